"""Step-3.7 (`step3p7`, Step3p7ForConditionalGeneration): Step-3.5's language model (its dims in `text_config`, its
tensors under `model.`: the published names, which vLLM's Step3p7 mapper and transformers' conversion mapping both
read), a vision tower under `vision_model.` and its projector `vit_large_projector` beside it.

Two attention layer types with the same kv heads and head_dim but their own query head counts: full-attention layers
(`num_attention_heads` 64 / `num_attention_groups` 8) and sliding layers (`attention_other_setting`: 96 / 8).
vLLM's Step3p5DecoderLayer reads the sliding layers' heads, kv heads and head_dim from `attention_other_setting`
for the layers whose `layer_types` entry is its `attention_type`; transformers' Step3p7TextConfig reads only its
`num_attention_heads` (as `num_sliding_attention_heads`, then `per_layer_config`), and gives sliding layers
`num_key_value_heads` (alias `num_attention_groups`) and `head_dim`. A config whose sliding kv heads or head_dim
differ between the two readings is refused (the engines would compute different models).

Padding appends whole kv groups to both layer types at once (query head i stays on kv head i // group in each):
64 / 96 heads and 8 kv heads become 72 / 108 / 9 at TP 3 and 96 / 144 / 12 at TP 6 (each count divisible by TP, the
kv heads sharded; vLLM's Step3p5Attention asserts both). The planner sees the full layers' head count; the sliding
layers' q/o/g widths follow through `HeadShape.head_ratio` (96 / 64 = 3 / 2). New heads are zero: q/k/v rows,
o_proj columns and the head-wise gate's g_proj rows (sigmoid(0) = 0.5 gates a zero head output, read by zero
o_proj columns); q_norm / k_norm are GemmaRMSNorms over one head's head_dim (a zero head stays zero). The
derivative writes the padded counts in every key either engine reads: num_attention_heads, num_key_value_heads and
num_attention_groups, attention_other_setting's num_attention_heads / num_attention_groups, and (transformers'
saved form) num_sliding_attention_heads and per_layer_config.

MLPs: the dense layers' `mlp.*` (intermediate_size), the shared expert `share_expert.*` (share_expert_dim) and the
routed experts stored stacked per layer, `moe.{gate,up}_proj.weight` [E, I, H] and `moe.down_proj.weight` [E, H, I]
(moe_intermediate_size), all padded with zeros (gate and up clamps of swiglu_limits keep a zero lane zero).

The vision tower and projector are copied byte for byte: with `--mm-encoder-tp-mode data` (Step3p7 inherits
Step3VL's supports_encoder_tp_data) vLLM builds PerceptionEncoder and vit_large_projector unsharded on every rank.
"""

from __future__ import annotations

import dataclasses

from hubpad.errors import ConfigError
from hubpad.plan.adapters import layer_heads
from hubpad.plan.adapters.base import COPY_MODULES, COPY_PARAMS, Adapter, L, Role, mtp_speculative
from hubpad.plan.adapters.vllm import encoder_data_parallel
from hubpad.plan.heads import HeadShape

_ATTENTION = {"q": Role("q"), "k": Role("kv"), "v": Role("kv"), "o": Role("o"), "g": Role("q", "g")}
_GROUP = {"mlp": "dense", "share_expert": "shared", "moe": "expert"}
STEP_MLP = ([(L + rf"{m}\.(gate_proj|up_proj)$", Role("rows", g)) for m, g in _GROUP.items()]
           + [(L + rf"{m}\.down_proj$", Role("cols", g)) for m, g in _GROUP.items()])
STEP_TOWER = r"^(vision_model\.|vit_large_projector$)"
# q_norm / k_norm span one head's head_dim (shared by every head); the MoE router and its bias; MTP layers' own
# modules (model.layers.N for N >= num_hidden_layers: vLLM's Step3p5MTP).
# (Step-3.5, the same language model without the tower, shares these.)
OWN_MODULES = [L + r"self_attn\.(q_norm|k_norm)$", L + r"moe\.gate$",
               L + r"(enorm|hnorm|eh_proj|shared_head\.norm|shared_head\.output)$"]
OWN_PARAMS = [L + r"moe\.router_bias$"]
STEP_INTER = {"dense": ("intermediate_size",), "shared": ("share_expert_dim",),
              "expert": ("moe_intermediate_size",)}


def layer_types(text: dict) -> list[str]:
    """Every decoder layer's attention type, MTP layers included (vLLM indexes `layer_types` by the MTP layer's own
    index; transformers keeps those entries in `mtp_layer_types`)."""
    types = list(text.get("layer_types") or [])
    n = int(text.get("num_hidden_layers") or 0)
    if len(types) == n and isinstance(text.get("mtp_layer_types"), list):
        types += text["mtp_layer_types"]
    return types


def sliding_heads(text: dict) -> int:
    """The sliding layers' query heads, checked in every form the config states them."""
    heads = int(text.get("num_attention_heads") or 1)
    other = text.get("attention_other_setting")
    vllm = int(other.get("num_attention_heads") or heads) if isinstance(other, dict) else None
    stated = {"attention_other_setting.num_attention_heads": vllm,
              "num_sliding_attention_heads": text.get("num_sliding_attention_heads")}
    per_layer = text.get("per_layer_config")
    if isinstance(per_layer, dict):
        for i, over in per_layer.items():
            if isinstance(over, dict) and "num_attention_heads" in over:
                stated[f"per_layer_config.{i}.num_attention_heads"] = over["num_attention_heads"]
    values = {k: int(v) for k, v in stated.items() if v is not None}
    if len(set(values.values())) > 1:
        raise ConfigError(f"config.json: the sliding layers' head counts disagree ({values}); transformers and vLLM "
                          f"would compute different models")
    return next(iter(values.values()), heads)


def check_readings(text: dict) -> None:
    """vLLM reads the sliding layers' kv heads and head_dim from attention_other_setting, transformers from
    num_key_value_heads / head_dim: they must agree, and the sliding layers must be the layer type it names."""
    other = text.get("attention_other_setting")
    if not isinstance(other, dict):
        return
    kv = text.get("num_key_value_heads", text.get("num_attention_groups"))
    bad = [f"attention_other_setting.{k} {other[k]} (transformers reads {v})"
           for k, v in (("num_attention_groups", kv), ("head_dim", text.get("head_dim", 128)))
           if other.get(k) is not None and other[k] != v]
    if other.get("attention_type", "sliding_attention") != "sliding_attention":
        bad.append(f"attention_other_setting.attention_type {other['attention_type']!r} (transformers gives its own "
                   f"heads to sliding_attention layers)")
    if str(text.get("att_impl_type", "GQA")) != "GQA":
        bad.append(f"att_impl_type {text['att_impl_type']!r} (vLLM's Step3p5 runs GQA only)")
    if text.get("gating", True) not in (True, "per-head"):
        bad.append(f"gating {text['gating']!r} (hubpad pads the head-wise gate, one g_proj row per head)")
    if bad:
        raise ConfigError(f"config.json: {', '.join(bad)}: transformers' Step3p7 and vLLM's Step3p5 would compute "
                          f"different models, or hubpad does not pad it")


class Step3p7Adapter(Adapter):
    """Step-3.7: full and sliding layers with their own query head counts, the vision tower replicated."""

    def dims_config(self, config: dict) -> dict:
        text = dict(super().dims_config(config))
        if text.get("num_key_value_heads") is None and text.get("num_attention_groups") is not None:
            text["num_key_value_heads"] = text["num_attention_groups"]  # transformers' attribute_map alias
        if text.get("n_routed_experts") is None and text.get("moe_num_experts") is not None:
            text["n_routed_experts"] = text["moe_num_experts"]  # the same alias; vLLM's FusedMoEBlock refuses TP > it
        return text

    def for_config(self, config: dict) -> "Step3p7Adapter":
        text = self.dims_config(config)
        check_readings(text)
        heads, swa = int(text.get("num_attention_heads") or 1), sliding_heads(text)
        counts = [swa if t == "sliding_attention" else heads for t in layer_types(text)]
        projections = {rf"self_attn\.{p}_proj$": r for p, r in _ATTENTION.items()}
        return dataclasses.replace(self, linear_patterns=layer_heads.patterns(L, counts, heads, projections)
                                   + self.linear_patterns)

    def head_shape(self, config: dict) -> HeadShape:
        heads = int(config.get("num_attention_heads") or 1)
        kv = int(config.get("num_key_value_heads") or config.get("num_attention_groups") or heads)
        hd = int(config.get("head_dim") or 128)
        swa = sliding_heads(config)
        for what, h in (("full", heads), ("sliding", swa)):
            if h % kv:
                raise ConfigError(f"config.json: the {what} layers' {h} attention heads are not a multiple of the "
                                  f"{kv} kv heads")
        return layer_heads.head_shape({"q": hd, "kv": hd, "o": hd, "g": 1},
                                      {"q": "q_proj rows", "kv": "k/v_proj rows", "o": "o_proj columns",
                                       "g": "g_proj rows"}, [heads, swa], heads, kv,
                                      names={swa: "sliding", heads: "full"}, gates=frozenset({"g"}))

    def padded_config(self, upstream: dict, config: dict, heads: int, kv: int) -> dict:
        text = dict(Adapter.dims_config(self, config))  # as written, without the aliases dims_config adds
        up = self.dims_config(upstream)
        swa = layer_heads.padded([sliding_heads(up)], int(up.get("num_attention_heads") or 1), heads)[0]
        if "num_attention_groups" in text:
            text["num_attention_groups"] = kv
        if isinstance(text.get("attention_other_setting"), dict):
            other = dict(text["attention_other_setting"])
            other["num_attention_heads"] = swa
            if "num_attention_groups" in other:
                other["num_attention_groups"] = kv
            text["attention_other_setting"] = other
        if text.get("num_sliding_attention_heads") is not None:
            text["num_sliding_attention_heads"] = swa
        if isinstance(text.get("per_layer_config"), dict):
            text["per_layer_config"] = {i: {**over, "num_attention_heads": swa}
                                        if isinstance(over, dict) and "num_attention_heads" in over else over
                                        for i, over in text["per_layer_config"].items()}
        return {**config, self.text_config: text} if self.text_config else text

    def serving(self, config: dict) -> dict:
        """vLLM's step3p5 parsers and MTP drafter (Step3p5MTP: one draft step per MTP layer, n_predict =
        num_nextn_predict_layers), the vision tower data-parallel, and --trust-remote-code: vLLM registers no config
        class for `step3p7`, and transformers' own Step3p7Config (5.19 in vLLM 0.32's CPU build) makes
        num_attention_heads a per-layer attribute that vLLM's get_hf_text_config cannot read (the original stops
        too); the hub's remote-code config keeps attention_other_setting, which vLLM's Step3p5 classes read."""
        arch = (config.get("architectures") or ["Step3p7ForConditionalGeneration"])[0]
        spec = mtp_speculative(self.dims_config(config))
        out = encoder_data_parallel(arch, tool="step3p5", reasoning="step3p5", spec=spec,
                                    features=("spec:mtp", "spec:step3p5_mtp") if spec else ())
        return {**out, "extra_args": ["--trust-remote-code"]}


STEP3P7 = Step3p7Adapter(
    name="step3p7", model_types=("step3p7",), linear_patterns=STEP_MLP,
    copy_modules=COPY_MODULES + OWN_MODULES + [STEP_TOWER], copy_params=COPY_PARAMS + OWN_PARAMS + [r"^vision_model\..*$"],
    intermediate_keys=STEP_INTER,
    text_config="text_config", tp_at_most_experts=True,
)
