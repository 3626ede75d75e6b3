"""MiMo-V2-Flash as published (XiaomiMiMo/MiMo-V2-Flash): config.json values and the tensor list, for header-only
plans of the real layout at TP 3 and 6.

Where the facts come from (stored public copies only; the Hub files could not be read offline):

- config.json: the values below agree across independent public copies (a Rust loader's `mimo_v2_flash_hub_config`
  test, Megatron-Bridge's MiMo-V2-Flash bridge test, MLX loaders): hidden 4096, 48 layers (full attention at layer 0
  and every 6th: hybrid_layer_pattern), 64 heads, 4 full kv heads, 8 SWA kv heads, head_dim 192, v_head_dim 128,
  SWA sinks, 256 experts top-8 of width 2048 after a dense first layer of 16384, vocab 152576,
  attention_value_scale 0.707. max_position_embeddings 262144 (one copy).
- Tensors: published names as vLLM's MiMoV2 loader and transformers' conversion mapping read them (per-expert
  experts, `self_attn.attention_sink_bias`, `mlp.gate.e_score_correction_bias`), and three MTP layers
  (`model.mtp.layers.{0,1,2}`: Megatron-Bridge's MTP detection test lists three).
- Storage: the published checkpoint is FP8 (e4m3, 128x128 blocks, `weight_scale_inv`): Megatron-Bridge dequantizes
  it, and its test gives the full-attention k_proj [768, 4096] a scale grid of (8, 32), which is not the continuous
  ceil(768/128) = 6 rows a 128-row block grid has (the 4 kv heads' 192 rows are tiled per head, 2 scale rows each).
  Which other tensors are quantized, and how their scales are tiled, could not be confirmed offline, so the layout
  here is BF16 (a dequantized copy, what hubpad pads exactly); `fp8_full_k_scales` reproduces the one confirmed
  FP8 detail for the refusal test.
"""

from __future__ import annotations

N_LAYERS = 48
PATTERN = [0 if (i == 0 or (i + 1) % 6 == 0) else 1 for i in range(N_LAYERS)]

MIMO_V2_FLASH = {
    "architectures": ["MiMoV2FlashForCausalLM"], "model_type": "mimo_v2_flash", "vocab_size": 152576,
    "hidden_size": 4096, "num_hidden_layers": N_LAYERS, "num_attention_heads": 64, "num_key_value_heads": 4,
    "head_dim": 192, "v_head_dim": 128, "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8,
    "swa_head_dim": 192, "swa_v_head_dim": 128, "partial_rotary_factor": 0.334, "rope_theta": 5000000,
    "swa_rope_theta": 10000, "sliding_window": 128, "sliding_window_size": 128, "hybrid_layer_pattern": PATTERN,
    "moe_layer_freq": [0] + [1] * (N_LAYERS - 1), "add_swa_attention_sink_bias": True,
    "add_full_attention_sink_bias": False, "intermediate_size": 16384, "n_routed_experts": 256,
    "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "routed_scaling_factor": None, "scoring_func": "sigmoid",
    "topk_method": "noaux_tc", "n_group": 1, "topk_group": 1, "norm_topk_prob": True, "layernorm_epsilon": 1e-5,
    "attention_value_scale": 0.707, "max_position_embeddings": 262144, "tie_word_embeddings": False,
    "attention_bias": False, "hidden_act": "silu", "num_nextn_predict_layers": 3,
}


def tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every tensor, BF16 (the router's weight and correction bias F32 as transformers keeps
    them; unconfirmed for the Hub file)."""
    h, hd, vd, heads = cfg["hidden_size"], cfg["head_dim"], cfg["v_head_dim"], cfg["num_attention_heads"]
    bf = "BF16"
    out = [("model.embed_tokens.weight", bf, (cfg["vocab_size"], h)), ("model.norm.weight", bf, (h,)),
           ("lm_head.weight", bf, (cfg["vocab_size"], h))]

    def attention(p: str, kv: int, sinks: bool) -> list:
        rows = [(p + "self_attn.q_proj.weight", bf, (heads * hd, h)), (p + "self_attn.k_proj.weight", bf, (kv * hd, h)),
                (p + "self_attn.v_proj.weight", bf, (kv * vd, h)), (p + "self_attn.o_proj.weight", bf, (h, heads * vd))]
        return rows + ([(p + "self_attn.attention_sink_bias", bf, (heads,))] if sinks else [])

    def dense(p: str) -> list:
        i = cfg["intermediate_size"]
        return [(p + "mlp.gate_proj.weight", bf, (i, h)), (p + "mlp.up_proj.weight", bf, (i, h)),
                (p + "mlp.down_proj.weight", bf, (h, i))]

    for n, swa in enumerate(cfg["hybrid_layer_pattern"]):
        p = f"model.layers.{n}."
        out += [(p + "input_layernorm.weight", bf, (h,)), (p + "post_attention_layernorm.weight", bf, (h,))]
        out += attention(p, cfg["swa_num_key_value_heads"] if swa else cfg["num_key_value_heads"], bool(swa))
        if cfg["moe_layer_freq"][n]:
            i, e = cfg["moe_intermediate_size"], cfg["n_routed_experts"]
            out += [(p + "mlp.gate.weight", "F32", (e, h)), (p + "mlp.gate.e_score_correction_bias", "F32", (e,))]
            for x in range(e):
                q = f"{p}mlp.experts.{x}."
                out += [(q + "gate_proj.weight", bf, (i, h)), (q + "up_proj.weight", bf, (i, h)),
                        (q + "down_proj.weight", bf, (h, i))]
        else:
            out += dense(p)
    for m in range(cfg["num_nextn_predict_layers"]):
        p = f"model.mtp.layers.{m}."
        out += [(p + n, bf, (h,)) for n in ("enorm.weight", "hnorm.weight", "input_layernorm.weight",
                                             "pre_mlp_layernorm.weight", "final_layernorm.weight")]
        out += [(p + "eh_proj.weight", bf, (h, 2 * h))] + attention(p, cfg["swa_num_key_value_heads"], True) + dense(p)
    return out


# MiMo-V2.5-Pro (XiaomiMiMo/MiMo-V2.5-Pro) as published: config.json values and every tensor's name, dtype and shape
# from a public dump of the published config.json and safetensors headers (159,581 tensors), agreeing with the
# loaders of vLLM (mimo_v2.py), llama.cpp and sglang. Not read from the Hub itself. num_nextn_predict_layers is
# absent from the config though three MTP layers ship (`model.mtp.layers.{0,1,2}`). MiMo-V2.5-Pro-FP4 (published as
# XiaomiMiMo/MiMo-V2.5-Pro-FP4-DFlash) stores the routed experts as MXFP4 (`store_dtype: mxfp4`: U8 e2m1 pairs and
# U8 e8m0 `weight_scale` per 32 inputs, names and dtypes confirmed by sglang's and llama.cpp's loaders); its shapes are
# inferred (the MXFP4 convention, which reproduces the byte totals of the V2.6 MXFP4 releases) and everything else
# is taken as the FP8 release's.
PRO_FULL = [0, 7, 15, 23, 31, 39, 47, 55, 62, 69]
MIMO_V2_5_PRO = {
    "architectures": ["MiMoV2ForCausalLM"], "model_type": "mimo_v2", "vocab_size": 152576, "hidden_size": 6144,
    "num_hidden_layers": 70, "num_attention_heads": 128, "num_key_value_heads": 8, "swa_num_attention_heads": 128,
    "swa_num_key_value_heads": 8, "head_dim": 192, "v_head_dim": 128, "swa_head_dim": 192, "swa_v_head_dim": 128,
    "hybrid_layer_pattern": [0 if i in PRO_FULL else 1 for i in range(70)], "moe_layer_freq": [0] + [1] * 69,
    "n_routed_experts": 384, "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "intermediate_size": 16384,
    "attention_value_scale": 0.612, "add_swa_attention_sink_bias": True, "add_full_attention_sink_bias": False,
    "attention_bias": False, "attention_projection_layout": "fused_qkv", "sliding_window": 128,
    "sliding_window_size": 128, "rope_theta": 10000000, "swa_rope_theta": 10000, "partial_rotary_factor": 0.334,
    "layernorm_epsilon": 1e-5, "max_position_embeddings": 1048576, "tie_word_embeddings": False,
    "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc", "scoring_func": "sigmoid", "norm_topk_prob": True,
    "routed_scaling_factor": None, "hidden_act": "silu",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128],
                            "ignored_layers": [f"model.layers.{i}.self_attn.o_proj" for i in range(70)]
                            + ["model.decoder.self_attn.o_proj"]},
}
MIMO_V2_5_PRO_FP4 = {**MIMO_V2_5_PRO, "quantization_config": {
    **MIMO_V2_5_PRO["quantization_config"], "store_dtype": "mxfp4", "mxfp4_block_size": 32}}


def pro_tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every tensor of MiMo-V2.5-Pro (FP8), or -FP4 when the config stores experts as mxfp4."""
    h, heads, kv, hd, vd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], 192, 128
    mxfp4 = cfg["quantization_config"].get("store_dtype") == "mxfp4"
    bf, f8 = "BF16", "F8_E4M3"

    def fp8(name: str, rows: int, cols: int, scale_rows: int | None = None) -> list:
        return [(name + ".weight", f8, (rows, cols)),
                (name + ".weight_scale_inv", "F32", (scale_rows or -(-rows // 128), -(-cols // 128)))]

    def attention(p: str, sinks: bool) -> list:
        # num_key_value_heads chunks, each block-quantized on its own: Pro 8 chunks of 3392 rows in both layer types
        # (8 SWA kv heads); MiMo-V2.5 4 chunks of 3392 (full: 4 kv heads) or 3712 rows (SWA: 8)
        qkv_rows = heads * hd + (cfg["swa_num_key_value_heads"] if sinks else kv) * (hd + vd)
        out = fp8(p + "self_attn.qkv_proj", qkv_rows, h, scale_rows=kv * -(-(qkv_rows // kv) // 128))
        out.append((p + "self_attn.o_proj.weight", bf, (h, heads * vd)))
        return out + ([(p + "self_attn.attention_sink_bias", bf, (heads,))] if sinks else [])

    def dense(p: str) -> list:
        i = cfg["intermediate_size"]
        return fp8(p + "mlp.gate_proj", i, h) + fp8(p + "mlp.up_proj", i, h) + fp8(p + "mlp.down_proj", h, i)

    def expert(q: str) -> list:
        i = cfg["moe_intermediate_size"]
        if not mxfp4:
            return fp8(q + "gate_proj", i, h) + fp8(q + "up_proj", i, h) + fp8(q + "down_proj", h, i)
        return [(q + "gate_proj.weight", "U8", (i, h // 2)), (q + "gate_proj.weight_scale", "U8", (i, h // 32)),
                (q + "up_proj.weight", "U8", (i, h // 2)), (q + "up_proj.weight_scale", "U8", (i, h // 32)),
                (q + "down_proj.weight", "U8", (h, i // 2)), (q + "down_proj.weight_scale", "U8", (h, i // 32))]

    out = [("model.embed_tokens.weight", bf, (cfg["vocab_size"], h)), ("model.norm.weight", bf, (h,)),
           ("lm_head.weight", bf, (cfg["vocab_size"], h))]
    for n, swa in enumerate(cfg["hybrid_layer_pattern"]):
        p = f"model.layers.{n}."
        out += [(p + "input_layernorm.weight", bf, (h,)), (p + "post_attention_layernorm.weight", bf, (h,))]
        out += attention(p, bool(swa))
        if cfg["moe_layer_freq"][n]:
            e = cfg["n_routed_experts"]
            out += [(p + "mlp.gate.weight", "F32", (e, h)), (p + "mlp.gate.e_score_correction_bias", "F32", (e,))]
            for x in range(e):
                out += expert(f"{p}mlp.experts.{x}.")
        else:
            out += dense(p)
    for m in range(3):
        p = f"model.mtp.layers.{m}."
        out += [(p + n, bf, (h,)) for n in ("enorm.weight", "hnorm.weight", "input_layernorm.weight",
                                             "pre_mlp_layernorm.weight", "final_layernorm.weight")]
        out += [(p + "eh_proj.weight", bf, (h, 2 * h))] + attention(p, True) + dense(p)
    if isinstance(cfg.get("vision_config"), dict):
        out += tower_tensors(cfg["vision_config"], h) + audio_tensors(cfg["audio_config"])
    return out


# MiMo-V2.5 (XiaomiMiMo/MiMo-V2.5) as published, with its vision tower and audio encoder: config.json and every
# tensor's name, shape and dtype from a public report of the published checkpoint (its config.json verbatim and its
# safetensors inventory: 73,081 tensors, 310,775,040,000 parameters, 293.40 GB in 17 files), agreeing with the
# qkv_proj geometry other public loaders read from the live headers (full layers [13568, 4096] with [108, 32]
# scales, SWA layers [14848, 4096] with [116, 32]). Not read from the Hub itself. The vision config states no
# qk_channels / kv_channels: vLLM's Mimo_VLVisionConfig defaults both to 64 (qkv [3072, 1280] = (32 + 2 x 8) x 64).
_V25_FULL = [0, 5, 11, 17, 23, 29, 35, 41, 47]
MIMO_V2_5 = {
    **{k: v for k, v in MIMO_V2_5_PRO.items() if k != "quantization_config"},
    "hidden_size": 4096, "num_hidden_layers": 48, "num_attention_heads": 64, "num_key_value_heads": 4,
    "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8, "n_routed_experts": 256, "attention_value_scale": 0.707,
    "hybrid_layer_pattern": [0 if i in _V25_FULL else 1 for i in range(48)], "moe_layer_freq": [0] + [1] * 47,
    "rope_theta": 10000000, "attention_chunk_size": 128, "n_shared_experts": None, "image_token_id": 151655,
    "video_token_id": 151656, "vision_start_token_id": 151652, "vision_end_token_id": 151653,
    "vision_model_type": "mimovl",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "store_dtype": "fp8",
                            "weight_block_size": [128, 128],
                            "ignored_layers": [f"model.layers.{i}.self_attn.o_proj" for i in range(48)]
                            + ["model.decoder.self_attn.o_proj"]},
    "vision_config": {"depth": 28, "fullatt_block_indexes": [0, 9, 18, 27], "hidden_act": "silu", "hidden_size": 1280,
                      "in_chans": 3, "intermediate_size": 4608, "num_heads": 32, "num_key_value_heads": 8,
                      "num_query_groups": 4, "out_hidden_size": 4096, "patch_size": 16, "spatial_merge_size": 2,
                      "spatial_patch_size": 16, "temporal_patch_size": 2, "tokens_per_second": 2, "use_sink": True,
                      "visual_token_window_size": 64, "window_size": 128,
                      "vit_window_attn_types": ([-1] + [0] * 4 + [1] * 4) * 3 + [-1]},
    "audio_config": {"add_post_norm": True, "audio_channels": 20, "audio_segment_size": 6000, "group_size": 4,
                     "input_full_attention": True, "input_local_attn_heads": 16, "input_local_dim": 1024,
                     "input_local_head_dim": 64, "input_local_hidden_dropout": 0.0,
                     "input_local_intermediate_size": 4096, "input_local_layers": 6, "out_hidden_size": 4096,
                     "partial_rotary_factor": 1.0, "projection_layers": 2, "rope_theta": 640000,
                     "speech_vocab_size": "1280", "speech_zeroemb_idx": "1024"},
}
MIMO_V2_5_COUNT, MIMO_V2_5_PARAMS = 73081, 310_775_040_000


def tower_tensors(v: dict, out_hidden: int) -> list[tuple[str, str, tuple[int, ...]]]:
    """MiMo-V2.5's vision tower (BF16): 28 blocks, sinks on the window blocks, a merger without biases."""
    h, i, heads, kv, hd = v["hidden_size"], v["intermediate_size"], v["num_heads"], v["num_key_value_heads"], 64
    unit, bf = v["spatial_merge_size"] ** 2, "BF16"
    out = [("visual.patch_embed.proj.weight", bf, (h, v["in_chans"], v["temporal_patch_size"], v["patch_size"],
                                                   v["patch_size"])),
           ("visual.merger.ln_q.weight", bf, (h,)), ("visual.merger.mlp.0.weight", bf, (h * unit, h * unit)),
           ("visual.merger.mlp.2.weight", bf, (out_hidden, h * unit))]
    for n in range(v["depth"]):
        p = f"visual.blocks.{n}."
        out += [(p + "norm1.weight", bf, (h,)), (p + "norm2.weight", bf, (h,)),
                (p + "attn.qkv.weight", bf, ((heads + 2 * kv) * hd, h)), (p + "attn.qkv.bias", bf, ((heads + 2 * kv) * hd,)),
                (p + "attn.proj.weight", bf, (h, heads * hd)), (p + "attn.proj.bias", bf, (h,)),
                (p + "mlp.gate_proj.weight", bf, (i, h)), (p + "mlp.gate_proj.bias", bf, (i,)),
                (p + "mlp.up_proj.weight", bf, (i, h)), (p + "mlp.up_proj.bias", bf, (i,)),
                (p + "mlp.down_proj.weight", bf, (h, i)), (p + "mlp.down_proj.bias", bf, (h,))]
        if n not in v["fullatt_block_indexes"]:
            out.append((p + "attn.sinks", bf, (heads,)))
    return out


def audio_tensors(a: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """MiMo-V2.5's audio encoder (BF16): a 6-layer Qwen2 stack (q/k/v biases), its norm, a 2-layer projection and 20
    speech embeddings."""
    d, i, bf = a["input_local_dim"], a["input_local_intermediate_size"], "BF16"
    out = [(f"speech_embeddings.{c}.weight", bf, (int(a["speech_vocab_size"]), d)) for c in range(a["audio_channels"])]
    for n in range(a["input_local_layers"]):
        p = f"audio_encoder.input_local_transformer.layers.{n}."
        out += [(p + "input_layernorm.weight", bf, (d,)), (p + "post_attention_layernorm.weight", bf, (d,)),
                (p + "mlp.gate_proj.weight", bf, (i, d)), (p + "mlp.up_proj.weight", bf, (i, d)),
                (p + "mlp.down_proj.weight", bf, (d, i)), (p + "self_attn.o_proj.weight", bf, (d, d))]
        out += [(p + f"self_attn.{x}_proj.{s}", bf, (d, d) if s == "weight" else (d,)) for x in "qkv"
                for s in ("weight", "bias")]
    width = d * a["group_size"]
    return out + [("audio_encoder.input_local_transformer.norm.weight", bf, (d,)),
                  ("audio_encoder.projection.mlp.0.weight", bf, (4 * width, width)),
                  ("audio_encoder.projection.mlp.2.weight", bf, (a["out_hidden_size"], 4 * width))]
