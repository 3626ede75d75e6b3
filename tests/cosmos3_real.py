"""The published Cosmos3 unified repos' layout, header-only (no public config.json or index could be read offline).

nvidia/Cosmos3-Nano (16B) and Cosmos3-Super (65B) are Diffusers pipelines: the root config.json is transformers'
Cosmos3OmniConfig (the reasoner, Qwen3-VL's text and vision configs), `transformer/` holds the reasoner's language
model and the generator (diffusers' Cosmos3OmniTransformer, flat names), `vision_encoder/` the Qwen3-VL tower.
Dims: Nano's are diffusers' Cosmos3OmniTransformer defaults (hidden 4096, 36 layers, 32 / 8 heads of 128, MLP
12288, rope_theta 5e6), which are Qwen3-VL-8B's exactly; the public framework's checkpoint names say 16B = 2 x 8B
and 64B = 2 x 32B (`cosmos3_ga_16bm8b`, `cosmos3_ga_64bm32b`), so Super is taken as Qwen3-VL-32B's (hidden 5120, 64
layers, 64 / 8 heads of 128, MLP 25600), which a public test's "16 divides both Cosmos3 Q layouts ... 8 KV heads"
agrees with. The row in docs/families.md carries † for that reason.
"""

from __future__ import annotations

import json
from pathlib import Path

from hubpad.testing import write_checkpoint
from tests.vlm_real import BF16, QWEN3_VL_8B_CONFIG, _linear, _norm, qwen3_vision_tensors

_VISION = QWEN3_VL_8B_CONFIG["vision_config"]
_TEXT = QWEN3_VL_8B_CONFIG["text_config"]


def _config(hidden: int, layers: int, heads: int, inter: int) -> dict:
    return {"architectures": ["Cosmos3ForConditionalGeneration"], "model_type": "cosmos3_omni",
            "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
            "vision_end_token_id": 151653, "tie_word_embeddings": False,
            "text_config": {**_TEXT, "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
                            "intermediate_size": inter},
            "vision_config": {**_VISION, "out_hidden_size": hidden}}


NANO = _config(4096, 36, 32, 12288)
SUPER = _config(5120, 64, 64, 25600)


def transformer_tensors(cfg: dict) -> list:
    """transformer/: the reasoner's language model and the generator, in diffusers' flat names (BF16)."""
    t = cfg["text_config"]
    h, hd, heads, kv, inter = t["hidden_size"], t["head_dim"], t["num_attention_heads"], t["num_key_value_heads"], \
        t["intermediate_size"]
    out = [("embed_tokens.weight", BF16, (t["vocab_size"], h))]
    for i in range(t["num_hidden_layers"]):
        p, a = f"layers.{i}.", f"layers.{i}.self_attn."
        for gen in ("", "_moe_gen"):
            out += _norm(p + "input_layernorm" + gen, h) + _norm(p + "post_attention_layernorm" + gen, h)
            out += (_linear(p + f"mlp{gen}.gate_proj", inter, h) + _linear(p + f"mlp{gen}.up_proj", inter, h)
                    + _linear(p + f"mlp{gen}.down_proj", h, inter))
        for q, k, v, o, nq, nk in (("to_q", "to_k", "to_v", "to_out", "norm_q", "norm_k"),
                                   ("add_q_proj", "add_k_proj", "add_v_proj", "to_add_out", "norm_added_q",
                                    "norm_added_k")):
            out += (_linear(a + q, heads * hd, h) + _linear(a + k, kv * hd, h) + _linear(a + v, kv * hd, h)
                    + _linear(a + o, h, heads * hd) + _norm(a + nq, hd) + _norm(a + nk, hd))
    out += _norm("norm", h) + _norm("norm_moe_gen", h) + [("lm_head.weight", BF16, (t["vocab_size"], h))]
    out += _linear("proj_in", h, 192, True) + _linear("proj_out", 192, h, True)
    out += _linear("time_embedder.linear_1", h, 256, True) + _linear("time_embedder.linear_2", h, h, True)
    return out


def write_unified(path: Path, cfg: dict) -> Path:
    """A header-only unified repo: transformer/ (8 shards and an index, diffusers' config.json), vision_encoder/
    (one shard and an index), the root config.json."""
    t = cfg["text_config"]
    diffusers = {"_class_name": "Cosmos3OmniTransformer", **{k: t[k] for k in (
        "head_dim", "hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers",
        "num_key_value_heads", "vocab_size")}}
    write_checkpoint(path / "transformer", diffusers, transformer_tensors(cfg), n_shards=8, header_only=True)
    write_checkpoint(path / "vision_encoder", {"model_type": "qwen3_vl"},
                     qwen3_vision_tensors(cfg["vision_config"], prefix=""), n_shards=1, header_only=True)
    (path / "config.json").write_text(json.dumps(cfg))
    return path
