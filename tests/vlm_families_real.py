"""EXAONE 4.5 as published, for header-only plans at TP 3 and 6 (tests/test_vlm_families.py,
tests/test_registry_rows.py). No torch.

LGAI-EXAONE/EXAONE-4.5-33B (stored public copies only, the Hub file could not be read offline): TensorRT-LLM's
Exaone4_5 test config (a copy of a 2026-03 release candidate's config.json) and ollama's EXAONE 4.5 config tests agree
on the language model: hidden 5120, 64 layers (3 sliding of 4096 then 1 global), 40 heads / 8 kv (no head_dim key:
5120 // 40 = 128), intermediate 27392, vocab 153600, untied head; the TRT copy also repeats hidden_size, the heads,
kv heads and intermediate_size at the top level beside text_config. The tower (TRT copy; the GGUF mmproj header
of LGAI-EXAONE/EXAONE-4.5-33B-GGUF agrees: 28 blocks, width 2048, 32 heads / 8 kv, projection 5120): depth 28, width
2048, 32 heads / 8 kv heads of 64, gated MLP 5120 with biases, patch 14, temporal patch 2, merge 2 -> out 5120.
Tensor names are transformers' Exaone4_5_ForConditionalGeneration's (`model.language_model.*`, `model.visual.*`,
`lm_head`), BF16 throughout. vLLM's Exaone4_5_MTP reads MTP layers under `mtp.`; whether the release ships them was
not seen, so they are left out here.
"""

from __future__ import annotations

from tests.gqa_real import EXAONE4_32B, tensors as gqa_tensors

BF = "BF16"
_TEXT = {**{k: v for k, v in EXAONE4_32B.items() if k not in ("architectures", "head_dim")},
         "vocab_size": 153600, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 1000000.0}
_VISION = {"model_type": "exaone4_5_vision", "depth": 28, "hidden_size": 2048, "intermediate_size": 5120,
           "num_heads": 32, "num_key_value_heads": 8, "out_hidden_size": 5120, "patch_size": 14,
           "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [6, 13, 20, 27],
           "hidden_act": "silu", "in_channels": 3}
EXAONE45_33B = {
    "architectures": ["Exaone4_5_ForConditionalGeneration"], "model_type": "exaone4_5",
    "hidden_size": 5120, "intermediate_size": 27392, "num_attention_heads": 40, "num_key_value_heads": 8,
    "num_hidden_layers": 64, "vocab_size": 153600, "tie_word_embeddings": False,
    "image_token_id": 67, "video_token_id": 68, "vision_start_token_id": 73, "vision_end_token_id": 74,
    "text_config": {**_TEXT, "model_type": "exaone4_5_text", "architectures": ["Exaone4ForCausalLM"]},
    "vision_config": _VISION,
}


def _tower(v: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    w, hd, i = v["hidden_size"], v["hidden_size"] // v["num_heads"], v["intermediate_size"]
    qkv = (v["num_heads"] + 2 * v["num_key_value_heads"]) * hd
    merged = w * v["spatial_merge_size"] ** 2
    out = [("model.visual.patch_embed.proj.weight", BF, (w, 3, v["temporal_patch_size"], v["patch_size"],
                                                         v["patch_size"]))]
    for b in range(v["depth"]):
        p = f"model.visual.blocks.{b}."
        out += [(p + "norm1.weight", BF, (w,)), (p + "norm2.weight", BF, (w,)),
                (p + "attn.qkv.weight", BF, (qkv, w)), (p + "attn.qkv.bias", BF, (qkv,)),
                (p + "attn.proj.weight", BF, (w, w)), (p + "attn.proj.bias", BF, (w,))]
        for proj, shape in (("gate_proj", (i, w)), ("up_proj", (i, w)), ("down_proj", (w, i))):
            out += [(p + f"mlp.{proj}.weight", BF, shape), (p + f"mlp.{proj}.bias", BF, (shape[0],))]
    return out + [("model.visual.merger.ln_q.weight", BF, (w,)),
                  ("model.visual.merger.mlp.0.weight", BF, (merged, merged)),
                  ("model.visual.merger.mlp.0.bias", BF, (merged,)),
                  ("model.visual.merger.mlp.2.weight", BF, (v["out_hidden_size"], merged)),
                  ("model.visual.merger.mlp.2.bias", BF, (v["out_hidden_size"],))]


def exaone45_tensors(c: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """Every tensor of EXAONE-4.5-33B: the tower, then EXAONE 4's language model under `model.language_model.`."""
    text = {**c["text_config"], "model_type": "exaone4"}
    lm = [(n.replace("model.", "model.language_model.", 1) if n.startswith("model.") else n, d, s)
          for n, d, s in gqa_tensors(text)]
    return _tower(c["vision_config"]) + lm
