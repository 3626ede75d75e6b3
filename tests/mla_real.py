"""DeepSeek-V3 and Kimi-K2-Instruct: their public config.json values and the FP8 tensor list, for header-only plans.

Both ship DeepSeek's FP8 format (`quant_method: fp8`, e4m3 weights with float32 `weight_scale_inv` per 128×128
block) with BF16 norms, router gates, embeddings and lm_head. DeepSeek-V3 has one MTP layer (index 61).
"""

from __future__ import annotations

_FP8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
_COMMON = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "aux_loss_alpha": 0.001,
    "ep_size": 1, "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432,
    "kv_lora_rank": 512, "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_experts_per_tok": 8, "num_hidden_layers": 61, "pretraining_tp": 1,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "quantization_config": _FP8,
    "rms_norm_eps": 1e-06, "scoring_func": "sigmoid", "seq_aux": True, "tie_word_embeddings": False,
    "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "use_cache": True, "v_head_dim": 128,
}
DEEPSEEK_V3_CONFIG = dict(
    _COMMON, model_type="deepseek_v3", num_attention_heads=128, num_key_value_heads=128, n_routed_experts=256,
    n_group=8, topk_group=4, first_k_dense_replace=3, num_nextn_predict_layers=1, routed_scaling_factor=2.5,
    max_position_embeddings=163840, vocab_size=129280, bos_token_id=0, eos_token_id=1, rope_theta=10000,
    rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                  "original_max_position_embeddings": 4096, "type": "yarn"},
)
KIMI_K2_CONFIG = dict(
    _COMMON, model_type="kimi_k2", num_attention_heads=64, num_key_value_heads=64, n_routed_experts=384,
    n_group=1, topk_group=1, first_k_dense_replace=1, num_nextn_predict_layers=0, routed_scaling_factor=2.827,
    max_position_embeddings=131072, vocab_size=163840, bos_token_id=163584, eos_token_id=163585, rope_theta=50000.0,
    rope_scaling={"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                  "original_max_position_embeddings": 4096, "type": "yarn"},
)


def _fp8(name: str, out_f: int, in_f: int) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(f"{name}.weight", "F8_E4M3", (out_f, in_f)),
            (f"{name}.weight_scale_inv", "F32", (-(-out_f // 128), -(-in_f // 128)))]


def _layer(cfg: dict, i: int) -> list[tuple[str, str, tuple[int, ...]]]:
    h, heads, p = cfg["hidden_size"], cfg["num_attention_heads"], f"model.layers.{i}."
    nope, rope, v, lq, lkv = (cfg[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "q_lora_rank",
                                                "kv_lora_rank"))
    out = [(p + "input_layernorm.weight", "BF16", (h,)), (p + "post_attention_layernorm.weight", "BF16", (h,)),
           (p + "self_attn.q_a_layernorm.weight", "BF16", (lq,)),
           (p + "self_attn.kv_a_layernorm.weight", "BF16", (lkv,))]
    out += _fp8(p + "self_attn.q_a_proj", lq, h) + _fp8(p + "self_attn.q_b_proj", heads * (nope + rope), lq)
    out += _fp8(p + "self_attn.kv_a_proj_with_mqa", lkv + rope, h)
    out += _fp8(p + "self_attn.kv_b_proj", heads * (nope + v), lkv) + _fp8(p + "self_attn.o_proj", h, heads * v)
    if i < cfg["first_k_dense_replace"]:
        inter = cfg["intermediate_size"]
        return out + _fp8(p + "mlp.gate_proj", inter, h) + _fp8(p + "mlp.up_proj", inter, h) + _fp8(
            p + "mlp.down_proj", h, inter)
    moe, n_exp = cfg["moe_intermediate_size"], cfg["n_routed_experts"]
    out += [(p + "mlp.gate.weight", "BF16", (n_exp, h)), (p + "mlp.gate.e_score_correction_bias", "F32", (n_exp,))]
    for e in [f"experts.{j}" for j in range(n_exp)] + ["shared_experts"]:
        out += _fp8(p + f"mlp.{e}.gate_proj", moe, h) + _fp8(p + f"mlp.{e}.up_proj", moe, h) + _fp8(
            p + f"mlp.{e}.down_proj", h, moe)
    return out


def mla_tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """Every tensor of the checkpoint, MTP layers (embed, enorm, hnorm, eh_proj, shared_head) included."""
    h, vocab, n = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    out = [("model.embed_tokens.weight", "BF16", (vocab, h))]
    for i in range(n + cfg["num_nextn_predict_layers"]):
        out += _layer(cfg, i)
        if i >= n:
            p = f"model.layers.{i}."
            out += [(p + "embed_tokens.weight", "BF16", (vocab, h)), (p + "enorm.weight", "BF16", (h,)),
                    (p + "hnorm.weight", "BF16", (h,)), (p + "eh_proj.weight", "BF16", (h, 2 * h)),
                    (p + "shared_head.norm.weight", "BF16", (h,)), (p + "shared_head.head.weight", "BF16", (vocab, h))]
    return out + [("model.norm.weight", "BF16", (h,)), ("lm_head.weight", "BF16", (vocab, h))]
