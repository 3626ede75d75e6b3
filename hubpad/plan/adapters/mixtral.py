"""Mixtral: routed experts named block_sparse_moe.experts.N.w1/w2/w3, no dense MLP."""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, Adapter, L, Role

MIXTRAL = Adapter(
    name="mixtral", model_types=("mixtral",),
    linear_patterns=ATTENTION + [
        (L + r"block_sparse_moe\.experts\.\d+\.w[13]$", Role("rows", "expert")),
        (L + r"block_sparse_moe\.experts\.\d+\.w2$", Role("cols", "expert")),
    ],
    copy_modules=COPY_MODULES + [L + r"block_sparse_moe\.gate$"], copy_params=COPY_PARAMS,
    intermediate_keys={"expert": ("intermediate_size",)},
)
