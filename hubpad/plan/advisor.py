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
from hubpad.plan.dims import MLP_TILE, choose_intermediate, head_problems, kv_per_rank
from hubpad.plan.planner import Survey, padded_features, plan_for, survey
from hubpad.source.base import Source

DEFAULT_TPS = tuple(range(1, 9))
# Routed experts (`...experts.<i>.<proj>` in every supported family; shared experts are named otherwise): each
# token runs num_experts_per_tok of them, so they weigh that share in the per-token FLOPs.
ROUTED_EXPERT = re.compile(r"\.experts\.\d+\.")
KV_CACHE_BYTES = 2  # BF16 KV cache (vLLM's default kv_cache_dtype "auto" for BF16/FP8/NVFP4 checkpoints)
_NO_SHARDS = 1 << 62  # the advisor needs no output shard layout: one (never written) shard


@dataclass
class Row:
    """One TP size: the verdict, why, the padded dims and what padding costs."""

    tp: int
    verdict: str  # "as is" | "pad" | "cannot"
    why: list[str] = field(default_factory=list)
    dims: list[dict] = field(default_factory=list)  # changed dims only
    vocab_patch: bool = False
    extra_bytes: int = 0
    kv_bytes_per_token: int = 0  # stored across all ranks (replicated kv heads count on every rank)
    extra_kv_bytes_per_token: int = 0  # vs the unsharded upstream
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
    row = Row(tp, "pad" if plan.needs_padding else "as is", why=_why(s, tp), vocab_patch=plan.vocab["patch_needed"])
    row.dims = [{"name": d.name, "config_key": d.config_keys[0] if d.config_keys else None, "before": d.before,
                 "after": d.after} for d in plan.dims if d.before != d.after]
    row.extra_bytes = sum(t.nbytes - t.src.nbytes for t in plan.tensors if t.padded)
    after = {d.config_keys[0]: d.after for d in plan.dims if d.config_keys}
    _costs(s, tp, row, after["num_attention_heads"], after["num_key_value_heads"], plan)
    if row.vocab_patch:
        row.why.append(f"vocab {plan.vocab['padded_to_64']} % {tp} != 0: the derivative ships vLLM's vocab patch")
    return row


def _why(s: Survey, tp: int) -> list[str]:
    """Why the upstream does not serve at `tp` as it is (the planner's own rules); empty when it does."""
    sh = s.shape
    why = head_problems(sh.heads, sh.kv, sh.head_dim, tp, s.aligns, sh.hidden, s.inputs.adapter)
    for group, (_, size) in sh.inter.items():
        aligns = s.group_align.get(group, (MLP_TILE, MLP_TILE))
        if choose_intermediate(size, tp, *aligns) != size:
            per_rank = f"{size // tp}" if size % tp == 0 else f"{size}/{tp}"
            why.append(f"{group} intermediate {size}: {per_rank} per rank is not a multiple of "
                       f"{math.lcm(*aligns)} (what its storage format needs per rank)")
    return why


def _costs(s: Survey, tp: int, row: Row, h2: int, kv2: int, plan) -> None:
    """KV cache per token and per-token FLOPs before and after padding, from the modules' logical shapes."""
    sh = s.shape
    layers = _attention_layers(s)
    per_kv_head = 2 * sh.head_dim * KV_CACHE_BYTES * layers  # K and V, every attention layer
    row.kv_bytes_per_token = kv_per_rank(kv2, tp) * tp * per_kv_head
    row.extra_kv_bytes_per_token = row.kv_bytes_per_token - sh.kv * per_kv_head
    after = {d.config_keys: d.after for d in plan.dims}
    attn, mlp = _flops(s, h2, kv2, {g: after[keys] for g, (keys, _) in sh.inter.items()})
    row.attention_flops_pct = _pct(*attn)
    row.mlp_flops_pct = _pct(*mlp)
    row.attention_score_flops_pct = _pct(sh.heads, h2)


def _attention_layers(s: Survey) -> int:
    return sum(1 for r in s.modules.roles.values() if r.kind == "q")


def _flops(s: Survey, h2: int, kv2: int, new_inter: dict[str, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(before, after) multiply-adds per token of the attention projections and of the MLPs (experts weighted by
    the share of tokens routed to each: num_experts_per_tok / num_experts)."""
    cfg = s.inputs.config
    n_exp = cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
    top_k = cfg.get("num_experts_per_tok") or 0
    counts = Counter((id(role), id(s.modules.layouts[m]), ROUTED_EXPERT.search(m + ".") is not None)
                     for m, role in s.modules.roles.items() if role.kind != "copy")
    by_id = {(id(r), id(s.modules.layouts[m])): (r, s.modules.layouts[m]) for m, r in s.modules.roles.items()
             if r.kind != "copy"}
    attn, mlp = [0.0, 0.0], [0.0, 0.0]
    for (rid, lid, routed), count in counts.items():
        role, lay = by_id[(rid, lid)]
        out2, in2 = padded_features(role, lay, s.shape.head_dim, h2, kv2, new_inter)
        weight = count * (top_k / n_exp if routed and n_exp else 1)
        acc = attn if role.kind in ("q", "kv", "o") else mlp
        acc[0] += weight * lay.out_features * lay.in_features
        acc[1] += weight * out2 * in2
    return (attn[0], attn[1]), (mlp[0], mlp[1])


def _pct(before: float, after: float) -> float:
    return round(100.0 * (after - before) / before, 2) if before else 0.0
