"""Tiny Ling / Ring (`bailing_moe`) checkpoints in the published layout, and a float64 reference forward written after
vLLM 0.32's bailing_moe.py (transformers has no class for it; the published checkpoints ship remote code).

The reference follows vLLM's BailingMoeModel step by step: word embedding; per layer RMSNorm, the fused
`attention.query_key_value` split [q | k | v] by the config's head counts, per-head RMSNorms on q and k
(`use_qk_norm`, `use_rmsnorm`), neox RoPE on the first `head_dim x partial_rotary_factor` dims, causal GQA attention
scaled by head_dim ** -0.5, `attention.dense`; RMSNorm, then a SwiGLU MLP (layers < first_k_dense_replace) or the MoE
block: router `mlp.gate` (softmax, or sigmoid with `mlp.gate.expert_bias` added for the choice only), top-k,
renormalized when norm_topk_prob, times routed_scaling_factor, plus the shared experts' MLP; final RMSNorm, lm_head.
head_dim is `config.head_dim or hidden_size // heads`, as vLLM reads it.
"""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file, save_file

CONFIG = dict(architectures=["BailingMoeV2ForCausalLM"], model_type="bailing_moe", hidden_size=32,
              intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, head_dim=8, vocab_size=128, num_experts=6, num_experts_per_tok=2,
              num_shared_experts=1, first_k_dense_replace=1, norm_topk_prob=True, routed_scaling_factor=2.5,
              score_function="sigmoid", moe_router_enable_expert_bias=True, use_qk_norm=True, use_rmsnorm=True,
              use_bias=False, use_qkv_bias=False, partial_rotary_factor=0.5, rope_theta=10000.0, rms_norm_eps=1e-6,
              max_position_embeddings=256, tie_word_embeddings=False, n_group=1, topk_group=1)


def random_tensors(seed: int, dtype):
    """rand(*shape, mean=0.0): seeded normal tensors of standard deviation 0.3 (norm weights around 1), in `dtype`."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, mean=0.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * 0.3 + mean).to(dtype)
    return rand


def save(path, tensors: dict, cfg: dict) -> dict:
    """Write `tensors` as one safetensors file and `cfg` as config.json under `path`; returns `cfg`."""
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return cfg


def _hd(cfg: dict) -> int:
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def build(path, seed: int = 0, dtype=torch.float64, **over) -> dict:
    """Write a random tiny Ling checkpoint (published names) to `path`; returns its config.json."""
    cfg = {**CONFIG, **over}
    rand = random_tensors(seed, dtype)
    h, hd, heads, kv = cfg["hidden_size"], _hd(cfg), cfg["num_attention_heads"], cfg["num_key_value_heads"]
    e, moe = cfg["num_experts"], cfg["moe_intermediate_size"]

    t = {"model.word_embeddings.weight": rand(cfg["vocab_size"], h), "model.norm.weight": rand(h, mean=1.0),
         "lm_head.weight": rand(cfg["vocab_size"], h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = rand(h, mean=1.0)
        t[p + "post_attention_layernorm.weight"] = rand(h, mean=1.0)
        t[p + "attention.query_key_value.weight"] = rand((heads + 2 * kv) * hd, h)
        if cfg["use_bias"] or cfg["use_qkv_bias"]:
            t[p + "attention.query_key_value.bias"] = rand((heads + 2 * kv) * hd)
        if cfg["use_qk_norm"]:
            t[p + "attention.query_layernorm.weight"] = rand(hd, mean=1.0)
            t[p + "attention.key_layernorm.weight"] = rand(hd, mean=1.0)
        t[p + "attention.dense.weight"] = rand(h, heads * hd)
        mlps = {"mlp.": cfg["intermediate_size"]} if i < cfg["first_k_dense_replace"] else {
            **{f"mlp.experts.{j}.": moe for j in range(e)}, "mlp.shared_experts.": moe * cfg["num_shared_experts"]}
        for m, width in mlps.items():
            t[p + m + "gate_proj.weight"], t[p + m + "up_proj.weight"] = rand(width, h), rand(width, h)
            t[p + m + "down_proj.weight"] = rand(h, width)
        if i >= cfg["first_k_dense_replace"]:
            t[p + "mlp.gate.weight"] = rand(e, h)
            if cfg.get("moe_router_enable_expert_bias"):
                t[p + "mlp.gate.expert_bias"] = rand(e).to(torch.float32) if dtype != torch.float64 else rand(e)
    return save(path, t, cfg)


def _rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rope(x, pos, rot: int, theta: float):
    """neox-style rotation of the first `rot` dims of every head (x: [seq, heads, hd])."""
    inv = 1.0 / theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)
    ang = pos[:, None].double() * inv[None]
    cos, sin = ang.cos()[:, None], ang.sin()[:, None]
    r, rest = x[..., :rot], x[..., rot:]
    a, b = r[..., :rot // 2], r[..., rot // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], -1)


def _mlp(x, t, p):
    return (torch.nn.functional.silu(x @ t[p + "gate_proj.weight"].T) * (x @ t[p + "up_proj.weight"].T)) \
        @ t[p + "down_proj.weight"].T


def logits(path, ids: torch.Tensor) -> torch.Tensor:
    """float64 logits of the checkpoint at `path` for one sequence of token ids."""
    cfg = json.loads((path / "config.json").read_text())
    t = {}
    for f in sorted(path.glob("*.safetensors")):
        t.update({k: v.double() for k, v in load_file(f).items()})
    h, hd, heads, kv, eps = (cfg["hidden_size"], _hd(cfg), cfg["num_attention_heads"], cfg["num_key_value_heads"],
                             cfg["rms_norm_eps"])
    rot = int(cfg.get("rotary_dim") or hd * cfg.get("partial_rotary_factor", 1.0))
    pos = torch.arange(len(ids))
    x = t["model.word_embeddings.weight"][ids]
    mask = torch.full((len(ids), len(ids)), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = _rms(x, t[p + "input_layernorm.weight"], eps)
        qkv = a @ t[p + "attention.query_key_value.weight"].T
        if p + "attention.query_key_value.bias" in t:
            qkv = qkv + t[p + "attention.query_key_value.bias"]
        q, k, v = qkv.split([heads * hd, kv * hd, kv * hd], -1)
        q, k, v = q.view(-1, heads, hd), k.view(-1, kv, hd), v.view(-1, kv, hd)
        if cfg.get("use_qk_norm"):
            q = _rms(q, t[p + "attention.query_layernorm.weight"], eps)
            k = _rms(k, t[p + "attention.key_layernorm.weight"], eps)
        q, k = _rope(q, pos, rot, cfg["rope_theta"]), _rope(k, pos, rot, cfg["rope_theta"])
        group = heads // kv
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        s = torch.einsum("qhd,khd->hqk", q, k) * hd ** -0.5 + mask
        o = torch.einsum("hqk,khd->qhd", s.softmax(-1), v).reshape(len(ids), heads * hd)
        x = x + o @ t[p + "attention.dense.weight"].T
        a = _rms(x, t[p + "post_attention_layernorm.weight"], eps)
        if i < cfg["first_k_dense_replace"]:
            x = x + _mlp(a, t, p + "mlp.")
            continue
        scores = a @ t[p + "mlp.gate.weight"].T
        sigmoid = cfg.get("score_function") == "sigmoid"
        scores = scores.sigmoid() if sigmoid else scores.softmax(-1)
        choice = scores + t[p + "mlp.gate.expert_bias"] if sigmoid else scores
        top = choice.topk(cfg["num_experts_per_tok"], -1).indices
        w = scores.gather(-1, top)
        if cfg.get("norm_topk_prob"):
            w = w / w.sum(-1, keepdim=True)
        w = w * cfg.get("routed_scaling_factor", 1.0)
        out = torch.zeros_like(x)
        for n in range(len(ids)):
            for j in range(top.shape[1]):
                out[n] += w[n, j] * _mlp(a[n], t, p + f"mlp.experts.{int(top[n, j])}.")
        if cfg.get("num_shared_experts"):
            out = out + _mlp(a, t, p + "mlp.shared_experts.")
        x = x + out
    return _rms(x, t["model.norm.weight"], eps) @ t["lm_head.weight"].T
