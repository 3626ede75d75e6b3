"""Published configs and tensor layouts (names, dtypes, shapes; header-only) of the registry families padded by
tests/test_registry_families.py, for plans at the real shapes and docs/families.md's registry table.

Sources: the config.json of each repo on the Hugging Face Hub as published (values written from those files;
huggingface.co could not be reached from this machine, so they are as recorded, not re-read): google/gemma-2-27b-it,
microsoft/Phi-3.5-MoE-instruct (its longrope factor lists left out: padding reads none of them),
zai-org/GLM-4-32B-0414, swiss-ai/Apertus-70B-Instruct-2509 (hidden 8192, intermediate 43008, 64 / 8 heads, 80 layers also in public
converters' test configs), and the Hugging Face conversion of nvidia/Nemotron-4-340B-Instruct (NVIDIA publishes .nemo
files; the -hf conversions carry this config). The tensor layouts are what transformers' classes hold for these
configs, in BF16 (the published dtype), with the published names: Phi-3.5-MoE's block_sparse_moe.experts.N.w1/w2/w3,
GLM-4's fused mlp.gate_up_proj and sandwich norms, Apertus' attention_layernorm / feedforward_layernorm and xIELU scalars (mlp.act_fn.alpha_p, alpha_n, beta, eps: the
last two are buffers, assumed saved), Nemotron's LayerNorm1p biases. Shard counts are not modelled.
"""

from __future__ import annotations

from tests.real_models import _linear

GEMMA2_27B = {
    "architectures": ["Gemma2ForCausalLM"], "attn_logit_softcapping": 50.0, "bos_token_id": 2,
    "cache_implementation": "hybrid", "eos_token_id": [1, 107], "final_logit_softcapping": 30.0, "head_dim": 128,
    "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 4608,
    "initializer_range": 0.02, "intermediate_size": 36864, "max_position_embeddings": 8192, "model_type": "gemma2",
    "num_attention_heads": 32, "num_hidden_layers": 46, "num_key_value_heads": 16, "pad_token_id": 0,
    "query_pre_attn_scalar": 144, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096,
    "sliding_window_size": 4096, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 256000,
}
PHI35_MOE = {
    "architectures": ["PhiMoEForCausalLM"], "attention_bias": True, "attention_dropout": 0.0, "bos_token_id": 1,
    "eos_token_id": 32000, "hidden_act": "silu", "hidden_dropout": 0.0, "hidden_size": 4096, "initializer_range": 0.02,
    "input_jitter_noise": 0.01, "intermediate_size": 6400, "lm_head_bias": True, "max_position_embeddings": 131072,
    "model_type": "phimoe", "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "num_local_experts": 16, "original_max_position_embeddings": 4096,
    "output_router_logits": False, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "router_aux_loss_coef": 0.0,
    "router_jitter_noise": 0.01, "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 32064,
}
APERTUS_70B = {
    "architectures": ["ApertusForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1,
    "eos_token_id": 68, "hidden_act": "xielu", "hidden_dropout": 0.0, "hidden_size": 8192, "initializer_range": 0.02,
    "intermediate_size": 43008, "max_position_embeddings": 65536, "mlp_bias": False, "model_type": "apertus",
    "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8, "pad_token_id": 3, "post_norm": False,
    "qk_norm": True, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 12000000, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 131072,
}
NEMOTRON4_340B = {
    "architectures": ["NemotronForCausalLM"], "bos_token_id": 2, "eos_token_id": 3, "head_dim": 192,
    "hidden_act": "relu2", "hidden_size": 18432, "initializer_range": 0.0063, "intermediate_size": 73728,
    "max_position_embeddings": 4096, "model_type": "nemotron", "norm_eps": 1e-05, "num_attention_heads": 96,
    "num_hidden_layers": 96, "num_key_value_heads": 8, "partial_rotary_factor": 0.5, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 256000,
}

GLM4_32B = {
    "architectures": ["Glm4ForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "eos_token_id": [151329, 151336, 151338], "head_dim": 128, "hidden_act": "silu", "hidden_size": 6144,
    "initializer_range": 0.02, "intermediate_size": 23040, "max_position_embeddings": 32768, "model_type": "glm4",
    "num_attention_heads": 48, "num_hidden_layers": 61, "num_key_value_heads": 2, "pad_token_id": 151329,
    "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 151552,
}

Tensors = list[tuple[str, str, tuple[int, ...]]]


def _vectors(prefix: str, names: tuple[str, ...], size: int, bias: bool = False) -> Tensors:
    return [(f"{prefix}{n}.{k}", "BF16", (size,)) for n in names for k in (("weight", "bias") if bias else ("weight",))]


def layout(cfg: dict) -> Tensors:
    """The BF16 tensors of one of the configs above, in transformers' save order."""
    mt, h, v, n = cfg["model_type"], cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv, inter = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd, cfg["intermediate_size"]
    bias = bool(cfg.get("attention_bias"))
    out: Tensors = [("model.embed_tokens.weight", "BF16", (v, h))]
    for i in range(n):
        p = f"model.layers.{i}."
        out += _linear(p + "self_attn.q_proj", q, h, bias) + _linear(p + "self_attn.k_proj", kv, h, bias)
        out += _linear(p + "self_attn.v_proj", kv, h, bias)
        out += _linear(p + "self_attn.o_proj", h, q, bias and mt != "glm4")
        if mt == "glm4":  # sandwich norms, one fused [gate; up] projection (and no o_proj bias, above)
            out += _vectors(p, ("input_layernorm", "post_self_attn_layernorm", "post_attention_layernorm",
                                "post_mlp_layernorm"), h)
            out += _linear(p + "mlp.gate_up_proj", 2 * inter, h) + _linear(p + "mlp.down_proj", h, inter)
        elif mt == "gemma2":
            out += _vectors(p, ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                                "post_feedforward_layernorm"), h)
            out += _linear(p + "mlp.gate_proj", inter, h) + _linear(p + "mlp.up_proj", inter, h)
            out += _linear(p + "mlp.down_proj", h, inter)
        elif mt == "phimoe":
            out += _vectors(p, ("input_layernorm", "post_attention_layernorm"), h, bias=True)
            out += _linear(p + "block_sparse_moe.gate", cfg["num_local_experts"], h)
            for e in range(cfg["num_local_experts"]):
                x = f"{p}block_sparse_moe.experts.{e}."
                out += _linear(x + "w1", inter, h) + _linear(x + "w2", h, inter) + _linear(x + "w3", inter, h)
        else:
            out += _linear(p + "mlp.up_proj", inter, h) + _linear(p + "mlp.down_proj", h, inter)
            if mt == "apertus":
                out += _vectors(p, ("attention_layernorm", "feedforward_layernorm"), h)
                out += _vectors(p + "self_attn.", ("q_norm", "k_norm"), hd)
                out += [(f"{p}mlp.act_fn.{s}", "BF16", (1,)) for s in ("alpha_n", "alpha_p", "beta", "eps")]
            else:
                out += _vectors(p, ("input_layernorm", "post_attention_layernorm"), h, bias=True)
    out += _vectors("model.", ("norm",), h, bias=mt in ("phimoe", "nemotron"))
    if not cfg.get("tie_word_embeddings", mt == "gemma2"):
        out += _linear("lm_head", v, h, bias=bool(cfg.get("lm_head_bias")))
    return out


# name on the Hub -> (config, layout)
MODELS = {
    "google/gemma-2-27b-it": (GEMMA2_27B, layout),
    "microsoft/Phi-3.5-MoE-instruct": (PHI35_MOE, layout),
    "swiss-ai/Apertus-70B-Instruct-2509": (APERTUS_70B, layout),
    "nvidia/Nemotron-4-340B-Instruct (HF conversion)": (NEMOTRON4_340B, layout),
    "zai-org/GLM-4-32B-0414": (GLM4_32B, layout),
}
# name -> {tp: the config keys `hubpad plan` changes, with their padded values}
PADDED = {
    "google/gemma-2-27b-it": {3: dict(num_attention_heads=36, num_key_value_heads=18),
                              6: dict(num_attention_heads=36, num_key_value_heads=18)},
    "microsoft/Phi-3.5-MoE-instruct": {3: dict(num_attention_heads=36, num_key_value_heads=9, intermediate_size=6528),
                                       6: dict(num_attention_heads=48, num_key_value_heads=12, intermediate_size=6528)},
    "swiss-ai/Apertus-70B-Instruct-2509": {3: dict(num_attention_heads=72, num_key_value_heads=9),
                                           6: dict(num_attention_heads=96, num_key_value_heads=12)},
    "nvidia/Nemotron-4-340B-Instruct (HF conversion)": {3: dict(num_attention_heads=108, num_key_value_heads=9),
                                                        6: dict(num_attention_heads=144, num_key_value_heads=12)},
    # kv 2 replicates at TP 6 and the 48 heads divide: nothing to pad there (the vocab plugin ships at both)
    "zai-org/GLM-4-32B-0414": {3: dict(num_attention_heads=72, num_key_value_heads=3), 6: {}},
}
