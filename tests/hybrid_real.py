"""Published layouts of the `hybrid` stream's families (issue 33), for header-only plans at TP 3 and 6.

Falcon-H1-34B-Instruct (tiiuae/Falcon-H1-34B-Instruct): its config.json as a public repository stores it
(Sahil170595/Chimeraforge, tests/fixtures/hybrid_configs/tiiuae_Falcon-H1-34B-Instruct.json, captured from the Hub
with its URL and date; transformers' FalconH1 docs table agrees: 72 layers, hidden 5120, 20 heads / 4 kv, Mamba2 32
heads of 128, state 256): hidden 5120, 72 parallel-hybrid layers, attention 20 heads / 4 kv of head_dim 128, MLP 21504,
Mamba2 mamba_d_ssm 4096 = 32 heads x 128 in 2 groups, state 256, conv 4 with bias, no projection bias, the gated
RMSNorm on (mamba_rms_norm), vocab 261120, untied head. The tensors are the names transformers' FalconH1 writes (the
Hub's headers were not read offline); BF16 throughout (torch_dtype bfloat16; A_log / D / dt_bias assumed BF16 too:
their dtype changes the extra disk by bytes, not the dims).
"""

from __future__ import annotations

FALCON_H1_34B = {
    "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "attention_bias": False,
    "attention_dropout": 0.0, "attention_in_multiplier": 1.0, "attention_out_multiplier": 0.0375,
    "attn_layer_indices": None, "bos_token_id": 1, "embedding_multiplier": 5.656854249492381, "eos_token_id": 11,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 21504,
    "key_multiplier": 0.011048543456039804, "lm_head_multiplier": 0.0078125, "mamba_chunk_size": 128,
    "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_head": 128, "mamba_d_ssm": 4096, "mamba_d_state": 256,
    "mamba_expand": 2, "mamba_n_groups": 2, "mamba_n_heads": 32, "mamba_norm_before_gate": False,
    "mamba_proj_bias": False, "mamba_rms_norm": True, "mamba_use_mlp": True, "max_position_embeddings": 262144,
    "mlp_bias": False, "mlp_expansion_factor": 8, "mlp_multipliers": [0.1767766952966369, 0.011160714285714284],
    "num_attention_heads": 20, "num_hidden_layers": 72, "num_key_value_heads": 4, "num_logits_to_keep": 1,
    "pad_token_id": 0, "projectors_bias": False, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 100000000000.0, "ssm_in_multiplier": 0.25,
    "ssm_multipliers": [0.3535533905932738, 0.25, 0.1767766952966369, 0.5, 0.3535533905932738],
    "ssm_out_multiplier": 0.08838834764831845, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.52.0.dev0", "use_cache": True, "vocab_size": 261120,
}


def falcon_h1_tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every tensor of a BF16 Falcon-H1 release."""
    h, bf = cfg["hidden_size"], "BF16"
    nh, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    inter = cfg["intermediate_size"]
    heads, groups, n, k = cfg["mamba_n_heads"], cfg["mamba_n_groups"], cfg["mamba_d_state"], cfg["mamba_d_conv"]
    width, bc = cfg["mamba_d_ssm"], groups * n
    out = [("model.embed_tokens.weight", bf, (cfg["vocab_size"], h)), ("model.final_layernorm.weight", bf, (h,)),
           ("lm_head.weight", bf, (cfg["vocab_size"], h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", bf, (h,)), (p + "pre_ff_layernorm.weight", bf, (h,)),
                (p + "self_attn.q_proj.weight", bf, (nh * hd, h)), (p + "self_attn.k_proj.weight", bf, (kv * hd, h)),
                (p + "self_attn.v_proj.weight", bf, (kv * hd, h)), (p + "self_attn.o_proj.weight", bf, (h, nh * hd)),
                (p + "feed_forward.gate_proj.weight", bf, (inter, h)),
                (p + "feed_forward.up_proj.weight", bf, (inter, h)),
                (p + "feed_forward.down_proj.weight", bf, (h, inter)),
                (p + "mamba.in_proj.weight", bf, (2 * width + 2 * bc + heads, h)),
                (p + "mamba.conv1d.weight", bf, (width + 2 * bc, 1, k)),
                (p + "mamba.conv1d.bias", bf, (width + 2 * bc,)),
                (p + "mamba.A_log", bf, (heads,)), (p + "mamba.D", bf, (heads,)), (p + "mamba.dt_bias", bf, (heads,)),
                (p + "mamba.norm.weight", bf, (width,)), (p + "mamba.out_proj.weight", bf, (h, width))]
    return out


# Ling-3.0-flash (inclusionAI, BailingMoeV3ForCausalLM): its config.json facts as a public repository pins them (a Rust
# loader's test of the Ling-3.0-flash-int4 release, checked there against the release's safetensors index: MLA at
# layers 5, 11, ..., 41, dense MLPs at 0 and 1); vLLM's own bailing_moe_v3_vl config test agrees on the language
# model (hidden 2560, 42 layers, 32 / 32 heads of 128, layer_group_size 6, 512 experts, top 8, kv_lora_rank 512).
# The tensors are the names transformers' BailingHybrid writes back (and vLLM's loader reads), in BF16: the released
# weights are quantized (int4, or FP8 blocks with MXFP4 experts), which the table marks †.
LING3_FLASH = {
    "architectures": ["BailingMoeV3ForCausalLM"], "model_type": "bailing_hybrid", "num_hidden_layers": 42,
    "hidden_size": 2560, "vocab_size": 157184, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    "first_k_dense_replace": 2, "intermediate_size": 6144, "num_attention_heads": 32, "num_key_value_heads": 32,
    "kv_lora_rank": 512, "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "head_dim": 128, "gated_attention_proj_granularity_type": "head_wise", "rope_theta": 6000000, "rotary_dim": 64,
    "rope_interleave": True, "short_conv_kernel_size": 4, "no_kda_lora": True, "kda_safe_gate": True,
    "kda_lower_bound": -5.0, "num_experts": 512, "num_experts_per_tok": 8, "num_shared_experts": 1,
    "moe_intermediate_size": 768, "moe_shared_expert_intermediate_size": 768, "routed_scaling_factor": 2.5,
    "norm_topk_prob": True, "n_group": 8, "topk_group": 4, "layer_group_size": 6,
}


def ling3_tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every tensor of a BF16 Ling 3 (KDA and gated MLA layers, dense then MoE MLPs)."""
    h, bf, heads, d = cfg["hidden_size"], "BF16", cfg["num_attention_heads"], cfg["head_dim"]
    nope, rope, v, rank = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
    group, layers, k = cfg["layer_group_size"], cfg["num_hidden_layers"], cfg["short_conv_kernel_size"]
    out = [("model.word_embeddings.weight", bf, (cfg["vocab_size"], h)), ("model.norm.weight", bf, (h,)),
           ("lm_head.weight", bf, (cfg["vocab_size"], h))]
    for i in range(layers):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.attention."
        out += [(p + "input_layernorm.weight", bf, (h,)), (p + "post_attention_layernorm.weight", bf, (h,))]
        if (i + 1) % group and i < layers // group * group:  # KDA
            out += [(a + f"{n}.weight", bf, (heads * d, h)) for n in ("q_proj", "k_proj", "v_proj", "f_proj", "g_proj")]
            out += [(a + f"{n}_conv1d.weight", bf, (heads * d, 1, k)) for n in "qkv"]
            out += [(a + "b_proj.weight", bf, (heads, h)), (a + "dt_bias", "F32", (heads * d,)),
                    (a + "A_log", "F32", (heads,)), (a + "o_norm.weight", bf, (d,)),
                    (a + "dense.weight", bf, (h, heads * d))]
        else:  # gated MLA
            out += [(a + "q_proj.weight", bf, (heads * (nope + rope), h)),
                    (a + "kv_a_proj_with_mqa.weight", bf, (rank + rope, h)), (a + "kv_a_layernorm.weight", bf, (rank,)),
                    (a + "kv_b_proj.weight", bf, (heads * (nope + v), rank)), (a + "g_proj.weight", bf, (heads, h)),
                    (a + "dense.weight", bf, (h, heads * v))]
        m = p + "mlp."
        if i < cfg["first_k_dense_replace"]:
            w = cfg["intermediate_size"]
            out += [(m + "gate_proj.weight", bf, (w, h)), (m + "up_proj.weight", bf, (w, h)),
                    (m + "down_proj.weight", bf, (h, w))]
            continue
        w, s = cfg["moe_intermediate_size"], cfg["moe_shared_expert_intermediate_size"]
        experts = cfg["num_experts"]
        out += [(m + "gate.weight", "F32", (experts, h)), (m + "gate.expert_bias", "F32", (experts,)),
                (m + "shared_experts.gate_proj.weight", bf, (s, h)), (m + "shared_experts.up_proj.weight", bf, (s, h)),
                (m + "shared_experts.down_proj.weight", bf, (h, s))]
        for e in range(experts):
            out += [(m + f"experts.{e}.gate_proj.weight", bf, (w, h)), (m + f"experts.{e}.up_proj.weight", bf, (w, h)),
                    (m + f"experts.{e}.down_proj.weight", bf, (h, w))]
    return out
