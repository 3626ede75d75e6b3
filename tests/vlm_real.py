"""Multimodal and Qwen2-line checkpoints as published: config.json values and tensor lists, for header-only plans.

Llama-4-Scout/Maverick, Qwen3-VL (235B-A22B, 30B-A3B, 8B), Kimi-K2.5, GLM-4.5V, and the text models QwQ-32B,
DeepSeek-R1-Distill-Qwen-32B, Qwen2-57B-A14B (Qwen2-MoE) and the config of Qwen2.5-VL-72B-Instruct. Each config is a
dict of config.json keys; each `*_tensors(cfg)` gives every tensor of the checkpoint as (name, dtype, shape), for
`hubpad.testing.write_checkpoint(path, cfg, tensors, n_shards=SHARDS.get(name, 2), header_only=True)`. No torch.

Where the facts come from (research notes of this project, offline: stored public copies only, no Hub download):

- Verbatim config.json (a byte-level copy of the published file): QwQ-32B, DeepSeek-R1-Distill-Qwen-32B (664 bytes,
  the size on the official tree page), Qwen3-VL-30B-A3B-Instruct, Qwen3-VL-8B-Instruct, Kimi-K2.5 (moonshot's
  file as carried by nvidia/Kimi-K2.5-NVFP4, size-checked; its quantization_config sits inside text_config, as in
  the real file), Qwen2-57B-A14B (base model; 916 bytes at Hub commit 759c0d83, which this dict reproduces exactly
  when dumped with indent 2).
- Trimmed (a hand-kept copy with keys dropped; the values present are real): Llama-4-Scout/Maverick-Instruct.
  For Scout the dropped text_config keys are filled in from the base Llama-4-Scout-17B-16E printout
  (transformers 4.51.0), assumed equal for Instruct (very likely, not confirmed); Maverick is left trimmed.
- Reconstructed: Qwen3-VL-235B-A22B-Instruct (its real values, from a transformers printout of the real checkpoint,
  poured into the verbatim key layout of Qwen3-VL-30B-A3B-Instruct), Qwen2.5-VL-72B-Instruct (Qwen's own
  Qwen2.5-VL-72B-Instruct-AWQ config.json without its quantization_config; intermediate_size 29568 and vocab_size
  152064 are the strongly implied, unconfirmed originals: the AWQ file pads intermediate_size to 29696).
- Normalized (real values, transformers 5.7 key layout: `rope_parameters`, extra defaults): GLM-4.5V. The raw
  Hub key list is unconfirmed.
- Tensor names, shapes and dtypes were read off the real checkpoints' tensor tables (model-inspector dumps of
  local copies) for Qwen3-VL (235B: 1,388 tensors; 8B: 750), Kimi-K2.5 (208,550), GLM-4.5V (18,106) and QwQ-32B
  (771); for Llama 4 they are derived from the modelling code and the base-Scout parameter table (no index seen):
  108,641,793,536 parameters, 202.36 GiB, as a local 50-shard Llama 4 download's "202.4 GB"; the base printout's
  "Total Trainable Params" is one vocab x hidden matrix more (109,676,279,296), unexplained; for R1-Distill and
  Qwen2-57B-A14B they are the standard Qwen2 / Qwen2-MoE names (derived). All BF16 except the F32 router
  `e_score_correction_bias` of Kimi-K2.5 and GLM-4.5V and Kimi-K2.5's int4 routed experts.
- Totals reproduced by these lists: Qwen3-VL-235B 438.97 GiB and GLM-4.5V 200.63 GiB (the dumps' sizes),
  Kimi-K2.5 554.30 GiB with its 64 shard headers, Qwen2-57B-A14B 57,408,658,944 parameters (57.409B as listed).
- Tensor order follows where the real checkpoints put things, as far as known (e.g. Qwen3-VL-235B: vision and
  embeddings in the first shard; Kimi-K2.5 and GLM-4.5V: embeddings, head and towers in the last shards), so an
  even split over SHARDS[name] files lands them roughly where they are.
"""

from __future__ import annotations

from tests.moe_real import Tensors

BF16 = "BF16"


def _linear(name: str, out_f: int, in_f: int, bias: bool = False) -> Tensors:
    return [(f"{name}.weight", BF16, (out_f, in_f))] + ([(f"{name}.bias", BF16, (out_f,))] if bias else [])


def _norm(name: str, width: int, bias: bool = False) -> Tensors:
    return [(f"{name}.weight", BF16, (width,))] + ([(f"{name}.bias", BF16, (width,))] if bias else [])


def _swiglu(p: str, width: int, h: int) -> Tensors:
    """`{p}.gate_proj`, `{p}.up_proj` [width, h] and `{p}.down_proj` [h, width]."""
    return _linear(f"{p}.gate_proj", width, h) + _linear(f"{p}.up_proj", width, h) + _linear(f"{p}.down_proj", h, width)


# ---------------------------------------------------------------------------------------------------------------------
# meta-llama/Llama-4-Scout-17B-16E-Instruct, Llama-4-Maverick-17B-128E-Instruct
# (aiconfigurator's trimmed copies, commit 64c5ddb6; Scout's dropped keys from the base model's printout)

_LLAMA4_VISION = {
    "attention_dropout": 0.0, "hidden_act": "gelu", "hidden_size": 1408, "image_size": 336,
    "initializer_range": 0.02, "intermediate_size": 5632, "model_type": "llama4_vision_model",
    "multi_modal_projector_bias": False, "norm_eps": 1e-05, "num_attention_heads": 16, "num_channels": 3,
    "num_hidden_layers": 34, "patch_size": 14, "pixel_shuffle_ratio": 0.5, "projector_dropout": 0.0,
    "projector_input_dim": 4096, "projector_output_dim": 4096, "rope_theta": 10000, "torch_dtype": "bfloat16",
    "vision_feature_layer": -1, "vision_feature_select_strategy": "default", "vision_output_dim": 4096,
}

LLAMA4_SCOUT_CONFIG = {
    "architectures": ["Llama4ForConditionalGeneration"], "boi_token_index": 200080, "eoi_token_index": 200081,
    "image_token_index": 200092, "model_type": "llama4",
    "text_config": {
        "attention_bias": False, "attention_chunk_size": 8192, "attention_dropout": 0.0,
        # attn_scale .. for_llm_compressor, initializer_range, moe_layers, no_rope_layers, pad_token_id and
        # router_jitter_noise: dropped from the trimmed copy; values from the base Scout printout (unconfirmed for
        # Instruct, very likely equal)
        "attn_scale": 0.1, "attn_temperature_tuning": 4, "bos_token_id": 200000,
        "eos_token_id": [200001, 200007, 200008], "floor_scale": 8192, "for_llm_compressor": False,
        "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02,
        "interleave_moe_layer_step": 1, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
        "max_position_embeddings": 10485760, "model_type": "llama4_text", "moe_layers": list(range(48)),
        "no_rope_layers": [1, 1, 1, 0] * 12,  # NoPE at layers 3, 7, ..., 47
        "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8,
        "num_local_experts": 16, "output_router_logits": False, "pad_token_id": 200018, "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "rope_theta": 500000.0, "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0, "torch_dtype": "bfloat16",
        "use_cache": True, "use_qk_norm": True, "vocab_size": 202048,
    },
    "tie_word_embeddings": False,  # dropped from the trimmed copy; base printout
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0.dev0",
    "vision_config": dict(_LLAMA4_VISION),
}

# Trimmed as stored: bos/eos/pad ids, no_rope_layers, moe_layers, attn_* keys and top-level tie_word_embeddings are
# absent (unknown for Maverick; transformers' defaults apply). Maverick's shard count is unknown.
LLAMA4_MAVERICK_CONFIG = {
    "architectures": ["Llama4ForConditionalGeneration"], "boi_token_index": 200080, "eoi_token_index": 200081,
    "image_token_index": 200092, "model_type": "llama4",
    "text_config": {
        "attention_bias": False, "attention_chunk_size": 8192, "attention_dropout": 0.0, "head_dim": 128,
        "hidden_act": "silu", "hidden_size": 5120, "interleave_moe_layer_step": 2, "intermediate_size": 8192,
        "intermediate_size_mlp": 16384, "max_position_embeddings": 1048576, "model_type": "llama4_text",
        "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8,
        "num_local_experts": 128, "output_router_logits": False, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "rope_theta": 500000.0, "router_aux_loss_coef": 0.001, "torch_dtype": "bfloat16", "use_cache": True,
        "use_qk_norm": False, "vocab_size": 202048,
    },
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0.dev0",
    "vision_config": dict(_LLAMA4_VISION),
}


def _llama4_vision(v: dict, text_hidden: int) -> Tensors:
    c, inter, p = v["hidden_size"], v["intermediate_size"], "vision_model."
    patches = (v["image_size"] // v["patch_size"]) ** 2 + 1  # 577 = 24*24 + class token
    out = [(p + "class_embedding", BF16, (c,)), (p + "positional_embedding_vlm", BF16, (patches, c))]
    out += _linear(p + "patch_embedding.linear", c, v["num_channels"] * v["patch_size"] ** 2)  # [1408, 588], no bias
    out += _norm(p + "layernorm_pre", c, True) + _norm(p + "layernorm_post", c, True)
    for j in range(v["num_hidden_layers"]):
        q = f"{p}model.layers.{j}."
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out += _linear(q + f"self_attn.{proj}", c, c, True)
        out += _linear(q + "mlp.fc1", inter, c, True) + _linear(q + "mlp.fc2", c, inter, True)
        out += _norm(q + "input_layernorm", c, True) + _norm(q + "post_attention_layernorm", c, True)
    # pixel-shuffle MLP: fc1 Linear(intermediate_size -> projector_input_dim), fc2 (out -> out), no biases
    out += _linear(p + "vision_adapter.mlp.fc1", v["projector_input_dim"], inter)
    out += _linear(p + "vision_adapter.mlp.fc2", v["projector_output_dim"], v["projector_output_dim"])
    return out + _linear("multi_modal_projector.linear_1", text_hidden, v["vision_output_dim"])


def llama4_tensors(cfg: dict) -> Tensors:
    """Vision tower and projector first (they sit in shard 1 of the real repo), then the language model.

    MoE layers ((i+1) % interleave_moe_layer_step == 0; all of Scout's, Maverick's odd ones): router, fused experts in
    the hub layout `experts.gate_up_proj` [E, H, 2I] (gate = [..., :I]) and `experts.down_proj` [E, I, H] (no
    `.weight`), a shared expert of the same width I; other layers a dense `feed_forward` of intermediate_size_mlp.
    No attention biases, no q/k-norm weights (Llama 4's qk norm is weightless).
    """
    t, h = cfg["text_config"], cfg["text_config"]["hidden_size"]
    vocab, hd, heads, kv = t["vocab_size"], t["head_dim"], t["num_attention_heads"], t["num_key_value_heads"]
    e, inter, step = t["num_local_experts"], t["intermediate_size"], t["interleave_moe_layer_step"]
    out = _llama4_vision(cfg["vision_config"], h)
    out += [("language_model.model.embed_tokens.weight", BF16, (vocab, h))]
    for i in range(t["num_hidden_layers"]):
        p = f"language_model.model.layers.{i}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        out += _linear(p + "self_attn.q_proj", heads * hd, h) + _linear(p + "self_attn.k_proj", kv * hd, h)
        out += _linear(p + "self_attn.v_proj", kv * hd, h) + _linear(p + "self_attn.o_proj", h, heads * hd)
        f = p + "feed_forward."
        if step > 0 and (i + 1) % step == 0:
            out += _linear(f + "router", e, h)
            out += [(f + "experts.gate_up_proj", BF16, (e, h, 2 * inter)),
                    (f + "experts.down_proj", BF16, (e, inter, h))]
            out += _swiglu(f + "shared_expert", inter, h)
        else:
            out += _swiglu(f[:-1], t["intermediate_size_mlp"], h)
    return out + _norm("language_model.model.norm", h) + _linear("language_model.lm_head", vocab, h)


# ---------------------------------------------------------------------------------------------------------------------
# Qwen3-VL: Qwen/Qwen3-VL-30B-A3B-Instruct and Qwen/Qwen3-VL-8B-Instruct verbatim; Qwen/Qwen3-VL-235B-A22B-Instruct
# reconstructed (its values, the 30B file's key layout)

QWEN3_VL_30B_A3B_CONFIG = {
    "architectures": ["Qwen3VLMoeForConditionalGeneration"], "image_token_id": 151655, "model_type": "qwen3_vl_moe",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1,
        "dtype": "bfloat16", "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
        "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 262144,
        "mlp_only_layers": [], "model_type": "qwen3_vl_moe_text", "moe_intermediate_size": 768,
        "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
        "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
        "rope_theta": 5000000, "use_cache": True, "vocab_size": 151936,
    },
    "tie_word_embeddings": False, "transformers_version": "4.57.0.dev0", "video_token_id": 151656,
    "vision_config": {
        "deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1152,
        "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4304, "model_type": "qwen3_vl_moe",
        "num_heads": 16, "num_position_embeddings": 2304, "out_hidden_size": 2048, "patch_size": 16,
        "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
    "vision_end_token_id": 151653, "vision_start_token_id": 151652,
}

# Values from the real checkpoint's printout (hidden 4096, 94 layers, 64/4 heads, 128 experts top-8, moe 1536,
# rope_theta 5e6, mrope [24, 20, 20] interleaved, vision out 4096, deepstack [8, 16, 24]); the key layout is the
# 30B-A3B file's. Whether the real file spells every key the same way is unconfirmed.
QWEN3_VL_235B_CONFIG = {
    **QWEN3_VL_30B_A3B_CONFIG,
    "text_config": {**QWEN3_VL_30B_A3B_CONFIG["text_config"], "hidden_size": 4096, "intermediate_size": 12288,
                    "moe_intermediate_size": 1536, "num_attention_heads": 64, "num_hidden_layers": 94},
    "vision_config": {**QWEN3_VL_30B_A3B_CONFIG["vision_config"], "out_hidden_size": 4096},
}

QWEN3_VL_8B_CONFIG = {
    "architectures": ["Qwen3VLForConditionalGeneration"], "image_token_id": 151655, "model_type": "qwen3_vl",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643, "dtype": "bfloat16",
        "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
        "intermediate_size": 12288, "max_position_embeddings": 262144, "model_type": "qwen3_vl_text",
        "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
        "rope_theta": 5000000, "use_cache": True, "vocab_size": 151936,
    },
    "tie_word_embeddings": False, "transformers_version": "4.57.0.dev0", "video_token_id": 151656,
    "vision_config": {
        "deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1152,
        "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4304, "model_type": "qwen3_vl",
        "num_heads": 16, "num_position_embeddings": 2304, "out_hidden_size": 4096, "patch_size": 16,
        "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
    "vision_end_token_id": 151653, "vision_start_token_id": 151652,
}


def qwen3_vision_tensors(v: dict, prefix: str = "model.visual.") -> Tensors:
    """The Qwen3-VL vision tower (also Qwen3.5's): Conv3d patch embedding, learned positions, `depth` blocks with
    LayerNorms and biased linears, the merger, and one deepstack merger per `deepstack_visual_indexes` entry (their
    norm is over the merged width C*m*m, not C)."""
    c, inter, m = v["hidden_size"], v["intermediate_size"], v["spatial_merge_size"]
    merged, out_h = c * m * m, v["out_hidden_size"]
    out = [(prefix + "patch_embed.proj.weight", BF16,
            (c, v["in_channels"], v["temporal_patch_size"], v["patch_size"], v["patch_size"])),
           (prefix + "patch_embed.proj.bias", BF16, (c,)),
           (prefix + "pos_embed.weight", BF16, (v["num_position_embeddings"], c))]
    for j in range(v["depth"]):
        b = f"{prefix}blocks.{j}."
        out += _norm(b + "norm1", c, True) + _norm(b + "norm2", c, True)
        out += _linear(b + "attn.qkv", 3 * c, c, True) + _linear(b + "attn.proj", c, c, True)
        out += _linear(b + "mlp.linear_fc1", inter, c, True) + _linear(b + "mlp.linear_fc2", c, inter, True)
    out += _norm(prefix + "merger.norm", c, True)
    out += _linear(prefix + "merger.linear_fc1", merged, merged, True) + _linear(prefix + "merger.linear_fc2", out_h,
                                                                                  merged, True)
    for k in range(len(v.get("deepstack_visual_indexes") or [])):
        d = f"{prefix}deepstack_merger_list.{k}."
        out += _norm(d + "norm", merged, True)
        out += _linear(d + "linear_fc1", merged, merged, True) + _linear(d + "linear_fc2", out_h, merged, True)
    return out


def qwen3_vl_tensors(cfg: dict) -> Tensors:
    """Vision tower first (all of it in shard 1 of the real 235B), then model.language_model.*, lm_head.weight.

    MoE layers: router `mlp.gate` [E, H] and fused experts in the hub layout `mlp.experts.gate_up_proj` [E, H, 2I]
    and `mlp.experts.down_proj` [E, I, H] (no `.weight`), no shared expert. Dense (8B, or a layer in mlp_only_layers
    / off decoder_sparse_step): `mlp.{gate,up,down}_proj`. Attention without biases, with q_norm / k_norm [head_dim].
    """
    t = cfg["text_config"]
    h, vocab, hd = t["hidden_size"], t["vocab_size"], t["head_dim"]
    heads, kv, lm = t["num_attention_heads"], t["num_key_value_heads"], "model.language_model."
    out = qwen3_vision_tensors(cfg["vision_config"]) + [(lm + "embed_tokens.weight", BF16, (vocab, h))]
    for i in range(t["num_hidden_layers"]):
        p = f"{lm}layers.{i}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        out += _linear(p + "self_attn.q_proj", heads * hd, h) + _linear(p + "self_attn.k_proj", kv * hd, h)
        out += _linear(p + "self_attn.v_proj", kv * hd, h) + _linear(p + "self_attn.o_proj", h, heads * hd)
        out += _norm(p + "self_attn.q_norm", hd) + _norm(p + "self_attn.k_norm", hd)
        sparse = "num_experts" in t and i not in t.get("mlp_only_layers", []) and (
            (i + 1) % t.get("decoder_sparse_step", 1) == 0)
        if sparse:
            e, inter = t["num_experts"], t["moe_intermediate_size"]
            out += _linear(p + "mlp.gate", e, h)
            out += [(p + "mlp.experts.gate_up_proj", BF16, (e, h, 2 * inter)),
                    (p + "mlp.experts.down_proj", BF16, (e, inter, h))]
        else:
            out += _swiglu(p + "mlp", t["intermediate_size"], h)
    return out + _norm(lm + "norm", h) + _linear("lm_head", vocab, h)


# ---------------------------------------------------------------------------------------------------------------------
# moonshotai/Kimi-K2.5 (verbatim; quantization_config inside text_config, as in the real file: only the routed
# experts are int4, group 32, compressed-tensors pack-quantized)

KIMI_K25_CONFIG = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "auto_map": {
        "AutoConfig": "configuration_kimi_k25.KimiK25Config",
        "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
        "AutoModelForCausalLM": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
    },
    "bos_token_id": 163584, "dtype": "bfloat16", "eos_token_id": 163585, "ignore_index": -100,
    "media_placeholder_token_id": 163605, "model_type": "kimi_k25", "pad_token_id": 163839,
    "text_config": {
        "_name_or_path": "", "add_cross_attention": False, "architectures": ["DeepseekV3ForCausalLM"],
        "attention_bias": False, "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "configuration_deepseek.DeepseekV3Config", "AutoModel": "modeling_deepseek.DeepseekV3Model",
            "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
        },
        "aux_loss_alpha": 0.001, "bad_words_ids": None, "begin_suppress_tokens": None, "bos_token_id": 163584,
        "chunk_size_feed_forward": 0, "cross_attention_hidden_size": None, "decoder_start_token_id": None,
        "diversity_penalty": 0.0, "do_sample": False, "dtype": "bfloat16", "early_stopping": False,
        "encoder_no_repeat_ngram_size": 0, "eos_token_id": 163585, "ep_size": 1,
        "exponential_decay_length_penalty": None, "finetuning_task": None, "first_k_dense_replace": 1,
        "forced_bos_token_id": None, "forced_eos_token_id": None, "hidden_act": "silu", "hidden_size": 7168,
        "id2label": {"0": "LABEL_0", "1": "LABEL_1"}, "initializer_range": 0.02, "intermediate_size": 18432,
        "is_decoder": False, "is_encoder_decoder": False, "kv_lora_rank": 512,
        "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "length_penalty": 1.0, "max_length": 20,
        "max_position_embeddings": 262144, "min_length": 0, "model_type": "kimi_k2", "moe_intermediate_size": 2048,
        "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 384, "n_shared_experts": 1, "no_repeat_ngram_size": 0,
        "norm_topk_prob": True, "num_attention_heads": 64, "num_beam_groups": 1, "num_beams": 1,
        "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 64, "num_nextn_predict_layers": 0,
        "num_return_sequences": 1, "output_attentions": False, "output_hidden_states": False, "output_scores": False,
        "pad_token_id": 163839, "prefix": None, "pretraining_tp": 1, "problem_type": None, "pruned_heads": {},
        "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "quantization_config": {
            "config_groups": {
                "group_0": {
                    "input_activations": None, "output_activations": None, "targets": ["Linear"],
                    "weights": {
                        "actorder": None, "block_structure": None, "dynamic": False, "group_size": 32, "num_bits": 4,
                        "observer": "minmax", "observer_kwargs": {}, "strategy": "group", "symmetric": True,
                        "type": "int",
                    },
                },
            },
            "format": "pack-quantized",
            "ignore": [
                "lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
            ],
            "kv_cache_scheme": None, "quant_method": "compressed-tensors", "quantization_status": "compressed",
        },
        "remove_invalid_values": False, "repetition_penalty": 1.0, "return_dict": True,
        "return_dict_in_generate": False, "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "beta_fast": 32.0, "beta_slow": 1.0, "factor": 64.0, "mscale": 1.0, "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096, "type": "yarn",
        },
        "rope_theta": 50000.0, "routed_scaling_factor": 2.827, "scoring_func": "sigmoid", "sep_token_id": None,
        "seq_aux": True, "suppress_tokens": None, "task_specific_params": None, "temperature": 1.0,
        "tf_legacy_loss": False, "tie_encoder_decoder": False, "tie_word_embeddings": False, "tokenizer_class": None,
        "top_k": 50, "top_p": 1.0, "topk_group": 1, "topk_method": "noaux_tc", "torchscript": False,
        "transformers_version": "4.56.2", "typical_p": 1.0, "use_bfloat16": False, "use_cache": True,
        "v_head_dim": 128, "vocab_size": 163840,
    },
    "tie_word_embeddings": False, "use_unified_vision_chunk": True,
    "video_placeholder": "<|kimi_k25_video_placeholder|>",
    "vision_config": {
        "_attn_implementation": "flash_attention_2", "init_pos_emb_height": 64, "init_pos_emb_time": 4,
        "init_pos_emb_width": 64, "merge_kernel_size": [2, 2], "merge_type": "sd2_tpool", "mm_hidden_size": 1152,
        "mm_projector_type": "patchmerger", "patch_size": 14, "pos_emb_type": "divided_fixed",
        "projector_hidden_act": "gelu", "projector_ln_eps": 1e-05, "text_hidden_size": 7168,
        "video_attn_type": "spatial_temporal", "vt_hidden_size": 1152, "vt_intermediate_size": 4304,
        "vt_num_attention_heads": 16, "vt_num_hidden_layers": 27,
    },
}


def _int4(name: str, out_f: int, in_f: int, group: int) -> Tensors:
    """compressed-tensors pack-quantized int4: eight values per int32, one BF16 scale per group, the shape."""
    return [(f"{name}.weight_packed", "I32", (out_f, in_f // 8)),
            (f"{name}.weight_scale", BF16, (out_f, in_f // group)), (f"{name}.weight_shape", "I32", (2,))]


def kimi_k25_tensors(cfg: dict) -> Tensors:
    """language_model.model.* (DeepSeek-V3 MLA, BF16; layer 0 dense; routed experts int4 per expert), then
    embed / lm_head / norm, mm_projector and vision_tower last (shards 62, 63 and 64 of 64 in the real repo)."""
    t = cfg["text_config"]
    h, vocab, heads = t["hidden_size"], t["vocab_size"], t["num_attention_heads"]
    nope, rope, vd, lq, lkv = (t[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "q_lora_rank",
                                              "kv_lora_rank"))
    n_exp, moe = t["n_routed_experts"], t["moe_intermediate_size"]
    group = t["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"]
    out: Tensors = []
    for i in range(t["num_hidden_layers"]):
        p = f"language_model.model.layers.{i}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        a = p + "self_attn."
        out += _linear(a + "q_a_proj", lq, h) + _norm(a + "q_a_layernorm", lq)
        out += _linear(a + "q_b_proj", heads * (nope + rope), lq)
        out += _linear(a + "kv_a_proj_with_mqa", lkv + rope, h) + _norm(a + "kv_a_layernorm", lkv)
        out += _linear(a + "kv_b_proj", heads * (nope + vd), lkv) + _linear(a + "o_proj", h, heads * vd)
        if i < t["first_k_dense_replace"]:
            out += _swiglu(p + "mlp", t["intermediate_size"], h)
            continue
        out += _linear(p + "mlp.gate", n_exp, h) + [(p + "mlp.gate.e_score_correction_bias", "F32", (n_exp,))]
        out += _swiglu(p + "mlp.shared_experts", moe * t["n_shared_experts"], h)
        for e in range(n_exp):
            x = f"{p}mlp.experts.{e}."
            out += _int4(x + "gate_proj", moe, h, group) + _int4(x + "up_proj", moe, h, group)
            out += _int4(x + "down_proj", h, moe, group)
    out += [("language_model.model.embed_tokens.weight", BF16, (vocab, h))]
    out += _linear("language_model.lm_head", vocab, h)
    out += _norm("language_model.model.norm", h)
    v = cfg["vision_config"]
    c, inter, (mh, mw) = v["vt_hidden_size"], v["vt_intermediate_size"], v["merge_kernel_size"]
    merged = c * mh * mw  # 4608
    out += _norm("mm_projector.pre_norm", c, True)
    out += _linear("mm_projector.proj.0", merged, merged, True) + _linear("mm_projector.proj.2", h, merged, True)
    out += [("vision_tower.patch_embed.proj.weight", BF16, (c, 3, v["patch_size"], v["patch_size"])),
            ("vision_tower.patch_embed.proj.bias", BF16, (c,)),
            # the time embedding is sincos, not stored
            ("vision_tower.patch_embed.pos_emb.weight", BF16, (v["init_pos_emb_height"], v["init_pos_emb_width"], c))]
    for j in range(v["vt_num_hidden_layers"]):
        b = f"vision_tower.encoder.blocks.{j}."
        out += _norm(b + "norm0", c, True) + _norm(b + "norm1", c, True)
        out += _linear(b + "wqkv", 3 * c, c, True) + _linear(b + "wo", c, c, True)
        out += _linear(b + "mlp.fc0", inter, c, True) + _linear(b + "mlp.fc1", c, inter, True)
    return out + _norm("vision_tower.encoder.final_layernorm", c, True)


# ---------------------------------------------------------------------------------------------------------------------
# zai-org/GLM-4.5V (values of the real checkpoint in transformers 5.7's normalized layout; no MTP layer)

GLM45V_CONFIG = {
    "architectures": ["Glm4vMoeForConditionalGeneration"], "dtype": "bfloat16", "image_end_token_id": 151340,
    "image_start_token_id": 151339, "image_token_id": 151363, "model_type": "glm4v_moe",
    "text_config": {
        "attention_bias": True, "attention_dropout": 0.0, "bos_token_id": None, "dtype": "bfloat16",
        "eos_token_id": [151329, 151336, 151338], "first_k_dense_replace": 1, "head_dim": 128, "hidden_act": "silu",
        "hidden_size": 4096, "image_end_token_id": 151340, "image_start_token_id": 151339, "image_token_id": 151363,
        "initializer_range": 0.02, "intermediate_size": 10944, "max_position_embeddings": 65536,
        "model_type": "glm4v_moe_text", "moe_intermediate_size": 1408, "n_group": 1, "n_routed_experts": 128,
        "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 96, "num_experts_per_tok": 8,
        "num_hidden_layers": 46, "num_key_value_heads": 8, "pad_token_id": 151329, "partial_rotary_factor": 0.5,
        "rms_norm_eps": 1e-05,
        "rope_parameters": {
            "mrope_section": [8, 12, 12], "partial_rotary_factor": 0.5, "rope_theta": 10000.0, "rope_type": "default",
        },
        "routed_scaling_factor": 1.0, "router_aux_loss_coef": 0.0001, "tie_word_embeddings": False, "topk_group": 1,
        "use_cache": True, "use_qk_norm": False, "vocab_size": 151552,
    },
    "tie_word_embeddings": False, "transformers_version": "5.7.0", "video_end_token_id": 151342,
    "video_start_token_id": 151341, "video_token_id": 151364,
    "vision_config": {
        "attention_bias": False, "attention_dropout": 0.0, "depth": 24, "hidden_act": "silu", "hidden_size": 1536,
        "image_size": 336, "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 10944,
        "model_type": "glm4v_moe_vision", "num_heads": 12, "out_hidden_size": 4096, "patch_size": 14,
        "rms_norm_eps": 1e-05, "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
}


def glm45v_tensors(cfg: dict) -> Tensors:
    """model.language_model.* (q/k/v biases; layer 0 dense; routed experts per expert, `shared_experts`, F32
    `e_score_correction_bias`), then lm_head, embeddings, norm and model.visual.* (all in the last shard of 46).

    Vision: RMSNorms without bias, bias-free attention, block MLPs of width out_hidden_size, a Conv2d downsample
    and a merger whose gate/up/down use vision intermediate_size."""
    t, v = cfg["text_config"], cfg["vision_config"]
    h, vocab, hd = t["hidden_size"], t["vocab_size"], t["head_dim"]
    heads, kv, lm = t["num_attention_heads"], t["num_key_value_heads"], "model.language_model."
    n_exp, moe = t["n_routed_experts"], t["moe_intermediate_size"]
    out: Tensors = []
    for i in range(t["num_hidden_layers"]):
        p = f"{lm}layers.{i}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        bias = t["attention_bias"]
        out += _linear(p + "self_attn.q_proj", heads * hd, h, bias) + _linear(p + "self_attn.k_proj", kv * hd, h, bias)
        out += _linear(p + "self_attn.v_proj", kv * hd, h, bias) + _linear(p + "self_attn.o_proj", h, heads * hd)
        if t["use_qk_norm"]:
            out += _norm(p + "self_attn.q_norm", hd) + _norm(p + "self_attn.k_norm", hd)
        if i < t["first_k_dense_replace"]:
            out += _swiglu(p + "mlp", t["intermediate_size"], h)
            continue
        out += _linear(p + "mlp.gate", n_exp, h) + [(p + "mlp.gate.e_score_correction_bias", "F32", (n_exp,))]
        for e in range(n_exp):
            out += _swiglu(f"{p}mlp.experts.{e}", moe, h)
        out += _swiglu(p + "mlp.shared_experts", moe * t["n_shared_experts"], h)
    out += _linear("lm_head", vocab, h) + [(lm + "embed_tokens.weight", BF16, (vocab, h))] + _norm(lm + "norm", h)
    c, out_h, m, vis = v["hidden_size"], v["out_hidden_size"], v["spatial_merge_size"], "model.visual."
    grid = v["image_size"] // v["patch_size"]  # 24: position_embedding [576, 1536]
    out += [(vis + "patch_embed.proj.weight", BF16, (c, v["in_channels"], v["temporal_patch_size"], v["patch_size"],
                                                      v["patch_size"])),
            (vis + "patch_embed.proj.bias", BF16, (c,)),
            (vis + "embeddings.position_embedding.weight", BF16, (grid * grid, c))]
    out += _norm(vis + "post_conv_layernorm", c)
    for j in range(v["depth"]):
        b = f"{vis}blocks.{j}."
        out += _norm(b + "norm1", c) + _norm(b + "norm2", c)
        out += _linear(b + "attn.qkv", 3 * c, c) + _linear(b + "attn.proj", c, c) + _swiglu(b + "mlp", out_h, c)
    out += _norm(vis + "post_layernorm", c)
    out += [(vis + "downsample.weight", BF16, (out_h, c, m, m)), (vis + "downsample.bias", BF16, (out_h,))]
    out += _linear(vis + "merger.proj", out_h, out_h) + _norm(vis + "merger.post_projection_norm", out_h, True)
    return out + _swiglu(vis + "merger", v["intermediate_size"], out_h)


# ---------------------------------------------------------------------------------------------------------------------
# Qwen2 line: dense (QwQ-32B, DeepSeek-R1-Distill-Qwen-32B), Qwen2-MoE (Qwen2-57B-A14B), Qwen2.5-VL-72B (config only)

QWQ_32B = {  # Qwen/QwQ-32B, verbatim
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
    "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 27648,
    "max_position_embeddings": 131072, "max_window_layers": 64, "model_type": "qwen2", "num_attention_heads": 40,
    "num_hidden_layers": 64, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False, "vocab_size": 152064,
}

R1_DISTILL_QWEN_32B = {  # deepseek-ai/DeepSeek-R1-Distill-Qwen-32B, verbatim (664 bytes)
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
    "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 27648,
    "max_position_embeddings": 131072, "max_window_layers": 64, "model_type": "qwen2", "num_attention_heads": 40,
    "num_hidden_layers": 64, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
    "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False, "vocab_size": 152064,
}

# Qwen/Qwen2-57B-A14B (base), config.json at Hub commit 759c0d83 (916 bytes, reproduced exactly by this dict). The
# file changed later (refs/pr/1: intermediate_size 20480, max_window_layers 28, sliding_window 131072; all unused by
# the MoE layers). The Instruct model has the same architecture values (derivative copies: max_position_embeddings
# 32768, mlp_only_layers []); its verbatim file and every shard count are unconfirmed.
QWEN2_57B_A14B = {
    "architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "decoder_sparse_step": 1, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584,
    "initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 131072,
    "max_window_layers": 21, "model_type": "qwen2_moe", "moe_intermediate_size": 2560, "norm_topk_prob": False,
    "num_attention_heads": 28, "num_experts": 64, "num_experts_per_tok": 8, "num_hidden_layers": 28,
    "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 20480, "sliding_window": 4096,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}

# Qwen/Qwen2.5-VL-72B-Instruct, reconstructed from Qwen's Qwen2.5-VL-72B-Instruct-AWQ config.json (_name_or_path
# "Qwen/Qwen2.5-VL-72B-Instruct", blob 666b8f5) without `_name_or_path` / `quantization_config`. The stored copy omits
# the vision keys that equal Qwen2_5_VLVisionConfig's defaults (depth 32, num_heads 16, window_size 112,
# fullatt_block_indexes [7, 15, 23, 31], patch 14, spatial_merge 2, temporal_patch 2, hidden_act silu).
QWEN25_VL_72B = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 8192, "image_token_id": 151655,
    "initializer_range": 0.02,
    "intermediate_size": 29568,  # unconfirmed: the AWQ file says 29696 (padded); 29568 as Qwen2.5-72B / Qwen2-VL-72B
    "max_position_embeddings": 128000, "max_window_layers": 80, "model_type": "qwen2_5_vl", "num_attention_heads": 64,
    "num_hidden_layers": 80, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": {"mrope_section": [16, 24, 24], "rope_type": "default", "type": "default"},
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.49.0.dev0", "use_cache": True, "use_sliding_window": False, "video_token_id": 151656,
    "vision_config": {
        "hidden_size": 1280, "in_chans": 3, "intermediate_size": 3456, "model_type": "qwen2_5_vl",
        "out_hidden_size": 8192, "spatial_patch_size": 14, "tokens_per_second": 2, "torch_dtype": "bfloat16",
    },
    "vision_end_token_id": 151653, "vision_start_token_id": 151652, "vision_token_id": 151654,
    "vocab_size": 152064,  # unconfirmed (cut off in the stored copy); very likely, as every Qwen2.5/Qwen2-VL 72B
}


def _qwen2_attention(cfg: dict, p: str) -> Tensors:
    """Qwen2 attention: q/k/v with biases, o_proj without; head_dim = hidden_size // num_attention_heads."""
    h, heads, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = h // heads
    out = _linear(p + "self_attn.q_proj", heads * hd, h, True) + _linear(p + "self_attn.k_proj", kv * hd, h, True)
    return out + _linear(p + "self_attn.v_proj", kv * hd, h, True) + _linear(p + "self_attn.o_proj", h, heads * hd)


def _qwen2_checkpoint(cfg: dict, mlp) -> Tensors:
    h, vocab = cfg["hidden_size"], cfg["vocab_size"]
    out = [("model.embed_tokens.weight", BF16, (vocab, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        out += _qwen2_attention(cfg, p) + mlp(cfg, i, p)
    return out + _norm("model.norm", h) + _linear("lm_head", vocab, h)


def qwen2_tensors(cfg: dict) -> Tensors:
    """A dense Qwen2 checkpoint (QwQ-32B: 771 tensors, embeddings in shard 1, lm_head in the last)."""
    return _qwen2_checkpoint(cfg, lambda c, i, p: _swiglu(p + "mlp", c["intermediate_size"], c["hidden_size"]))


def _qwen2_moe_mlp(cfg: dict, i: int, p: str) -> Tensors:
    h = cfg["hidden_size"]
    if i in cfg.get("mlp_only_layers", []) or (i + 1) % cfg["decoder_sparse_step"] != 0:
        return _swiglu(p + "mlp", cfg["intermediate_size"], h)
    out = _linear(p + "mlp.gate", cfg["num_experts"], h)
    for e in range(cfg["num_experts"]):
        out += _swiglu(f"{p}mlp.experts.{e}", cfg["moe_intermediate_size"], h)
    return out + _swiglu(p + "mlp.shared_expert", cfg["shared_expert_intermediate_size"], h) + _linear(
        p + "mlp.shared_expert_gate", 1, h)


def qwen2_moe_tensors(cfg: dict) -> Tensors:
    """A Qwen2-MoE checkpoint (Qwen2-57B-A14B): per-expert routed experts, one shared expert with its sigmoid gate
    `shared_expert_gate` [1, H], router `mlp.gate` [E, H]; attention as Qwen2 (q/k/v biases)."""
    return _qwen2_checkpoint(cfg, _qwen2_moe_mlp)


# ---------------------------------------------------------------------------------------------------------------------

# hub name -> (config, tensors function)
REAL_VLM_MODELS = {
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (LLAMA4_SCOUT_CONFIG, llama4_tensors),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": (LLAMA4_MAVERICK_CONFIG, llama4_tensors),
    "Qwen/Qwen3-VL-235B-A22B-Instruct": (QWEN3_VL_235B_CONFIG, qwen3_vl_tensors),
    "Qwen/Qwen3-VL-30B-A3B-Instruct": (QWEN3_VL_30B_A3B_CONFIG, qwen3_vl_tensors),
    "Qwen/Qwen3-VL-8B-Instruct": (QWEN3_VL_8B_CONFIG, qwen3_vl_tensors),
    "moonshotai/Kimi-K2.5": (KIMI_K25_CONFIG, kimi_k25_tensors),
    "zai-org/GLM-4.5V": (GLM45V_CONFIG, glm45v_tensors),
    "Qwen/QwQ-32B": (QWQ_32B, qwen2_tensors),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": (R1_DISTILL_QWEN_32B, qwen2_tensors),
    "Qwen/Qwen2-57B-A14B": (QWEN2_57B_A14B, qwen2_moe_tensors),
}

# Shard counts of the real repos where known. write_checkpoint names shards with a 5-digit total
# (-of-000NN); Kimi-K2.5 and R1-Distill-Qwen-32B really use a 6-digit one (model-000NN-of-000064 /
# model-0000N-of-000008). Scout's 50 is from a secondary source (a local download's README and ModelOpt's comment
# "model-00001-of-00050"), not the Hub page.
SHARDS = {
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": 50,
    "Qwen/Qwen3-VL-235B-A22B-Instruct": 96,
    "Qwen/Qwen3-VL-30B-A3B-Instruct": 13,
    "Qwen/Qwen3-VL-8B-Instruct": 4,
    "moonshotai/Kimi-K2.5": 64,
    "zai-org/GLM-4.5V": 46,
    "Qwen/QwQ-32B": 14,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": 8,
}
