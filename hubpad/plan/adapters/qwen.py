"""Qwen3 (dense, per-head q/k norms) and the Qwen2/Qwen3 MoE models (routed plus shared experts)."""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, ROUTERS, SHARED, Adapter

QWEN3 = Adapter(
    name="qwen3", model_types=("qwen3",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
    per_head_norms=True,
)

QWEN_MOE = Adapter(
    name="qwen_moe", model_types=("qwen3_moe", "qwen2_moe"),
    linear_patterns=ATTENTION + DENSE_MLP + EXPERTS + SHARED,
    copy_modules=COPY_MODULES + ROUTERS, copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",),
                       "shared": ("shared_expert_intermediate_size",)},
    per_head_norms=True,
)
