"""MiniMax-M2 / M2.1 / M2.5 / M2.7 (`minimax_m2`): GQA (48 heads / 8 kv, head_dim 128), q/k RMSNorm over all heads
of a layer, 256 routed experts (`block_sparse_moe.experts.N.w1/w2/w3`) with sigmoid routing and
`e_score_correction_bias`, and MTP modules after the last layer.

Its q and k RMSNorms are per layer (`qk_norm_type: per_layer`): one norm over all heads × head_dim (vLLM's
MiniMaxText01RMSNormTP all-reduces each rank's mean of squares and divides by the TP size, so it is the same global
mean at any TP; transformers' MiniMaxM2RMSNorm takes the mean over all heads). Zero heads leave the sum of squares
alone but grow the count, so the mean shrinks by r = H'/H. The norm's input scale is free, though: the real rows of
q_proj (k_proj) × sqrt(r) multiply the sum of squares by r, which restores the original mean square, and the q_norm
(k_norm) weight × 1/sqrt(r) undoes the factor after the norm; eps is untouched. So hubpad rescales those four tensors
per layer (plan/ops.py `scaled`; FP8 weights keep their bytes and the factor goes into their float32 block scales),
and `hubpad verify` checks every rescaled element is the nearest value to the original's × the factor. In float64
the padded model's logits equal the original's (tests/test_minimax_m2.py); with BF16 storage the rounding of the
rescaled values costs what docs/families/minimax.md measures. Every engine (transformers, vLLM, SGLang) computes the
same thing from those weights: nothing depends on a runtime patch.

vLLM serves it with MiniMaxM2ForCausalLM (minimax_m2.py) and its minimax_m2 tool-call and reasoning parsers; it
drops the MTP layers (`num_mtp_modules`: layers num_hidden_layers.. in the checkpoint) and has no MiniMax-M2 MTP
draft, so no speculative config; hubpad pads and rescales those layers like the others. Its MoE block raises when the
TP size exceeds num_local_experts. vLLM reads `scoring_func` and `rotary_dim` from config.json with no default.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, Adapter, L, Role
from hubpad.plan.adapters.vllm import serving


class MiniMaxM2Adapter(Adapter):
    """vLLM's minimax_m2 tool-call and reasoning parsers; no speculative decoding (vLLM has no M2 MTP draft)."""

    def serving(self, config: dict) -> dict:
        return serving(tool="minimax_m2", reasoning="minimax_m2", features=("arch:MiniMaxM2ForCausalLM",))


MINIMAX_M2 = MiniMaxM2Adapter(
    name="minimax_m2", model_types=("minimax_m2",),
    linear_patterns=ATTENTION + [
        (L + r"block_sparse_moe\.experts\.\d+\.w[13]$", Role("rows", "expert")),
        (L + r"block_sparse_moe\.experts\.\d+\.w2$", Role("cols", "expert")),
    ],
    copy_modules=COPY_MODULES + [L + r"block_sparse_moe\.gate$"],
    copy_params=COPY_PARAMS + [L + r"block_sparse_moe\.e_score_correction_bias$"],
    intermediate_keys={"expert": ("intermediate_size",)},
    layer_qk_norms={"self_attn.q_proj": "self_attn.q_norm", "self_attn.k_proj": "self_attn.k_norm"},
    tp_at_most_experts=True,
    vllm_reads={"scoring_func": "vLLM's MiniMaxM2MoE reads (config.scoring_func) without a default: it stops at load",
                "rotary_dim": "vLLM's MiniMaxM2Attention reads (config.rotary_dim) without a default: it stops at load"},
)
