"""Mixtral and Phi-3.5-MoE (`phimoe`): routed experts named block_sparse_moe.experts.N.w1/w2/w3, no dense MLP.

PhiMoE is Mixtral's layout plus q/k/v/o biases, LayerNorms with biases (copied) and an lm_head bias (copied); its
router (sparsemixer top-2) reads the gate's logits only, which padding leaves alone. vLLM's PhiMoE reads
config.head_dim from 0.9.2 (before, hidden_size // heads); transformers' reads it too.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, Adapter, L, Role
from hubpad.plan.adapters.vllm import serving


def _reads_head_dim(config: dict) -> bool:
    """True when the derivative's head_dim differs from hidden_size // heads (its heads were padded), so vLLM's class
    must read head_dim from config.json."""
    hidden, heads, head_dim = config.get("hidden_size"), config.get("num_attention_heads"), config.get("head_dim")
    return bool(hidden and heads and head_dim) and hidden // heads != head_dim


class MixtralAdapter(Adapter):
    """Mixtral serves with the mistral tool parser; padded heads need a vLLM whose Mixtral reads head_dim."""

    def serving(self, config: dict) -> dict:
        return serving(tool="mistral", features=("head_dim:mixtral",) if _reads_head_dim(config) else ())


class PhiMoEAdapter(Adapter):
    """Phi-3.5-MoE has no tool-call or reasoning parser in vLLM; padded heads need a PhiMoE that reads head_dim."""

    def serving(self, config: dict) -> dict:
        return serving(features=("arch:PhiMoEForCausalLM",) + (("head_dim:phimoe",) if _reads_head_dim(config) else ()))


_BLOCK_SPARSE = dict(
    linear_patterns=ATTENTION + [
        (L + r"block_sparse_moe\.experts\.\d+\.w[13]$", Role("rows", "expert")),
        (L + r"block_sparse_moe\.experts\.\d+\.w2$", Role("cols", "expert")),
    ],
    copy_modules=COPY_MODULES + [L + r"block_sparse_moe\.gate$"], copy_params=COPY_PARAMS,
    intermediate_keys={"expert": ("intermediate_size",)},
)
MIXTRAL = MixtralAdapter(name="mixtral", model_types=("mixtral",), **_BLOCK_SPARSE)
PHIMOE = PhiMoEAdapter(name="phimoe", model_types=("phimoe",), **_BLOCK_SPARSE)
