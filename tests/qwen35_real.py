"""Qwen3.5 (397B-A17B, 122B-A10B, 27B and 27B-FP8) and Qwen3-Next-80B-A3B as published: config.json values and the
complete tensor lists (vision tower and MTP layer included), for header-only plans of the real hybrid GDN layouts.

Tests build a sparse copy with `hubpad.testing.write_checkpoint(path, cfg, tensors(cfg), n_shards=K,
header_only=True)`, taking (cfg, tensors) from REAL_GDN_MODELS. No torch. The real shard counts are unknown for all of
these repos, so K is the test's choice.

Where the facts come from (this project's research notes; stored public copies only, nothing fetched from the Hub):

- Qwen/Qwen3.5-397B-A17B: config.json as copied in ai-dynamo/aiconfigurator (@87fe4b0c), all values in it confirmed
  again against the official config (HF commit 84726181) and the model card. That copy may be trimmed: the rope
  values (rope_theta 1e7, partial_rotary_factor 0.25, mrope_section [11, 11, 10]) are confirmed but missing from it,
  and are added here in the form of the verbatim Qwen3.6-27B file (`rope_parameters` plus a top-level
  `partial_rotary_factor`); that form is reconstructed. Keys that the Qwen3.6-27B file has but the copy lacks
  (bos_token_id, mamba_ssm_dtype, pad_token_id, output_router_logits, vision deepstack_visual_indexes /
  initializer_range, language_model_only) are left out: their presence in the 3.5 file is unconfirmed, and the
  defaults mean the same (no deepstack mergers: the vision parameter count is reproduced only without them).
  Tensors: fused BF16 routed experts `mlp.experts.gate_up_proj` [E, 2I, H] / `mlp.experts.down_proj` [E, H, I]
  confirmed (THUDM/slime #1799 gives [512, 2048, 4096]); per-expert 2-D experts in the MTP layer confirmed (AMD's
  exclude list, Qwen3.5-35B-A3B's index). The totals below are reproduced exactly: 403,397,928,944 parameters
  (text 396,346,350,336 + vision 456,010,480 + MTP 6,595,568,128), 2,924 tensors.
- Qwen/Qwen3.5-122B-A10B: no copy of the file. Values from the model card and a review of the official configs
  (hidden 3072, 48 layers, 32/2 heads, 64 value heads, 256 experts top-8, expert and shared width 1024); the rest
  (vision out_hidden_size 3072, conv kernel 4, rope, token ids, mtp_num_hidden_layers 1) is reconstructed from the
  397B file. Fused BF16 experts as 397B (family convention; unconfirmed for 122B).
- Qwen/Qwen3.5-27B: no copy of the 3.5 file. Built from the verbatim Qwen/Qwen3.6-27B config.json (same
  architecture; the confirmed 3.5-27B numbers are identical), minus `language_model_only` and `output_gate_type`,
  which may be 3.6-era additions; `transformers_version` is unconfirmed. Totals: 27,781,427,952 parameters,
  1,199 tensors (MTP: 15 tensors, as a Qwen3.6-27B index shows).
- Qwen/Qwen3.5-27B-FP8: the exclusion list (`modules_to_not_convert`, 259 entries) is the official one as
  reproduced by a converter that follows it and by ms-swift; F8_E4M3 weights with F32 `weight_scale_inv`
  [ceil(out/128), ceil(in/128)] for every other 2-D `.weight` whose dims are multiples of 128 (400 in the text
  stack). Unconfirmed: whether Qwen's file also quantizes the MTP layer's projections (done here: only `mtp.fc` is
  listed as excluded) and the exact extra quantization_config keys.
- Qwen/Qwen3-Next-80B-A3B-Instruct: the verbatim config.json of its Thinking sibling (aiconfigurator @1b7cfb10), same
  values as the Instruct card and a transformers printout of the real Instruct-FP8. It has no `layer_types` and no MTP
  count key, yet the checkpoint carries one MTP layer (`mtp.*`, experts per expert): included here, while
  `num_nextn_predict_layers` is not added to the config. Per-expert routed experts confirmed. Derived totals:
  81,324,862,720 parameters, 75,944 tensors.
- dtypes: BF16, except `linear_attn.A_log` and `linear_attn.norm.weight`, which Qwen3.5 checkpoints store as F32
  (confirmed for Qwen3.5-27B and -0.8B; expected, unconfirmed, for 397B and 122B). Qwen3-Next's are taken as BF16
  (unconfirmed).
"""

from __future__ import annotations

from tests.moe_real import Tensors
from tests.vlm_real import qwen3_vision_tensors

BF16 = "BF16"


def layer_types(n: int, interval: int = 4) -> list[str]:
    """Three GDN layers, then one full-attention layer: layer i is full attention iff (i+1) % interval == 0."""
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]


# Confirmed values (rope_theta 1e7, partial rotary 0.25, mrope [11, 11, 10]); the key form is the Qwen3.6-27B file's.
_ROPE = {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "partial_rotary_factor": 0.25,
         "rope_theta": 10000000, "rope_type": "default"}

# ---------------------------------------------------------------------------------------------------------------------
# Qwen/Qwen3.5-397B-A17B: the aiconfigurator copy plus the confirmed rope values (partial_rotary_factor,
# rope_parameters: the only keys added)

QWEN35_397B_CONFIG = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"], "image_token_id": 248056, "model_type": "qwen3_5_moe",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True, "dtype": "bfloat16",
        "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu",
        "hidden_size": 4096, "initializer_range": 0.02, "layer_types": layer_types(60), "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 64,
        "linear_value_head_dim": 128, "max_position_embeddings": 262144, "mlp_only_layers": [],
        "model_type": "qwen3_5_moe_text", "moe_intermediate_size": 1024, "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False, "num_attention_heads": 32, "num_experts": 512,
        "num_experts_per_tok": 10, "num_hidden_layers": 60, "num_key_value_heads": 2,
        "partial_rotary_factor": 0.25,  # added: value confirmed, not in the copy
        "rms_norm_eps": 1e-06,
        "rope_parameters": dict(_ROPE),  # added: values confirmed, form reconstructed
        "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 1024, "use_cache": True,
        "vocab_size": 248320,
    },
    "tie_word_embeddings": False, "transformers_version": "4.57.0.dev0", "video_token_id": 248057,
    "vision_config": {
        "depth": 27, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1152, "in_channels": 3,
        "intermediate_size": 4304, "model_type": "qwen3_5_moe", "num_heads": 16, "num_position_embeddings": 2304,
        "out_hidden_size": 4096, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
    "vision_end_token_id": 248054, "vision_start_token_id": 248053,
}

# Qwen/Qwen3.5-122B-A10B: no copy of the file. Confirmed: hidden 3072, 48 layers, 32 / 2 heads, head_dim 256,
# 16 key / 64 value GDN heads of 128, 256 experts top-8, moe and shared width 1024, vocab 248320, 262144 context,
# vision depth 27. Reconstructed from the 397B file: every other key, vision out_hidden_size 3072 (= hidden), and
# mtp_num_hidden_layers 1 (the model is trained with MTP; the key itself is unconfirmed).
QWEN35_122B_CONFIG = {
    **QWEN35_397B_CONFIG,
    "text_config": {**QWEN35_397B_CONFIG["text_config"], "hidden_size": 3072, "layer_types": layer_types(48),
                    "num_experts": 256, "num_experts_per_tok": 8, "num_hidden_layers": 48},
    "vision_config": {**QWEN35_397B_CONFIG["vision_config"], "out_hidden_size": 3072},
}

# Qwen/Qwen3.5-27B: the verbatim Qwen/Qwen3.6-27B config.json (same architecture and numbers) without
# language_model_only / output_gate_type.
QWEN35_27B_CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"], "image_token_id": 248056, "model_type": "qwen3_5",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True, "bos_token_id": 248044,
        "dtype": "bfloat16", "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256,
        "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 17408,
        "layer_types": layer_types(64), "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
        "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_value_head_dim": 128,
        "mamba_ssm_dtype": "float32", "max_position_embeddings": 262144, "model_type": "qwen3_5_text",
        "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False, "num_attention_heads": 24,
        "num_hidden_layers": 64, "num_key_value_heads": 4, "pad_token_id": None, "partial_rotary_factor": 0.25,
        "rms_norm_eps": 1e-06, "rope_parameters": dict(_ROPE), "tie_word_embeddings": False, "use_cache": True,
        "vocab_size": 248320,
    },
    "tie_word_embeddings": False,
    "transformers_version": "4.57.0.dev0",  # unconfirmed for this file: the 397B copy's (Qwen3.6-27B says 4.57.1)
    "video_token_id": 248057,
    "vision_config": {
        "deepstack_visual_indexes": [], "depth": 27, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1152,
        "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4304, "model_type": "qwen3_5",
        "num_heads": 16, "num_position_embeddings": 2304, "out_hidden_size": 5120, "patch_size": 16,
        "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
    "vision_end_token_id": 248054, "vision_start_token_id": 248053,
}

# Qwen/Qwen3-Next-80B-A3B-Instruct: the verbatim Qwen3-Next-80B-A3B-Thinking file (same values; whether the two
# files are byte-identical is unconfirmed). No num_nextn_predict_layers, although the checkpoint has one MTP layer.
QWEN3_NEXT_80B_CONFIG = {
    "architectures": ["Qwen3NextForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "decoder_sparse_step": 1, "eos_token_id": 151645, "full_attention_interval": 4, "head_dim": 256,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_value_head_dim": 128, "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_next",
    "moe_intermediate_size": 512, "norm_topk_prob": True, "num_attention_heads": 16, "num_experts": 512,
    "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2, "output_router_logits": False,
    "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000000,
    "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.57.0.dev0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}
QWEN3_NEXT_MTP_LAYERS = 1  # what the checkpoint holds (mtp.layers.0.*); the config has no key for it


# ---------------------------------------------------------------------------------------------------------------------
# tensors

def _w(name: str, out_f: int, in_f: int) -> Tensors:
    return [(f"{name}.weight", BF16, (out_f, in_f))]


def _norm(name: str, width: int, dtype: str = BF16) -> Tensors:
    return [(f"{name}.weight", dtype, (width,))]


def _swiglu(p: str, width: int, h: int) -> Tensors:
    return _w(f"{p}.gate_proj", width, h) + _w(f"{p}.up_proj", width, h) + _w(f"{p}.down_proj", h, width)


def _gated_attention(t: dict, p: str) -> Tensors:
    """Full attention with the output gate packed into q_proj (rows per head: [q_h | gate_h]); q_norm / k_norm."""
    h, hd, heads, kv = t["hidden_size"], t["head_dim"], t["num_attention_heads"], t["num_key_value_heads"]
    out = _w(p + "self_attn.q_proj", 2 * heads * hd, h) + _w(p + "self_attn.k_proj", kv * hd, h)
    out += _w(p + "self_attn.v_proj", kv * hd, h) + _w(p + "self_attn.o_proj", h, heads * hd)
    return out + _norm(p + "self_attn.q_norm", hd) + _norm(p + "self_attn.k_norm", hd)


def _gdn_dims(t: dict) -> tuple[int, int, int, int, int, int]:
    nk, nv, hk, hv = (t[k] for k in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                     "linear_value_head_dim"))
    return t["hidden_size"], nk, nv, hk, hv, t["linear_conv_kernel_dim"]


def _gdn_qwen35(t: dict, p: str) -> Tensors:
    """Qwen3.5 Gated DeltaNet, projections stored separately: in_proj_qkv rows [q | k | v], in_proj_z, in_proj_b,
    in_proj_a; depthwise conv1d without bias over [q | k | v]; A_log and the gated norm in F32."""
    h, nk, nv, hk, hv, k = _gdn_dims(t)
    conv, a = 2 * nk * hk + nv * hv, p + "linear_attn."
    out = _w(a + "in_proj_qkv", conv, h) + _w(a + "in_proj_z", nv * hv, h)
    out += _w(a + "in_proj_b", nv, h) + _w(a + "in_proj_a", nv, h)
    out += [(a + "conv1d.weight", BF16, (conv, 1, k)), (a + "dt_bias", BF16, (nv,)), (a + "A_log", "F32", (nv,))]
    return out + _norm(a + "norm", hv, "F32") + _w(a + "out_proj", h, nv * hv)


def _gdn_qwen3_next(t: dict, p: str) -> Tensors:
    """Qwen3-Next Gated DeltaNet, projections fused and grouped per key head: in_proj_qkvz
    [nk * (2hk + 2r*hv), H] and in_proj_ba [nk * 2r, H] with r = nv / nk; conv1d flat [q | k | v]. All BF16."""
    h, nk, nv, hk, hv, k = _gdn_dims(t)
    r, a = nv // nk, p + "linear_attn."
    conv = 2 * nk * hk + nv * hv
    out = _w(a + "in_proj_qkvz", nk * (2 * hk + 2 * r * hv), h) + _w(a + "in_proj_ba", nk * 2 * r, h)
    out += [(a + "conv1d.weight", BF16, (conv, 1, k)), (a + "dt_bias", BF16, (nv,)), (a + "A_log", BF16, (nv,))]
    return out + _norm(a + "norm", hv) + _w(a + "out_proj", h, nv * hv)


def _mlp(t: dict, i: int, p: str, fused: bool) -> Tensors:
    """Sparse MoE (router `mlp.gate`, routed experts, `shared_expert` and its gate [1, H]) or a dense MLP.

    Routed experts `fused`: `mlp.experts.gate_up_proj` [E, 2I, H] (gate rows, then up) and `mlp.experts.down_proj`
    [E, H, I], no `.weight` suffix; else per expert `mlp.experts.{e}.{gate,up,down}_proj.weight`."""
    h = t["hidden_size"]
    sparse = "num_experts" in t and i not in t.get("mlp_only_layers", []) and (
        (i + 1) % t.get("decoder_sparse_step", 1) == 0)
    if not sparse:
        return _swiglu(p + "mlp", t["intermediate_size"], h)
    e, inter = t["num_experts"], t["moe_intermediate_size"]
    out = _w(p + "mlp.gate", e, h)
    if fused:
        out += [(p + "mlp.experts.gate_up_proj", BF16, (e, 2 * inter, h)),
                (p + "mlp.experts.down_proj", BF16, (e, h, inter))]
    else:
        for x in range(e):
            out += _swiglu(f"{p}mlp.experts.{x}", inter, h)
    out += _swiglu(p + "mlp.shared_expert", t["shared_expert_intermediate_size"], h)
    return out + _w(p + "mlp.shared_expert_gate", 1, h)


def _mtp(t: dict, n_layers: int) -> Tensors:
    """The MTP block: `mtp.fc` [H, 2H] (input cat[embedding, hidden]), its three norms, and n full-attention decoder
    layers `mtp.layers.{k}.*` whose routed experts are stored per expert (also in the BF16 releases). No embedding
    or head of its own (shared with the main model)."""
    h = t["hidden_size"]
    out = _w("mtp.fc", h, 2 * h) + _norm("mtp.pre_fc_norm_embedding", h) + _norm("mtp.pre_fc_norm_hidden", h)
    out += _norm("mtp.norm", h)
    for k in range(n_layers):
        p = f"mtp.layers.{k}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        out += _gated_attention(t, p) + _mlp(t, 0, p, fused=False)
    return out


def qwen35_tensors(cfg: dict) -> Tensors:
    """Every tensor of a Qwen3.5 release (dense `qwen3_5` or MoE `qwen3_5_moe`), in the BF16 layout:
    model.language_model.* (main-layer routed experts fused), lm_head, model.visual.*, then mtp.*."""
    t, lm = cfg["text_config"], "model.language_model."
    h, vocab = t["hidden_size"], t["vocab_size"]
    out = [(lm + "embed_tokens.weight", BF16, (vocab, h))]
    for i, kind in enumerate(t["layer_types"]):
        p = f"{lm}layers.{i}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        out += _gdn_qwen35(t, p) if kind == "linear_attention" else _gated_attention(t, p)
        out += _mlp(t, i, p, fused=True)
    out += _norm(lm + "norm", h) + _w("lm_head", vocab, h)
    return out + qwen3_vision_tensors(cfg["vision_config"]) + _mtp(t, t["mtp_num_hidden_layers"])


def qwen3_next_tensors(cfg: dict) -> Tensors:
    """Every tensor of Qwen3-Next (text only, flat `model.layers.{i}.`): fused GDN projections, gated attention,
    routed experts per expert, shared expert and gate; then norm, lm_head and the MTP layer(s)."""
    h, vocab = cfg["hidden_size"], cfg["vocab_size"]
    kinds = cfg.get("layer_types") or layer_types(cfg["num_hidden_layers"], cfg["full_attention_interval"])
    out = [("model.embed_tokens.weight", BF16, (vocab, h))]
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        out += _gdn_qwen3_next(cfg, p) if kind == "linear_attention" else _gated_attention(cfg, p)
        out += _mlp(cfg, i, p, fused=False)
    out += _norm("model.norm", h) + _w("lm_head", vocab, h)
    return out + _mtp(cfg, cfg.get("num_nextn_predict_layers", QWEN3_NEXT_MTP_LAYERS))


# ---------------------------------------------------------------------------------------------------------------------
# Qwen/Qwen3.5-27B-FP8 (Qwen's block FP8: F8_E4M3 weights, F32 weight_scale_inv per 128x128 block)

def qwen35_fp8_exclusions(cfg: dict) -> list[str]:
    """The official Qwen3.5-27B-FP8 `modules_to_not_convert` (259 entries for 27B), sorted: lm_head, the embedding,
    conv1d / in_proj_a / in_proj_b of every GDN layer, every vision linear, patch_embed, pos_embed, and mtp.fc."""
    t, v = cfg["text_config"], cfg["vision_config"]
    out = ["lm_head", "model.language_model.embed_tokens", "mtp.fc", "model.visual.merger.linear_fc1",
           "model.visual.merger.linear_fc2", "model.visual.patch_embed.proj", "model.visual.pos_embed"]
    for i, kind in enumerate(t["layer_types"]):
        if kind == "linear_attention":
            out += [f"model.language_model.layers.{i}.linear_attn.{m}" for m in ("conv1d", "in_proj_a", "in_proj_b")]
    for b in range(v["depth"]):
        out += [f"model.visual.blocks.{b}.{m}" for m in ("attn.proj", "attn.qkv", "mlp.linear_fc1", "mlp.linear_fc2")]
    return sorted(set(out))


# activation_scheme / quant_method / weight_block_size / modules_to_not_convert: Qwen's FP8 releases; "fmt" as in
# Qwen/Qwen3-Next-80B-A3B-Instruct-FP8's file. Unconfirmed for this repo: "fmt", and whether it also carries
# weight_per_tensor / act_per_tensor (false) and scale_fmt ("float"), as newer transformers write.
QWEN35_27B_FP8_CONFIG = {
    **QWEN35_27B_CONFIG,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128],
                            "modules_to_not_convert": qwen35_fp8_exclusions(QWEN35_27B_CONFIG)},
}


def qwen35_27b_fp8_tensors(cfg: dict) -> Tensors:
    """The BF16 layout converted the official way: every 2-D `.weight` whose dims are multiples of the block and
    whose module is not in modules_to_not_convert becomes F8_E4M3, followed by its F32 `weight_scale_inv`
    [ceil(out/128), ceil(in/128)]; everything else keeps its dtype (A_log, linear_attn.norm F32).

    That quantizes in_proj_qkv, in_proj_z, out_proj, q/k/v/o_proj and the MLPs of the text stack (400 weights) and
    the MTP layer's attention and MLP (7; unconfirmed for Qwen's file)."""
    qc = cfg["quantization_config"]
    excluded, (bn, bk) = qc["modules_to_not_convert"], qc["weight_block_size"]
    out: Tensors = []
    for name, dtype, shape in qwen35_tensors(cfg):
        module = name.removesuffix(".weight")
        if (name.endswith(".weight") and len(shape) == 2 and shape[0] % bn == 0 and shape[1] % bk == 0
                and not any(module == m or module.startswith(m + ".") for m in excluded)):
            out += [(name, "F8_E4M3", shape), (module + ".weight_scale_inv", "F32", (-(-shape[0] // bn),
                                                                                     -(-shape[1] // bk)))]
        else:
            out.append((name, dtype, shape))
    return out


# hub name -> (config, tensors function)
REAL_GDN_MODELS = {
    "Qwen/Qwen3.5-397B-A17B": (QWEN35_397B_CONFIG, qwen35_tensors),
    "Qwen/Qwen3.5-122B-A10B": (QWEN35_122B_CONFIG, qwen35_tensors),
    "Qwen/Qwen3.5-27B": (QWEN35_27B_CONFIG, qwen35_tensors),
    "Qwen/Qwen3.5-27B-FP8": (QWEN35_27B_FP8_CONFIG, qwen35_27b_fp8_tensors),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": (QWEN3_NEXT_80B_CONFIG, qwen3_next_tensors),
}
