"""tencent/Hy3's real config (reference reconstruction) for header-only planning at full scale."""

HY3_CONFIG = {
    "architectures": ["HYV3ForCausalLM"], "model_type": "hy_v3", "vocab_size": 120832, "hidden_size": 4096,
    "intermediate_size": 13312, "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
    "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 262144, "rms_norm_eps": 1e-05,
    "rope_parameters": {"rope_theta": 11158840.0, "rope_type": "default"}, "qk_norm": True,
    "tie_word_embeddings": False, "num_experts": 192, "num_experts_per_tok": 8, "num_shared_experts": 1,
    "expert_hidden_dim": 1536, "moe_intermediate_size": 1536, "first_k_dense_replace": 1, "route_norm": True,
    "router_scaling_factor": 2.826, "num_nextn_predict_layers": 1, "bos_token_id": 120000, "eos_token_id": 120025,
}
