"""Intern-S2-Preview (`interns2_preview`, InternS2PreviewForConditionalGeneration; internlm/Intern-S2-Preview, 35B):
Qwen3.5-MoE's checkpoint with a time-series encoder beside it; and Intern-S2-Mobius (`interns2_mobius`,
InternS2MobiusForConditionalGeneration), the same with its routed experts in banks shared by several layers.

vLLM 0.32.0's class (interns2_preview.py) is Qwen3_5MoeForConditionalGeneration's subclass, its own only a processor
and a weight mapper that drops `model.time_series.` / `time_series.`: the language model, GDN layers, MTP layer and
the data-parallel vision tower (supports_encoder_tp_data, inherited) are Qwen3.5-MoE's, padded by its rules
(adapters/qwen_next.py). The time-series tensors, which vLLM never loads, are copied byte for byte.

Intern-S2-Mobius (interns2_mobius.py) subclasses it: each decoder layer keeps Qwen3.5-MoE's attention or GDN mixer
and its gated shared expert (`mlp.shared_expert*`), but its routed experts and router are bank `layer % num_blocks`
of `model.language_model.meta_mlp.{b}.{gate,experts}` (InternS2MobiusMetaMoeBlock: Qwen3.5-MoE's routed block,
TP <= experts), stored once. A bank is padded once, to the routed experts' padded width, and every layer that calls it
gets the same zero neurons. Optional `attn_layer_scale` / `ffn_layer_scale` ([1, 1, hidden]) are copied. Its MTP
layer is Qwen3.5-MoE's with `mtp_num_experts` experts of the same width (vLLM's InternS2MobiusMTP).
"""

from __future__ import annotations

from dataclasses import fields

from hubpad.plan.adapters.base import L, LANGUAGE_MODEL, Adapter, under
from hubpad.plan.adapters.qwen_next import QWEN3_5_MOE, Qwen35VlAdapter

_TIME_SERIES = [r"^(model\.)?time_series\."]


class InternS2Adapter(Qwen35VlAdapter):
    """Qwen3.5-MoE's flags, and --trust-remote-code: neither vLLM nor transformers has a config class for
    interns2_preview, so vLLM reads the checkpoint's own."""

    def serving(self, config: dict) -> dict:
        out = super().serving(config)
        return {**out, "extra_args": list(out.get("extra_args") or []) + ["--trust-remote-code"]}


INTERNS2_PREVIEW = InternS2Adapter(**{
    **{f.name: getattr(QWEN3_5_MOE, f.name) for f in fields(Adapter)},
    "name": "interns2_preview", "model_types": ("interns2_preview",),
    "copy_modules": QWEN3_5_MOE.copy_modules + _TIME_SERIES, "copy_params": QWEN3_5_MOE.copy_params + _TIME_SERIES})

# A layer's routed experts (`<layer>.mlp.experts.`) live in a bank (`meta_mlp.{b}.experts.`) instead: the same
# tensors, per expert or fused as Qwen3.5-MoE stores them; a Mobius layer has none of its own (its MTP layer does).
_LAYER_MLP = under(LANGUAGE_MODEL, [L])[0] + r"mlp\."
_BANK = r"^" + LANGUAGE_MODEL.replace(".", r"\.") + r"meta_mlp\.\d+\."


def _experts_in_banks(patterns: list) -> list:
    return [(pattern.replace(_LAYER_MLP, _BANK) if pattern.startswith(_LAYER_MLP + r"experts\.") else pattern, *rest)
            for pattern, *rest in patterns]


class InternS2MobiusAdapter(InternS2Adapter):
    """Intern-S2-Preview's flags; its MTP layer is vLLM's InternS2MobiusMTP, whose MoE block has `mtp_num_experts`
    experts and so refuses a larger TP too."""

    def serving(self, config: dict) -> dict:
        out = super().serving(config)
        features = ["spec:interns2_mobius_mtp" if f == "spec:qwen3_5_mtp" else f for f in out["vllm_features"]]
        return {**out, "vllm_features": features}

    def tp_notes(self, config: dict, tp: int) -> list[str]:
        text = self.dims_config(config)
        mtp_experts = text.get("mtp_num_experts")
        if text.get("mtp_num_hidden_layers") and mtp_experts and tp > int(mtp_experts):
            return [f"MTP speculative decoding needs TP <= mtp_num_experts ({mtp_experts}): vLLM's MTP MoE block "
                    f"refuses a larger tensor-parallel size"]
        return []


INTERNS2_MOBIUS = InternS2MobiusAdapter(**{
    **{f.name: getattr(INTERNS2_PREVIEW, f.name) for f in fields(Adapter)},
    "name": "interns2_mobius", "model_types": ("interns2_mobius",),
    "linear_patterns": _experts_in_banks(INTERNS2_PREVIEW.linear_patterns),
    "fused_experts": _experts_in_banks(INTERNS2_PREVIEW.fused_experts),
    "copy_modules": INTERNS2_PREVIEW.copy_modules + [_BANK + r"gate$"],
    "copy_params": INTERNS2_PREVIEW.copy_params + under(LANGUAGE_MODEL, [L + r"(attn|ffn)_layer_scale$"])})
