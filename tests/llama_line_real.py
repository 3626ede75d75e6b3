"""Published configs and tensor layouts (header-only) of Llama-line families: those vLLM builds with its
LlamaForCausalLM and hubpad pads under a padded Llama's label (adapters/llama.py: IQuest-Coder-V1-40B-Instruct,
TeleChat3-36B), and Solar Pro (adapters/solar.py), Llama's tensors with skip connections.

Sources (huggingface.co could not be reached from this machine: values as public copies record them, not re-read):
IQuestLab/IQuest-Coder-V1-40B-Instruct's dims as transformers' IQuestCoderConfig defaults name that checkpoint (vocab
76800, hidden 5120, intermediate 27648, 80 layers, 40 / 8 heads of 128) and as the -Loop sibling's published config
states them (max_position_embeddings 131072, rope_theta 500000, eos [2, 75864, 75869]); TeleChat3-36B's config as the
mlx-community/Telechat3-36B-Thinking-4bit conversion copies it (hidden 6144, intermediate 24576, 64 layers, 48 / 8 heads
of 128, vocab 131072, rope_scaling telechat3-yarn), its quantization key left out; upstage/solar-pro-preview-instruct
(22B: 64 layers of Phi-3-medium's width, hidden 5120, intermediate 17920, 40 / 10 heads of 128, which give its 22.1B
parameters) with the skip-connection lists and sliding_window its configuration_solar.py defaults to, and Phi-3's
vocab of 32064 (not confirmed offline); LGAI-EXAONE/EXAONE-3.5-32B-Instruct (hidden 5120, intermediate 27392, 64 layers,
40 / 8 heads, vocab 102400: the dims public model tables give it) in the key layout EXAONE-3.0-7.8B-Instruct's published
config.json has (num_layers, activation_function, layer_norm_epsilon, no head_dim), its llama3 rope scaling as the 3.5
cards state it. The tensors are Llama's (EXAONE's under its own names), in BF16.
"""

from __future__ import annotations

from tests.real_models import _linear

IQUEST_CODER_40B = {
    "architectures": ["IQuestCoderForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_iquestcoder.IQuestCoderConfig",
                 "AutoModelForCausalLM": "modeling_iquestcoder.IQuestCoderForCausalLM"},
    "bos_token_id": 1, "eos_token_id": [2, 75864, 75869], "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
    "initializer_range": 0.02, "intermediate_size": 27648, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "iquestcoder", "num_attention_heads": 40, "num_hidden_layers": 80, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 500000, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 76800,
}
TELECHAT3_36B = {
    "architectures": ["Telechat3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_telechat3.Telechat3Config",
                 "AutoModelForCausalLM": "modeling_telechat3.Telechat3ForCausalLM"},
    "bos_token_id": 1, "eos_token_id": 2, "head_dim": 128, "hidden_act": "silu", "hidden_size": 6144,
    "initializer_range": 0.0048, "intermediate_size": 24576, "max_position_embeddings": 32768, "mlp_bias": False,
    "model_type": "telechat3", "num_attention_heads": 48, "num_hidden_layers": 64, "num_key_value_heads": 8,
    "pad_token_id": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 4.0, "original_max_position_embeddings": 8192,
                     "rope_type": "telechat3-yarn", "type": "telechat3-yarn"},
    "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "vocab_size": 131072,
}
SOLAR_PRO = {
    "architectures": ["SolarForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_solar.SolarConfig", "AutoModelForCausalLM": "modeling_solar.SolarForCausalLM"},
    "bos_token_id": 1, "bskcn_1": [12, 20, 32, 44], "bskcn_2": [20, 32], "bskcn_3": [16, 24, 36, 48],
    "bskcn_4": [28, 40], "bskcn_tv": [0.9, 0.8], "eos_token_id": 32007, "hidden_act": "silu", "hidden_size": 5120,
    "initializer_range": 0.02, "intermediate_size": 17920, "max_position_embeddings": 4096, "mlp_bias": False,
    "model_type": "solar", "num_attention_heads": 40, "num_hidden_layers": 64, "num_key_value_heads": 10,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0, "sliding_window": 2047,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 32064,
}
EXAONE_35_32B = {
    "activation_function": "silu", "architectures": ["ExaoneForCausalLM"], "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_exaone.ExaoneConfig",
                 "AutoModelForCausalLM": "modeling_exaone.ExaoneForCausalLM",
                 "AutoModelForSequenceClassification": "modeling_exaone.ExaoneForSequenceClassification"},
    "bos_token_id": 1, "embed_dropout": 0.0, "eos_token_id": 361, "hidden_size": 5120, "initializer_range": 0.02,
    "intermediate_size": 27392, "layer_norm_epsilon": 1e-05, "max_position_embeddings": 32768, "model_type": "exaone",
    "num_attention_heads": 40, "num_key_value_heads": 8, "num_layers": 64, "pad_token_id": 0,
    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "vocab_size": 102400,
}

Tensors = list[tuple[str, str, tuple[int, ...]]]


def layout(cfg: dict) -> Tensors:
    """Llama's BF16 tensors for one of the configs above, in transformers' save order."""
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv, inter = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd, cfg["intermediate_size"]
    out: Tensors = [("model.embed_tokens.weight", "BF16", (v, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += _linear(p + "self_attn.q_proj", q, h) + _linear(p + "self_attn.k_proj", kv, h)
        out += _linear(p + "self_attn.v_proj", kv, h) + _linear(p + "self_attn.o_proj", h, q)
        out += _linear(p + "mlp.gate_proj", inter, h) + _linear(p + "mlp.up_proj", inter, h)
        out += _linear(p + "mlp.down_proj", h, inter)
        out += [(p + n + ".weight", "BF16", (h,)) for n in ("input_layernorm", "post_attention_layernorm")]
    out += [("model.norm.weight", "BF16", (h,))] + _linear("lm_head", v, h)
    return out


# Llama's names -> EXAONE 3.x's (transformers' conversion_mapping for exaone, reversed)
EXAONE_NAMES = {"model.embed_tokens.": "transformer.wte.", "model.norm.": "transformer.ln_f.",
                "model.layers.": "transformer.h.", ".self_attn.o_proj.": ".attn.attention.out_proj.",
                ".self_attn.": ".attn.attention.", ".input_layernorm.": ".ln_1.", ".post_attention_layernorm.": ".ln_2.",
                ".mlp.gate_proj.": ".mlp.c_fc_0.", ".mlp.up_proj.": ".mlp.c_fc_1.", ".mlp.down_proj.": ".mlp.c_proj."}


def exaone_name(name: str) -> str:
    """A Llama tensor's name in EXAONE 3.x's checkpoints."""
    for old, new in EXAONE_NAMES.items():
        name = name.replace(old, new)
    return name


def exaone_layout(cfg: dict) -> Tensors:
    """EXAONE 3.x's BF16 tensors: Llama's under EXAONE's names (its layer count is num_layers)."""
    return [(exaone_name(n), dtype, shape) for n, dtype, shape in layout({**cfg, "num_hidden_layers": cfg["num_layers"]})]


# name on the Hub -> (config, layout)
MODELS = {
    "IQuestLab/IQuest-Coder-V1-40B-Instruct": (IQUEST_CODER_40B, layout),
    "Tele-AI/TeleChat3-36B": (TELECHAT3_36B, layout),
    "upstage/solar-pro-preview-instruct": (SOLAR_PRO, layout),
    "LGAI-EXAONE/EXAONE-3.5-32B-Instruct": (EXAONE_35_32B, exaone_layout),
}
# name -> {tp: the config keys `hubpad plan` changes, with their padded values}
PADDED = {
    "IQuestLab/IQuest-Coder-V1-40B-Instruct": {3: dict(num_attention_heads=45, num_key_value_heads=9),
                                               6: dict(num_attention_heads=60, num_key_value_heads=12)},
    "Tele-AI/TeleChat3-36B": {3: dict(num_attention_heads=54, num_key_value_heads=9),
                              6: dict(num_attention_heads=72, num_key_value_heads=12)},
    "upstage/solar-pro-preview-instruct": {
        3: dict(num_attention_heads=48, num_key_value_heads=12, intermediate_size=18048),
        6: dict(num_attention_heads=48, num_key_value_heads=12, intermediate_size=18432)},
    "LGAI-EXAONE/EXAONE-3.5-32B-Instruct": {
        3: dict(num_attention_heads=45, num_key_value_heads=9, intermediate_size=27648),
        6: dict(num_attention_heads=60, num_key_value_heads=12, intermediate_size=27648)},
}
