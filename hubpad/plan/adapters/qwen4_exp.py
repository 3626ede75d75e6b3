"""Qwen4-Exp (`qwen4_exp`, Qwen4ExpForConditionalGeneration: Qwen3.8-Flash-Next is published with this model type and
architecture): Qwen3.5's hybrid stack (plan/gdn.py Gated DeltaNet layers, Qwen3.5 layout, between gated full-attention
layers) plus three replicated parts, a 512-expert MoE with a shared expert, an MTP layer and a vision tower.

What padding does, each rule read in transformers' modeling_qwen4_exp.py and vLLM's vllm/models/qwen4_exp:
- Full attention (QSA layers, vLLM's Qwen4ExpQSAAttention): q_proj holds, per head, the query then its output gate
  (QKVParallelLinear over num_attention_heads x 2 heads, split contiguously per rank), so whole 2 x head_dim blocks
  are appended with whole GQA groups, as for Qwen3.5; k/v rows and o_proj columns follow. vLLM refuses heads % TP and
  a kv count that neither divides by TP nor divides TP ("TP size must be divisible by replicated QSA KV heads").
- Gated DeltaNet (QwenGatedDeltaNetAttention, gqa_interleaved_layout=False): in_proj_qkv rows and conv1d channels
  grow per [q | k | v] section, in_proj_z, in_proj_a/b, A_log, dt_bias and out_proj's columns with the value heads
  (plan/gdn.py, the Qwen3.5 rules).
- Replicated, copied as they are: the hyper-connections (`*_hyper_connection.*`, `hyper_connection_mixer.*`:
  ReplicatedLinear / MergedColumnParallelLinear(disable_tp=True) over hc_count x hidden), the n-gram per-layer
  embedding (`ple.*`: its projections are MergedColumnParallelLinear(disable_tp=True); the n-gram table shards
  `ngram_embedding.shard_N` are a vocab-parallel embedding over rows, any row count) and the QSA token indexer
  (`self_attn.indexer.*`: ReplicatedLinear, and vLLM's fused qkv+indexer GEMM loads it as shard 3 from rank 0 on
  every rank). None of them has a head axis; all are hidden-wide, and padding never changes hidden_size.
- Routed experts stored fused ([E, 2I, H] gate then up, [E, H, I]; vLLM's Qwen3-Next MoE block, which refuses a TP
  larger than the number of experts); the shared expert has its own width. 640 neurons at TP 3 grow to the
  per-rank kernel tile.
- The MTP layer (`mtp.*`: a QSA decoder layer with its hyper-connections, `fc_embedding` / `fc_hidden`, norms and a
  mixer): vLLM's fc_embedding / fc_hidden are ColumnParallelLinear over the hidden size, so MTP needs
  hidden_size % TP == 0 (Qwen3.8-Flash-Next: 2560, so not at TP 3 or 6); the card then leaves MTP out and says why.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import (ATTENTION, COPY_PARAMS, EXPERTS, LANGUAGE_MODEL, ROUTERS, SHARED, VISION_TOWER,
                                       FusedExperts, L, under)
from hubpad.plan.adapters.qwen_next import _GDN_BOTH, _GDN_NORM, _GDN_QWEN35, Qwen35VlAdapter

_HC = r"(hc_norm|input_mix_weight_down|input_mix_weight_up|block_inject_weight)$"
# modules copied as they are, for a decoder layer whose names start at `model.layers.N.`
_LAYER_COPY = [L + r"(attn|mlp)_hyper_connection\." + _HC,
               L + r"ple\.(key_proj|value_proj|norm_key|norm_query|norm_conv|conv1d)$",
               L + r"ple\.ple_embedding\.ngram_embedding(\.shard_\d+)?$",
               L + r"self_attn\.indexer\.(index_qk_proj|q_layernorm|k_layernorm)$",
               r"^model\.embed_tokens$", r"^lm_head$", r"^model\.hyper_connection_mixer\." + _HC]
_LAYER_PARAMS = [L + r"ple\.ple_embedding\.(layer_multipliers|ngram_heads_vocab_sizes|ngram_heads_offsets)$"]
_MTP = "mtp."
_MTP_OWN = [r"^mtp\.(fc_embedding|fc_hidden|fc|pre_fc_norm_embedding|pre_fc_norm_hidden|norm)$",
            r"^mtp\.hyper_connection_mixer\." + _HC]


class Qwen4ExpAdapter(Qwen35VlAdapter):
    """Qwen3.5's serving facts (Qwen3 parsers, MTP where the hidden size shards, the tower data-parallel), with
    Qwen4-Exp's own MTP class: vLLM drafts with Qwen4ExpMTP, not Qwen3.5's."""

    def serving(self, config: dict) -> dict:
        out = super().serving(config)
        features = ["spec:qwen4_exp_mtp" if f == "spec:qwen3_5_mtp" else f for f in out["vllm_features"]]
        return {**out, "vllm_features": features}


class Qwen4ExpTextAdapter(Qwen4ExpAdapter):
    """A text-only Qwen4-Exp checkpoint (`qwen4_exp_text`, vLLM's Qwen4ExpForCausalLM): no tower, no encoder mode."""

    multimodal = False


def _qwen4_exp(name: str, cls: type, lm: str | None):
    """Qwen4-Exp's adapter with its language model under `lm` (None: at `model.`, a text-only checkpoint: vLLM's
    Qwen4ExpForCausalLM maps `model.language_model.` to `model.`, so it reads the layers there), MTP at `mtp.`."""
    at = (lambda patterns: under(lm, patterns)) if lm else list
    layers = at([L])[0]
    mtp_layers = under(_MTP, [L])[0]
    moe = ATTENTION + EXPERTS + SHARED
    return cls(
        name=name, model_types=(name,),
        linear_patterns=at(moe) + under(_MTP, moe),
        copy_modules=(at(_LAYER_COPY + ROUTERS + _GDN_NORM) + under(_MTP, _LAYER_COPY + ROUTERS) + _MTP_OWN
                      + (VISION_TOWER if lm else [])),
        copy_params=at(COPY_PARAMS + _LAYER_PARAMS) + under(_MTP, COPY_PARAMS),
        per_head_norms=True, layers=f"^(?:{layers[1:]}|{mtp_layers[1:]})",
        intermediate_keys={"expert": ("moe_intermediate_size",), "shared": ("shared_expert_intermediate_size",)},
        fused_experts=[(f"^(?:{layers[1:]}|{mtp_layers[1:]})" + r"mlp\.experts\.gate_up_proj$",
                        FusedExperts(axis=-2, parts=2)),
                       (f"^(?:{layers[1:]}|{mtp_layers[1:]})" + r"mlp\.experts\.down_proj$",
                        FusedExperts(axis=-1, parts=1))],
        linear_attention=[(layers + tail, kind) for tail, kind in _GDN_QWEN35 + _GDN_BOTH],
        text_config="text_config" if lm else None, mtp_fc_shards_hidden=True, tp_at_most_experts=True,
        lossless=("heads.indexer",),  # the QSA token indexer: copied, replicated
    )


QWEN4_EXP = _qwen4_exp("qwen4_exp", Qwen4ExpAdapter, LANGUAGE_MODEL)
QWEN4_EXP_TEXT = _qwen4_exp("qwen4_exp_text", Qwen4ExpTextAdapter, None)
