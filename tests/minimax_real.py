"""MiniMax-M2 / M2.1 / M2.5 / M2.7 (MiniMaxAI, FP8 block 128 x 128): their public config.json values and tensor list.

Not read from huggingface.co here (no access offline); assembled from public copies of the configs and loaders: the
values below appear in third-party tests and tools that load the published checkpoints (transformers' MiniMaxM2Config
defaults, NVIDIA Megatron-Bridge's MiniMax-M2 notes, SGLang/tokenspeed and vLLM-monitoring fixtures quoting
config.json: 62 layers, 48 heads / 8 kv, head_dim 128, hidden 3072, expert width 1536, 256 experts top 8, vocab
200064, rotary_dim 64, sigmoid routing with a correction bias, `quantization_config` fp8 with 128 x 128 blocks and
`modules_to_not_convert` gate / e_score_correction_bias / lm_head, `num_mtp_modules` 3). The tensor count this list
gives, 96,103, is the count a public merge of M2.5 and M2.7 reports for the published checkpoint: no MTP tensors (an
issue on MiniMax-AI/MiniMax-M2.7 says so too), FP8 weights with a float32 `weight_scale_inv` for every attention and
expert linear layer. Not confirmable offline: the dtypes of the norms, the router gate and the embeddings (BF16 here;
hubpad copies them as they are, except q_norm/k_norm, which it rescales in their own dtype), and the shard layout.
`max_position_embeddings` is 196608 in M2 and 204800 in M2.7 (nothing hubpad reads).
"""

from __future__ import annotations

M2_CONFIG = {
    "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "hidden_size": 3072,
    "intermediate_size": 1536, "num_hidden_layers": 62, "num_attention_heads": 48, "num_key_value_heads": 8,
    "head_dim": 128, "rotary_dim": 64, "rope_theta": 5000000, "max_position_embeddings": 196608,
    "num_local_experts": 256, "num_experts_per_tok": 8, "scoring_func": "sigmoid", "use_routing_bias": True,
    "use_qk_norm": True, "qk_norm_type": "per_layer", "rms_norm_eps": 1e-06, "vocab_size": 200064,
    "hidden_act": "silu", "tie_word_embeddings": False, "attention_dropout": 0.0, "shared_intermediate_size": 0,
    "num_mtp_modules": 3, "mtp_transformer_layers": 1, "use_mtp": True, "attn_type_list": [1] * 62,
    "torch_dtype": "bfloat16",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "float8_e4m3fn", "quant_method": "fp8",
                            "weight_block_size": [128, 128],
                            "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]},
}


def _fp8(name: str, out_f: int, in_f: int) -> list:
    return [(f"{name}.weight", "F8_E4M3", (out_f, in_f)),
            (f"{name}.weight_scale_inv", "F32", (-(-out_f // 128), -(-in_f // 128)))]


def m2_tensors(cfg: dict = M2_CONFIG) -> list:
    h, hd, heads, kv = cfg["hidden_size"], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    inter, experts, vocab = cfg["intermediate_size"], cfg["num_local_experts"], cfg["vocab_size"]
    out = [("model.embed_tokens.weight", "BF16", (vocab, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", "BF16", (h,)), (p + "post_attention_layernorm.weight", "BF16", (h,))]
        a = p + "self_attn."
        out += _fp8(a + "q_proj", heads * hd, h) + _fp8(a + "k_proj", kv * hd, h) + _fp8(a + "v_proj", kv * hd, h)
        out += _fp8(a + "o_proj", h, heads * hd)
        out += [(a + "q_norm.weight", "BF16", (heads * hd,)), (a + "k_norm.weight", "BF16", (kv * hd,))]
        m = p + "block_sparse_moe."
        out += [(m + "gate.weight", "BF16", (experts, h)), (m + "e_score_correction_bias", "F32", (experts,))]
        for e in range(experts):
            out += _fp8(m + f"experts.{e}.w1", inter, h) + _fp8(m + f"experts.{e}.w3", inter, h)
            out += _fp8(m + f"experts.{e}.w2", h, inter)
    return out + [("model.norm.weight", "BF16", (h,)), ("lm_head.weight", "BF16", (vocab, h))]


# MiniMax-M3 (MiniMaxAI/MiniMax-M3, `minimax_m3_vl`). Confirmed from public copies (SGLang's offline fallback of the
# released text_config, transformers' MiniMaxM3VLTextConfig defaults, third-party loaders of the released checkpoint):
# hidden 6144, 64 heads / 4 kv, head_dim 128, rotary_dim 64 (partial 0.5), per-head Gemma q/k norms, the indexer's
# sparse_attention_config (128-dim index heads, 4 of them = the kv heads, blocks of 128, top 16, 1 local block),
# vocab 200064, 128 routed experts of 3072 (top 4) with one shared expert of 3072, dense layers of 12288, sigmoid routing
# with a correction bias, 60 layers; the tensor names (`language_model.model.layers.N.self_attn.index_q_proj`,
# `block_sparse_moe.shared_experts.*`, dense `mlp.*`, `vision_tower.vision_model.*`, `multi_modal_projector.*`,
# `patch_merge_mlp.*`), and no MTP tensors in the released index. NOT confirmable offline: which layers are dense and
# which run the indexer (moe_layer_freq / sparse_attention_freq: 3 dense layers first, and the indexer on the MoE
# layers, is assumed here; a 796 GB BF16 release, which a public loader quotes, fits 3 dense layers), the dtypes
# (BF16 assumed), and the vision tower's shapes (a stand-in: hubpad copies it byte for byte whatever it holds).
_M3_LAYERS = 60
_M3_DENSE = 3
M3_TEXT = {
    "model_type": "minimax_m3_vl_text", "hidden_size": 6144, "num_hidden_layers": _M3_LAYERS,
    "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128, "rotary_dim": 64,
    "partial_rotary_factor": 0.5, "rope_theta": 5000000, "max_position_embeddings": 1048576, "rms_norm_eps": 1e-06,
    "use_qk_norm": True, "qk_norm_type": "per_head", "use_gemma_norm": True, "attention_output_gate": False,
    "vocab_size": 200064, "intermediate_size": 3072, "dense_intermediate_size": 12288, "shared_intermediate_size": 3072,
    "n_shared_experts": 1, "num_local_experts": 128, "num_experts_per_tok": 4, "scoring_func": "sigmoid",
    "use_routing_bias": True, "routed_scaling_factor": 2.0, "hidden_act": "swigluoai", "swiglu_alpha": 1.702,
    "swiglu_limit": 7.0, "tie_word_embeddings": False,
    "moe_layer_freq": [0] * _M3_DENSE + [1] * (_M3_LAYERS - _M3_DENSE),
    "sparse_attention_config": {"use_sparse_attention": True, "sparse_index_dim": 128, "sparse_num_index_heads": 4,
                                "sparse_topk_blocks": 16, "sparse_block_size": 128, "sparse_score_type": "max",
                                "sparse_init_block": 0, "sparse_local_block": 1,
                                "sparse_attention_freq": [0] * _M3_DENSE + [1] * (_M3_LAYERS - _M3_DENSE)},
}
M3_CONFIG = {"architectures": ["MiniMaxM3SparseForConditionalGeneration"], "model_type": "minimax_m3_vl",
             "text_config": M3_TEXT, "vision_config": {"hidden_size": 1024, "num_hidden_layers": 2},
             "image_token_index": 200025, "video_token_index": 200026, "torch_dtype": "bfloat16"}


def m3_tensors(text: dict = M3_TEXT) -> list:
    h, hd, heads, kv = text["hidden_size"], text["head_dim"], text["num_attention_heads"], text["num_key_value_heads"]
    inter, dense, experts, vocab = (text["intermediate_size"], text["dense_intermediate_size"],
                                    text["num_local_experts"], text["vocab_size"])
    bf = lambda name, *shape: (name, "BF16", shape)  # noqa: E731
    out = [bf("language_model.model.embed_tokens.weight", vocab, h)]
    for i in range(text["num_hidden_layers"]):
        p = f"language_model.model.layers.{i}."
        out += [bf(p + "input_layernorm.weight", h), bf(p + "post_attention_layernorm.weight", h)]
        a = p + "self_attn."
        out += [bf(a + "q_proj.weight", heads * hd, h), bf(a + "k_proj.weight", kv * hd, h),
                bf(a + "v_proj.weight", kv * hd, h), bf(a + "o_proj.weight", h, heads * hd),
                bf(a + "q_norm.weight", hd), bf(a + "k_norm.weight", hd)]
        if text["sparse_attention_config"]["sparse_attention_freq"][i]:
            d = text["sparse_attention_config"]["sparse_index_dim"]
            out += [bf(a + "index_q_proj.weight", kv * d, h), bf(a + "index_k_proj.weight", d, h),
                    bf(a + "index_q_norm.weight", d), bf(a + "index_k_norm.weight", d)]
        if not text["moe_layer_freq"][i]:
            out += [bf(p + "mlp.gate_proj.weight", dense, h), bf(p + "mlp.up_proj.weight", dense, h),
                    bf(p + "mlp.down_proj.weight", h, dense)]
            continue
        m = p + "block_sparse_moe."
        out += [bf(m + "gate.weight", experts, h), (m + "e_score_correction_bias", "F32", (experts,))]
        for e in [f"experts.{j}" for j in range(experts)]:
            out += [bf(m + f"{e}.w1.weight", inter, h), bf(m + f"{e}.w3.weight", inter, h),
                    bf(m + f"{e}.w2.weight", h, inter)]
        out += [bf(m + "shared_experts.gate_proj.weight", inter, h), bf(m + "shared_experts.up_proj.weight", inter, h),
                bf(m + "shared_experts.down_proj.weight", h, inter)]
    out += [bf("language_model.model.norm.weight", h), bf("language_model.lm_head.weight", vocab, h)]
    v = "vision_tower.vision_model."  # a stand-in tower (copied byte for byte, whatever it holds)
    out += [bf(v + "embeddings.patch_embedding.weight", 1024, 3, 2, 14, 14), bf(v + "pre_layrnorm.weight", 1024),
            bf(v + "encoder.layers.0.self_attn.q_proj.weight", 1024, 1024),
            bf(v + "encoder.layers.0.mlp.fc1.weight", 4096, 1024),
            bf("multi_modal_projector.linear_1.weight", h, 1024), bf("multi_modal_projector.linear_2.weight", h, h),
            bf("patch_merge_mlp.linear_1.weight", h, 4096), bf("patch_merge_mlp.linear_2.weight", h, h)]
    return out
