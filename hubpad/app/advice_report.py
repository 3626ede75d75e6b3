"""The text of `hubpad plan SRC` without one TP size: the TP advisor's table, one row per TP."""

from __future__ import annotations

from hubpad.app.report import _table, wrap_lines
from hubpad.plan.advisor import KV_CACHE_BYTES, Advice, Row
from hubpad.plan.vllm_route import route_flags
from hubpad.util.sizes import human

_SHORT = {"attention heads": "heads", "kv heads": "kv"}


def verdict_cell(row: Row) -> str:
    """`as is`, `pad` or `cannot`; a padded row says when the vocab patch ships and when the derivative takes
    another architecture label (plan/relabel.py: a Llama written as MistralForCausalLM) or must be served through
    another vLLM class (a VllmRoute: a head-padded Qwen2 as vLLM's Llama)."""
    if row.verdict == "cannot":
        return row.verdict
    cell = row.verdict + (" + vocab patch" if row.vocab_patch else "")
    if row.relabelled:
        cell += f", as {_label(row.relabelled)}"
    route = row.vllm_route
    if route and route.get("hf_overrides"):
        overrides = route["hf_overrides"]
        overrides = overrides.get("text_config", overrides)  # a language model inside a VLM (adapters/nested_lm.py)
        cell += f", served as {overrides['architectures'][0]} (--hf-overrides)"
    elif route and route.get("model_impl"):
        cell += f", served with --model-impl {route['model_impl']}"
    return cell


def dims_cell(row: Row) -> str:
    """The padded dims in one short cell: `heads 64→72, kv 8→9, dense 28672→28800`. MLA's num_key_value_heads,
    which follows the heads in config.json but caches nothing, is left out (the --json rows keep it)."""
    if row.verdict == "cannot":
        return "—"
    parts = [f"{_SHORT.get(d['name'], d['name'].removesuffix(' intermediate'))} {d['before']}→{d['after']}"
             for d in row.dims if not (row.kv_cache == "latent" and d["name"] == "kv heads")]
    return ", ".join(parts) or "none"


def cost_cells(row: Row) -> list[str]:
    """Extra disk, extra KV cache per token (all ranks, with padding's share when replication adds more),
    extra attention / MLP FLOPs per token."""
    if row.verdict == "cannot":
        return ["—"] * 4
    kv = "+0" if not row.extra_kv_bytes_per_token else f"+{human(row.extra_kv_bytes_per_token)}"
    base = row.kv_bytes_per_token - row.extra_kv_bytes_per_token
    if row.extra_kv_bytes_per_token and base:
        kv += f" (+{100 * row.extra_kv_bytes_per_token / base:.1f}%)"
    if row.padding_kv_bytes_per_token != row.extra_kv_bytes_per_token:
        padding = row.padding_kv_bytes_per_token
        kv += f"; padding {'+' + human(padding) if padding else '+0'}"
    return [human(row.extra_bytes) if row.extra_bytes else "0", kv, f"+{row.attention_flops_pct:.1f}%",
            f"+{row.mlp_flops_pct:.1f}%"]


ADVICE_HEADER = ["tp", "verdict", "padded dims", "extra disk", "extra KV/token", "attn FLOPs", "MLP FLOPs", "why"]


def advice_title(advice: Advice) -> str:
    return (f"{advice.source}  ({advice.architecture}; {', '.join(advice.formats) or 'no linear layers'}): "
            f"which tensor-parallel sizes work, and what padding costs")


def advice_rows(advice: Advice) -> list[list[str]]:
    """The table's cells, one row per TP under ADVICE_HEADER: what the CLI prints and a web page shows."""
    return [[str(r.tp), verdict_cell(r), dims_cell(r), *cost_cells(r), "; ".join(r.why) or "—"] for r in advice.rows]


def advice_notes(advice: Advice) -> list[str]:
    """What the columns mean, and the relabel / vLLM route notes the rows refer to."""
    lines = [f"extra KV/token: what vLLM caches per token in a {8 * KV_CACHE_BYTES}-bit cache, summed over all "
             "ranks, against the unsharded upstream: K and V of every attention layer's kv heads (replicated when "
             "TP > kv heads), or MLA's latent (kv_lora_rank + qk_rope_head_dim), which every rank holds whole and "
             "no head count changes; `padding` is the part padding adds when replication adds the rest. FLOPs: "
             "per token, projections only (attention scores grow as the heads do); routed experts weighted by "
             "num_experts_per_tok / num_experts."]
    relabel = next((r.relabelled for r in advice.rows if r.relabelled), None)
    if relabel:
        arch = _label(relabel)
        lines.append(f"as {arch}: the derivative's config is labelled {arch}, because transformers' "
                     f"{relabel['from']['model_type']} config rejects padded heads that do not divide hidden_size "
                     f"and {arch}'s computes the same function; {relabel['vllm']}.")
    route = next((r.vllm_route for r in advice.rows if r.vllm_route), None)
    if route:
        lines.append(f"serve with {' '.join(route_flags(route))}: {route['why']}; {route['route']}.")
    return lines


def advice_text(advice: Advice, width: int | None = None) -> str:
    """One row per TP: verdict, padded dims, costs and why; then what the columns mean."""
    lines = [advice_title(advice), ""]
    lines += _table([ADVICE_HEADER, *advice_rows(advice)], width)
    lines += ["", *advice_notes(advice), "`hubpad plan SRC --tp N` shows the full plan for one size."]
    return "\n".join(wrap_lines(lines, width))


def _label(relabel: dict) -> str:
    """The new label: its architecture, or its model_type where the architectures stay (an EAGLE-3 draft's)."""
    to, before = relabel["to"], relabel["from"]
    return to["architectures"][0] if to["architectures"] != before["architectures"] else f"model_type {to['model_type']}"
