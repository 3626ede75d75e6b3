"""Tiny PLaMo 3 (`plamo3`, Plamo3ForCausalLM) checkpoints and a float64 reference written after vLLM 0.32's plamo3.py
(transformers has no class; the checkpoints' modeling code is remote code, not read here).

vLLM's layer: x -> pre_mixer_norm -> attention -> post_mixer_norm, added to the residual; -> pre_mlp_norm -> SwiGLU MLP
-> post_mlp_norm, added. Attention: a fused qkv_proj [q | k | v] of num_attention_heads / num_key_value_heads heads of
head_dim, per-head q/k RMSNorms over head_dim, neox RoPE (rope_local_theta on sliding layers, rope_theta on full ones),
a causal window on sliding layers (interleaved_sliding_window[i]), scaling head_dim ** -0.5. Every RMSNorm weight is
stored minus an offset vLLM adds at load (1; post_mixer 1/5; post_mlp 1/5**1.5).
"""

from __future__ import annotations

import json
import math

import torch
from safetensors.torch import load_file

from tests.helpers import save_tiny

TINY = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=100,
            vocab_size=160, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0, rope_local_theta=500.0,
            tie_word_embeddings=False)
LAYER_TYPES = ["sliding_attention", "full_attention", "sliding_attention"]
WINDOW = 4
_OFFSETS = {"pre_mixer_norm": 1.0, "post_mixer_norm": 1.0 / 5, "pre_mlp_norm": 1.0, "post_mlp_norm": 1.0 / 5 ** 1.5}

PLAMO3_CONFIG_CLASS = '''from transformers import PretrainedConfig


class Plamo3Config(PretrainedConfig):
    model_type = "plamo3"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
'''


def config_json(**over) -> dict:
    cj = {**TINY, **over, "architectures": ["Plamo3ForCausalLM"], "model_type": "plamo3"}
    cj["layer_types"] = LAYER_TYPES
    cj["num_hidden_layers"] = len(LAYER_TYPES)
    cj["interleaved_sliding_window"] = [WINDOW if t == "sliding_attention" else None for t in LAYER_TYPES]
    cj["rope_parameters"] = {"rope_type": "default", "rope_theta": cj["rope_theta"]}
    return cj


def shapes(cj: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of the checkpoint, by its published name."""
    h, hd, i, v = cj["hidden_size"], cj["head_dim"], cj["intermediate_size"], cj["vocab_size"]
    q, kv = cj["num_attention_heads"] * hd, cj["num_key_value_heads"] * hd
    out = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,), "lm_head.weight": (v, h)}
    for n in range(cj["num_hidden_layers"]):
        p = f"model.layers.layers.{n}."
        out.update({p + "mixer.qkv_proj.weight": (q + 2 * kv, h), p + "mixer.o_proj.weight": (h, q),
                    p + "mixer.q_norm.weight": (hd,), p + "mixer.k_norm.weight": (hd,),
                    p + "mlp.gate_up_proj.weight": (2 * i, h), p + "mlp.down_proj.weight": (h, i)})
        out.update({p + f"{norm}.weight": (h,) for norm in _OFFSETS})
    return out


def _norm(x, w, offset, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (w + offset)


def _rope(x, pos, theta):
    half = x.shape[-1] // 2
    freqs = pos[:, None].double() / theta ** (torch.arange(half, dtype=torch.float64) * 2 / x.shape[-1])
    cos, sin = freqs.cos()[:, None, :], freqs.sin()[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)


def forward(cj: dict, t: dict, ids: torch.Tensor) -> torch.Tensor:
    """Logits of one sequence `ids` [n] (float64)."""
    eps, hd, heads, kv = cj["rms_norm_eps"], cj["head_dim"], cj["num_attention_heads"], cj["num_key_value_heads"]
    i_size, n = cj["intermediate_size"], ids.shape[0]
    pos = torch.arange(n)
    x = t["model.embed_tokens.weight"][ids]
    for layer, kind in enumerate(cj["layer_types"]):
        p = f"model.layers.layers.{layer}."
        h = _norm(x, t[p + "pre_mixer_norm.weight"], 1.0, eps)
        qkv = h @ t[p + "mixer.qkv_proj.weight"].T
        q, k, v = qkv.split([heads * hd, kv * hd, kv * hd], -1)
        q = _norm(q.view(n, heads, hd), t[p + "mixer.q_norm.weight"], 1.0, eps)
        k = _norm(k.view(n, kv, hd), t[p + "mixer.k_norm.weight"], 1.0, eps)
        theta = cj["rope_local_theta"] if kind == "sliding_attention" else cj["rope_theta"]
        q, k, v = _rope(q, pos, theta), _rope(k, pos, theta), v.view(n, kv, hd)
        k, v = k.repeat_interleave(heads // kv, 1), v.repeat_interleave(heads // kv, 1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
        allowed = pos[None, :] <= pos[:, None]
        window = cj["interleaved_sliding_window"][layer]
        if window:
            allowed &= pos[:, None] - pos[None, :] < window
        attn = torch.einsum("hqk,khd->qhd", scores.masked_fill(~allowed, float("-inf")).softmax(-1), v)
        h = attn.reshape(n, heads * hd) @ t[p + "mixer.o_proj.weight"].T
        x = x + _norm(h, t[p + "post_mixer_norm.weight"], _OFFSETS["post_mixer_norm"], eps)
        h = _norm(x, t[p + "pre_mlp_norm.weight"], 1.0, eps) @ t[p + "mlp.gate_up_proj.weight"].T
        h = (torch.nn.functional.silu(h[:, :i_size]) * h[:, i_size:]) @ t[p + "mlp.down_proj.weight"].T
        x = x + _norm(h, t[p + "post_mlp_norm.weight"], _OFFSETS["post_mlp_norm"], eps)
    return _norm(x, t["model.norm.weight"], 1.0, eps) @ t["lm_head.weight"].T


def build(path, seed: int = 0, dtype=torch.float64, remote_code: bool = False, **over) -> dict:
    """Save a tiny PLaMo 3 under `path` (random weights everywhere, norms too); returns config.json."""
    cj = config_json(**over)
    g = torch.Generator().manual_seed(seed)
    tensors = {name: (torch.randn(shape, generator=g, dtype=torch.float64) * 0.3).to(dtype)
               for name, shape in shapes(cj).items()}
    return save_tiny(path, tensors, cj, dtype, ("configuration_plamo3", PLAMO3_CONFIG_CLASS) if remote_code else None)


def logits(path, ids: torch.Tensor) -> torch.Tensor:
    """Float64 logits of the checkpoint at `path` (every tensor must be one the reference reads, at its shape)."""
    cj = json.loads((path / "config.json").read_text())
    t = {k: v.double() for f in sorted(path.glob("*.safetensors")) for k, v in load_file(f).items()}
    want = shapes(cj)
    assert {k: tuple(v.shape) for k, v in t.items()} == want, "the checkpoint's tensors are not the reference's"
    return torch.stack([forward(cj, t, row) for row in ids])
