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

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, Adapter, L, Role,
                                       one_shared_expert, under)
from hubpad.plan.adapters.vllm import encoder_data_parallel, serving
from hubpad.plan.heads import HeadShape


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
                "rotary_dim": "vLLM's MiniMaxM2Attention reads (config.rotary_dim) without a default: it stops at "
                              "load"},
)


# MiniMax-M3 (`minimax_m3_vl`): the language model under `language_model.model.` (lm_head `language_model.lm_head`), its
# dims in text_config, the vision tower (`vision_tower.`, `multi_modal_projector.`, `patch_merge_mlp.`) beside it. Its
# text-only checkpoints (`minimax_m3_vl_text`, vLLM's MiniMaxM3SparseForCausalLM: the same language model at `model.`,
# dims at the top of config.json, no tower) take the same rules.
_M3 = "language_model.model."


class MiniMaxM3Adapter(Adapter):
    """MiniMax-M3: GQA with per-head (Gemma-style) q/k norms, so zero heads stay zero; a lightning indexer on the sparse
    layers whose `index_q_proj` holds one head per kv head (vLLM's MinimaxM3QKVParallelLinearWithIndexer asserts
    sparse_num_index_heads == num_key_value_heads and shards index_q exactly like k/v, index_head_dim == head_dim), so
    it is padded with the kv heads, and both index head counts (`index_n_heads`, `sparse_attention_config.
    sparse_num_index_heads`) follow num_key_value_heads; its single `index_k_proj` head is replicated on every rank and
    stays as it is. A padded index head scores every key block 0 and selects blocks for its padded kv group only, whose
    zero q heads add nothing. Dense layers (`mlp.*`, dense_intermediate_size), routed experts with sigmoid + bias
    routing and one shared expert of the routed width (vLLM: intermediate_size x n_shared_experts). The vision tower is
    copied and replicated on every rank (`--mm-encoder-tp-mode data`; vLLM's class sets supports_encoder_tp_data).
    vLLM serves it with MiniMaxM3SparseForConditionalGeneration (the text-only checkpoints: MiniMaxM3SparseForCausalLM)
    and its minimax_m3 tool-call / reasoning parsers."""

    multimodal = True

    def head_shape(self, config: dict) -> HeadShape:
        hd = int(config.get("head_dim") or 0)
        sparse = config.get("sparse_attention_config") or {}
        index_dim = int(config.get("index_head_dim") or sparse.get("sparse_index_dim") or hd)
        if index_dim != hd:
            raise ConfigError(f"config.json: the indexer's head dim {index_dim} differs from head_dim {hd}; vLLM's "
                              f"MiniMax-M3 shards index_q with head_dim rows per kv head")
        shape = HeadShape.uniform(hd)
        return HeadShape({**shape.widths, "index": index_dim}, {**shape.labels, "index": "index_q_proj rows"},
                         kv_heads=True, config_head_dim=hd, per_kv=("kv", "index"))

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        one_shared_expert(config)
        return super().intermediate_sizes(config)

    def serving(self, config: dict) -> dict:
        # M3's classes (the multimodal one's encoder data-parallel) and both parsers: first releases in vllm.py
        if not self.multimodal:
            return serving(tool="minimax_m3", reasoning="minimax_m3", features=("arch:MiniMaxM3SparseForCausalLM",))
        return encoder_data_parallel("MiniMaxM3SparseForConditionalGeneration", tool="minimax_m3",
                                     reasoning="minimax_m3")


class MiniMaxM3TextAdapter(MiniMaxM3Adapter):
    multimodal = False


def _m3(name: str, cls: type, lm: str | None) -> MiniMaxM3Adapter:
    """MiniMax-M3's adapter with its language model under `lm` (None: at `model.`, a text-only checkpoint)."""
    at = (lambda patterns: under(lm, patterns)) if lm else list
    tower = [r"^language_model\.lm_head$", r"^vision_tower\.", r"^multi_modal_projector\.", r"^patch_merge_mlp\."]
    return cls(
        name=name, model_types=(name,),
        linear_patterns=at(ATTENTION + DENSE_MLP + [
            (L + r"self_attn\.index_q_proj$", Role("kv", "index")),
            (L + r"block_sparse_moe\.experts\.\d+\.w[13]$", Role("rows", "expert")),
            (L + r"block_sparse_moe\.experts\.\d+\.w2$", Role("cols", "expert")),
            (L + r"block_sparse_moe\.shared_experts\.(gate_proj|up_proj)$", Role("rows", "expert")),
            (L + r"block_sparse_moe\.shared_experts\.down_proj$", Role("cols", "expert")),
        ]),
        copy_modules=at(COPY_MODULES + [L + r"block_sparse_moe\.gate$", L + r"self_attn\.index_k_proj$",
                                        L + r"self_attn\.index_[qk]_norm$"]) + (tower if lm else []),
        copy_params=at(COPY_PARAMS + [L + r"block_sparse_moe\.e_score_correction_bias$"]),
        intermediate_keys={"dense": ("dense_intermediate_size",),
                           "expert": ("intermediate_size", "shared_intermediate_size")},
        per_head_norms=True, text_config="text_config" if lm else None, layers=at([L])[0], tp_at_most_experts=True,
        tied_keys={"index_n_heads": "num_key_value_heads",
                   "sparse_attention_config.sparse_num_index_heads": "num_key_value_heads"},
    )


MINIMAX_M3 = _m3("minimax_m3_vl", MiniMaxM3Adapter, _M3)
MINIMAX_M3_TEXT = _m3("minimax_m3_vl_text", MiniMaxM3TextAdapter, None)
