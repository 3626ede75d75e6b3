"""GLM-4.5, GLM-4.6 and GLM-4.5-Air (zai-org, BF16): their public config.json values and tensor lists."""

from __future__ import annotations

from tests.moe_real import Tensors, checkpoint

_COMMON = {
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "attention_bias": True,
    "attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "initializer_range": 0.02,
    "n_group": 1, "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 96, "num_experts_per_tok": 8,
    "num_key_value_heads": 8, "num_nextn_predict_layers": 1, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05,
    "rope_theta": 1000000, "routed_scaling_factor": 2.5, "tie_word_embeddings": False, "topk_group": 1,
    "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 151552, "pad_token_id": 151329,
    "eos_token_id": [151329, 151336, 151338],
}
GLM45_CONFIG = dict(_COMMON, hidden_size=5120, intermediate_size=12288, moe_intermediate_size=1536, n_routed_experts=160,
                    num_hidden_layers=92, first_k_dense_replace=3, use_qk_norm=True, max_position_embeddings=131072)
GLM46_CONFIG = dict(GLM45_CONFIG, max_position_embeddings=202752)
GLM45_AIR_CONFIG = dict(_COMMON, hidden_size=4096, intermediate_size=10944, moe_intermediate_size=1408,
                        n_routed_experts=128, num_hidden_layers=46, first_k_dense_replace=1, use_qk_norm=False,
                        max_position_embeddings=131072)


def _bf16(name: str, out_f: int, in_f: int, bias: bool = False) -> Tensors:
    return [(f"{name}.weight", "BF16", (out_f, in_f))] + ([(f"{name}.bias", "BF16", (out_f,))] if bias else [])


def _attention(cfg: dict, i: int) -> Tensors:
    h, hd, p = cfg["hidden_size"], cfg["head_dim"], f"model.layers.{i}.self_attn."
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    out = _bf16(p + "q_proj", heads * hd, h, True) + _bf16(p + "k_proj", kv * hd, h, True)
    out += _bf16(p + "v_proj", kv * hd, h, True) + _bf16(p + "o_proj", h, heads * hd)
    if cfg["use_qk_norm"]:
        out += [(p + "q_norm.weight", "BF16", (hd,)), (p + "k_norm.weight", "BF16", (hd,))]
    return out


def glm_tensors(cfg: dict) -> Tensors:
    """Every tensor, the MTP layer (embed_tokens, enorm, hnorm, eh_proj, shared_head) included."""
    return checkpoint(cfg, _attention, _bf16)
