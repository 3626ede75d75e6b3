"""Step-3.7-Flash as published (stepfun-ai/Step-3.7-Flash): config.json values and the tensor list, for header-only
plans of the real layout at TP 3 and 6.

Where the facts come from (stored public copies only; the Hub files could not be read offline):

- Text config: hidden 4096, 45 layers, full attention at every 4th layer (0, 4, ..., 44; 12 full, 33 sliding,
  window 512), 64 heads / 8 kv heads (`num_attention_groups`) / head_dim 128 in full layers and 96 / 8 / 128 in
  sliding ones (`attention_other_setting`), the head-wise gate, 288 experts top-8 of width 1280 with a shared expert
  of 1280 from layer 3 on (`moe_layers_enum`), vocab 128896, 3 MTP layers: these agree across independent public
  copies (a capacity planner's "real Step-3.7-Flash shape" test, a Rust loader's config test, an NVFP4 launcher,
  transformers' Step3p7 docstring checkpoint). The dense intermediate_size is 11264 in three copies and 12288 in
  one MLX test (which may be Step-3.5-Flash's): 11264 is used; unconfirmed.
- The MTP layers' attention type (the `layer_types` entries past num_hidden_layers, which vLLM's Step3p5MTP reads)
  could not be confirmed: full attention is assumed here (transformers' default for missing entries). Their names
  are vLLM's Step3p5MTP loader's: `model.layers.{45,46,47}.{enorm,hnorm,eh_proj,shared_head.norm,
  shared_head.output}` beside a decoder layer with a dense MLP (not in moe_layers_enum).
- Vision: transformers' Step3p7VisionConfig defaults (the documented checkpoint): width 1536, 47 layers, 16 heads,
  patch 14, image 728, MLP 8960; tensor names as transformers' save writes them (the hub's `vision_model.*`). The
  tower is copied, so these only change the tensor count and bytes.
- Storage: BF16 (the router and its bias F32, as vLLM's GateLinear reads the router); unconfirmed for the Hub file.
"""

from __future__ import annotations

N_LAYERS, N_MTP = 45, 3
TYPES = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(N_LAYERS)] + ["full_attention"] * N_MTP

STEP37_FLASH = {
    "architectures": ["Step3p7ForConditionalGeneration"], "model_type": "step3p7", "projector_bias": False,
    "image_token_id": 151679,
    "text_config": {
        "model_type": "step3p5", "hidden_size": 4096, "num_hidden_layers": N_LAYERS, "vocab_size": 128896,
        "num_attention_heads": 64, "num_attention_groups": 8, "head_dim": 128,
        "attention_other_setting": {"attention_type": "sliding_attention", "num_attention_heads": 96,
                                    "num_attention_groups": 8, "head_dim": 128, "true_head_dim": 128},
        "layer_types": TYPES, "sliding_window": 512, "att_impl_type": "GQA", "use_head_wise_attn_gate": True,
        "use_qk_norm": True, "intermediate_size": 11264, "moe_intermediate_size": 1280, "share_expert_dim": 1280,
        "moe_num_experts": 288, "moe_top_k": 8, "moe_layers_enum": ",".join(str(i) for i in range(3, N_LAYERS)),
        "moe_router_activation": "sigmoid", "moe_router_scaling_factor": 3.0, "use_moe_router_bias": True,
        "need_fp32_gate": True, "norm_expert_weight": True, "num_nextn_predict_layers": N_MTP,
        "rope_theta": [5000000.0 if t == "full_attention" else 10000.0 for t in TYPES],
        "partial_rotary_factors": [0.5 if t == "full_attention" else 1.0 for t in TYPES],
        "yarn_only_types": ["full_attention"], "rms_norm_eps": 1e-5, "max_position_embeddings": 262144,
    },
    "vision_config": {"width": 1536, "layers": 47, "heads": 16, "image_size": 728, "patch_size": 14},
}


def tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every tensor."""
    t = cfg["text_config"]
    h, hd, vocab = t["hidden_size"], t["head_dim"], t["vocab_size"]
    kv = t["num_attention_groups"]
    moe = {int(i) for i in t["moe_layers_enum"].split(",")}
    bf = "BF16"
    out = [("model.embed_tokens.weight", bf, (vocab, h)), ("model.norm.weight", bf, (h,)), ("lm_head.weight", bf, (vocab, h))]
    for n, kind in enumerate(t["layer_types"]):
        p = f"model.layers.{n}."
        heads = t["attention_other_setting"]["num_attention_heads"] if kind == "sliding_attention" else t["num_attention_heads"]
        out += [(p + "self_attn.q_proj.weight", bf, (heads * hd, h)), (p + "self_attn.k_proj.weight", bf, (kv * hd, h)),
                (p + "self_attn.v_proj.weight", bf, (kv * hd, h)), (p + "self_attn.o_proj.weight", bf, (h, heads * hd)),
                (p + "self_attn.g_proj.weight", bf, (heads, h)), (p + "self_attn.q_norm.weight", bf, (hd,)),
                (p + "self_attn.k_norm.weight", bf, (hd,)), (p + "input_layernorm.weight", bf, (h,)),
                (p + "post_attention_layernorm.weight", bf, (h,))]
        if n in moe:
            e, i, s = t["moe_num_experts"], t["moe_intermediate_size"], t["share_expert_dim"]
            out += [(p + "moe.gate.weight", "F32", (e, h)), (p + "moe.router_bias", "F32", (e,)),
                    (p + "moe.gate_proj.weight", bf, (e, i, h)), (p + "moe.up_proj.weight", bf, (e, i, h)),
                    (p + "moe.down_proj.weight", bf, (e, h, i)), (p + "share_expert.gate_proj.weight", bf, (s, h)),
                    (p + "share_expert.up_proj.weight", bf, (s, h)), (p + "share_expert.down_proj.weight", bf, (h, s))]
        else:
            i = t["intermediate_size"]
            out += [(p + "mlp.gate_proj.weight", bf, (i, h)), (p + "mlp.up_proj.weight", bf, (i, h)),
                    (p + "mlp.down_proj.weight", bf, (h, i))]
        if n >= t["num_hidden_layers"]:  # an MTP layer's own modules
            out += [(p + "enorm.weight", bf, (h,)), (p + "hnorm.weight", bf, (h,)), (p + "eh_proj.weight", bf, (h, 2 * h)),
                    (p + "shared_head.norm.weight", bf, (h,)), (p + "shared_head.output.weight", bf, (vocab, h))]
    v = cfg["vision_config"]
    w, m, g = v["width"], int(v["width"] * 8960 / 1536), v["image_size"] // v["patch_size"]
    out += [("vision_model.conv1.weight", bf, (w, 3, v["patch_size"], v["patch_size"])),
            ("vision_model.ln_pre.weight", bf, (w,)), ("vision_model.ln_pre.bias", bf, (w,)),
            ("vision_model.positional_embedding", bf, (g * g, w)),
            ("vision_model.vit_downsampler1.weight", bf, (2 * w, w, 3, 3)), ("vision_model.vit_downsampler1.bias", bf, (2 * w,)),
            ("vision_model.vit_downsampler2.weight", bf, (4 * w, 2 * w, 3, 3)),
            ("vision_model.vit_downsampler2.bias", bf, (4 * w,)), ("vit_large_projector.weight", bf, (h, 4 * w))]
    for n in range(v["layers"]):
        p = f"vision_model.transformer.resblocks.{n}."
        out += [(p + "attn.in_proj_weight", bf, (3 * w, w)), (p + "attn.in_proj_bias", bf, (3 * w,)),
                (p + "attn.out_proj.weight", bf, (w, w)), (p + "attn.out_proj.bias", bf, (w,)),
                (p + "ln_1.weight", bf, (w,)), (p + "ln_1.bias", bf, (w,)), (p + "ln_2.weight", bf, (w,)),
                (p + "ln_2.bias", bf, (w,)), (p + "ls_1.gamma", bf, (w,)), (p + "ls_2.gamma", bf, (w,)),
                (p + "mlp.c_fc.weight", bf, (m, w)), (p + "mlp.c_fc.bias", bf, (m,)),
                (p + "mlp.c_proj.weight", bf, (w, m)), (p + "mlp.c_proj.bias", bf, (w,))]
    return out


# Step-3.5-Flash (stepfun-ai/Step-3.5-Flash, Step3p5ForCausalLM): the same language model at the top of config.json,
# without the tower. Its dims as public copies state them (not read on huggingface.co): a Megatron-Bridge Step-3.5
# conversion test, a remote-code Step3p5Config's defaults, a Step-3.5-Flash benchmark note and a model-zoo class
# agree on hidden 4096, 45 layers + 3 MTP, 64 / 96 heads, 8 kv heads of 128, 288 experts top-8 of 1280, a shared
# expert of 1280, dense layers 0-2 of 11264, window 512, vocab 128896.
STEP35_FLASH = {**STEP37_FLASH["text_config"], "architectures": ["Step3p5ForCausalLM"], "model_type": "step3p5"}


def step35_tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every Step-3.5 tensor: Step-3.7's without the tower."""
    return [t for t in tensors({"text_config": cfg, "vision_config": STEP37_FLASH["vision_config"]})
            if not t[0].startswith(("vision_model.", "vit_"))]
