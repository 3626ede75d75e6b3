"""Human-readable plan output, and the split of output shards into parts for fan-out runs."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap

from hubpad.plan.model import Plan
from hubpad.plan.vllm_route import route_flags
from hubpad.util.sizes import human


def _keys_text(keys: tuple[str, ...]) -> str:
    """A dim's config keys as the report shows them: the same key of several list entries (a Puzzle's
    block_configs.N.moe_intermediate_size) once, with how many blocks state it (hubpad.json lists each)."""
    by_template: dict[str, list[str]] = {}
    for key in keys:
        by_template.setdefault(re.sub(r"\.\d+\.", ".N.", key), []).append(key)
    return ", ".join(found[0] if len(found) == 1 else f"{template} ({len(found)} blocks)"
                     for template, found in by_template.items())


class _Row(str):
    """A line of a table: already fitted to the width by _table, so wrap_lines leaves it alone."""


def _table(rows: list[list[str]], width: int | None = None) -> list[str]:
    """Aligned columns. With `width`, a row too long for it continues its last column (the long lists: shard sources,
    rules, reasons) on the next lines, under that column; when the other columns leave too little room for that, the
    last column goes on lines of its own below the row."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    last = 2 + sum(w + 2 for w in widths[:-1])  # where the last column starts
    out: list[str] = []
    if width is not None and last > width and len(rows[0]) > 2:  # the columns cannot fit: one block per row
        for r in rows[1:]:
            lead = 2 if len("  " + "  ".join(r[:2])) <= width else 1
            out.append(_Row(("  " + "  ".join(r[:lead])).rstrip()))
            for name, value in zip(rows[0][lead:], r[lead:]):
                out += [_Row("      " + p) for p in textwrap.wrap(f"{name}: {value}", width - 6, break_long_words=True,
                                                                    break_on_hyphens=False,
                                                                    subsequent_indent="  ")]
        return out
    for n, r in enumerate(rows):
        head = "  " + "".join(c.ljust(w) + "  " for c, w in zip(r[:-1], widths[:-1]))
        if width is None or len(head) + len(r[-1]) <= width:
            out.append(_Row((head + r[-1]).rstrip()))
        elif width - last >= min(20, widths[-1]):
            pieces = textwrap.wrap(r[-1], width - last, break_long_words=True, break_on_hyphens=False) or [""]
            out.append(_Row((head + pieces[0]).rstrip()))
            out += [_Row(" " * last + p) for p in pieces[1:]]
        else:
            out.append(_Row(head.rstrip()))
            out += [_Row("      " + p) for p in textwrap.wrap(r[-1], width - 6, break_long_words=True,
                                                                break_on_hyphens=False)]
        if n == 0:
            inline = width is None or width - last >= min(20, widths[-1])
            rule = "  " + "  ".join("-" * min(w, width - last) if i == len(widths) - 1 and width else "-" * w
                                    for i, w in enumerate(widths if inline else widths[:-1]))
            out.append(_Row(rule))
    return out


def output_width() -> int | None:
    """The terminal's width (shutil's: $COLUMNS, else the terminal's size) when stdout is a terminal; None (no
    wrapping) when the output goes to a pipe or a file, so scripts and logs keep whole lines to grep."""
    if not sys.stdout.isatty():
        return None
    return max(shutil.get_terminal_size().columns, 40)


def wrap_lines(lines: list[str], width: int | None) -> list[str]:
    """Lines longer than `width` (tables are wrapped by _table already) continue under their own indent plus two."""
    if width is None:
        return lines
    out = []
    for line in lines:
        if len(line) <= width or isinstance(line, _Row):
            out.append(line)
        else:
            indent = " " * (len(line) - len(line.lstrip()) + 2)
            out += textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False)
    return out


def plan_text(plan: Plan, parts: list[dict] | None = None, width: int | None = None) -> str:
    """The plan as `hubpad plan` prints it: dims, changed tensors, per-rank table, shards, totals; lines wrapped to
    `width` (None: not wrapped)."""
    def table(rows: list[list[str]]) -> list[str]:
        return _table(rows, width)

    lines = [f"{plan.source.label} → TP={plan.tp}  ({plan.adapter.name}; {', '.join(plan.formats) or 'no linear layers'};"
             f" quantization: {plan.quant.method})", ""]
    if not plan.needs_padding:
        lines.append(f"No padding needed: this checkpoint already shards at TP={plan.tp}.")
    lines.append("Padded dims:")
    lines += table([["dim", "config key", "before", "after"]] +
                    [[d.name, _keys_text(d.config_keys), str(d.before), str(d.after)
                      + ("" if d.before == d.after else "  *")] for d in plan.dims])
    lines += _relabel_lines(plan.relabelled)
    lines += _route_lines(plan.vllm_route)
    lines += ["", *(f"Warning: {w}." for w in plan.warnings)] if plan.warnings else []
    groups = plan.padded_groups()
    lines.append("")
    lines.append(f"Tensors whose shape changes ({sum(g['count'] for g in groups)} of {len(plan.tensors)}; "
                 f"* = every layer index):")
    if groups:
        lines += table([["tensor", "before", "after", "count", "bytes added"]] +
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
    lines += table([["dim", "total", "per rank", "ok", "rule"]] +
                    [[r["dim"], str(r["total"]), str(r["per_rank"]), "yes" if r["ok"] else ("NO" if r.get("required", True) else "no (optional)"), r["rule"]]
                     for r in plan.rank_table])
    v = plan.vocab
    if v.get("patch_needed"):
        lines.append(f"  vocab {v['size']} is not padded on disk; the derivative ships a vLLM patch padding it to "
                     f"lcm(64, {plan.tp}) = {v['patch_pad_to']} → {v['patched_size']}")
    lines.append("")
    lines.append(f"Output shards ({len(plan.shards)}):")
    lines += table([["shard", "size", "tensors", "built from"]] +
                    [[s.name, human(s.size), str(len(s.tensors)),
                      ", ".join(f"{f} [{r[0][0]}…{r[-1][1]})" for f, r in s.source_ranges().items())]
                     for s in plan.shards])
    if parts:
        lines.append("")
        lines.append(f"Parts ({len(parts)}):")
        lines += table([["part", "shards", "bytes"]] +
                        [[f"{p['part']}/{len(parts)}", ", ".join(p["shards"]), human(p["bytes"])] for p in parts])
    lines.append("")
    lines.append(f"Total: {human(plan.bytes_in)} in ({len(plan.weight_files)} files) → {human(plan.bytes_out)} out; "
                 f"{len(plan.copied_files)} other files copied" +
                 (f", {len(plan.skipped_files)} skipped ({', '.join(plan.skipped_files[:3])})" if plan.skipped_files else ""))
    return "\n".join(wrap_lines(lines, width))


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
