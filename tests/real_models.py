"""Real public configs for header-only planning at full scale (the TP advisor's README table and its tests).

Each config copies the keys of the model's public config.json on the Hugging Face Hub (values written from the
published files: meta-llama/Llama-3.3-70B-Instruct, Qwen/Qwen2.5-72B-Instruct, Qwen/Qwen3-235B-A22B; tencent/Hy3
is tests/hy3_real.py). `header_only_tensors` gives the names, dtypes and shapes transformers writes for them in
BF16, so `hubpad.testing.write_checkpoint(..., header_only=True)` builds a sparse copy that costs no disk.
"""

from __future__ import annotations

from tests.hy3_real import HY3_CONFIG

# meta-llama/Llama-3.3-70B-Instruct, config.json
LLAMA33_70B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "head_dim": 128, "hidden_act": "silu", "hidden_size": 8192,
    "initializer_range": 0.02, "intermediate_size": 28672, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "vocab_size": 128256,
}

# Qwen/Qwen2.5-72B-Instruct, config.json (q/k/v carry biases, o_proj does not)
QWEN25_72B = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
    "hidden_act": "silu", "hidden_size": 8192, "initializer_range": 0.02, "intermediate_size": 29568,
    "max_position_embeddings": 32768, "max_window_layers": 70, "model_type": "qwen2", "num_attention_heads": 64,
    "num_hidden_layers": 80, "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 152064,
}

# Qwen/Qwen3-235B-A22B, config.json (every layer is MoE: decoder_sparse_step 1, no mlp_only_layers)
QWEN3_235B_A22B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288, "max_position_embeddings": 40960,
    "max_window_layers": 94, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 1536,
    "norm_topk_prob": True, "num_attention_heads": 64, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 94, "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}

# name on the Hub -> config; the order of the README table
REAL_MODELS = {
    "meta-llama/Llama-3.3-70B-Instruct": LLAMA33_70B,
    "Qwen/Qwen2.5-72B-Instruct": QWEN25_72B,
    "tencent/Hy3": HY3_CONFIG,
    "Qwen/Qwen3-235B-A22B": QWEN3_235B_A22B,
}


def _linear(name: str, out_f: int, in_f: int, bias: bool = False) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(f"{name}.weight", "BF16", (out_f, in_f))] + ([(f"{name}.bias", "BF16", (out_f,))] if bias else [])


def _attention(p: str, cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    h, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or h // nh
    qkv_bias = cfg["model_type"] == "qwen2" or bool(cfg.get("attention_bias"))
    out = _linear(f"{p}.self_attn.q_proj", nh * hd, h, qkv_bias) + _linear(f"{p}.self_attn.k_proj", nkv * hd, h, qkv_bias)
    out += _linear(f"{p}.self_attn.v_proj", nkv * hd, h, qkv_bias) + _linear(f"{p}.self_attn.o_proj", h, nh * hd)
    if cfg["model_type"] in ("qwen3", "qwen3_moe"):
        out += [(f"{p}.self_attn.q_norm.weight", "BF16", (hd,)), (f"{p}.self_attn.k_norm.weight", "BF16", (hd,))]
    return out


def _mlp(p: str, width: int, h: int) -> list[tuple[str, str, tuple[int, ...]]]:
    return _linear(f"{p}.gate_proj", width, h) + _linear(f"{p}.up_proj", width, h) + _linear(f"{p}.down_proj", h, width)


def header_only_tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """BF16 tensor names/dtypes/shapes of a Llama, Qwen2 or Qwen3-MoE checkpoint as transformers saves it."""
    h, v, n = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    out = [("model.embed_tokens.weight", "BF16", (v, h))]
    for layer in range(n):
        p = f"model.layers.{layer}"
        out += [(f"{p}.input_layernorm.weight", "BF16", (h,)), (f"{p}.post_attention_layernorm.weight", "BF16", (h,))]
        out += _attention(p, cfg)
        if cfg["model_type"] == "qwen3_moe":
            out += [(f"{p}.mlp.gate.weight", "BF16", (cfg["num_experts"], h))]
            for e in range(cfg["num_experts"]):
                out += _mlp(f"{p}.mlp.experts.{e}", cfg["moe_intermediate_size"], h)
        else:
            out += _mlp(f"{p}.mlp", cfg["intermediate_size"], h)
    out += [("model.norm.weight", "BF16", (h,))]
    if not cfg.get("tie_word_embeddings"):
        out += [("lm_head.weight", "BF16", (v, h))]
    return out
