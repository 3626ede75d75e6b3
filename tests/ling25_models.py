"""Tiny Ling / Ring 2.5 checkpoints (`bailing_hybrid`, BailingMoeV2_5ForCausalLM) and a float64 reference model written
after vLLM 0.32's bailing_moe_linear.py and layers/mamba/linear/bailing_linear_attn.py (transformers has no class for
V2.5, and the publisher's remote code needs flash-linear-attention's Triton kernels).

The reference reads config.json and the tensors as published (`model.layers.N.attention.*`), so it runs the original
and a `hubpad mirror` derivative alike; everything vLLM derives from a head count is derived here from the config it
is given: the lightning layers' decay slopes from the TOTAL head count
(MiniMaxText01LinearAttention._build_slope_tensor, times 1 - layer_idx / (L - 1) + 1e-5), the gated group norm's
groups from group_norm_size, head_dim from config.json (else hidden_size // heads, vLLM's fallback). Per layer (vLLM's
BailingMoeV25DecoderLayer): x + attn(norm(x)), then + mlp(norm(x)); lightning where (layer + 1) % layer_group_size
!= 0, MLA elsewhere; a dense MLP below first_k_dense_replace, then the MoE (sigmoid router with expert_bias, grouped
top-k, renormalised, routed scale, one shared expert).

Exactness in float64 needs the same rounding for every real value: the reference computes each head's projections
(and each 32-channel chunk of an MLP) as a product of its own and sums the output projections head by head in order,
as TP ranks compute their slices, and clones every tensor it reads (fresh aligned memory): a matmul over a wider axis,
a strided slice or a file-offset tensor may take another CPU kernel path and round differently, which padding must not
be blamed for.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.helpers import save_tiny

# 5 layers in groups of 2: lightning 0, 2, 4 (the trailing layer 4 too, vLLM's rule) and MLA 1, 3. 16 heads of 8 in 8
# norm groups (2 heads a group, as 64 heads in 8 groups hold 8): 18 heads / 9 groups at TP 3, 24 / 12 at TP 6, both
# below 32 (the slopes kept). MLA: nope 8 + rope 8, v 8, kv_lora_rank 16, q_proj without LoRA. A dense first MLP, then
# MoE of 4 experts (2 groups, top 2) with one shared expert; one MTP layer (model.layers.5: MLA and MoE, with its enorm /
# hnorm / eh_proj / final_layernorm), which vLLM's main model and this reference skip.
LING25_TINY = {
    "architectures": ["BailingMoeV2_5ForCausalLM"], "model_type": "bailing_hybrid", "vocab_size": 256,
    "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 64, "moe_shared_expert_intermediate_size": 64,
    "num_hidden_layers": 5, "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 8, "group_norm_size": 8,
    "layer_group_size": 2, "num_experts": 4, "num_experts_per_tok": 2, "num_shared_experts": 1, "n_group": 2,
    "topk_group": 1, "first_k_dense_replace": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
    "score_function": "sigmoid", "moe_router_enable_expert_bias": True, "kv_lora_rank": 16, "q_lora_rank": None,
    "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8, "use_qk_norm": True, "linear_silu": False,
    "partial_rotary_factor": 0.5, "rope_theta": 600000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 128,
    "use_bias": False, "use_qkv_bias": False, "tie_word_embeddings": False, "num_nextn_predict_layers": 1,
}


# A stand-in for the checkpoint's own config code (configuration_bailing_moe_v2_5.py, auto_map; not read offline):
# vLLM 0.32 registers no config class for a text-only bailing_hybrid and the serving lock's transformers (< 5.20) has
# none, so a V2.5 checkpoint reaches vLLM through remote code; every config.json key is kept as an attribute.
LING25_CONFIG_CLASS = """from transformers import PretrainedConfig


class BailingMoeV2_5Config(PretrainedConfig):
    model_type = "bailing_hybrid"
"""


def is_lightning(layer: int, config: dict) -> bool:
    group = config.get("layer_group_size", 1)
    return group > 0 and (layer + 1) % group != 0


def build_ling25(path: Path, seed: int = 0, dtype=torch.float64, config_class: tuple[str, str] | None = None,
                 **over) -> dict:
    """Save a tiny V2.5 checkpoint under `path` (every tensor random, norms around 1); returns its config.json."""
    c = {**LING25_TINY, **over}
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, scale=0.2):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * scale

    def norm(n):
        return 1 + rand(n, scale=0.1)

    D, H = c["hidden_size"], c["num_attention_heads"]
    d = c.get("head_dim") or D // H
    nope, rope, v, kvl = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    t = {"model.word_embeddings.weight": rand(c["vocab_size"], D, scale=1.0), "model.norm.weight": norm(D),
         "lm_head.weight": rand(c["vocab_size"], D)}
    layers = c["num_hidden_layers"]
    for i in range(layers + c.get("num_nextn_predict_layers", 0)):  # then the MTP layers (the publisher's MTPLayer)
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"], t[p + "post_attention_layernorm.weight"] = norm(D), norm(D)
        if i >= layers:
            t[p + "enorm.weight"], t[p + "hnorm.weight"], t[p + "final_layernorm.weight"] = norm(D), norm(D), norm(D)
            t[p + "eh_proj.weight"] = rand(D, 2 * D)
        a = p + "attention."
        if i < layers and is_lightning(i, c):
            t[a + "query_key_value.weight"] = rand(3 * H * d, D)
            t[a + "query_layernorm.weight"], t[a + "key_layernorm.weight"] = norm(d), norm(d)
            t[a + "g_proj.weight"], t[a + "g_norm.weight"] = rand(H * d, D), norm(H * d)
            t[a + "dense.weight"] = rand(D, H * d)
        else:
            t[a + "q_proj.weight"] = rand(H * (nope + rope), D)
            t[a + "kv_a_proj_with_mqa.weight"] = rand(kvl + rope, D)
            t[a + "kv_a_layernorm.weight"] = norm(kvl)
            t[a + "kv_b_proj.weight"] = rand(H * (nope + v), kvl)
            t[a + "dense.weight"] = rand(D, H * v)
        m = p + "mlp."
        if i < c["first_k_dense_replace"]:
            _mlp(t, m, D, c["intermediate_size"], rand)
        else:
            t[m + "gate.weight"], t[m + "gate.expert_bias"] = rand(c["num_experts"], D), rand(c["num_experts"])
            for e in range(c["num_experts"]):
                _mlp(t, f"{m}experts.{e}.", D, c["moe_intermediate_size"], rand)
            _mlp(t, m + "shared_experts.", D, c["moe_shared_expert_intermediate_size"], rand)
    return save_tiny(path, {k: x.to(dtype) for k, x in t.items()}, dict(c), dtype, config_class)


def _mlp(t: dict, prefix: str, hidden: int, width: int, rand) -> None:
    t[prefix + "gate_proj.weight"], t[prefix + "up_proj.weight"] = rand(width, hidden), rand(width, hidden)
    t[prefix + "down_proj.weight"] = rand(hidden, width)


def ling25_logits(path: Path, ids: torch.Tensor) -> torch.Tensor:
    """float64 logits [batch, seq, vocab] of the checkpoint under `path` (the reference model)."""
    c = json.loads((Path(path) / "config.json").read_text())
    # cloned: fresh, aligned memory (a float64 tensor read straight from a file sits at the file's offsets, and CPU
    # BLAS may round a product differently at another alignment)
    w = {k: x.to(torch.float64).clone()
         for f in sorted(Path(path).glob("*.safetensors")) for k, x in load_file(f).items()}
    eps = c.get("rms_norm_eps", 1e-5)
    x = w["model.word_embeddings.weight"][ids]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = _rms(x, w[p + "input_layernorm.weight"], eps)
        attn = lightning(h, w, p + "attention.", c, i) if is_lightning(i, c) else mla(h, w, p + "attention.", c)
        x = x + attn
        h = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + (_mlp_out(h, w, p + "mlp.") if i < c["first_k_dense_replace"] else moe(h, w, p + "mlp.", c))
    return _rms(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def slopes(heads: int) -> list[float]:
    """vLLM's MiniMaxText01LinearAttention._build_slope_tensor, as Python floats."""
    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]

    if math.log2(heads).is_integer():
        return power_of_2(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return power_of_2(closest) + slopes(2 * closest)[0::2][: heads - closest]


def lightning(x: torch.Tensor, w: dict, a: str, c: dict, layer: int, tp: int = 1, rank: int = 0) -> torch.Tensor:
    """BailingMoELinearAttention._forward in float64: qkv (silu under linear_silu), per-head q/k RMSNorm, neox rotary
    over head_dim x partial_rotary_factor, q x head_dim^-0.5, decayed linear attention (state S_t = exp(-slope) S_{t-1}
    + k_t^T v_t, output q_t S_t), gated group RMSNorm (sigmoid gate), dense. With `tp` > 1: rank `rank`'s partial
    output as vLLM shards the layer (heads [rank H / tp, ...) of each qkv section, of g_proj's rows, g_norm and dense's
    columns; its slopes that slice of the total count's; group_norm_size / tp local groups; dense's bias on rank 0)."""
    H = c["num_attention_heads"]
    d = c.get("head_dim") or c["hidden_size"] // H
    eps = c.get("rms_norm_eps", 1e-5)
    B, T, _ = x.shape
    n = H // tp  # this rank's heads
    mine = slice(rank * n * d, (rank + 1) * n * d)
    qkv_w, qkv_b = w[a + "query_key_value.weight"], w.get(a + "query_key_value.bias")
    rows = torch.cat([torch.arange(H * d)[mine] + s * H * d for s in range(3)])
    qkv = _per_head_in(x, qkv_w[rows].contiguous(), 3 * n)
    if qkv_b is not None:
        qkv = qkv + qkv_b[rows]
    if c.get("linear_silu"):
        qkv = torch.nn.functional.silu(qkv)
    q, k, v = (t.contiguous().reshape(B, T, n, d) for t in qkv.split(n * d, dim=-1))  # (strides of their own)
    if c.get("use_qk_norm"):
        q, k = _rms(q, w[a + "query_layernorm.weight"], eps), _rms(k, w[a + "key_layernorm.weight"], eps)
    rot = int(d * c.get("partial_rotary_factor", 1.0))
    q, k = _rope(q, rot, c, neox=True), _rope(k, rot, c, neox=True)
    q = q * d ** -0.5
    L = c["num_hidden_layers"]
    factor = 1 + 1e-5 if L <= 1 else 1 - layer / (L - 1) + 1e-5
    # vLLM's slopes: a float32 tensor over the TOTAL head count, each rank its slice; those float32 values in float64
    slope = torch.tensor(slopes(H), dtype=torch.float32)[rank * n:(rank + 1) * n].to(torch.float64) * factor
    decay = torch.exp(-slope)
    state = torch.zeros(B, n, d, d, dtype=torch.float64)
    out = []
    for t in range(T):
        state = decay[None, :, None, None] * state + k[:, t, :, :, None] * v[:, t, :, None, :]
        out.append(torch.einsum("bhd,bhde->bhe", q[:, t], state))
    hidden = torch.stack(out, dim=1).reshape(B, T, n * d)
    gate = _per_head_in(x, w[a + "g_proj.weight"][mine].contiguous(), n)
    groups = c.get("group_norm_size", 1) // tp  # vLLM: groups of H d / group_norm_size channels, whole on each rank
    grouped = hidden.reshape(B, T, groups, n * d // groups)
    normed = (grouped * torch.rsqrt(grouped.square().mean(-1, keepdim=True) + eps)).reshape(B, T, n * d)
    hidden = normed * w[a + "g_norm.weight"][mine] * torch.sigmoid(gate)
    out = _per_head_out(hidden, w[a + "dense.weight"][:, mine].contiguous(), n)
    return out + w[a + "dense.bias"] if a + "dense.bias" in w and rank == 0 else out


def mla(x: torch.Tensor, w: dict, a: str, c: dict) -> torch.Tensor:
    """BailingMoeV25MLAAttention in float64: q (q_proj, or q_b(norm(q_a))), the latent kv_a [kv_lora | rope] with its
    norm, kv_b per head [nope | v], interleaved rotary on the rope parts (one rope key for every head), causal softmax
    over (nope + rope)^-0.5 scaled scores, dense."""
    H, nope, rope, vd = c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    kvl, eps = c["kv_lora_rank"], c.get("rms_norm_eps", 1e-5)
    B, T, _ = x.shape
    if a + "q_proj.weight" in w:
        q = _per_head_in(x, w[a + "q_proj.weight"], H)
    else:
        q = _per_head_in(_rms(x @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], eps),
                         w[a + "q_b_proj.weight"], H)
    q = q.reshape(B, T, H, nope + rope)
    latent = x @ w[a + "kv_a_proj_with_mqa.weight"].T
    kv = _per_head_in(_rms(latent[..., :kvl], w[a + "kv_a_layernorm.weight"], eps), w[a + "kv_b_proj.weight"], H)
    kv = kv.reshape(B, T, H, nope + vd)
    q_rope = _rope(q[..., nope:], rope, c, neox=False)
    k_rope = _rope(latent[..., None, kvl:], rope, c, neox=False)  # [B, T, 1, rope]
    scores = (torch.einsum("bthd,bshd->bhts", q[..., :nope], kv[..., :nope])
              + torch.einsum("bthd,bsxd->bhts", q_rope, k_rope)) * (nope + rope) ** -0.5
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.einsum("bhts,bshd->bthd", scores.softmax(-1), kv[..., nope:]).reshape(B, T, H * vd)
    return _per_head_out(out, w[a + "dense.weight"], H)


def _per_head_in(x: torch.Tensor, weight: torch.Tensor, heads: int) -> torch.Tensor:
    """A per-head projection computed head by head (as column-parallel ranks compute their rows): each head's values
    come from the same matmul shapes however many heads there are, where one matmul with more output rows may take
    another kernel path and round differently (seen with torch's CPU float64 matmul)."""
    per = weight.shape[0] // heads
    return torch.cat([x @ weight[h * per:(h + 1) * per].T for h in range(heads)], dim=-1)


def _per_head_out(x: torch.Tensor, weight: torch.Tensor, heads: int) -> torch.Tensor:
    """The output projection summed head by head in head order (as row-parallel ranks sum their partial products):
    a zero head adds exactly 0.0, so padding cannot move a rounding, where one matmul over a wider inner axis (or a
    slice of one with other strides) may block its sums differently."""
    per = weight.shape[1] // heads
    out = torch.zeros(*x.shape[:-1], weight.shape[0], dtype=x.dtype)
    for h in range(heads):
        out = out + x[..., h * per:(h + 1) * per].contiguous() @ weight[:, h * per:(h + 1) * per].contiguous().T
    return out


def moe(x: torch.Tensor, w: dict, m: str, c: dict) -> torch.Tensor:
    """vLLM's BailingMoeV25 block: sigmoid scores, experts chosen by score + expert_bias within the top topk_group
    groups (a group's score: its two best), weights the chosen scores renormalised (norm_topk_prob) times
    routed_scaling_factor, plus the shared expert."""
    E, k = c["num_experts"], c["num_experts_per_tok"]
    n_group, topk_group = c.get("n_group") or 1, c.get("topk_group") or 1
    flat = x.reshape(-1, x.shape[-1])
    scores = torch.sigmoid(flat @ w[m + "gate.weight"].T)
    biased = scores + w[m + "gate.expert_bias"]
    per_group = biased.reshape(-1, n_group, E // n_group).topk(2, dim=-1)[0].sum(-1)
    keep = torch.zeros_like(per_group).scatter_(1, per_group.topk(topk_group, dim=-1)[1], 1)
    mask = keep[:, :, None].expand(-1, n_group, E // n_group).reshape(-1, E).bool()
    chosen = biased.masked_fill(~mask, float("-inf")).topk(k, dim=-1)[1]
    weights = scores.gather(1, chosen)
    if c.get("norm_topk_prob", True):
        weights = weights / weights.sum(-1, keepdim=True)
    weights = weights * c.get("routed_scaling_factor", 1.0)
    out = torch.zeros_like(flat)
    for e in range(E):
        rows, slot = (chosen == e).nonzero(as_tuple=True)
        if len(rows):
            out[rows] += weights[rows, slot, None] * _mlp_out(flat[rows], w, f"{m}experts.{e}.")
    out = out + _mlp_out(flat, w, m + "shared_experts.")
    return out.reshape(x.shape)


def _mlp_out(x: torch.Tensor, w: dict, p: str, chunk: int = 32) -> torch.Tensor:
    """down(silu(gate(x)) * up(x)), chunk by chunk of `chunk` channels summed in order (as _per_head_out: zero
    channels padded in whole chunks add exactly 0.0)."""
    width = w[p + "gate_proj.weight"].shape[0]
    hidden = torch.nn.functional.silu(_per_head_in(x, w[p + "gate_proj.weight"], width // chunk))
    return _per_head_out(hidden * _per_head_in(x, w[p + "up_proj.weight"], width // chunk), w[p + "down_proj.weight"],
                         width // chunk)


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight


def _rope(x: torch.Tensor, rot: int, c: dict, neox: bool) -> torch.Tensor:
    """Rotary over the first `rot` channels of the last axis (x: [B, T, heads, dim]; positions 0..T-1): neox halves or
    interleaved pairs, as vLLM's get_rope with is_neox_style."""
    T = x.shape[1]
    inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]  # [T, rot / 2]
    cos, sin = angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]
    r, rest = x[..., :rot], x[..., rot:]
    if neox:
        x1, x2 = r[..., : rot // 2], r[..., rot // 2:]
        r = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        x1, x2 = r[..., 0::2], r[..., 1::2]
        r = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    return torch.cat((r, rest), dim=-1)
