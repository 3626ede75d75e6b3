"""DeepSeek-V3 and Kimi-K2-Instruct: their public config.json values and the FP8 tensor list, for header-only plans.

Both ship DeepSeek's FP8 format (`quant_method: fp8`, e4m3 weights with float32 `weight_scale_inv` per 128×128
block) with BF16 norms, router gates, embeddings and lm_head. DeepSeek-V3 has one MTP layer (index 61).
"""

from __future__ import annotations

from tests.moe_real import Tensors, checkpoint

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


def _fp8(name: str, out_f: int, in_f: int) -> Tensors:
    return [(f"{name}.weight", "F8_E4M3", (out_f, in_f)),
            (f"{name}.weight_scale_inv", "F32", (-(-out_f // 128), -(-in_f // 128)))]


def _attention(cfg: dict, i: int) -> Tensors:
    h, heads, p = cfg["hidden_size"], cfg["num_attention_heads"], f"model.layers.{i}.self_attn."
    nope, rope, v, lq, lkv = (cfg[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "q_lora_rank",
                                                "kv_lora_rank"))
    out = [(p + "q_a_layernorm.weight", "BF16", (lq,)), (p + "kv_a_layernorm.weight", "BF16", (lkv,))]
    out += _fp8(p + "q_a_proj", lq, h) + _fp8(p + "q_b_proj", heads * (nope + rope), lq)
    out += _fp8(p + "kv_a_proj_with_mqa", lkv + rope, h)
    return out + _fp8(p + "kv_b_proj", heads * (nope + v), lkv) + _fp8(p + "o_proj", h, heads * v)


def mla_tensors(cfg: dict) -> Tensors:
    """Every tensor of the checkpoint, MTP layers (embed, enorm, hnorm, eh_proj, shared_head) included."""
    return checkpoint(cfg, _attention, _fp8)
