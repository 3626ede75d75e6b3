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
    # keys the derivative drops: an `auto_map` naming the repo's own config class, which --trust-remote-code would
    # load instead of the twin's (TeleChat3's rejects head_dim != hidden_size // heads)
    drop_keys: tuple[str, ...] = ()
    # the family's config class also rejects head_dim != hidden_size // heads (TeleChat3's): any padded head count
    # needs the twin, not only one that leaves hidden_size % heads
    head_dim_from_hidden: bool = False


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

# Families vLLM builds with its LlamaForCausalLM (registry.py maps IQuestCoderForCausalLM and TeleChat3ForCausalLM
# there) whose config class rejects the padded heads: transformers' IQuestCoderConfig (hidden % heads != 0) and the
# repo's Telechat3Config (head_dim != hidden // heads). Labelled as a padded Llama is, without their auto_map.
_LLAMA_CLASS_TWIN = dataclasses.replace(
    _LLAMA_TWIN, drop_keys=("auto_map",),
    vllm="vLLM builds the family with its LlamaForCausalLM (registry.py), and maps MistralForCausalLM to the same "
         "Llama implementation (vllm/model_executor/models/mistral.py subclasses LlamaForCausalLM)",
)

# adapter name -> its twin
TWINS: dict[str, Twin] = {"llama": _LLAMA_TWIN, "eagle3_llama": _EAGLE3_LLAMA_TWIN, "iquestcoder": _LLAMA_CLASS_TWIN,
                          "telechat3": dataclasses.replace(_LLAMA_CLASS_TWIN, head_dim_from_hidden=True)}


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
            h2, kv2 = choose_heads(heads, kv, hs, tp, aligns, hidden, adapter)
        except ConfigError as exc:
            raise ConfigError(f"{exc}; the {_label(twin, config)} label that would hold the padded heads cannot "
                              f"express {'; '.join(blocked)}") from None
        if twin.head_dim_from_hidden and h2 != heads:
            raise ConfigError(f"config.json: the {adapter.name} config class rejects head_dim != hidden_size // heads, "
                              f"so {heads} heads cannot become {h2} under its label, and the {_label(twin, config)} "
                              f"label that would hold them cannot express {'; '.join(blocked)}")
        return h2, kv2, None
    # The twin's config class has no hidden % heads rule: choose as for it, then relabel only if needed.
    h2, kv2 = choose_heads(heads, kv, hs, tp, aligns, hidden,
                           dataclasses.replace(adapter, hidden_must_divide_by_heads=False))
    uneven = hidden % h2 or (twin.head_dim_from_hidden and h2 != heads)
    needed = hidden and uneven and config.get("model_type") != twin.model_type  # (a padded draft: labelled)
    return h2, kv2, _record(adapter.name, twin, config, hidden, h2) if needed else None


def _record(adapter_name: str, twin: Twin, config: dict, hidden: int, heads: int) -> dict:
    dropped = [k for k in twin.drop_keys if k in config]
    return {
        "from": {"model_type": config.get("model_type"), "architectures": list(config.get("architectures") or [])},
        "to": {"model_type": twin.model_type,
               "architectures": list(twin.architectures or config.get("architectures") or [])},
        "set_keys": dict(twin.set_keys),
        "drop_keys": dropped,
        "why": (f"the {adapter_name} config class rejects head_dim != hidden_size {hidden} // {heads} attention heads"
                if twin.head_dim_from_hidden else
                f"transformers' {adapter_name} config rejects hidden_size {hidden} % {heads} attention heads != 0 "
                f"even with an explicit head_dim") + f"; {_label(twin, config)} accepts it and computes the same "
                                                     f"function" + (f"; the upstream's {', '.join(dropped)} is left out "
                                                                    f"(--trust-remote-code would load the family's own "
                                                                    f"config class from it)" if dropped else ""),
        "vllm": twin.vllm,
    }


def relabelled_config_keys(record: dict | None) -> dict:
    """The config.json keys a relabelling writes (model_type, architectures and the twin's fixed keys)."""
    if not record:
        return {}
    return {"model_type": record["to"]["model_type"], "architectures": record["to"]["architectures"],
            **record["set_keys"]}


def relabelled_config(config: dict, record: dict | None) -> dict:
    """The derivative's config.json under the twin label: relabelled_config_keys written, the twin's drop_keys gone."""
    out = {**config, **relabelled_config_keys(record)}
    for key in (record or {}).get("drop_keys", ()):
        out.pop(key, None)
    return out
