"""Inkling and Inkling-Small as published (thinkingmachines/Inkling, thinkingmachines/Inkling-Small:
`inkling_mm_model`): config.json values and the language model's tensor list, for header-only plans at TP 3 and 6.

Where the facts come from (stored public copies only; the Hub files could not be read offline):
- text_config: a public checker quotes both releases' text_config "field by field, as a literal" (PUBLISHED_INKLING_TEXT
  and PUBLISHED_INKLING_SMALL_TEXT), and loader tests agree: Inkling hidden 6144, 66 layers (global every 6th:
  local_layer_ids lists the others), 64 heads, 8 global / 16 sliding kv heads of 128, d_rel 16, rel_extent 1024,
  window 512, conv kernel 4, dense_mlp_idx 2 (dense 24576), 256 experts (top 6) of 3072 and 2 shared, vocab 201024
  (the unembedding holds 200058 rows: unpadded_vocab_size); Inkling-Small hidden 4096, 42 layers, 32 heads, 8 / 8 kv,
  dense 16384, experts 2048.
- mtp_config: {"num_nextn_predict_layers": 8, "chain_hidden_post_norm": false, "local_layer_ids": [0, 2, 4, 5, 6, 7]}
  "as shipped in both Inkling-NVFP4-full and Inkling-small-NVFP4" (an inference engine's test; one other copy says 1
  depth): taken for both releases, unconfirmed for the BF16 ones.
- Tensors: a header checker's expected shapes for the text trunk (`model.llm.*`: per-kv-head k/v short convolutions,
  `rel_logits_proj.proj` [d_rel, rel_extent] (the window on sliding layers), fused experts `experts.w13_weight`
  [E, 2I, H], the router's weight over routed + shared experts), and vLLM's InklingMTP loader for `model.mtp.*`. The
  towers' tensors were not confirmed: two stand-ins (`model.visual.layers.linear_0.weight`,
  `model.audio.encoder.weight`) are planned as copied, as every tower tensor is. BF16 throughout.
- The text-only format vLLM serves as InklingForCausalLM (`inkling_model`): no release ships it (text-only configs
  appear in loaders' tests and fixtures, with the `model.llm.*` names); `text_only` derives it from a release.
"""

from __future__ import annotations

_MTP = {"num_nextn_predict_layers": 8, "chain_hidden_post_norm": False, "local_layer_ids": [0, 2, 4, 5, 6, 7]}


def _text(hidden: int, layers: int, heads: int, kv: int, swa_kv: int, dense: int, expert: int) -> dict:
    return {"model_type": "inkling_text", "model_max_length": 1048576, "hidden_size": hidden,
            "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": 128,
            "d_rel": 16, "rel_extent": 1024, "log_scaling_n_floor": 128000, "log_scaling_alpha": 0.1,
            "local_layer_ids": [i for i in range(layers) if (i + 1) % 6], "dense_mlp_idx": 2, "use_sconv": True,
            "sconv_kernel_size": 4, "swa_head_dim": 128, "swa_num_attention_heads": heads,
            "swa_num_key_value_heads": swa_kv, "sliding_window_size": 512, "n_routed_experts": 256,
            "num_experts_per_tok": 6, "n_shared_experts": 2, "dense_intermediate_size": dense,
            "intermediate_size": expert, "vocab_size": 201024, "rms_norm_eps": 1e-6, "route_scale": 8.0,
            "logits_mup_width_multiplier": 24.0, "gate_activation": "sigmoid", "norm_after_topk": True,
            "shared_expert_sink": True, "use_embed_norm": True, "use_gate_bias": True, "use_global_scale": True}


INKLING = {"architectures": ["InklingForConditionalGeneration"], "model_type": "inkling_mm_model",
           "text_config": {**_text(6144, 66, 64, 8, 16, 24576, 3072), "unpadded_vocab_size": 200058},
           "mtp_config": dict(_MTP)}
INKLING_SMALL = {"architectures": ["InklingForConditionalGeneration"], "model_type": "inkling_mm_model",
                 "text_config": _text(4096, 42, 32, 8, 8, 16384, 2048), "mtp_config": dict(_MTP)}


def text_only(cfg: dict) -> dict:
    """The text-only format of a release as vLLM serves it (InklingForCausalLM, model_type inkling_model): its
    text_config at the top of config.json with the mtp_config; tensors() then leaves the towers out."""
    return {**cfg["text_config"], "architectures": ["InklingForCausalLM"], "model_type": "inkling_model",
            "mtp_config": dict(cfg["mtp_config"])}


INKLING_TEXT_ONLY = text_only(INKLING)  # the `inkling_model` adapter's config (tests/test_lossless.py reads it)


def tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of the language model, the MTP depths and (a multimodal config) two tower stand-ins, BF16."""
    t, bf = cfg.get("text_config") or cfg, "BF16"
    h, k, hd, d_rel = t["hidden_size"], t["sconv_kernel_size"], t["head_dim"], t["d_rel"]
    heads, local = t["num_attention_heads"], set(t["local_layer_ids"])
    ne, ns, inter = t["n_routed_experts"], t["n_shared_experts"], t["intermediate_size"]

    def block(p: str, swa: bool, dense: bool) -> list:
        kv = t["swa_num_key_value_heads"] if swa else t["num_key_value_heads"]
        out = [(p + n + ".weight", bf, (h,)) for n in ("attn_norm", "mlp_norm")]
        out += [(p + n + ".weight", bf, (h, 1, k)) for n in ("attn_sconv", "mlp_sconv")]
        out += [(p + "attn.q_norm.weight", bf, (hd,)), (p + "attn.k_norm.weight", bf, (hd,)),
                (p + "attn.k_sconv.weight", bf, (kv * hd, 1, k)), (p + "attn.v_sconv.weight", bf, (kv * hd, 1, k)),
                (p + "attn.rel_logits_proj.proj", bf, (d_rel, t["sliding_window_size"] if swa else t["rel_extent"])),
                (p + "attn.wq_du.weight", bf, (heads * hd, h)), (p + "attn.wk_dv.weight", bf, (kv * hd, h)),
                (p + "attn.wv_dv.weight", bf, (kv * hd, h)), (p + "attn.wr_du.weight", bf, (heads * d_rel, h)),
                (p + "attn.wo_ud.weight", bf, (h, heads * hd))]
        if dense:
            i = t["dense_intermediate_size"]
            return out + [(p + "mlp.global_scale", bf, (1,)), (p + "mlp.w13_dn.weight", bf, (2 * i, h)),
                          (p + "mlp.w2_md.weight", bf, (h, i))]
        return out + [(p + "mlp.experts.w13_weight", bf, (ne, 2 * inter, h)),
                      (p + "mlp.experts.w2_weight", bf, (ne, h, inter)), (p + "mlp.gate.bias", "F32", (ne,)),
                      (p + "mlp.gate.global_scale", "F32", (1,)), (p + "mlp.gate.weight", bf, (ne + ns, h)),
                      (p + "mlp.shared_experts.shared_w13_weight", bf, (ns, 2 * inter, h)),
                      (p + "mlp.shared_experts.shared_w2_weight", bf, (ns, h, inter))]

    out = [("model.llm.embed.weight", bf, (t["vocab_size"], h)), ("model.llm.embed_norm.weight", bf, (h,)),
           ("model.llm.norm.weight", bf, (h,)),
           ("model.llm.unembed.weight", bf, (t.get("unpadded_vocab_size") or t["vocab_size"], h))]
    if "text_config" in cfg:
        out += [("model.visual.layers.linear_0.weight", bf, (1024, 192)), ("model.audio.encoder.weight", bf, (20480, h))]
    for layer in range(t["num_hidden_layers"]):
        out += block(f"model.llm.layers.{layer}.", layer in local, layer < t["dense_mlp_idx"])
    mtp = cfg.get("mtp_config") or {}
    for depth in range(int(mtp.get("num_nextn_predict_layers") or 0)):
        p = f"model.mtp.layers.{depth}."
        out += [(p + "hidden_norm.weight", bf, (h,)), (p + "embed_norm.weight", bf, (h,)),
                (p + "input_proj.weight", bf, (h, 2 * h))]
        out += block(p + "transformer_block.", depth in set(mtp.get("local_layer_ids") or []), True)
    return out
