"""Intern-S1-Pro (`interns1_pro`, InternS1ProForConditionalGeneration; internlm/Intern-S1-Pro, 1T): Qwen3-VL's
layout (`model.visual.*`, `model.language_model.*`, `lm_head`) around a Qwen3-MoE language model whose rotary is
FoPE (Fourier position embedding).

vLLM 0.32.0's class (interns1_pro.py) is Qwen3VLForConditionalGeneration's subclass: its vision tower is Qwen3-VL's,
run data-parallel (`supports_encoder_tp_data`, inherited), so it is copied byte for byte. Its language model is its
own: Qwen3-MoE attention (q/k_norm per head, head_dim read from text_config), MoE layers through FusedMoE (TP <=
experts, vLLM's check), routed experts per expert or fused and NOT transposed ([E, 2I, H], [E, H, I]), a router
copied. The FoPE rotary (rotary_embedding/fope.py, FourierRotaryEmbedding) holds two parameters the checkpoint
stores once, `model.language_model.rotary_emb.sin_coef` / `cos_coef` [kv heads, freqs, freqs]; vLLM's weight loader
gives each rank the rows of its own kv heads (chunked by TP, replicated as the k/v rows are where kv < TP). Padding
kv heads (in whole GQA groups) appends one zero row per new kv head to both: the new heads' q and k rows are zero,
and a zero q or k stays zero whatever cos and sin multiply it by.

vLLM has no config class for interns1_pro: it reads the checkpoint's own (--trust-remote-code).
"""

from __future__ import annotations

import dataclasses

from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, LANGUAGE_MODEL,
                                       ROUTERS, FusedExperts, L, inside_vlm, under)
from hubpad.plan.adapters.qwen_vl import QwenVLAdapter
from hubpad.plan.heads import HeadShape

_LAYERS = under(LANGUAGE_MODEL, [L])[0]
_FOPE = r"^model\.language_model\.rotary_emb\.(sin_coef|cos_coef)$"


class InternS1ProAdapter(QwenVLAdapter):
    """Qwen3-VL-MoE's flags and --trust-remote-code; the FoPE coefficients' rows counted as one per kv head."""

    def head_shape(self, config: dict) -> HeadShape:
        """FoPE's sin_coef / cos_coef hold one row per kv head, sharded with the kv heads (any number per rank)."""
        shape = super().head_shape(config)
        return dataclasses.replace(shape, widths={**shape.widths, "fope": 1},
                                   labels={**shape.labels, "fope": "FoPE sin/cos_coef rows"}, per_kv=("kv", "fope"))

    def serving(self, config: dict) -> dict:
        out = super().serving(config)
        return {**out, "extra_args": list(out.get("extra_args") or []) + ["--trust-remote-code"]}


INTERNS1_PRO = InternS1ProAdapter(
    name="interns1_pro", model_types=("interns1_pro",), per_head_norms=True, tp_at_most_experts=True,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    fused_experts=[(_LAYERS + r"mlp\.experts\.gate_up_proj$", FusedExperts(axis=-2, parts=2)),
                   (_LAYERS + r"mlp\.experts\.down_proj$", FusedExperts(axis=-1, parts=1))],
    head_rows=[(_FOPE, "fope")], lossless=("heads.fope",),
    **inside_vlm(ATTENTION + DENSE_MLP + EXPERTS, COPY_MODULES + ROUTERS, COPY_PARAMS))
