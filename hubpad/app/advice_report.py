"""The text of `hubpad plan SRC` without one TP size: the TP advisor's table, one row per TP."""

from __future__ import annotations

from hubpad.app.report import _table
from hubpad.plan.advisor import KV_CACHE_BYTES, Advice, Row
from hubpad.util.sizes import human

_SHORT = {"attention heads": "heads", "kv heads": "kv"}


def dims_cell(row: Row) -> str:
    """The padded dims in one short cell: `heads 64→72, kv 8→9, dense 28672→28800`."""
    if row.verdict == "cannot":
        return "—"
    parts = [f"{_SHORT.get(d['name'], d['name'].removesuffix(' intermediate'))} {d['before']}→{d['after']}"
             for d in row.dims]
    return ", ".join(parts) or "none"


def cost_cells(row: Row) -> list[str]:
    """Extra disk, extra KV cache per token (all ranks), extra attention / MLP FLOPs per token."""
    if row.verdict == "cannot":
        return ["—"] * 4
    kv = "+0" if not row.extra_kv_bytes_per_token else f"+{human(row.extra_kv_bytes_per_token)}"
    base = row.kv_bytes_per_token - row.extra_kv_bytes_per_token
    if row.extra_kv_bytes_per_token and base:
        kv += f" (+{100 * row.extra_kv_bytes_per_token / base:.1f}%)"
    return [human(row.extra_bytes) if row.extra_bytes else "0", kv, f"+{row.attention_flops_pct:.1f}%",
            f"+{row.mlp_flops_pct:.1f}%"]


def advice_text(advice: Advice) -> str:
    """One row per TP: verdict, padded dims, costs and why; then what the columns mean."""
    lines = [f"{advice.source}  ({advice.architecture}; {', '.join(advice.formats) or 'no linear layers'}): "
             f"which tensor-parallel sizes work, and what padding costs", ""]
    rows = [["tp", "verdict", "padded dims", "extra disk", "extra KV/token", "attn FLOPs", "MLP FLOPs", "why"]]
    for r in advice.rows:
        rows.append([str(r.tp), r.verdict + (" + vocab patch" if r.vocab_patch and r.verdict != "cannot" else ""),
                     dims_cell(r), *cost_cells(r), "; ".join(r.why) or "—"])
    lines += _table(rows)
    lines += ["", f"extra KV/token: K and V of every attention layer in a {8 * KV_CACHE_BYTES}-bit cache, summed over "
              "all ranks (kv heads replicated when TP > kv heads count on every rank), against the unsharded "
              "upstream. FLOPs: per token, projections only (attention scores grow as the heads do); routed "
              "experts weighted by num_experts_per_tok / num_experts.",
              "`hubpad plan SRC --tp N` shows the full plan for one size."]
    return "\n".join(lines)
