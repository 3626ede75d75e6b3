"""Mixtral: routed experts named block_sparse_moe.experts.N.w1/w2/w3, no dense MLP."""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, Adapter, L, Role
from hubpad.plan.adapters.vllm import serving


class MixtralAdapter(Adapter):
    """Mixtral serves with the mistral tool parser; padded heads need a vLLM whose Mixtral reads head_dim."""

    def serving(self, config: dict) -> dict:
        hidden, heads, head_dim = config.get("hidden_size"), config.get("num_attention_heads"), config.get("head_dim")
        padded = bool(hidden and heads and head_dim) and hidden // heads != head_dim
        return serving(tool="mistral", features=("head_dim:mixtral",) if padded else ())


MIXTRAL = MixtralAdapter(
    name="mixtral", model_types=("mixtral",),
    linear_patterns=ATTENTION + [
        (L + r"block_sparse_moe\.experts\.\d+\.w[13]$", Role("rows", "expert")),
        (L + r"block_sparse_moe\.experts\.\d+\.w2$", Role("cols", "expert")),
    ],
    copy_modules=COPY_MODULES + [L + r"block_sparse_moe\.gate$"], copy_params=COPY_PARAMS,
    intermediate_keys={"expert": ("intermediate_size",)},
)
