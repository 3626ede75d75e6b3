"""Intern-S2-Preview (`interns2_preview`, InternS2PreviewForConditionalGeneration; internlm/Intern-S2-Preview, 35B):
Qwen3.5-MoE's checkpoint with a time-series encoder beside it.

vLLM 0.32.0's class (interns2_preview.py) is Qwen3_5MoeForConditionalGeneration's subclass, its own only a processor
and a weight mapper that drops `model.time_series.` / `time_series.`: the language model, GDN layers, MTP layer and
the data-parallel vision tower (supports_encoder_tp_data, inherited) are Qwen3.5-MoE's, padded by its rules
(adapters/qwen_next.py). The time-series tensors, which vLLM never loads, are copied byte for byte.
"""

from __future__ import annotations

from dataclasses import fields

from hubpad.plan.adapters.base import Adapter
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
