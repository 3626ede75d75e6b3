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
