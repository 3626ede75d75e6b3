"""meta-models/Muse-Glimmer-30B's published layout, header-only (issue 33's table, tests/test_registry_rows.py).

The Hub cannot be reached from this machine: the dims are transformers' MuseGlimmerConfig defaults (its docstring's
checkpoint is meta-models/Muse-Glimmer-30B), which public configs of the checkpoint repeat (text: hidden 6656,
intermediate 19968, 52 layers, 32 / 2 heads of 128, vocab 202048; vision: 16 heads, hidden 1536, 50 layers,
intermediate 8960, patch 14, temporal patch 2, merge 2, 32 x 32 position grid; adapter 6144 -> 4096), so the row
carries †. Names are transformers' MuseGlimmerForConditionalGeneration state dict.
"""

from __future__ import annotations

TEXT = dict(model_type="muse_glimmer_text", vocab_size=202048, hidden_size=6656, intermediate_size=19968,
            num_hidden_layers=52, num_attention_heads=32, num_key_value_heads=2, head_dim=128, sliding_window=2048,
            hidden_activation="silu", final_logit_softcapping=20.0, qk_scale_factor=3.87,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, tie_word_embeddings=False)
VISION = dict(model_type="muse_glimmer_vision", hidden_size=1536, num_attention_heads=16, num_hidden_layers=50,
              intermediate_size=8960, patch_size=14, patch_temporal=2, merge_size=2, pos_emb_height=32,
              pos_emb_width=32)
MUSE_GLIMMER_30B = dict(architectures=["MuseGlimmerForConditionalGeneration"], model_type="muse_glimmer",
                        image_token_id=200092, video_token_id=200091, out_hidden_size=6144,
                        projector_hidden_size=4096, text_config=TEXT, vision_config=VISION)


def tensors(c: dict) -> list:
    t, v, bf = c["text_config"], c["vision_config"], "BF16"
    h, hd, heads, kv, inter = (t["hidden_size"], t["head_dim"], t["num_attention_heads"], t["num_key_value_heads"],
                               t["intermediate_size"])
    lm = "model.language_model."
    out = [(lm + "embed_tokens.weight", bf, (t["vocab_size"], h)), (lm + "norm.weight", bf, (h,)),
           ("lm_head.weight", bf, (t["vocab_size"], h))]
    for i in range(t["num_hidden_layers"]):
        p = f"{lm}layers.{i}."
        out += [(p + n + ".weight", bf, (h,)) for n in ("input_layernorm", "post_attention_layernorm",
                                                       "pre_feedforward_layernorm", "post_feedforward_layernorm")]
        out += [(p + "self_attn.q_proj.weight", bf, (heads * hd, h)), (p + "self_attn.gate_proj.weight", bf, (heads * hd, h)),
                (p + "self_attn.k_proj.weight", bf, (kv * hd, h)), (p + "self_attn.v_proj.weight", bf, (kv * hd, h)),
                (p + "self_attn.o_proj.weight", bf, (h, heads * hd)), (p + "mlp.gate_proj.weight", bf, (inter, h)),
                (p + "mlp.up_proj.weight", bf, (inter, h)), (p + "mlp.down_proj.weight", bf, (h, inter))]
    vh, vi, vt = v["hidden_size"], v["intermediate_size"], "model.vision_tower."
    out += [(vt + "patch_embedder.patch_embedding.weight", bf, (vh, 3 * v["patch_temporal"] * v["patch_size"] ** 2)),
            (vt + "patch_embedder.position_embedding_table.weight", bf, (v["pos_emb_height"] * v["pos_emb_width"], vh))]
    out += [(vt + f"{n}.{s}", bf, (vh,)) for n in ("ln_pre", "ln_post") for s in ("weight", "bias")]
    for i in range(v["num_hidden_layers"]):
        p = f"{vt}layers.{i}."
        out += [(p + f"{n}.{s}", bf, (vh,)) for n in ("norm1", "norm2") for s in ("weight", "bias")]
        for n in ("q_proj", "k_proj", "v_proj", "proj"):
            out += [(p + f"attn.{n}.weight", bf, (vh, vh)), (p + f"attn.{n}.bias", bf, (vh,))]
        out += [(p + "mlp.fc1.weight", bf, (vi, vh)), (p + "mlp.fc1.bias", bf, (vi,)),
                (p + "mlp.fc2.weight", bf, (vh, vi)), (p + "mlp.fc2.bias", bf, (vh,))]
    ph = c["projector_hidden_size"]
    out += [("model.vision_adapter.fc1.weight", bf, (ph, c["out_hidden_size"])),
            ("model.vision_adapter.fc2.weight", bf, (ph, ph)), ("model.vision_projection.weight", bf, (h, ph))]
    return out
