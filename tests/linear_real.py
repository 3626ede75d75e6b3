"""The late-2026 linear-attention releases as published, for header-only plans: Qwen3.8-Flash-Next (qwen4_exp),
Kimi-Linear-48B-A3B-Instruct (kimi_linear) and Kimi-K3 (kimi_k3). No torch.

Where the facts come from (stored public copies only; nothing fetched from the Hub, so nothing here is checked against
the official files, and every value below is "as reproduced by third parties"):

- Qwen/Qwen3.8-Flash-Next: model_type qwen4_exp, architectures [Qwen4ExpForConditionalGeneration] (a published-
  checkpoint check script pins both, with text_config.model_type qwen4_exp_text). text_config values agree across five
  independent copies (converters for GGUF / MLX / Rust engines and a checkpoint contract): hidden 2560, 48 layers
  (every 4th QSA), 24 heads / 2 kv of 256, GDN 16 key / 48 value heads of 128, 512 experts top-10 of width 640, shared
  expert 640, hc_count 4, hc_lowrank 320, PLE on layer 2 (1-based) with ple_embed_dim 2560, 3-grams, 8 heads per
  n-gram, 128 table shards, QSA indexer 4 heads of 128, MTP 1 layer, vocab 248320; vision depth 27, 1152 wide, out
  2560. Tensor names and shapes from one converter's spec of the release: fused BF16 experts
  (`experts.gate_up_proj` [512, 1280, 2560], `experts.down_proj` [512, 2560, 640]), F32 A_log and dt_bias,
  `indexer.index_qk_proj` [640, 2560], the PLE on `layers.1` with `key_proj` [10240, 2560], `value_proj`
  [2560, 2560], 128 `ngram_embedding.shard_N` tables of 160 columns (their row counts are not known: the spec's are
  placeholders; 51e9 parameters / 128 shards / 160 gives the 2.5e6 rows used here). Unconfirmed: the MTP layer's
  tensor names (taken from vLLM's Qwen4ExpMTP: fc_embedding, fc_hidden, pre_fc norms, a hyper-connection mixer and one
  QSA decoder layer; its experts stored like the main layers'), the vision tower's deepstack mergers (none here).
- moonshotai/Kimi-Linear-48B-A3B-Instruct: config values as two engines' tests quote "the released 48B config":
  hidden 2304, 27 layers, KDA layers all but 1-based [4, 8, 12, 16, 20, 24, 27], KDA 32 heads of 128, kernel 4; MLA
  32 heads, no q LoRA, kv_lora 512, nope 128, rope 64, v 128 (mla_use_nope); 256 experts top-8 of 1024, one shared
  expert, first layer dense 9216, vocab 163840. Tensor names: transformers' kimi_linear conversion mapping (the
  checkpoint's side of it: block_sparse_moe, experts.N.w1/w2/w3, q/k/v_conv1d, self_attn.f_a_proj / A_log / dt_bias)
  and vLLM's loader; A_log [1, 1, H, 1] and dt_bias F32 as transformers declares them. BF16.
- moonshotai/Kimi-K3: an official-config check pins text_config values (hidden 7168, 93 layers, 896 experts top-16,
  2 shared experts, moe_intermediate 3072, latent 3584, first layer dense); the rest (MLA 96 heads with q LoRA 1536 and
  an output gate, KDA 96 heads of 128 with a full-rank gate, attention-residual blocks of 12, KDA layers all but every
  4th and the last) from two engines' K3 templates. Tensor names from a K3 engine's synthetic-checkpoint generator
  ("verified against the real checkpoint's config.json"): `language_model.model.layers.N.*`, `language_model.lm_head`,
  experts `block_sparse_moe.experts.E.w1/w3/w2`. The release's routed experts are MXFP4 (compressed-tensors
  "mxfp4-pack-quantized", per the same generator): that form is KIMI_K3_MXFP4, the rest of the model BF16 (KIMI_K3
  has BF16 experts, the layout hubpad can read). The vision tower is left out (not known offline; it is copied).
"""

from __future__ import annotations

from tests.moe_real import Tensors
from tests.qwen35_real import _gated_attention, _gdn_qwen35, _norm, _w, layer_types
from tests.vlm_real import qwen3_vision_tensors

BF16, F32 = "BF16", "F32"

QWEN38_FLASH_NEXT_CONFIG = {
    "architectures": ["Qwen4ExpForConditionalGeneration"], "model_type": "qwen4_exp", "image_token_id": 248056,
    "video_token_id": 248057, "vision_start_token_id": 248053, "vision_end_token_id": 248054,
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "qwen4_exp_text", "hidden_size": 2560, "num_hidden_layers": 48, "layer_types": layer_types(48),
        "num_attention_heads": 24, "num_key_value_heads": 2, "head_dim": 256, "hidden_act": "silu",
        "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "num_experts": 512, "num_experts_per_tok": 10,
        "moe_intermediate_size": 640, "shared_expert_intermediate_size": 640, "norm_topk_prob": True,
        "hc_count": 4, "hc_lowrank": 320, "ngram_size": 3, "heads_per_ngram": 8, "ple_embed_dim": 2560,
        "ple_conv_kernel_size": 4, "ple_layer_ids": [2], "ngram_vocab_size_base": 20000000,
        "make_ngram_vocab_size_divisible_by": 128, "split_ngram_parts": 128, "seed": 1234,
        "indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 128, "indexer_budget": 2048,
        "indexer_compress_ratio": 4, "eos_token_id": 248044, "rms_norm_eps": 1e-06, "output_gate_type": "sigmoid",
        "max_position_embeddings": 262144, "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False,
        "partial_rotary_factor": 0.25, "tie_word_embeddings": False, "vocab_size": 248320,
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "partial_rotary_factor": 0.25,
                            "rope_theta": 10000000, "rope_type": "default"},
    },
    "vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16,
                      "out_hidden_size": 2560, "patch_size": 16, "num_position_embeddings": 2304,
                      "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3,
                      "hidden_act": "gelu_pytorch_tanh", "model_type": "qwen4_exp_vision"},
}
_NGRAM_ROWS = 2_500_000  # per table shard (not known; see above)


def _hc(p: str, t: dict, inject: bool = True) -> Tensors:
    w = t["hc_count"] * t["hidden_size"]
    out = _norm(p + "hc_norm", w) + _w(p + "input_mix_weight_down", t["hc_lowrank"], w)
    out += _w(p + "input_mix_weight_up", w, t["hc_lowrank"])
    return out + (_w(p + "block_inject_weight", t["hc_count"], w) if inject else [])


def _qwen4_layer(t: dict, p: str, linear: bool, ple: bool) -> Tensors:
    h, e, inter = t["hidden_size"], t["num_experts"], t["moe_intermediate_size"]
    out = _hc(p + "attn_hyper_connection.", t) + _hc(p + "mlp_hyper_connection.", t)
    if linear:
        out += [(n, F32 if n.endswith(("A_log", "dt_bias")) else d, s) for n, d, s in _gdn_qwen35(t, p)]
    else:
        a = p + "self_attn."
        out += _gated_attention(t, p)
        out += _w(a + "indexer.index_qk_proj", (t["indexer_n_heads"] + 1) * t["indexer_head_dim"], h)
        out += _norm(a + "indexer.q_layernorm", t["indexer_head_dim"]) + _norm(a + "indexer.k_layernorm",
                                                                                 t["indexer_head_dim"])
    out += _w(p + "mlp.gate", e, h) + _w(p + "mlp.shared_expert_gate", 1, h)
    s = t["shared_expert_intermediate_size"]
    out += _w(p + "mlp.shared_expert.gate_proj", s, h) + _w(p + "mlp.shared_expert.up_proj", s, h)
    out += _w(p + "mlp.shared_expert.down_proj", h, s)
    out += [(p + "mlp.experts.gate_up_proj", BF16, (e, 2 * inter, h)), (p + "mlp.experts.down_proj", BF16, (e, h, inter))]
    if ple:
        w, q = t["hc_count"] * h, p + "ple."
        out += [(q + "conv1d.weight", BF16, (w, 1, t["ple_conv_kernel_size"]))]
        out += _w(q + "key_proj", w, t["ple_embed_dim"]) + _w(q + "value_proj", h, t["ple_embed_dim"])
        out += _norm(q + "norm_key", w) + _norm(q + "norm_query", w) + _norm(q + "norm_conv", w)
        heads = (t["ngram_size"] - 1) * t["heads_per_ngram"]
        out += [(q + "ple_embedding.layer_multipliers", "I64", (t["ngram_size"],)),
                (q + "ple_embedding.ngram_heads_offsets", "I64", (heads,)),
                (q + "ple_embedding.ngram_heads_vocab_sizes", "I64", (heads,))]
        out += [(f"{q}ple_embedding.ngram_embedding.shard_{k}.weight", BF16, (_NGRAM_ROWS, t["ple_embed_dim"] // heads))
                for k in range(t["split_ngram_parts"])]
    return out


def qwen4_exp_tensors(cfg: dict) -> Tensors:
    t, lm = cfg["text_config"], "model.language_model."
    h, v = t["hidden_size"], t["vocab_size"]
    out = _w(lm + "embed_tokens", v, h) + _w("lm_head", v, h) + _hc(lm + "hyper_connection_mixer.", t, inject=False)
    for i, kind in enumerate(t["layer_types"]):
        out += _qwen4_layer(t, f"{lm}layers.{i}.", kind == "linear_attention", i + 1 in t["ple_layer_ids"])
    out += qwen3_vision_tensors(cfg["vision_config"])
    out += _w("mtp.fc_embedding", h, h) + _w("mtp.fc_hidden", h, h) + _norm("mtp.pre_fc_norm_embedding", h)
    out += _norm("mtp.pre_fc_norm_hidden", t["hc_count"] * h) + _hc("mtp.hyper_connection_mixer.", t, inject=False)
    return out + _qwen4_layer(t, "mtp.layers.0.", linear=False, ple=False)


# ---------------------------------------------------------------------------------------------------------------------
def _kimi_layers(n: int, full: list[int]) -> dict:
    return {"full_attn_layers": full, "kda_layers": [i for i in range(1, n + 1) if i not in full]}


KIMI_LINEAR_48B_CONFIG = {
    "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear", "hidden_size": 2304,
    "num_hidden_layers": 27, "vocab_size": 163840, "num_attention_heads": 32, "num_key_value_heads": 32,
    "q_lora_rank": None, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "mla_use_nope": True, "num_experts": 256, "num_experts_per_token": 8, "num_shared_experts": 1,
    "moe_intermediate_size": 1024, "intermediate_size": 9216, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "moe_renormalize": True, "moe_router_activation_func": "sigmoid", "num_expert_group": 1, "topk_group": 1,
    "routed_scaling_factor": 2.446, "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": False,
    "eos_token_id": 163586, "torch_dtype": "bfloat16",
    "linear_attn_config": {**_kimi_layers(27, [4, 8, 12, 16, 20, 24, 27]), "head_dim": 128, "num_heads": 32,
                           "short_conv_kernel_size": 4},
}

_K3_FULL = [i for i in range(4, 93, 4)] + [93]
KIMI_K3_TEXT = {
    "model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"], "hidden_size": 7168,
    "num_hidden_layers": 93, "vocab_size": 163840, "num_attention_heads": 96, "num_key_value_heads": 96,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "mla_use_nope": True, "mla_use_output_gate": True, "attn_res_block_size": 12, "num_experts": 896,
    "num_experts_per_token": 16, "num_shared_experts": 2, "moe_intermediate_size": 3072,
    "routed_expert_hidden_size": 3584, "latent_moe_use_norm": True, "intermediate_size": 33792,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "hidden_act": "situ", "activation_situ_beta": 4.0,
    "activation_situ_linear_beta": 25.0, "routed_scaling_factor": 1.0, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "linear_attn_config": {**_kimi_layers(93, _K3_FULL), "head_dim": 128, "num_heads": 96, "short_conv_kernel_size": 4,
                           "gate_lower_bound": -5.0, "use_full_rank_gate": True},
}
KIMI_K3_CONFIG = {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
                  "text_config": KIMI_K3_TEXT, "tie_word_embeddings": False}
KIMI_K3_MXFP4_CONFIG = {
    **KIMI_K3_CONFIG,
    "text_config": {**KIMI_K3_TEXT, "quantization_config": {"quant_method": "compressed-tensors",
                                                            "format": "mxfp4-pack-quantized"}}}


def _kda(t: dict, a: str) -> Tensors:
    k = t["linear_attn_config"]
    heads, d, kernel, h = k["num_heads"], k["head_dim"], k["short_conv_kernel_size"], t["hidden_size"]
    di = heads * d
    out = _w(a + "q_proj", di, h) + _w(a + "k_proj", di, h) + _w(a + "v_proj", di, h)
    out += [(a + f"{x}_conv1d.weight", BF16, (di, 1, kernel)) for x in "qkv"]
    out += _w(a + "f_a_proj", d, h) + _w(a + "f_b_proj", di, d) + _w(a + "b_proj", heads, h)
    out += [(a + "dt_bias", F32, (di,)), (a + "A_log", F32, (1, 1, heads, 1))]
    out += _w(a + "g_proj", di, h) if k.get("use_full_rank_gate") else _w(a + "g_a_proj", d, h) + _w(a + "g_b_proj",
                                                                                                      di, d)
    return out + _norm(a + "o_norm", d, F32) + _w(a + "o_proj", h, di)


def _mla(t: dict, a: str) -> Tensors:
    h, heads, nope, rope, v = (t[k] for k in ("hidden_size", "num_attention_heads", "qk_nope_head_dim",
                                              "qk_rope_head_dim", "v_head_dim"))
    q = t.get("q_lora_rank")
    out = (_w(a + "q_a_proj", q, h) + _norm(a + "q_a_layernorm", q) + _w(a + "q_b_proj", heads * (nope + rope), q)
           if q else _w(a + "q_proj", heads * (nope + rope), h))
    out += _w(a + "kv_a_proj_with_mqa", t["kv_lora_rank"] + rope, h) + _norm(a + "kv_a_layernorm", t["kv_lora_rank"])
    out += _w(a + "kv_b_proj", heads * (nope + v), t["kv_lora_rank"]) + _w(a + "o_proj", h, heads * v)
    return out + (_w(a + "g_proj", heads * v, h) if t.get("mla_use_output_gate") else [])


def _experts(p: str, e: int, inter: int, width: int, mxfp4: bool) -> Tensors:
    out: Tensors = []
    for x in range(e):
        for w, rows, cols in (("w1", inter, width), ("w3", inter, width), ("w2", width, inter)):
            name = f"{p}experts.{x}.{w}"
            out += ([(name + ".weight_packed", "U8", (rows, cols // 2)), (name + ".weight_scale", "U8",
                                                                          (rows, cols // 32))]
                    if mxfp4 else _w(name, rows, cols))
    return out


def kimi_tensors(cfg: dict, prefix: str = "model.", head: str = "lm_head", mxfp4: bool = False) -> Tensors:
    t = cfg.get("text_config", cfg)
    h, v, n = t["hidden_size"], t["vocab_size"], t["num_hidden_layers"]
    kda = set(t["linear_attn_config"]["kda_layers"])
    latent = t.get("routed_expert_hidden_size")
    out = _w(prefix + "embed_tokens", v, h) + _w(head, v, h) + _norm(prefix + "norm", h)
    if t.get("attn_res_block_size"):
        out += _norm(prefix + "output_attn_res_norm", h) + _w(prefix + "output_attn_res_proj", 1, h)
    for i in range(n):
        p = f"{prefix}layers.{i}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        if t.get("attn_res_block_size"):
            out += _norm(p + "self_attention_res_norm", h) + _w(p + "self_attention_res_proj", 1, h)
            out += _norm(p + "mlp_res_norm", h) + _w(p + "mlp_res_proj", 1, h)
        out += _kda(t, p + "self_attn.") if i + 1 in kda else _mla(t, p + "self_attn.")
        if i < t["first_k_dense_replace"]:
            d = t["intermediate_size"]
            out += _w(p + "mlp.gate_proj", d, h) + _w(p + "mlp.up_proj", d, h) + _w(p + "mlp.down_proj", h, d)
            continue
        m, e, inter = p + "block_sparse_moe.", t["num_experts"], t["moe_intermediate_size"]
        s = inter * t["num_shared_experts"]
        out += _w(m + "gate", e, h) + [(m + "gate.e_score_correction_bias", F32, (e,))]
        out += _w(m + "shared_experts.gate_proj", s, h) + _w(m + "shared_experts.up_proj", s, h)
        out += _w(m + "shared_experts.down_proj", h, s)
        if latent:
            out += _w(m + "routed_expert_down_proj", latent, h) + _w(m + "routed_expert_up_proj", h, latent)
            out += _norm(m + "routed_expert_norm", latent)
        out += _experts(m, e, inter, latent or h, mxfp4)
    return out


def kimi_k3_tensors(cfg: dict) -> Tensors:
    return kimi_tensors(cfg, "language_model.model.", "language_model.lm_head",
                        mxfp4="quantization_config" in cfg["text_config"])


# ---------------------------------------------------------------------------------------------------------------------
# zai-org/GLM-5.3-Flash (glm5_next): text values from an inference engine's "report" template and a reference script's
# config (hidden 4096, 45 layers with DSA at every 4th, MLA 64 NoPE heads of 256 with q LoRA 1536 / kv LoRA 512, indexer
# 32 heads of 128 with a k-pool of 4, KDA 64 heads of 128, dense 12288 on the first 3 layers, 288 experts top-8 of
# 2048, one shared expert, one MTP layer, vocab 154880). `layer_types` says "deepseek_sparse_attention" for the DSA
# layers and linear_attn_config.kda_layers is 0-based there (hubpad reads layer_types, as vLLM does). Its quantization
# (one reference loads it as FP8 128x128 blocks) and vision tower are not known offline: BF16, tower left out.
_GLM53_TYPES = ["deepseek_sparse_attention" if i % 4 == 3 else "linear_attention" for i in range(45)]
GLM53_FLASH_TEXT = {
    "model_type": "glm5_next_text", "num_hidden_layers": 45, "hidden_size": 4096, "num_attention_heads": 64,
    "num_key_value_heads": 64, "qk_nope_head_dim": 256, "qk_rope_head_dim": 0, "v_head_dim": 256, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "layer_types": _GLM53_TYPES, "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 42,
    "index_topk": 2048, "index_n_heads": 32, "index_head_dim": 128, "index_kpool": 4, "num_nextn_predict_layers": 1,
    "intermediate_size": 12288, "moe_intermediate_size": 2048, "n_routed_experts": 288, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "n_group": 1, "topk_group": 1, "vocab_size": 154880, "rms_norm_eps": 1e-06,
    "hidden_act": "silu", "hc_mult": 4, "hc_eps": 1e-06, "hc_sinkhorn_iters": 20, "tie_word_embeddings": False,
    "linear_attn_config": {"full_attn_layers": [i for i in range(45) if i % 4 == 3],
                           "kda_layers": [i for i in range(45) if i % 4 != 3], "head_dim": 128, "num_heads": 64,
                           "short_conv_kernel_size": 4, "gate_lower_bound": -5.0},
}
GLM53_FLASH_CONFIG = {"architectures": ["Glm5NextForConditionalGeneration"], "model_type": "glm5_next",
                      "text_config": GLM53_FLASH_TEXT, "tie_word_embeddings": False}


def glm5_next_tensors(cfg: dict) -> Tensors:
    t, lm = cfg["text_config"], "model.language_model."
    h, v, n, hc = t["hidden_size"], t["vocab_size"], t["num_hidden_layers"], t["hc_mult"]
    mix = (2 + hc) * hc
    out = _w(lm + "embed_tokens", v, h) + _w("lm_head", v, h) + _norm(lm + "norm", h)
    out += [(lm + "hc_head_fn", F32, (hc, hc * h)), (lm + "hc_head_base", F32, (hc,)), (lm + "hc_head_scale", F32, (1,))]
    kda_cfg = {**t, "linear_attn_config": {**t["linear_attn_config"], "use_full_rank_gate": False}}
    for i in range(n + t["num_nextn_predict_layers"]):
        p = f"{lm}layers.{i}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        for part in ("attn", "ffn"):
            out += [(f"{p}hc_{part}_fn", F32, (mix, hc * h)), (f"{p}hc_{part}_base", F32, (mix,)),
                    (f"{p}hc_{part}_scale", F32, (3,))]
        if i < n and t["layer_types"][i] == "linear_attention":
            out += [(x, d, (s[2],) if x.endswith("A_log") else s) for x, d, s in _kda(kda_cfg, p + "self_attn.")]
        else:
            a, ih, ihd = p + "self_attn.", t["index_n_heads"], t["index_head_dim"]
            out += _mla(t, a)
            out += _w(a + "indexer.wq_b", ih * ihd, t["q_lora_rank"]) + _w(a + "indexer.wk", ihd, h)
            out += [(a + "indexer.k_norm.weight", BF16, (ihd,)), (a + "indexer.k_norm.bias", BF16, (ihd,))]
            out += _w(a + "indexer.weights_proj", ih, h)
            out += [(a + "indexer.index_kpool_compress_ape", BF16, (t["index_kpool"], ihd)),
                    (a + "indexer.index_kpool_compress_gate", BF16, (ihd, h))]
        if i >= n:  # the MTP layer's own modules
            out += _norm(p + "enorm", h) + _norm(p + "hnorm", h) + _w(p + "eh_proj", h, 2 * h)
            out += _norm(p + "shared_head.norm", h)
        if i < n and t["mlp_layer_types"][i] == "dense":
            d = t["intermediate_size"]
            out += _w(p + "mlp.gate_proj", d, h) + _w(p + "mlp.up_proj", d, h) + _w(p + "mlp.down_proj", h, d)
            continue
        e, inter = t["n_routed_experts"], t["moe_intermediate_size"]
        out += _w(p + "mlp.gate", e, h) + [(p + "mlp.gate.e_score_correction_bias", F32, (e,))]
        for x in range(e):
            q = f"{p}mlp.experts.{x}."
            out += _w(q + "gate_proj", inter, h) + _w(q + "up_proj", inter, h) + _w(q + "down_proj", h, inter)
        s = inter * t["n_shared_experts"]
        out += _w(p + "mlp.shared_experts.gate_proj", s, h) + _w(p + "mlp.shared_experts.up_proj", s, h)
        out += _w(p + "mlp.shared_experts.down_proj", h, s)
    return out


# hub name -> (config, tensors function)
REAL_LINEAR_MODELS = {
    "zai-org/GLM-5.3-Flash": (GLM53_FLASH_CONFIG, glm5_next_tensors),
    "Qwen/Qwen3.8-Flash-Next": (QWEN38_FLASH_NEXT_CONFIG, qwen4_exp_tensors),
    "moonshotai/Kimi-Linear-48B-A3B-Instruct": (KIMI_LINEAR_48B_CONFIG, kimi_tensors),
    "moonshotai/Kimi-K3": (KIMI_K3_CONFIG, kimi_k3_tensors),
    "moonshotai/Kimi-K3 (MXFP4 experts)": (KIMI_K3_MXFP4_CONFIG, kimi_k3_tensors),
}
