"""Muse Glimmer (`muse_glimmer`, meta-models/Muse-Glimmer-30B; its text-only export `muse_glimmer_text`): vLLM serves
both with MuseGlimmerForCausalLM. A Gemma 2 derivative: GQA (32 / 2 heads of 128, hidden 6656), a SiLU-gated MLP,
(1 + w) sandwich norms, a weightless embedding norm, and two attention deltas that decide how heads pad:

- q/k norms without a weight, per head over head_dim, before RoPE: a zero head stays zero (RMS of 0 is 0 with eps),
  and the query pre-scale (`qk_scale_factor`) is a constant.
- an output gate `self_attn.gate_proj` (hidden -> heads x head_dim, column-parallel beside q; vLLM's
  `output_gate_proj`): a padded head's gate rows are zero (sigmoid 0.5) and multiply that head's output, whose
  o_proj columns are zero. So the gate is padded exactly as q.

vLLM reads config.json through its own MuseGlimmerTextConfig (vllm/transformers_utils/configs/muse_glimmer.py),
which, unlike transformers' strict class, does not check hidden % heads: 6656 has no factor 3, so no padded head
count divides it, and the derivative loads in vLLM (and hubpad's float64 proof builds transformers' model around the
check) but not through transformers' own config. The vision tower (16 heads of 96) is copied: vLLM's
MuseGlimmerVisionAttention runs data-parallel by itself when its heads do not divide TP (vision.py
`is_vit_use_data_parallel`), its MLP is replicated, and at a TP that divides 16 it shards the published heads.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, LANGUAGE_MODEL, Adapter, L,
                                       Role, under)
from hubpad.plan.adapters.vllm import serving

_GATE = [(L + r"self_attn\.gate_proj$", Role("q"))]
# The legacy text-only export names its post-attention / post-MLP norms post_attn_norm / post_ffn_norm (vLLM's
# hf_to_vllm_mapper renames them): hidden-wide, copied like the others.
_NORMS = [L + r"(post_attn_norm|post_ffn_norm)$"]
_TOWER = [r"^model\.(vision_tower|vision_adapter|vision_projection)\."]


class MuseGlimmerAdapter(Adapter):
    """MuseGlimmerForCausalLM serves both model types; its tower needs no flag (data-parallel where heads do not
    divide TP)."""

    def serving(self, config: dict) -> dict:
        return serving(features=("arch:MuseGlimmerForCausalLM",))


_LINEAR = ATTENTION + _GATE + DENSE_MLP

MUSE_GLIMMER_TEXT = MuseGlimmerAdapter(
    name="muse_glimmer_text", model_types=("muse_glimmer_text",), linear_patterns=_LINEAR,
    copy_modules=COPY_MODULES + _NORMS, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
)

MUSE_GLIMMER = MuseGlimmerAdapter(
    name="muse_glimmer", model_types=("muse_glimmer",), linear_patterns=under(LANGUAGE_MODEL, _LINEAR),
    copy_modules=under(LANGUAGE_MODEL, COPY_MODULES + _NORMS) + _TOWER, copy_params=under(LANGUAGE_MODEL, COPY_PARAMS)
    + _TOWER, intermediate_keys={"dense": ("intermediate_size",)}, text_config="text_config",
    layers=under(LANGUAGE_MODEL, [L])[0],
)
