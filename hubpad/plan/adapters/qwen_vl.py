"""Qwen3-VL, dense (`qwen3_vl`) and MoE (`qwen3_vl_moe`): Qwen3's language model under `model.language_model.`, its
dims in `text_config`; the vision tower under `model.visual.` (patch embedding, blocks, the merger and the deepstack
mergers that project into the language model's hidden size, which padding never changes) is copied byte for byte.

vLLM shards a vision tower by its heads unless it runs data-parallel: with `--mm-encoder-tp-mode data` (honoured by
Qwen3VLForConditionalGeneration and its MoE subclass, `supports_encoder_tp_data`) every rank holds the whole tower,
so only the language model must divide by TP. vLLM builds that language model with its Qwen3 / Qwen3-MoE classes,
which read head_dim from text_config. The MoE's routed experts are fused 3-D tensors in the hub layout, which vLLM
reads transposed: gate_up_proj [E, hidden, 2 x I] (gate, then up, along the last axis) and down_proj [E, I, hidden].
"""

from __future__ import annotations

from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, LANGUAGE_MODEL, ROUTERS, Adapter,
                                       FusedExperts, L, inside_vlm, under)
from hubpad.plan.adapters.vllm import encoder_data_parallel

_LAYERS = under(LANGUAGE_MODEL, [L])[0]
_EXPERTS = [(_LAYERS + r"mlp\.experts\.gate_up_proj$", FusedExperts(axis=-1, parts=2)),
            (_LAYERS + r"mlp\.experts\.down_proj$", FusedExperts(axis=-2, parts=1))]


class QwenVLAdapter(Adapter):
    """Qwen3's parsers (Hermes tool calls, <think> reasoning), and the vision tower replicated on every rank."""

    def serving(self, config: dict) -> dict:
        return encoder_data_parallel((config.get("architectures") or [""])[0], tool="hermes", reasoning="qwen3")


QWEN3_VL = QwenVLAdapter(
    name="qwen3_vl", model_types=("qwen3_vl",), intermediate_keys={"dense": ("intermediate_size",)},
    per_head_norms=True, **inside_vlm(ATTENTION + DENSE_MLP, COPY_MODULES, COPY_PARAMS))

QWEN3_VL_MOE = QwenVLAdapter(
    name="qwen3_vl_moe", model_types=("qwen3_vl_moe",), fused_experts=_EXPERTS, per_head_norms=True,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    **inside_vlm(ATTENTION + DENSE_MLP, COPY_MODULES + ROUTERS, COPY_PARAMS))
