"""Architecture relabelling: when transformers' config class for a family refuses the padded heads, the
derivative is written under a twin label whose config class accepts them and whose math is the same.

transformers' `LlamaConfig` rejects `hidden_size % num_attention_heads != 0` even with an explicit `head_dim`,
so no padded head count fits any Llama-2/3.x at TP=3 (hidden 4096/5120/8192). `MistralConfig` has no such
check, transformers' `MistralForCausalLM` is Llama's decoder (RMSNorm, the shared RoPE functions including
`llama3` scaling, SwiGLU, explicit head_dim) once `sliding_window` is null, and vLLM's `MistralForCausalLM`
subclasses its `LlamaForCausalLM` (its Mistral-only extras, `llama_4_scaling` and `ada_rms_norm_t_cond`, are
off when the config has neither). Every key the twin cannot express is refused, never dropped.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import Adapter
from hubpad.plan.dims import choose_heads


@dataclass(frozen=True)
class Twin:
    """The label a family's derivative takes when its own config class cannot hold the padded heads."""

    model_type: str
    architectures: tuple[str, ...]
    set_keys: dict = field(default_factory=dict)  # keys whose twin default would change the math
    # config key -> (what the twin cannot express, the value it can): refused when the upstream differs
    cannot_express: dict = field(default_factory=dict)
    vllm: str = ""


_LLAMA_TWIN = Twin(
    model_type="mistral",
    architectures=("MistralForCausalLM",),
    set_keys={"sliding_window": None},  # MistralConfig defaults to a 4096 window; Llama has none
    cannot_express={
        "attention_bias": ("q/k/v/o biases", lambda v: not v),
        "mlp_bias": ("MLP biases", lambda v: not v),
        "pretraining_tp": ("pretraining_tp > 1 (sliced linear layers)", lambda v: v is None or int(v) <= 1),
        "llama_4_scaling": ("a key only vLLM's MistralForCausalLM reads", lambda v: v is None),
    },
    vllm="vLLM maps MistralForCausalLM to its Llama implementation (vllm/model_executor/models/mistral.py "
         "subclasses LlamaForCausalLM), so the same Llama code serves it",
)

# An EAGLE-3 draft with a Llama layer keeps its architectures (vLLM picks Eagle3LlamaForCausalLM by them) and takes
# model_type mistral only: vLLM reads the draft's config with AutoConfig (LlamaConfig refuses hidden % heads != 0),
# then EAGLEConfig keeps any architecture that ends in or starts with Eagle3, and Eagle3LlamaForCausalLM builds vLLM's
# Llama decoder layer from that MistralConfig (head_dim read from it; sliding_window set to null).
_EAGLE3_LLAMA_TWIN = Twin(
    model_type="mistral", architectures=(), set_keys=_LLAMA_TWIN.set_keys, cannot_express=_LLAMA_TWIN.cannot_express,
    vllm="vLLM reads the draft's config as MistralConfig and still builds Eagle3LlamaForCausalLM from its "
         "architectures (EAGLEConfig keeps a name that starts or ends with Eagle3), with the same Llama layer",
)

# adapter name -> its twin
TWINS: dict[str, Twin] = {"llama": _LLAMA_TWIN, "eagle3_llama": _EAGLE3_LLAMA_TWIN}


def _label(twin: Twin, config: dict) -> str:
    """What the twin is called in messages: its architecture, or (keeping the upstream's) its model_type's config."""
    return twin.architectures[0] if twin.architectures else f"model_type {twin.model_type}"


def blockers(twin: Twin, config: dict) -> list[str]:
    """What in `config` the twin label cannot express (empty: relabelling is exact)."""
    return [f"{key}: {config[key]!r} ({what})" for key, (what, ok) in twin.cannot_express.items()
            if key in config and not ok(config[key])]


def choose_heads_and_label(heads: int, kv: int, hs, tp: int, aligns, hidden: int, adapter: Adapter,
                           config: dict) -> tuple[int, int, dict | None]:
    """choose_heads (same arguments), and the relabelling record when the padded heads need the twin label.

    Without a usable twin the family's own config rule stands (choose_heads says why nothing fits)."""
    twin = TWINS.get(adapter.name)
    if twin is None or not adapter.hidden_must_divide_by_heads:
        return (*choose_heads(heads, kv, hs, tp, aligns, hidden, adapter), None)
    blocked = blockers(twin, config)
    if blocked:
        try:
            return (*choose_heads(heads, kv, hs, tp, aligns, hidden, adapter), None)
        except ConfigError as exc:
            raise ConfigError(f"{exc}; the {_label(twin, config)} label that would hold the padded heads cannot "
                              f"express {'; '.join(blocked)}") from None
    # The twin's config class has no hidden % heads rule: choose as for it, then relabel only if needed.
    h2, kv2 = choose_heads(heads, kv, hs, tp, aligns, hidden,
                           dataclasses.replace(adapter, hidden_must_divide_by_heads=False))
    needed = hidden and hidden % h2 and config.get("model_type") != twin.model_type  # (a padded draft: labelled)
    return h2, kv2, _record(adapter.name, twin, config, hidden, h2) if needed else None


def _record(adapter_name: str, twin: Twin, config: dict, hidden: int, heads: int) -> dict:
    return {
        "from": {"model_type": config.get("model_type"), "architectures": list(config.get("architectures") or [])},
        "to": {"model_type": twin.model_type,
               "architectures": list(twin.architectures or config.get("architectures") or [])},
        "set_keys": dict(twin.set_keys),
        "why": f"transformers' {adapter_name} config rejects hidden_size {hidden} % {heads} attention heads != 0 "
               f"even with an explicit head_dim; {_label(twin, config)} accepts it and computes the same function",
        "vllm": twin.vllm,
    }


def relabelled_config_keys(record: dict | None) -> dict:
    """The config.json keys a relabelling writes (model_type, architectures and the twin's fixed keys)."""
    if not record:
        return {}
    return {"model_type": record["to"]["model_type"], "architectures": record["to"]["architectures"],
            **record["set_keys"]}
