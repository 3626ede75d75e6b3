"""Published layouts of issue 33's `moe` stream families (header-only plans at TP 3 and 6; tests/test_registry_rows.py
re-plans the table's rows from them).

- sarvamai/sarvam-30b (`sarvam_moe`): the dims transformers 5.24 documents for that checkpoint (SarvamMoEConfig's
  defaults, auto_docstring(checkpoint="sarvamai/sarvam-30b"); a second copy of the class, documented with
  sarvam-30b-fp8, gives the same): hidden 4096, 19 layers, 64 heads / 4 kv heads of 64, dense first layer of 8192,
  128 experts top-6 of 1024 and one shared expert, vocab 262144. Not read on huggingface.co; BF16 assumed, the
  routers' expert_bias F32. Tensor names: the Ling layout vLLM's SarvamMoEForCausalLM (BailingMoeForCausalLM) loads
  and transformers' conversion mapping reads.
"""

from __future__ import annotations

SARVAM_30B = {
    "architectures": ["SarvamMoEForCausalLM"], "model_type": "sarvam_moe", "hidden_size": 4096,
    "intermediate_size": 8192, "moe_intermediate_size": 1024, "num_hidden_layers": 19, "num_attention_heads": 64,
    "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 262144, "num_experts": 128, "num_experts_per_tok": 6,
    "num_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "norm_topk_prob": True,
    "routed_scaling_factor": 2.5, "score_function": "sigmoid", "moe_router_enable_expert_bias": True,
    "use_qk_norm": True, "use_rmsnorm": True, "use_bias": False, "use_qkv_bias": False, "rms_norm_eps": 1e-6,
    "rope_theta": 8000000.0, "max_position_embeddings": 131072, "tie_word_embeddings": False,
}


def ling_tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every tensor in the Ling / Sarvam layout."""
    h, hd, heads, kv = cfg["hidden_size"], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    e, moe, bf = cfg["num_experts"], cfg["moe_intermediate_size"], "BF16"
    out = [("model.word_embeddings.weight", bf, (cfg["vocab_size"], h)), ("model.norm.weight", bf, (h,))]
    out += [] if cfg.get("tie_word_embeddings") else [("lm_head.weight", bf, (cfg["vocab_size"], h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", bf, (h,)), (p + "post_attention_layernorm.weight", bf, (h,)),
                (p + "attention.query_key_value.weight", bf, ((heads + 2 * kv) * hd, h)),
                (p + "attention.query_layernorm.weight", bf, (hd,)), (p + "attention.key_layernorm.weight", bf, (hd,)),
                (p + "attention.dense.weight", bf, (h, heads * hd))]
        shared = cfg.get("moe_shared_expert_intermediate_size") or moe * cfg["num_shared_experts"]
        mlps = {"mlp.": cfg["intermediate_size"]} if i < cfg["first_k_dense_replace"] else {
            **{f"mlp.experts.{j}.": moe for j in range(e)}, "mlp.shared_experts.": shared}
        for m, width in mlps.items():
            out += [(p + m + "gate_proj.weight", bf, (width, h)), (p + m + "up_proj.weight", bf, (width, h)),
                    (p + m + "down_proj.weight", bf, (h, width))]
        if i >= cfg["first_k_dense_replace"]:
            out += [(p + "mlp.gate.weight", bf, (e, h)), (p + "mlp.gate.expert_bias", "F32", (e,))]
    return out


# skt/A.X-K1 (`AXK1`): the dims transformers 5.24 documents for that checkpoint (AXK1Config's defaults,
# auto_docstring(checkpoint="skt/A.X-K1")), which the hub's remote-code AXK1Config (a public copy) repeats with
# model_type "AXK1", one MTP layer, topk_method noaux_tc and sigmoid scoring: DeepSeek-V3's MLA at 64 heads (q LoRA
# 1536, kv LoRA 512, nope 128 / rope 64 / v 128), hidden 7168, 61 layers (the first dense, 18432), 192 experts of 2048
# top-8 in 8 groups and one shared expert, vocab 163840. Not read on huggingface.co; BF16 assumed (the storage format
# was not found offline), each layer with its post_mlp_layernorm.
AXK1_CONFIG = {
    "architectures": ["AXK1ForCausalLM"], "model_type": "AXK1", "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_nextn_predict_layers": 1, "num_attention_heads": 64,
    "num_key_value_heads": 64, "n_shared_experts": 1, "n_routed_experts": 192, "routed_scaling_factor": 2.5,
    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
    "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4, "num_experts_per_tok": 8, "moe_layer_freq": 1,
    "first_k_dense_replace": 1, "norm_topk_prob": True, "scoring_func": "sigmoid", "hidden_act": "silu",
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "vocab_size": 163840, "tie_word_embeddings": False,
    "rope_theta": 10000.0,
}


def _bf16(name: str, out_f: int, in_f: int) -> list:
    return [(f"{name}.weight", "BF16", (out_f, in_f))]


def _mla_attention(cfg: dict, i: int) -> list:
    h, heads, p = cfg["hidden_size"], cfg["num_attention_heads"], f"model.layers.{i}."
    nope, rope, v, lq, lkv = (cfg[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "q_lora_rank",
                                                "kv_lora_rank"))
    a = p + "self_attn."
    return ([(p + "post_mlp_layernorm.weight", "BF16", (h,)), (a + "q_a_layernorm.weight", "BF16", (lq,)),
             (a + "kv_a_layernorm.weight", "BF16", (lkv,))] + _bf16(a + "q_a_proj", lq, h)
            + _bf16(a + "q_b_proj", heads * (nope + rope), lq) + _bf16(a + "kv_a_proj_with_mqa", lkv + rope, h)
            + _bf16(a + "kv_b_proj", heads * (nope + v), lkv) + _bf16(a + "o_proj", h, heads * v))


def axk1_tensors(cfg: dict) -> list:
    """Every A.X-K1 tensor (DeepSeek-V3's BF16 layout, the MTP layer included, post_mlp_layernorm in every layer)."""
    from tests.moe_real import checkpoint

    return checkpoint(cfg, _mla_attention, _bf16)


# bharatgenai/Param2-17B-A2.4B-Thinking (`param2moe`, 17B: under 20B): the dims public copies state (an inference
# wrapper's notes from its model card and config, a Megatron-Bridge recipe): hidden 2048, 21 layers, 32 heads / 8 kv
# of 64, a dense first layer of 7168, 64 experts top-6 and 2 shared experts (a shared width of 4096), vocab 128008,
# tied embeddings. The routed experts' width was not found offline: 1024 is assumed (it changes only the disk figures).
PARAM2_17B = {
    "architectures": ["Param2MoEForCausalLM"], "model_type": "param2moe", "hidden_size": 2048,
    "intermediate_size": 7168, "moe_intermediate_size": 1024, "moe_shared_expert_intermediate_size": 4096,
    "num_hidden_layers": 21, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
    "vocab_size": 128008, "num_experts": 64, "num_experts_per_tok": 6, "num_shared_experts": 2,
    "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "norm_topk_prob": True, "score_function": "sigmoid",
    "moe_router_enable_expert_bias": True, "use_qk_norm": True, "use_rmsnorm": True, "use_bias": False,
    "use_qkv_bias": False, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
}
