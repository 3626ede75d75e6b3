"""K2-Horizon (`k2_horizon`): tiny checkpoints under the published names, and a float64 forward written after vLLM 0.32's
model_executor/models/k2_horizon.py (transformers has no class; the published repos ship theirs as remote code).

The forward follows vLLM's module step by step, reading a checkpoint folder as hubpad writes it:
- K2HorizonRMSNorm: x / sqrt(mean(x^2) + eps) over each of `layernorm_num_groups` groups of the hidden size, × weight.
- K2HorizonAttention: q/k/v projections (biases with attention_bias), partial RoPE on the first rope_head_dim channels
  of each head's interleaved representation (`apply_partial_rope`: split_to_interleaved, NeoX rotation of those,
  back), causal softmax at head_dim^-0.5 with query head i on kv head i // (heads / kv heads), the output gate
  (gate_proj, silu or softplus with beta ln 2), o_proj (bias with attention_bias).
- K2HorizonMoVAAttention (MoE layers when mova_num_experts > 0): the values are Σ_k w_k silu(x W_k^T) over the value
  experts the replicated v_router picks (`calc_router_weights`: router scores, the bias used for selection only, top
  mova_num_experts_per_tok, renormalised when more than one, × router_scaling_factor).
- K2HorizonSparseMoeBlock (layers not in mlp_only_layers, when (i + 1) % decoder_sparse_step == 0): FusedMoE with the
  same routing (top num_experts_per_tok, renormalised when norm_topk_prob) plus one shared MLP of
  moe_intermediate_size × num_shared_experts; dense layers are K2HorizonMLP; SwiGLU everywhere.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

# The published configs (IFM/K2-Horizon-375B-A23B, IFM/K2-Horizon-MoVA-36B-A4B: tests/mla_line_real.py) at tiny dims:
# 4 heads / 2 kv heads of 16 (RoPE on 8 of them), hidden 64 in 2 norm groups, one dense layer, then MoE layers with 8
# experts (vLLM refuses a TP above the expert count).
TINY = dict(vocab_size=160, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, rope_head_dim=8, intermediate_size=96, moe_intermediate_size=32, num_experts=8,
            num_experts_per_tok=2, num_shared_experts=1, mlp_only_layers=[0], decoder_sparse_step=1,
            layernorm_num_groups=2, rms_norm_eps=1e-6, max_position_embeddings=64, attention_bias=False,
            query_key_norm=False, moe_gate_bias=True, norm_topk_prob=True, router_score_func="sigmoid",
            router_scaling_factor=2.5, rope_parameters={"rope_theta": 10000000.0, "rope_type": "default"},
            hidden_act="silu", tie_word_embeddings=False, mova_num_experts=0, mova_num_experts_per_tok=0,
            attention_gate_func=None)
MOVA = dict(mova_num_experts=4, mova_num_experts_per_tok=2, attention_gate_func="softplus")


def config(**overrides) -> dict:
    return {"architectures": ["K2HorizonForCausalLM"], "model_type": "k2_horizon", **TINY, **overrides}


def _is_sparse(cfg: dict, i: int) -> bool:
    return (i not in (cfg.get("mlp_only_layers") or []) and cfg["num_experts"] > 0
            and (i + 1) % cfg["decoder_sparse_step"] == 0)


def write(path: Path, cfg: dict, seed: int = 0, dtype: torch.dtype = torch.float64) -> Path:
    """A K2-Horizon checkpoint with O(0.3) random weights (norms around 1, router biases that reorder the choice)."""
    g = torch.Generator().manual_seed(seed)
    h, heads, kv, d = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    w = {}

    def lin(name: str, out_f: int, in_f: int, bias: bool = False) -> None:
        w[name + ".weight"] = torch.randn(out_f, in_f, generator=g, dtype=torch.float64) * 0.3
        if bias:
            w[name + ".bias"] = torch.randn(out_f, generator=g, dtype=torch.float64) * 0.3

    def norm(name: str, size: int) -> None:
        w[name + ".weight"] = 1 + 0.3 * torch.randn(size, generator=g, dtype=torch.float64)

    def mlp(p: str, inter: int) -> None:
        lin(p + "gate_proj", inter, h)
        lin(p + "up_proj", inter, h)
        lin(p + "down_proj", h, inter)

    w["model.embed_tokens.weight"] = torch.randn(cfg["vocab_size"], h, generator=g, dtype=torch.float64)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        norm(p + "input_layernorm", h)
        norm(p + "post_attention_layernorm", h)
        bias = cfg["attention_bias"]
        lin(p + "self_attn.q_proj", heads * d, h, bias)
        lin(p + "self_attn.k_proj", kv * d, h, bias)
        lin(p + "self_attn.o_proj", h, heads * d, bias)
        if cfg["attention_gate_func"] is not None:
            lin(p + "self_attn.gate_proj", heads * d, h)
        sparse = _is_sparse(cfg, i)
        if sparse and cfg["mova_num_experts"] > 0:
            lin(p + "self_attn.v_router", cfg["mova_num_experts"], h, cfg["moe_gate_bias"])
            for e in range(cfg["mova_num_experts"]):
                lin(p + f"self_attn.v_experts.{e}", kv * d, h)
        else:
            lin(p + "self_attn.v_proj", kv * d, h, bias)
        if sparse:
            lin(p + "mlp.gate", cfg["num_experts"], h, cfg["moe_gate_bias"])
            for e in range(cfg["num_experts"]):
                mlp(p + f"mlp.experts.{e}.", cfg["moe_intermediate_size"])
            if cfg["num_shared_experts"]:
                mlp(p + "mlp.shared_experts.", cfg["moe_intermediate_size"] * cfg["num_shared_experts"])
        else:
            mlp(p + "mlp.", cfg["intermediate_size"])
    norm("model.norm", h)
    lin("lm_head", cfg["vocab_size"], h)
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.to(dtype).contiguous() for k, v in w.items()}, path / "model.safetensors", metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path


# ---------------------------------------------------------------------------------------------------------------------
# The float64 forward (vLLM's module, as the docstring says)

def _tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return {k: v.to(torch.float64) for f in sorted(Path(path).glob("*.safetensors")) for k, v in load_file(f).items()}


def _norm(x, weight, groups: int, eps: float):
    xs = x.reshape(*x.shape[:-1], groups, -1)
    xs = xs * torch.rsqrt(xs.pow(2).mean(-1, keepdim=True) + eps)
    return xs.reshape(x.shape) * weight


def _split_to_interleaved(x):
    return x.reshape(*x.shape[:-1], 2, -1).transpose(-1, -2).reshape(*x.shape[:-1], -1)


def _interleaved_to_split(x):
    return x.reshape(*x.shape[:-1], -1, 2).transpose(-1, -2).reshape(*x.shape[:-1], -1)


def _rope(x, cos, sin):
    """NeoX rotation of the last dim (its two halves), positions along dim 0."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def _partial_rope(x, rope: int, cos, sin):
    """apply_partial_rope: the first `rope` channels of each head's interleaved representation rotate (x: [T, H, D])."""
    if rope == x.shape[-1]:
        return _rope(x, cos, sin)
    rot, rest = _split_to_interleaved(x).split([rope, x.shape[-1] - rope], dim=-1)
    rot = _split_to_interleaved(_rope(_interleaved_to_split(rot), cos, sin))
    return _interleaved_to_split(torch.cat([rot, rest], dim=-1))


def _route(logits, bias, score_func: str, top_k: int, renormalize: bool, scale):
    """calc_router_weights / FusedMoE's routing: (weights [T, k], chosen experts [T, k])."""
    scores = torch.sigmoid(logits) if score_func == "sigmoid" else torch.softmax(logits, dim=-1)
    chosen = torch.topk(scores if bias is None else scores + bias, top_k, dim=-1).indices
    weights = scores.gather(-1, chosen)
    if renormalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights * (scale if scale is not None else 1.0), chosen


def _swiglu(w: dict, p: str, x):
    return (F.silu(x @ w[p + "gate_proj.weight"].T) * (x @ w[p + "up_proj.weight"].T)) @ w[p + "down_proj.weight"].T


def _linear(w: dict, name: str, x):
    y = x @ w[name + ".weight"].T
    return y + w[name + ".bias"] if name + ".bias" in w else y


def _attention(cfg: dict, w: dict, p: str, x, sparse: bool):
    t, heads, kv, d = x.shape[0], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    rope = cfg.get("rope_head_dim") or d
    q = _linear(w, p + "q_proj", x).view(t, heads, d)
    k = _linear(w, p + "k_proj", x).view(t, kv, d)
    if sparse and cfg["mova_num_experts"] > 0:
        weights, chosen = _route(x @ w[p + "v_router.weight"].T, w.get(p + "v_router.bias"), cfg["router_score_func"],
                                 cfg["mova_num_experts_per_tok"], cfg["mova_num_experts_per_tok"] > 1,
                                 cfg["router_scaling_factor"])
        v = torch.zeros(t, kv * d, dtype=x.dtype)
        for slot in range(chosen.shape[1]):
            for e in chosen[:, slot].unique().tolist():
                rows = chosen[:, slot] == e
                v[rows] += weights[rows, slot, None] * F.silu(x[rows] @ w[p + f"v_experts.{e}.weight"].T)
        v = v.view(t, kv, d)
    else:
        v = _linear(w, p + "v_proj", x).view(t, kv, d)
    theta = cfg["rope_parameters"]["rope_theta"]
    inv_freq = 1.0 / theta ** (torch.arange(0, rope, 2, dtype=torch.float64) / rope)
    freqs = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None]
    cos, sin = freqs.cos()[:, None], freqs.sin()[:, None]
    q, k = _partial_rope(q, rope, cos, sin), _partial_rope(k, rope, cos, sin)
    k, v = k.repeat_interleave(heads // kv, dim=1), v.repeat_interleave(heads // kv, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) * d ** -0.5
    scores = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
    out = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(t, heads * d)
    gate_func = cfg.get("attention_gate_func")
    if gate_func is not None:
        gate = x @ w[p + "gate_proj.weight"].T
        out = out * (F.silu(gate) if gate_func == "silu" else F.softplus(gate, beta=math.log(2)))
    return _linear(w, p + "o_proj", out)


def _moe(cfg: dict, w: dict, p: str, x):
    weights, chosen = _route(x @ w[p + "gate.weight"].T, w.get(p + "gate.bias"), cfg["router_score_func"],
                             cfg["num_experts_per_tok"], cfg["norm_topk_prob"], cfg["router_scaling_factor"])
    out = torch.zeros_like(x)
    for slot in range(chosen.shape[1]):
        for e in chosen[:, slot].unique().tolist():
            rows = chosen[:, slot] == e
            out[rows] += weights[rows, slot, None] * _swiglu(w, p + f"experts.{e}.", x[rows])
    if cfg["num_shared_experts"]:
        out = out + _swiglu(w, p + "shared_experts.", x)
    return out


@torch.no_grad()
def logits(path: Path, ids: torch.Tensor) -> torch.Tensor:
    """float64 logits [T, vocab] of the checkpoint at `path` for one sequence of token ids."""
    cfg, w = json.loads((Path(path) / "config.json").read_text()), _tensors(path)
    groups, eps = cfg["layernorm_num_groups"], cfg["rms_norm_eps"]
    x = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        sparse = _is_sparse(cfg, i)
        x = x + _attention(cfg, w, p + "self_attn.", _norm(x, w[p + "input_layernorm.weight"], groups, eps), sparse)
        h = _norm(x, w[p + "post_attention_layernorm.weight"], groups, eps)
        x = x + (_moe(cfg, w, p + "mlp.", h) if sparse else _swiglu(w, p + "mlp.", h))
    return _norm(x, w["model.norm.weight"], groups, eps) @ w["lm_head.weight"].T


# The published repos name their config class in auto_map (remote code); vLLM and transformers have none, so a tiny
# checkpoint that vLLM is to load carries one: every config.json key becomes an attribute (PretrainedConfig does that).
CONFIG_CODE = '''from transformers import PretrainedConfig


class K2HorizonConfig(PretrainedConfig):
    model_type = "k2_horizon"
'''


def add_remote_config(path: Path) -> None:
    """configuration_k2_horizon.py and the auto_map that names it, as the published repos carry them."""
    (path / "configuration_k2_horizon.py").write_text(CONFIG_CODE)
    cfg = json.loads((path / "config.json").read_text())
    cfg["auto_map"] = {"AutoConfig": "configuration_k2_horizon.K2HorizonConfig"}
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
