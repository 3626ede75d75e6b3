"""Public test and example helper: the tiny Hy3-shaped checkpoint in RedHatAI/Hy3-NVFP4-FP8's layout.

FP8-block attention, NVFP4 dense MLP and experts (compressed-tensors names), BF16 router gates and a BF16
MTP layer at index num_hidden_layers, like the real 178 GB model, in two upstream shards. `hubpad demo`,
the tests and the benchmarks build it; also `write_checkpoint` for any (sparse) layout. No torch, no network.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from hubpad.formats.safetensors import DTYPE_BITS, encode_header

TINY_HY3 = {
    "architectures": ["HYV3ForCausalLM"], "model_type": "hy_v3", "vocab_size": 1000, "hidden_size": 512,
    "intermediate_size": 640, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
    "rope_parameters": {"rope_theta": 11158840.0, "rope_type": "default"}, "qk_norm": True,
    "tie_word_embeddings": False, "num_experts": 6, "num_experts_per_tok": 2, "num_shared_experts": 1,
    "expert_hidden_dim": 384, "moe_intermediate_size": 384, "first_k_dense_replace": 1,
    "route_norm": True, "router_scaling_factor": 2.826, "num_nextn_predict_layers": 1,
    "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
}


UPSTREAM_CARD = """---
license: other
license_name: tiny-hy3-community-license
license_link: LICENSE
base_model: example/Tiny-Hy3
tags:
- nvfp4
- fp8
library_name: transformers
pipeline_tag: text-generation
---
# Tiny-Hy3-NVFP4-FP8

A made-up, randomly initialised stand-in for RedHatAI/Hy3-NVFP4-FP8, used by `hubpad demo`.
"""


def quant_config(n_layers: int) -> dict:
    return {
        "quant_method": "compressed-tensors", "format": "mixed-precision", "quantization_status": "compressed",
        "kv_cache_scheme": None, "global_compression_ratio": None,
        "config_groups": {
            "attention": {"targets": ["re:.*self_attn\\..*"], "format": "float-quantized",
                          "weights": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "block",
                                      "block_structure": [128, 128], "dynamic": False},
                          "input_activations": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "group",
                                                "group_size": 128, "dynamic": True}},
            "experts": {"targets": ["re:.*mlp.*"], "format": "nvfp4-pack-quantized",
                        "weights": {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group",
                                    "group_size": 16, "dynamic": False, "scale_dtype": "torch.float8_e4m3fn"},
                        "input_activations": {"num_bits": 4, "type": "float", "symmetric": True,
                                              "strategy": "tensor_group", "group_size": 16, "dynamic": "local"}},
        },
        "ignore": [f"model.layers.{i}.mlp.router.gate" for i in range(1, n_layers)] + ["lm_head",
                                                                                       f"re:^model.layers.{n_layers}.*"],
    }


def _fp8_linear(name: str, out_f: int, in_f: int) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(f"{name}.weight", "F8_E4M3", (out_f, in_f)),
            (f"{name}.weight_scale", "BF16", (-(-out_f // 128), -(-in_f // 128)))]


def _nvfp4_linear(name: str, out_f: int, in_f: int) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(f"{name}.weight_packed", "U8", (out_f, in_f // 2)),
            (f"{name}.weight_scale", "F8_E4M3", (out_f, in_f // 16)),
            (f"{name}.weight_global_scale", "F32", (1,)),
            (f"{name}.input_global_scale", "F32", (1,))]


def _bf16_linear(name: str, out_f: int, in_f: int) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(f"{name}.weight", "BF16", (out_f, in_f))]


def tiny_hy3_tensors(cfg: dict, layout: str = "redhat") -> list[tuple[str, str, tuple[int, ...]]]:
    """Tensor names, dtypes and shapes of a Hy3 in RedHatAI's layout ("redhat") or tencent's BF16 ("bf16").

    Works for the real Hy3 config too (81 layers with the MTP one, 192 experts); benchmarks and tests use
    that with `write_checkpoint(header_only=True)`.
    """
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    hd, nh, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    n = cfg["num_hidden_layers"]
    out = [("model.embed_tokens.weight", "BF16", (v, h))]
    for layer in range(n + 1):
        p = f"model.layers.{layer}"
        mtp = layer == n
        attn = _bf16_linear if mtp or layout == "bf16" else _fp8_linear
        mlp = _bf16_linear if mtp or layout == "bf16" else _nvfp4_linear
        out += [(f"{p}.input_layernorm.weight", "BF16", (h,)), (f"{p}.post_attention_layernorm.weight", "BF16", (h,))]
        out += attn(f"{p}.self_attn.q_proj", nh * hd, h) + attn(f"{p}.self_attn.k_proj", nkv * hd, h)
        out += attn(f"{p}.self_attn.v_proj", nkv * hd, h) + attn(f"{p}.self_attn.o_proj", h, nh * hd)
        out += [(f"{p}.self_attn.q_norm.weight", "BF16", (hd,)), (f"{p}.self_attn.k_norm.weight", "BF16", (hd,))]
        if layer < cfg["first_k_dense_replace"]:
            i = cfg["intermediate_size"]
            out += mlp(f"{p}.mlp.gate_proj", i, h) + mlp(f"{p}.mlp.up_proj", i, h) + mlp(f"{p}.mlp.down_proj", h, i)
        else:
            e = cfg["expert_hidden_dim"]
            out += [(f"{p}.mlp.router.gate.weight", "BF16", (cfg["num_experts"], h)),
                    (f"{p}.mlp.expert_bias", "F32", (cfg["num_experts"],))]
            for x in [f"{p}.mlp.shared_mlp"] + [f"{p}.mlp.experts.{k}" for k in range(cfg["num_experts"])]:
                out += mlp(f"{x}.gate_proj", e, h) + mlp(f"{x}.up_proj", e, h) + mlp(f"{x}.down_proj", h, e)
        if mtp:
            out += [(f"{p}.enorm.weight", "BF16", (h,)), (f"{p}.hnorm.weight", "BF16", (h,)),
                    (f"{p}.eh_proj.weight", "BF16", (h, 2 * h)), (f"{p}.final_layernorm.weight", "BF16", (h,))]
    out += [("model.norm.weight", "BF16", (h,)), ("lm_head.weight", "BF16", (v, h))]
    return out


def _data(dtype: str, shape: tuple[int, ...], rng: random.Random) -> bytes:
    n = 1
    for d in shape:
        n *= d
    nbytes = n * DTYPE_BITS[dtype] // 8
    raw = bytearray(rng.randbytes(nbytes))
    if dtype == "F8_E4M3":  # no NaN codes (0x7F/0xFF), scales positive
        raw = bytearray(b & 0x76 for b in raw)
    elif dtype in ("F32",) and n <= 4:
        raw = bytearray(b"\x00\x00\x80\x3f" * n)
    elif dtype == "BF16":  # finite bf16 values: clear the top exponent bit
        for k in range(1, len(raw), 2):
            raw[k] &= 0x3F
    return bytes(raw)


def write_checkpoint(path: Path, config: dict, tensors: list[tuple[str, str, tuple[int, ...]]], n_shards: int = 2,
                     seed: int = 0, extra_files: dict[str, str] | None = None, header_only: bool = False) -> Path:
    """Write a sharded safetensors checkpoint (random bytes) with config.json and index.

    `header_only` writes real headers over sparse data sections: full-size files that cost no disk,
    for planning at real scale.
    """
    path.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    per = -(-len(tensors) // n_shards)
    weight_map, total = {}, 0
    for s in range(n_shards):
        chunk = tensors[s * per:(s + 1) * per]
        name = f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        sizes = [(t, d, sh, nbytes(d, sh)) for t, d, sh in chunk]
        with open(path / name, "wb") as f:
            header = encode_header(sizes, {"format": "pt"})
            f.write(header)
            for t, d, sh, nb in sizes:
                if not header_only:
                    f.write(_data(d, sh, rng))
                weight_map[t] = name
                total += nb
            if header_only:
                f.truncate(len(header) + sum(x[3] for x in sizes))
    return write_model_files(path, config, weight_map, total, extra_files)


def write_model_files(path: Path, config: dict, weight_map: dict[str, str], total: int,
                      extra_files: dict[str, str] | None = None) -> Path:
    """config.json, the index and the small files beside the shards (shared with bench/'s fast writer)."""
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n")
    for rel, text in (extra_files or {}).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    return path


def nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * DTYPE_BITS[dtype] // 8


def build_tiny_hy3(path: Path, seed: int = 0) -> Path:
    """The demo's upstream checkpoint, with the small files a real repo carries."""
    cfg = dict(TINY_HY3)
    cfg["quantization_config"] = quant_config(cfg["num_hidden_layers"])
    extra = {
        "README.md": UPSTREAM_CARD,
        "LICENSE": "Tiny Hy3 Community License (demo text).\n",
        "generation_config.json": json.dumps({"bos_token_id": 1, "eos_token_id": 2, "temperature": 0.7}) + "\n",
        "tokenizer_config.json": json.dumps({"model_max_length": 4096}) + "\n",
        "chat_template.jinja": "{% for m in messages %}{{ m['content'] }}{% endfor %}\n",
    }
    return write_checkpoint(path, cfg, tiny_hy3_tensors(cfg), n_shards=2, seed=seed, extra_files=extra)
