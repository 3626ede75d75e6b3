"""Nemotron-NAS's published layouts (header-only): config.json values and tensor lists for plans at the real shapes
(tests/test_nemotron_nas.py, docs/families.md's DeciLMForCausalLM row).

Sources (stored public copies; huggingface.co could not be read offline): NVIDIA NeMo's
nemo/collections/llm/gpt/model/llama_nemotron_config.py holds both config.json files verbatim ("Config copy from
https://huggingface.co/nvidia/Llama-3_3-Nemotron-Super-49B-v1/blob/main/config.json", and Ultra-253B-v1's), here as
(n_heads_in_group or None for no attention, ffn_mult or None for no FFN, layers in a row). Super-49B-v1.5 is assumed to
keep v1's layout (its card: the same architecture; its config not read). Llama-3.1-Nemotron-51B-Instruct's config
was not found; its card (and NVIDIA's blog) describe attention replaced by linear layers in some blocks, which
vLLM's class does not build (refused: tests/test_nemotron_nas.py). Tensors: BF16, Llama's names, no attention
tensors or input_layernorm where attention is a no-op, no MLP or post_attention_layernorm where the FFN is.
"""

from __future__ import annotations

from hubpad.plan.adapters.nemotron_nas import ffn_width
from tests.real_models import _linear

SUPER_49B_RUNS = [
    (8, 2.625, 1), (8, 5.25, 5), (None, 2.625, 2), (8, 5.25, 3), (None, 3.28125, 1), (8, 5.25, 30),
    (None, 1.3125, 1), (None, 2.625, 2), (None, 1.3125, 1), (None, 5.25, 1), (None, 1.3125, 1), (None, 2.625, 1),
    (None, 1.3125, 3), (8, 5.25, 1), (None, 1.3125, 1), (None, 1.0, 2), (None, 1.3125, 1), (None, 1.0, 3),
    (None, 1.3125, 2), (None, 0.5, 2), (None, 1.0, 2), (None, 0.5, 2), (None, 1.0, 1), (None, 0.5, 2), (8, 5.25, 9),
]
ULTRA_253B_RUNS = [
    (16, 0.4875, 1), (16, 0.975, 1), (16, 1.4625, 6), (16, 1.95, 1), (None, None, 4), (16, 1.95, 3), (16, 4.875, 2),
    (None, None, 6), (16, 4.875, 3), (None, None, 5), (16, 4.875, 3), (16, 2.4375, 1), (None, None, 3),
    (16, 1.95, 3), (None, 1.95, 1), (16, 4.875, 1), (None, 4.875, 1), (None, None, 5), (16, 4.875, 4),
    (None, None, 5), (16, 4.875, 4), (None, None, 5), (16, 4.875, 4), (None, None, 5), (16, 4.875, 4),
    (None, None, 5), (16, 4.875, 1), (16, 3.4125, 3), (None, None, 2), (16, 2.925, 1), (16, 2.4375, 3),
    (None, 2.4375, 2), (16, 2.4375, 1), (None, None, 1), (None, 2.4375, 7), (16, 2.4375, 1), (None, None, 5),
    (16, 2.925, 1), (16, 4.875, 1), (None, 4.875, 1), (16, 4.875, 1), (None, None, 8), (None, 36.5625, 1),
    (None, None, 8), (None, 39.0, 1), (None, None, 8), (None, 31.40625, 1), (None, None, 5), (None, 27.5625, 1),
    (None, 1.95, 1), (16, 1.95, 1), (16, 2.4375, 1), (None, None, 1), (16, 2.4375, 2), (16, 3.4125, 1),
    (16, 4.875, 4), (16, 2.4375, 1),
]


def _blocks(runs: list) -> list[dict]:
    out = []
    for group, mult, n in runs:
        out += [{"attention": {"n_heads_in_group": group, "no_op": group is None, "num_sink_tokens": None,
                               "replace_with_linear": False, "sparsify": None, "unshifted_sink": False,
                               "use_prefill_window_in_sink_attention": False, "window_length": None},
                 "ffn": {"ffn_mult": mult, "no_op": mult is None, "replace_with_linear": False, "sparsify": None}}
                for _ in range(n)]
    return out


_COMMON = {
    "architectures": ["DeciLMForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_decilm.DeciLMConfig",
                 "AutoModelForCausalLM": "modeling_decilm.DeciLMForCausalLM"},
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "initializer_range": 0.02,
    "intermediate_size": None, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "nemotron-nas",
    "num_key_value_heads": None, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 128256,
}
SUPER_49B = {**_COMMON, "_name_or_path": "llama_nemotron_super", "hidden_size": 8192, "num_attention_heads": 64,
             "num_hidden_layers": 80, "transformers_version": "4.48.3",
             "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                              "original_max_position_embeddings": 8192, "rope_type": "llama3"},
             "block_configs": _blocks(SUPER_49B_RUNS)}
ULTRA_253B = {**_COMMON, "_name_or_path": "llama_nemotron_ultra", "hidden_size": 16384, "num_attention_heads": 128,
              "num_hidden_layers": 162, "transformers_version": "4.45.1",
              "rope_scaling": {"factor": 16.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                               "original_max_position_embeddings": 8192, "rope_type": "llama3"},
              "block_configs": _blocks(ULTRA_253B_RUNS)}
# name on the Hub -> config
REAL = {"nvidia/Llama-3_3-Nemotron-Super-49B-v1": SUPER_49B, "nvidia/Llama-3_1-Nemotron-Ultra-253B-v1": ULTRA_253B}


def tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """The BF16 tensors of one of the configs above, in transformers' save order."""
    h, v, heads = cfg["hidden_size"], cfg["vocab_size"], cfg["num_attention_heads"]
    hd = h // heads
    out = [("model.embed_tokens.weight", "BF16", (v, h))]
    for i, block in enumerate(cfg["block_configs"]):
        p = f"model.layers.{i}."
        if not block["attention"]["no_op"]:
            kv = heads // block["attention"]["n_heads_in_group"] * hd
            out += [(p + "input_layernorm.weight", "BF16", (h,))]
            out += _linear(p + "self_attn.q_proj", heads * hd, h) + _linear(p + "self_attn.k_proj", kv, h)
            out += _linear(p + "self_attn.v_proj", kv, h) + _linear(p + "self_attn.o_proj", h, heads * hd)
        if not block["ffn"]["no_op"]:
            inter = ffn_width(block["ffn"]["ffn_mult"], h)
            out += [(p + "post_attention_layernorm.weight", "BF16", (h,))]
            out += _linear(p + "mlp.gate_proj", inter, h) + _linear(p + "mlp.up_proj", inter, h)
            out += _linear(p + "mlp.down_proj", h, inter)
    out += [("model.norm.weight", "BF16", (h,))]
    return out + _linear("lm_head", v, h)

