"""Qwen2/2.5 and Qwen3 (dense; Qwen3 with per-head q/k norms) and their MoE models (routed plus shared experts)."""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, ROUTERS, SHARED, Adapter
from hubpad.plan.adapters.vllm import serving


class QwenAdapter(Adapter):
    """Qwen3 (dense and MoE) templates: Hermes-style tool calls and <think> reasoning (vLLM's qwen3 parser);
    Qwen2-MoE: Hermes tool calls, no reasoning."""

    def serving(self, config: dict) -> dict:
        arch = (config.get("architectures") or [""])[0]
        if config.get("model_type") in ("qwen3", "qwen3_moe"):
            return serving(tool="hermes", reasoning="qwen3", features=(f"arch:{arch}",))
        return serving(tool="hermes")


QWEN3 = QwenAdapter(
    name="qwen3", model_types=("qwen3",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
    per_head_norms=True,
)

# Qwen2 has q/k/v biases (no o_proj bias); vLLM's Qwen2 classes derive head_dim from hidden_size // heads.
QWEN2 = QwenAdapter(
    name="qwen2", model_types=("qwen2",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
    vllm_head_dim_from_hidden=True,
)

_MOE = dict(
    linear_patterns=ATTENTION + DENSE_MLP + EXPERTS + SHARED,
    copy_modules=COPY_MODULES + ROUTERS, copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",),
                       "shared": ("shared_expert_intermediate_size",)},
)

QWEN_MOE = QwenAdapter(name="qwen_moe", model_types=("qwen3_moe",), per_head_norms=True, **_MOE)

QWEN2_MOE = QwenAdapter(name="qwen2_moe", model_types=("qwen2_moe",), vllm_head_dim_from_hidden=True, **_MOE)
