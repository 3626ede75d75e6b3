"""Human-readable plan output, and the split of output shards into parts for fan-out runs."""

from __future__ import annotations

from hubpad.plan.model import Plan
from hubpad.plan.vllm_route import route_flags
from hubpad.util.sizes import human


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


def plan_text(plan: Plan, parts: list[dict] | None = None) -> str:
    """The plan as `hubpad plan` prints it: dims, changed tensors, per-rank table, shards, totals."""
    lines = [f"{plan.source.label} → TP={plan.tp}  ({plan.adapter.name}; {', '.join(plan.formats) or 'no linear layers'};"
             f" quantization: {plan.quant.method})", ""]
    if not plan.needs_padding:
        lines.append(f"No padding needed: this checkpoint already shards at TP={plan.tp}.")
    lines.append("Padded dims:")
    lines += _table([["dim", "config key", "before", "after"]] +
                    [[d.name, ", ".join(d.config_keys), str(d.before), str(d.after)
                      + ("" if d.before == d.after else "  *")] for d in plan.dims])
    lines += _relabel_lines(plan.relabelled)
    lines += _route_lines(plan.vllm_route)
    lines += ["", *(f"Warning: {w}." for w in plan.warnings)] if plan.warnings else []
    groups = plan.padded_groups()
    lines.append("")
    lines.append(f"Tensors whose shape changes ({sum(g['count'] for g in groups)} of {len(plan.tensors)}; "
                 f"* = every layer index):")
    if groups:
        lines += _table([["tensor", "before", "after", "count", "bytes added"]] +
                        [[g["pattern"], str(g["before"]), str(g["after"]), str(g["count"]), human(g["bytes_added"])]
                         for g in groups])
        scaled = [g for g in groups if "scale" in g]
        if scaled:  # a scaled copy (MiniMax-M2's q/k norm over all heads): the values change, not only the shape
            lines.append("  rescaled (every stored value x the factor, rounded to its dtype; hubpad verify checks "
                         "each): " + "; ".join(f"{g['pattern']} x {g['scale']:.6f}" for g in scaled))
    else:
        lines.append("  (none)")
    lines.append("")
    lines.append(f"Per-rank divisibility at TP={plan.tp}:")
    lines += _table([["dim", "total", "per rank", "ok", "rule"]] +
                    [[r["dim"], str(r["total"]), str(r["per_rank"]), "yes" if r["ok"] else ("NO" if r.get("required", True) else "no (optional)"), r["rule"]]
                     for r in plan.rank_table])
    v = plan.vocab
    if v.get("patch_needed"):
        lines.append(f"  vocab {v['size']} is not padded on disk; the derivative ships a vLLM patch padding it to "
                     f"lcm(64, {plan.tp}) = {v['patch_pad_to']} → {v['patched_size']}")
    lines.append("")
    lines.append(f"Output shards ({len(plan.shards)}):")
    lines += _table([["shard", "size", "tensors", "built from"]] +
                    [[s.name, human(s.size), str(len(s.tensors)),
                      ", ".join(f"{f} [{r[0][0]}…{r[-1][1]})" for f, r in s.source_ranges().items())]
                     for s in plan.shards])
    if parts:
        lines.append("")
        lines.append(f"Parts ({len(parts)}):")
        lines += _table([["part", "shards", "bytes"]] +
                        [[f"{p['part']}/{len(parts)}", ", ".join(p["shards"]), human(p["bytes"])] for p in parts])
    lines.append("")
    lines.append(f"Total: {human(plan.bytes_in)} in ({len(plan.weight_files)} files) → {human(plan.bytes_out)} out; "
                 f"{len(plan.copied_files)} other files copied" +
                 (f", {len(plan.skipped_files)} skipped ({', '.join(plan.skipped_files[:3])})" if plan.skipped_files else ""))
    return "\n".join(lines)


def _route_lines(r: dict | None) -> list[str]:
    """How vLLM must serve the derivative when its own class would misread the padded config (VllmRoute)."""
    if not r:
        return []
    return ["", f"Served by vLLM with: {' '.join(route_flags(r))}", f"  Why: {r['why']}.", f"  {r['route']}."]


def _relabel_lines(r: dict | None) -> list[str]:
    """The architecture label change (plan/relabel.py), said plainly."""
    if not r:
        return []
    return ["", f"Architecture label: {', '.join(r['from']['architectures'])} → {', '.join(r['to']['architectures'])} "
                f"(model_type {r['from']['model_type']} → {r['to']['model_type']}).",
            f"  Why: {r['why']}.", f"  {r['vllm']}."]
