"""Tiny MiMo-V2.5 checkpoints with their vision tower, and a float64 reference of that tower written after vLLM's
module (there is no transformers class for it).

`build_omni(tmp, dst)`: the language model in MiMo-V2.5's published "Pro format" (tests/mimo_fused.py: fused FP8
qkv_proj in num_key_value_heads chunks, FP8 o_proj and experts), plus a `vision_config` and its tower under the
published names (`visual.blocks.N.attn.qkv`, `attn.proj`, `attn.sinks` on the window blocks, `mlp.{gate,up,down}_proj`
with biases, `norm1` / `norm2`, `patch_embed.proj`, `merger.ln_q`, `merger.mlp.0` / `.2` without biases), a token
audio encoder (`audio_encoder.*`, `speech_embeddings.*`) and an `audio_tokenizer/` folder, which are copied.

`tower_forward(tensors, vision_config, pixels, grid)`: vLLM 0.32.0's MiMoVisionTransformer.forward
(vllm/model_executor/models/mimo_v2_omni.py) step by step in float64: the Conv3d patch embedding (kernel = stride, so
a matmul over the flattened patch), the 2-D rotary (get_rope(head_size=qk_channels, partial_rotary_factor 0.5,
base 10000, neox): cos/sin of the h and w positions side by side, qk_channels / 2 wide, rotating both halves of
every head), the column-order windows (`get_window_index_1d(col=True)`, tokens reordered in spatial_merge_unit
groups when a run of type-1 blocks starts and back when it ends), each block as MiMoVisionBlock (RMSNorm eps 1e-6;
attention; the fused residual add + norm2; SiluAndMul MLP), full attention per image (MMEncoderAttention, GQA) and
window attention per image as the Triton prefill kernel computes it (`context_attention_fwd(is_causal=False,
sliding_window_q=w, sliding_window_k=w, sinks_bias_key0=True)`: key j is seen when |i - j| <= w, and the head's sink
is added to the logit of the image's first key when that key is seen), then the merger (ln_q, groups of
spatial_merge_size² tokens, Linear, exact GELU, Linear).
"""

from __future__ import annotations

import json
import math

import torch
from safetensors.torch import load_file, save_file

from tests.mimo_fused import fuse

# Tiny tower: 4 heads / 2 kv heads of 8 (qk_channels = kv_channels), MLP 16 (padded to 18 at TP 3 and 6), hidden 24
# so that the merger (24 x 2² = 96) divides 3 and 6; block 0 full, 1 row windows, 2-3 column windows, sinks on 1-3.
VISION = {"depth": 4, "hidden_size": 24, "intermediate_size": 16, "num_heads": 4, "num_key_value_heads": 2,
          "num_query_groups": 2, "qk_channels": 8, "kv_channels": 8, "hidden_act": "silu", "in_chans": 3,
          "in_channels": 3, "patch_size": 2, "temporal_patch_size": 2, "spatial_merge_size": 2,
          "fullatt_block_indexes": [0], "vit_window_attn_types": [-1, 0, 1, 1], "visual_token_window_size": 4,
          "use_sink": True, "window_size": 8, "tokens_per_second": 2}
AUDIO = {"audio_channels": 2, "group_size": 4, "input_local_dim": 16, "input_local_layers": 1,
         "input_local_attn_heads": 2, "input_local_head_dim": 8, "input_local_intermediate_size": 32,
         "projection_layers": 2, "speech_vocab_size": "40", "speech_zeroemb_idx": "39"}


def tower_tensors(v: dict, out_hidden: int, seed: int = 0, dtype=torch.float32) -> dict[str, torch.Tensor]:
    """Random tower weights under the published names (norm weights around 1, sinks around 0)."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, mean=0.0, std=0.3):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * std + mean).to(dtype)

    h, heads, kv, hd, i = v["hidden_size"], v["num_heads"], v["num_key_value_heads"], v["qk_channels"], \
        v["intermediate_size"]
    unit = v["spatial_merge_size"] ** 2
    out = {"visual.patch_embed.proj.weight": rnd(h, v["in_chans"], v["temporal_patch_size"], v["patch_size"],
                                                 v["patch_size"]),
           "visual.merger.ln_q.weight": rnd(h, mean=1.0), "visual.merger.mlp.0.weight": rnd(h * unit, h * unit),
           "visual.merger.mlp.2.weight": rnd(out_hidden, h * unit)}
    for n in range(v["depth"]):
        p = f"visual.blocks.{n}."
        out |= {p + "norm1.weight": rnd(h, mean=1.0), p + "norm2.weight": rnd(h, mean=1.0),
                p + "attn.qkv.weight": rnd((heads + 2 * kv) * hd, h), p + "attn.qkv.bias": rnd((heads + 2 * kv) * hd),
                p + "attn.proj.weight": rnd(h, heads * hd), p + "attn.proj.bias": rnd(h),
                p + "mlp.gate_proj.weight": rnd(i, h), p + "mlp.gate_proj.bias": rnd(i),
                p + "mlp.up_proj.weight": rnd(i, h), p + "mlp.up_proj.bias": rnd(i),
                p + "mlp.down_proj.weight": rnd(h, i), p + "mlp.down_proj.bias": rnd(h)}
        if v["use_sink"] and n not in v["fullatt_block_indexes"]:
            out[p + "attn.sinks"] = rnd(heads, std=1.0)
    return out


def audio_tensors(a: dict, dtype=torch.float32) -> dict[str, torch.Tensor]:
    """A token audio encoder under the published names (copied by hubpad; not run here)."""
    g = torch.Generator().manual_seed(7)
    d = a["input_local_dim"]
    out = {f"speech_embeddings.{c}.weight": torch.randn(int(a["speech_vocab_size"]), d, generator=g)
           for c in range(a["audio_channels"])}
    p = "audio_encoder.input_local_transformer.layers.0."
    out |= {p + f"self_attn.{n}_proj.weight": torch.randn(d, d, generator=g) for n in "qkvo"}
    out |= {p + "self_attn.q_proj.bias": torch.randn(d, generator=g),
            "audio_encoder.input_local_transformer.norm.weight": torch.ones(d),
            "audio_encoder.projection.mlp.0.weight": torch.randn(4 * d, d * a["group_size"], generator=g),
            "audio_encoder.projection.mlp.2.weight": torch.randn(64, 4 * d, generator=g)}
    return {k: v.to(dtype) for k, v in out.items()}


def build_omni(tmp, dst, vision: dict | None = None, **over) -> dict:
    """A tiny MiMo-V2.5 (fused FP8 language model, float32 vision tower, token audio encoder) in `dst`; its config."""
    vision = {**VISION, **(vision or {})}
    cfg = fuse(tmp / "flash", dst, **over)
    tensors = load_file(dst / "model.safetensors")
    tensors |= tower_tensors(vision, cfg["hidden_size"]) | audio_tensors(AUDIO)
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    cfg = {**cfg, "vision_config": vision, "audio_config": AUDIO, "vision_model_type": "mimovl",
           "image_token_id": 250, "video_token_id": 251, "vision_start_token_id": 252, "vision_end_token_id": 253}
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    (dst / "audio_tokenizer").mkdir(exist_ok=True)
    save_file({"encoder.weight": torch.ones(4, 4)}, dst / "audio_tokenizer" / "model.safetensors")
    (dst / "audio_tokenizer" / "config.json").write_text(json.dumps({"d_model": 4}))
    return cfg


def text_view(folder, dst) -> None:
    """`folder`'s language model alone (the tower and audio tensors and configs dropped), for tests/mimo_fused.py's
    float64 reading."""
    from tests.helpers import folder_tensors

    dst.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((folder / "config.json").read_text())
    tensors = {k: v for k, v in folder_tensors(folder).items()
               if not k.startswith(("visual.", "audio_encoder.", "speech_embeddings."))}
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    for key in ("vision_config", "audio_config", "vision_model_type"):
        cfg.pop(key, None)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))


def image(grid: list[tuple[int, int, int]], v: dict, seed: int = 3) -> torch.Tensor:
    """Flattened patches of the images `grid` describes ((t, h, w) in patches), as vLLM's processor hands them over."""
    n = sum(t * h * w for t, h, w in grid)
    width = v["in_chans"] * v["temporal_patch_size"] * v["patch_size"] ** 2
    return torch.rand(n, width, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2 - 1


# --- the reference, after vLLM's MiMoVisionTransformer ------------------------------------------------------------

def _rms(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rotary(v: dict, grid) -> tuple[torch.Tensor, torch.Tensor]:
    """MiMoVisionTransformer.rot_pos_emb: [tokens, qk_channels // 2] cos and sin."""
    m, rd = v["spatial_merge_size"], v["qk_channels"] // 2  # partial_rotary_factor 0.5
    inv = 1.0 / (10000.0 ** (torch.arange(0, rd, 2, dtype=torch.float64) / rd))
    cos, sin = [], []
    for t, h, w in grid:
        hpos = torch.arange(h)[:, None].expand(-1, w).reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten()
        wpos = torch.arange(w)[None, :].expand(h, -1).reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten()
        pos = torch.stack([hpos, wpos], dim=-1).repeat(t, 1)
        freqs = torch.arange(max(h, w), dtype=torch.float64)[:, None] * inv[None, :]
        cos.append(freqs.cos()[pos].flatten(1))
        sin.append(freqs.sin()[pos].flatten(1))
    return torch.cat(cos), torch.cat(sin)


def _col_index(v: dict, grid) -> torch.Tensor:
    """get_window_index_1d(col=True): merge-unit groups of each image in column order."""
    m, out, base = v["spatial_merge_size"], [], 0
    for t, h, w in grid:
        n = t * (h // m) * (w // m)
        out.append(torch.arange(n).reshape(t, h // m, w // m).transpose(1, 2).reshape(-1) + base)
        base += n
    return torch.cat(out)


def _reorder(x: torch.Tensor, index: torch.Tensor, unit: int) -> torch.Tensor:
    return x.unflatten(0, (-1, unit))[index].flatten(0, 1)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def _attention(q, k, v, scale: float, window: int | None, sinks: torch.Tensor | None) -> torch.Tensor:
    """One image's attention, [n, heads, d]: full (window None), or the Triton kernel's bidirectional window with the
    sink biasing key 0; GQA: head i reads kv head i // group."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    logits = torch.einsum("ihd,jhd->hij", q, k) * scale
    if window is not None:
        i = torch.arange(q.shape[0])
        seen = (i[:, None] - i[None, :]).abs() <= window
        if sinks is not None:
            logits[:, :, 0] = logits[:, :, 0] + sinks[:, None] * seen[None, :, 0]
        logits = logits.masked_fill(~seen[None], float("-inf"))
    return torch.einsum("hij,jhd->ihd", logits.softmax(-1), v)


def tower_forward(w: dict[str, torch.Tensor], v: dict, pixels: torch.Tensor, grid) -> torch.Tensor:
    """MiMoVisionTransformer.forward in float64 from the tensors `w` (published names) and `v` (vision_config)."""
    w = {k: t.double() for k, t in w.items() if k.startswith("visual.")}
    heads, kv, hd = v["num_heads"], v["num_key_value_heads"], v.get("qk_channels", 64)
    unit, window = v["spatial_merge_size"] ** 2, v["visual_token_window_size"]
    x = pixels @ w["visual.patch_embed.proj.weight"].flatten(1).T
    cos, sin = _rotary(v, grid)
    index = _col_index(v, grid)
    reverse = torch.argsort(index)
    col_cos, col_sin = _reorder(cos, index, unit), _reorder(sin, index, unit)
    lengths = [h * ww for t, h, ww in grid for _ in range(t)]  # one attention sequence per frame (cu_seqlens)
    types = v["vit_window_attn_types"]
    for n in range(v["depth"]):
        p = f"visual.blocks.{n}."
        if types[n] == 1 and (n == 0 or types[n - 1] != 1):
            x = _reorder(x, index, unit)
        if n > 0 and types[n] != 1 and types[n - 1] == 1:
            x = _reorder(x, reverse, unit)
        c, s = (col_cos, col_sin) if types[n] == 1 else (cos, sin)
        full = n in v["fullatt_block_indexes"]
        qkv = _rms(x, w[p + "norm1.weight"]) @ w[p + "attn.qkv.weight"].T + w[p + "attn.qkv.bias"]
        q, k, val = qkv.split([heads * hd, kv * hd, kv * hd], dim=-1)
        q, k = _rotate(q.unflatten(-1, (heads, hd)), c, s), _rotate(k.unflatten(-1, (kv, hd)), c, s)
        val = val.unflatten(-1, (kv, hd))
        outs, start = [], 0
        for length in lengths:
            sl = slice(start, start + length)
            outs.append(_attention(q[sl], k[sl], val[sl], hd ** -0.5, None if full else window,
                                   None if full else w.get(p + "attn.sinks")))
            start += length
        attn = torch.cat(outs).flatten(1) @ w[p + "attn.proj.weight"].T + w[p + "attn.proj.bias"]
        residual = x + attn
        h = _rms(residual, w[p + "norm2.weight"])
        gate = h @ w[p + "mlp.gate_proj.weight"].T + w[p + "mlp.gate_proj.bias"]
        up = h @ w[p + "mlp.up_proj.weight"].T + w[p + "mlp.up_proj.bias"]
        x = residual + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T \
            + w[p + "mlp.down_proj.bias"]
    if types[v["depth"] - 1] == 1:
        x = _reorder(x, reverse, unit)
    x = _rms(x, w["visual.merger.ln_q.weight"]).reshape(-1, v["hidden_size"] * unit)
    x = torch.nn.functional.gelu(x @ w["visual.merger.mlp.0.weight"].T)
    return x @ w["visual.merger.mlp.2.weight"].T


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item() / max(a.abs().max().item(), math.ulp(1.0))
