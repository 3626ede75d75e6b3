"""The TP advisor: for each tensor-parallel size, does the checkpoint serve as is, with padding, or not at all, and
what does padding cost (disk, KV cache, FLOPs)?

Every answer is the planner's own: the checkpoint is surveyed once (config + headers), then planned at each TP with
`plan_for`, so the dims, refusals and byte counts are exactly those `hubpad plan --tp N` and `hubpad mirror` use.
"""

from __future__ import annotations

import gc
import math
import re
from collections import Counter
from dataclasses import dataclass, field

from hubpad.errors import HubpadError
from hubpad.plan import gdn, tower
from hubpad.plan.adapters.base import routed_experts
from hubpad.plan.dims import head_problems, kv_per_rank
from hubpad.plan.heads import HeadShape
from hubpad.plan.model import Plan
from hubpad.plan.planner import Survey, padded_features, plan_for, survey
from hubpad.plan.quant import detect_layout
from hubpad.source.base import Source

DEFAULT_TPS = tuple(range(1, 9))
# Routed experts (`...experts.<i>.<proj>` in every supported family; shared experts are named otherwise): each
# token runs num_experts_per_tok of them, so they weigh that share in the per-token FLOPs.
ROUTED_EXPERT = re.compile(r"\.experts\.\d+\.")
KV_CACHE_BYTES = 2  # BF16 KV cache (vLLM's default kv_cache_dtype "auto" for BF16/FP8/NVFP4 checkpoints)
# Attention projections that are not sharded by heads (MLA's q_a_proj and kv_a_proj_with_mqa, replicated on every
# rank): they cost the same FLOPs before and after padding, but belong in the attention total.
ATTENTION_MODULE = re.compile(r"\.self_attn\.")
_NO_SHARDS = 1 << 62  # the advisor needs no output shard layout: one (never written) shard


@dataclass
class Row:
    """One TP size: the verdict, why, the padded dims and what padding costs."""

    tp: int
    verdict: str  # "as is" | "pad" | "cannot"
    why: list[str] = field(default_factory=list)
    dims: list[dict] = field(default_factory=list)  # changed dims only
    vocab_patch: bool = False
    relabelled: dict | None = None  # the derivative's new architecture label and why (plan/relabel.py), if any
    vllm_route: dict | None = None  # the vLLM class or implementation it must be served with, if any (VllmRoute)
    extra_bytes: int = 0
    kv_cache: str = "kv heads"  # what vLLM caches: "kv heads" (K and V per kv head) or "latent" (MLA)
    kv_bytes_per_token: int = 0  # stored across all ranks (replicated kv heads / MLA latent count on every rank)
    kv_bytes_per_token_per_rank: int = 0
    extra_kv_bytes_per_token: int = 0  # vs the unsharded upstream: replication at this TP plus padding
    padding_kv_bytes_per_token: int = 0  # the part padding adds (any layout at this TP stores at least the rest)
    attention_flops_pct: float = 0.0  # q/k/v/o projections
    attention_score_flops_pct: float = 0.0  # QK^T and AV, which grow with the attention heads
    mlp_flops_pct: float = 0.0  # dense MLP, shared and active routed experts per token

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Advice:
    source: str
    architecture: str
    formats: list[str]
    rows: list[Row]

    def to_json(self) -> dict:
        return {"source": self.source, "architecture": self.architecture, "formats": self.formats,
                "kv_cache_bytes_per_element": KV_CACHE_BYTES, "rows": [r.to_json() for r in self.rows]}


def advise(source: Source, tps: list[int] | tuple[int, ...] = DEFAULT_TPS) -> Advice:
    """Survey `source` once and plan it at every TP in `tps` (sorted, de-duplicated)."""
    enabled = gc.isenabled()
    gc.disable()  # as make_plan does: planning makes many short-lived containers and no cycles
    try:
        s = survey(source)
        rows = [_row(s, tp) for tp in sorted(set(tps))]
    finally:
        if enabled:
            gc.enable()
    formats = sorted({lay.format_tag for lay in s.modules.layouts.values()})
    return Advice(source.label, s.inputs.adapter.name, formats, rows)


def _row(s: Survey, tp: int) -> Row:
    try:
        plan = plan_for(s, tp, _NO_SHARDS)
    except HubpadError as exc:
        return Row(tp, "cannot", why=[str(exc)])
    row = Row(tp, "pad" if plan.needs_padding else "as is", why=_why(s, tp, plan),
              vocab_patch=plan.vocab["patch_needed"], relabelled=plan.relabelled, vllm_route=plan.vllm_route)
    row.dims = [{"name": d.name, "config_key": d.config_keys[0] if d.config_keys else None, "before": d.before,
                 "after": d.after} for d in plan.dims if d.before != d.after]
    row.extra_bytes = sum(t.nbytes - t.src.nbytes for t in plan.tensors if t.padded)
    after = {d.config_keys[0]: d.after for d in plan.dims if d.config_keys}
    _kv_costs(s, tp, row, after["num_key_value_heads"], after["num_attention_heads"])
    _flop_costs(s, row, after["num_attention_heads"], after["num_key_value_heads"], plan)
    row.why += s.inputs.adapter.tp_notes(plan.new_config, tp)  # what serving at this TP needs beyond the flags
    if row.vocab_patch:
        v = plan.vocab
        row.why.append(f"vLLM pads the vocab (config.json vocab_size {v['size']}) to {v['padded_to_64']}, a multiple of "
                       f"64, and {v['padded_to_64']} % {tp} != 0: the derivative ships vLLM's vocab patch")
    return row


def _why(s: Survey, tp: int, plan: Plan) -> list[str]:
    """Why the upstream does not serve at `tp` as it is: the planner's head rules on the same head geometry, and
    each intermediate group `plan` grows (named with the per-rank multiple its formats need)."""
    sh = s.shape
    why = head_problems(sh.heads, sh.kv, sh.geometry, tp, s.aligns, sh.hidden, s.inputs.adapter)
    if sh.linear is not None:
        why += gdn.problems(sh.linear, tp, s.linear_align)
    if sh.tower is not None:
        why += tower.problems(sh.tower, tp)
    for d in plan.dims:
        group = d.name.removesuffix(" intermediate")
        if group in sh.inter and d.after != d.before:
            step = math.lcm(*s.group_align.get(group, (1, 1)))
            why.append(f"{d.name} {d.before} % tp {tp} != 0" if d.before % tp else
                       f"{d.name} {d.before}: {d.before // tp} per rank is not a multiple of {step} (what its "
                       f"storage format needs per rank)")
    return why


def kv_values_per_token(hs: HeadShape, kv: int, tp: int) -> int | None:
    """Values all `tp` ranks cache per token and attention layer (None: `kv` heads cannot shard at `tp`).

    vLLM caches K and V of each kv head a rank holds (kv heads replicated when tp > kv), or, for MLA, one latent
    of kv_lora_rank + qk_rope_head_dim per rank (ModelConfig.get_num_kv_heads is 1 and MLAAttention's head_size
    is the latent, whatever the head count), so MLA's cache grows with TP but never with padded heads."""
    if hs.latent_kv:
        return tp * hs.latent_kv
    per_rank = kv_per_rank(kv, tp)
    return None if per_rank is None else per_rank * tp * 2 * hs.widths["kv"]


def _kv_costs(s: Survey, tp: int, row: Row, kv2: int, h2: int = 0) -> None:
    """KV cache per token: all ranks, per rank, against the unsharded upstream, and the part padding adds (the
    rest, at least one kv head per rank or MLA's latent on every rank, any layout at this TP stores)."""
    hs, kv = s.shape.geometry, s.shape.kv
    if hs.kv_groups:
        return _kv_costs_by_layer(s, tp, row, kv2, h2)
    per_layer = KV_CACHE_BYTES * _attention_layers(s)
    row.kv_cache = "latent" if hs.latent_kv else "kv heads"
    row.kv_bytes_per_token = kv_values_per_token(hs, kv2, tp) * per_layer
    row.kv_bytes_per_token_per_rank = row.kv_bytes_per_token // tp
    row.extra_kv_bytes_per_token = row.kv_bytes_per_token - kv_values_per_token(hs, kv, 1) * per_layer
    least = row.kv_bytes_per_token if hs.latent_kv else max(kv, tp) * 2 * hs.widths["kv"] * per_layer
    row.padding_kv_bytes_per_token = row.kv_bytes_per_token - least


def _kv_costs_by_layer(s: Survey, tp: int, row: Row, kv2: int, h2: int) -> None:
    """_kv_costs for layer types with kv heads of their own (HeadShape.kv_groups: Gemma 4's global layers, MiMo-V2's
    sliding ones), summed layer by layer from the k/v projections each layer has: K and V of each one's width per kv
    head, a layer with a single k/v projection (Gemma 4's attention_k_eq_v) caching K and V of it all the same."""
    hs, sh = s.shape.geometry, s.shape
    layers: dict[str, list[str]] = {}
    for module, role in s.modules.roles.items():
        if role.kind == "kv":
            layers.setdefault(module.rsplit(".", 2)[0], []).append(role.width_key)
    for name, spec in s.modules.presharded.items():  # a fused qkv_proj (plan/presharded.py): its K and V rows
        if name.endswith(".weight"):
            layers.setdefault(name.rsplit(".", 3)[0], []).extend([spec.k, spec.v])
    total = before = least = 0
    for keys in layers.values():
        factor = 2 if len(keys) == 1 else 1
        for key in keys:
            count, count2, width = hs.kv_count(key, sh.heads, sh.kv), hs.kv_count(key, h2, kv2), hs.widths[key]
            total += factor * kv_per_rank(count2, tp) * tp * width
            before += factor * count * width
            least += factor * max(count, tp) * width
    row.kv_cache = "kv heads"
    row.kv_bytes_per_token = total * KV_CACHE_BYTES
    row.kv_bytes_per_token_per_rank = row.kv_bytes_per_token // tp
    row.extra_kv_bytes_per_token = row.kv_bytes_per_token - before * KV_CACHE_BYTES
    row.padding_kv_bytes_per_token = row.kv_bytes_per_token - least * KV_CACHE_BYTES


def _flop_costs(s: Survey, row: Row, h2: int, kv2: int, plan: Plan) -> None:
    """Per-token FLOPs of the attention projections and MLPs, and of attention scores (they grow as heads do)."""
    sh = s.shape
    after = {d.config_keys: d.after for d in plan.dims}
    attn, mlp = _flops(s, h2, kv2, {g: after[keys] for g, (keys, _) in sh.inter.items()})
    replicated = _replicated_attention_flops(s)
    linear = _linear_attention_flops(s, plan)
    row.attention_flops_pct = _pct(attn[0] + replicated + linear[0], attn[1] + replicated + linear[1])
    row.mlp_flops_pct = _pct(*mlp)
    row.attention_score_flops_pct = _pct(sh.heads, h2)


def _linear_attention_flops(s: Survey, plan: Plan) -> tuple[int, int]:
    """(before, after) multiply-adds per token of the Gated DeltaNet projections (their 2-D weights), which count
    with attention's."""
    if not s.modules.linear:
        return 0, 0
    planned = {t.name: t for t in plan.tensors if t.name in s.modules.linear}
    before = after = 0
    for name, t in planned.items():
        if name.endswith(".weight") and len(t.shape) == 2:
            before += math.prod(t.src.shape)
            after += math.prod(t.shape)
    return before, after


def _attention_layers(s: Survey) -> int:
    """Attention layers (the MTP layer's too: the card serves it as a speculative draft): one o_proj each."""
    return sum(1 for r in s.modules.roles.values() if r.kind == "o")


def _replicated_attention_flops(s: Survey) -> int:
    """Multiply-adds per token of the attention projections that are not sharded by heads (MLA's q_a_proj and
    kv_a_proj_with_mqa): copied modules under self_attn with a 2-D weight (norms are 1-D)."""
    total, seen = 0, {}
    for module, role in s.modules.roles.items():
        params = s.modules.params[module]
        weight = next((params[k] for k in ("weight", "weight_packed", "qweight") if k in params), None)
        if role.kind != "copy" or not ATTENTION_MODULE.search(module) or weight is None or len(weight.shape) < 2:
            continue
        sig = tuple((k, p.dtype, p.shape) for k, p in params.items())
        if sig not in seen:
            lay = detect_layout(module, params, s.inputs.quant)
            seen[sig] = lay.out_features * lay.in_features
        total += seen[sig]
    return total


def _flops(s: Survey, h2: int, kv2: int, new_inter: dict[str, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(before, after) multiply-adds per token of the attention projections and of the MLPs (experts weighted by
    the share of tokens routed to each: num_experts_per_tok / num_experts)."""
    cfg = s.inputs.text
    n_exp = routed_experts(cfg)
    top_k = cfg.get("num_experts_per_tok") or 0
    counts = Counter((id(role), id(s.modules.layouts[m]), ROUTED_EXPERT.search(m + ".") is not None)
                     for m, role in s.modules.roles.items() if role.kind != "copy")
    by_id = {(id(r), id(s.modules.layouts[m])): (r, s.modules.layouts[m]) for m, r in s.modules.roles.items()
             if r.kind != "copy"}
    attn, mlp = [0.0, 0.0], [0.0, 0.0]
    for (rid, lid, routed), count in counts.items():
        role, lay = by_id[(rid, lid)]
        out2, in2 = padded_features(role, lay, s.shape.geometry, h2, kv2, new_inter)
        weight = count * (top_k / n_exp if routed and n_exp else 1)
        acc = attn if role.kind in ("q", "kv", "o", "qkv") else mlp
        acc[0] += weight * lay.out_features * lay.in_features
        acc[1] += weight * out2 * in2
    if s.modules.fused and n_exp:  # fused 3-D experts: [E, ...] each, a share top_k / E of the tokens
        inter, inter2 = s.shape.inter["expert"][1], new_inter["expert"]
        for name in s.modules.fused:
            t = s.modules.plain[name]
            per_expert = t.shape[1] * t.shape[2]
            mlp[0] += top_k * per_expert
            mlp[1] += top_k * per_expert * inter2 // inter
    return (attn[0], attn[1]), (mlp[0], mlp[1])


def _pct(before: float, after: float) -> float:
    return round(100.0 * (after - before) / before, 2) if before else 0.0
