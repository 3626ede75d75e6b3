"""Tiny MiMo-V2.5 checkpoints in the "Pro format" (vLLM `mimo_v2.py` `_shard_fp8_qkv_proj`), and their float64 reading.

`fuse(src, dst)` turns a tiny float64 MiMo-V2-Flash (tests/mimo_models.py) into MiMo-V2.5's published form: every
layer's (and the MTP layer's) q/k/v as one FP8 `qkv_proj` pre-sharded in num_key_value_heads chunks of
[Q_c | K_c | V_c], block-quantized chunk by chunk (`tiling="chunk"`, ceil(chunk rows / block) scale rows each) or as
one continuous grid (`tiling="grid"`), o_proj and the experts FP8-block too, or the experts MXFP4 (`store_dtype:
mxfp4`, e2m1 pairs and e8m0 byte scales, MiMo-V2.5-Pro-FP4). `dequantize(folder, dst)` reads such a checkpoint
back as the float64 MiMo-V2-Flash transformers loads (de-chunked with the folder's own config), so an original and
its padded derivative can be compared as models: every FP8 or e2m1 value times its scale is exact in float64.
"""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file, save_file

from tests.helpers import folder_tensors
from tests.mimo_models import build_mimo

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                    dtype=torch.float64)
BLOCK = 16


def _quantize(w: torch.Tensor, block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """FP8 e4m3 codes and float32 block scales (amax / 448 per block), as DeepSeek-style checkpoints store them."""
    rows, cols = w.shape
    r2, c2 = -(-rows // block) * block, -(-cols // block) * block
    padded = torch.zeros(r2, c2, dtype=torch.float64)
    padded[:rows, :cols] = w
    blocks = padded.reshape(r2 // block, block, c2 // block, block)
    scale = (blocks.abs().amax(dim=(1, 3)) / 448.0).clamp(min=1e-8).to(torch.float32)
    codes = (blocks / scale.double()[:, None, :, None]).reshape(r2, c2)[:rows, :cols]
    return codes.to(torch.float8_e4m3fn), scale


def _expand(scale: torch.Tensor, rows: int, cols: int, block: int = BLOCK) -> torch.Tensor:
    return scale.double().repeat_interleave(block, 0).repeat_interleave(block, 1)[:rows, :cols]


def _geometry(cfg: dict, swa: bool) -> tuple[int, int, int, int, int]:
    """(chunks, q heads per chunk, kv heads per chunk, q/k width, v width) of one layer type."""
    n = cfg["num_key_value_heads"]
    kv = cfg["swa_num_key_value_heads"] if swa else n
    return n, cfg["num_attention_heads"] // n, kv // n, cfg["head_dim"], cfg["v_head_dim"]


def _chunked(q, k, v, geo) -> torch.Tensor:
    n, qh, kh, hd, vd = geo
    return torch.cat([torch.cat([q[c * qh * hd:(c + 1) * qh * hd], k[c * kh * hd:(c + 1) * kh * hd],
                                 v[c * kh * vd:(c + 1) * kh * vd]]) for c in range(n)])


def _unchunked(w, geo) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n, qh, kh, hd, vd = geo
    rows = qh * hd + kh * (hd + vd)
    parts = [w[c * rows:(c + 1) * rows] for c in range(n)]
    return (torch.cat([p[:qh * hd] for p in parts]), torch.cat([p[qh * hd:qh * hd + kh * hd] for p in parts]),
            torch.cat([p[qh * hd + kh * hd:] for p in parts]))


def fused_fp8(w: torch.Tensor, n: int, tiling: str, block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """A fused [Q_c | K_c | V_c] x n weight as FP8 codes and block scales, tiled per chunk or as one grid."""
    if tiling == "grid":
        return _quantize(w, block)
    pairs = [_quantize(c, block) for c in w.chunk(n)]
    return torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])


def _fused_dequant(codes: torch.Tensor, scale: torch.Tensor, geo) -> torch.Tensor:
    n = geo[0]
    rows, cols = codes.shape
    per_chunk = -(-(rows // n) // BLOCK)
    if scale.shape[0] == n * per_chunk:  # tiled chunk by chunk (vLLM checks this reading first)
        return torch.cat([c.double() * _expand(s, rows // n, cols) for c, s in zip(codes.chunk(n), scale.chunk(n))])
    return codes.double() * _expand(scale, rows, cols)


def _mxfp4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Random-looking but exact MXFP4 of `w`'s shape: e2m1 codes (low nibble first) and e8m0 scales per 32 inputs,
    derived from `w` so the fixture is deterministic; the dequantized value is what the test compares."""
    rows, cols = w.shape
    g = torch.Generator().manual_seed(int(w.abs().sum().item() * 1000) % 2**31)
    nibbles = torch.randint(0, 16, (rows, cols), generator=g, dtype=torch.uint8)
    scales = torch.randint(122, 126, (rows, cols // 32), generator=g, dtype=torch.uint8)
    return nibbles[:, 0::2] | (nibbles[:, 1::2] << 4), scales


def _mxfp4_dequant(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    nib = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(packed.shape[0], -1).long()
    return E2M1[nib] * (2.0 ** (scales.double() - 127)).repeat_interleave(32, dim=1)


def fuse(src, dst, tiling: str = "chunk", mxfp4_experts: bool = False, **over) -> dict:
    """Build a tiny MiMo-V2-Flash in `src` and write its MiMo-V2.5 "Pro format" form to `dst`; returns the config."""
    dst.mkdir(parents=True, exist_ok=True)
    cfg = build_mimo(src, **over)
    tensors = load_file(src / "model.safetensors")
    out = {}
    for name, t in tensors.items():
        prefix, _, leaf = name.rpartition(".self_attn.")
        if leaf == "q_proj.weight":
            swa = ".mtp." in name or cfg["hybrid_layer_pattern"][int(prefix.rsplit(".", 1)[1])] == 1
            geo = _geometry(cfg, swa)
            p = prefix + ".self_attn."
            fused = _chunked(t, tensors[p + "k_proj.weight"], tensors[p + "v_proj.weight"], geo)
            out[p + "qkv_proj.weight"], out[p + "qkv_proj.weight_scale_inv"] = fused_fp8(fused, geo[0], tiling)
        elif leaf in ("k_proj.weight", "v_proj.weight"):
            continue
        elif ".experts." in name and mxfp4_experts:
            out[name], out[name.replace(".weight", ".weight_scale")] = _mxfp4(t)
        elif (leaf == "o_proj.weight" and ".mtp." not in name) or ".experts." in name:
            out[name], out[name.replace(".weight", ".weight_scale_inv")] = _quantize(t)
        else:
            out[name] = t
    save_file(out, dst / "model.safetensors", metadata={"format": "pt"})
    quant = {"quant_method": "fp8", "weight_block_size": [BLOCK, BLOCK], "activation_scheme": "dynamic"}
    if mxfp4_experts:
        quant["store_dtype"] = "mxfp4"
    config = {**cfg, "model_type": "mimo_v2", "architectures": ["MiMoV2ForCausalLM"], "quantization_config": quant,
              "attention_projection_layout": "fused_qkv"}
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    return config


def dequantize(folder, dst) -> None:
    """`folder` (a fused checkpoint, padded or not) as the float64 MiMo-V2-Flash transformers reads."""
    dst.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((folder / "config.json").read_text())
    tensors = folder_tensors(folder)
    out = {}
    for name, t in tensors.items():
        if name.endswith(("weight_scale_inv", "weight_scale")):
            continue
        prefix, _, leaf = name.rpartition(".self_attn.")
        if leaf == "qkv_proj.weight":
            swa = ".mtp." in name or cfg["hybrid_layer_pattern"][int(prefix.rsplit(".", 1)[1])] == 1
            geo = _geometry(cfg, swa)
            w = _fused_dequant(t, tensors[name + "_scale_inv"], geo)
            p = prefix + ".self_attn."
            out[p + "q_proj.weight"], out[p + "k_proj.weight"], out[p + "v_proj.weight"] = _unchunked(w, geo)
        elif t.dtype == torch.uint8:
            out[name] = _mxfp4_dequant(t, tensors[name + "_scale"])
        elif t.dtype == torch.float8_e4m3fn:
            out[name] = t.double() * _expand(tensors[name + "_scale_inv"], *t.shape)
        else:
            out[name] = t
    save_file({k: v.contiguous() for k, v in out.items()}, dst / "model.safetensors", metadata={"format": "pt"})
    plain = {k: v for k, v in cfg.items() if k not in ("quantization_config", "attention_projection_layout")}
    (dst / "config.json").write_text(json.dumps({**plain, "model_type": "mimo_v2_flash",
                                                 "architectures": ["MiMoV2FlashForCausalLM"]}, indent=2))


def chunk_rows(cfg: dict, swa: bool) -> int:
    """Rows of one chunk of a layer type's fused qkv_proj."""
    n, qh, kh, hd, vd = _geometry(cfg, swa)
    return qh * hd + kh * (hd + vd)


