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
