"""Decoder layers whose attention holds a query head count of its own over the model's one kv head count: Step-3.7's
sliding layers (`attention_other_setting`), Laguna's `num_attention_heads_per_layer`. Written once here: each layer's
tensor roles, the HeadShape keys of each count with its ratio to the config's num_attention_heads
(`HeadShape.head_ratio`), and the padded counts the derivative writes.

Padding appends whole kv groups in every layer: a layer of c heads over kv kv heads keeps c / kv query heads per kv
head, so with kv' kv heads it holds c x kv' / kv = c x h' / h heads (h: num_attention_heads). The planner chooses h'
and kv' for the config's heads; head_problems checks every layer's count is whole and divides the TP.
"""

from __future__ import annotations

import math

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import Role, layers_pattern
from hubpad.plan.heads import HeadShape


def count_key(key: str, count: int, base: int) -> str:
    """The width key of a per-head layer (q, o, a gate) in layers of `count` heads: its own key at the base count."""
    return key if count == base else f"{key}@{count}"


def patterns(layers: str, counts: list[int], base: int, projections: dict[str, Role]) -> list[tuple[str, Role]]:
    """Each attention projection's (pattern, role) per head count: `layers` is the family's layer prefix (with one
    `(\\d+)` group), `counts` every layer's query heads (empty: every layer has `base`), `projections` the roles of
    a base-count layer by the pattern tail after the layer prefix. The q/o-kind roles of the other counts take their
    count's width keys; kv roles are the same in every layer."""
    by_count: dict[int, list[str]] = {}
    for i, count in enumerate(counts):
        by_count.setdefault(count, []).append(str(i))
    out = []
    for count, idx in (by_count or {base: [r"\d+"]}).items():
        layer = layers_pattern(idx, layers)
        for tail, role in projections.items():
            keyed = Role(role.kind, count_key(role.width_key, count, base)) if role.kind in ("q", "o") else role
            out.append((layer + tail, keyed))
    return out


def head_shape(widths: dict[str, int], labels: dict[str, str], counts: list[int], base: int, kv: int,
               names: dict[int, str] | None = None, gates: frozenset[str] = frozenset()) -> HeadShape:
    """The HeadShape of a model with these per-layer head counts: `widths` / `labels` are a base-count layer's (with
    "kv"), `names` an optional name per count for the labels ("full", "sliding"); every other count's q/o/gate keys
    hold the base width in `count / base` of the heads."""
    names = names or {}
    for count in sorted(set(counts) | {base}):
        if count % kv:
            raise ConfigError(f"config.json: layers of {count} attention heads are not a multiple of the {kv} kv heads")
    all_widths, all_labels, ratio, all_gates = {}, {}, {}, set()
    for count in sorted(set(counts) | {base}, key=lambda c: c != base):
        g = math.gcd(count, base)
        for key, width in widths.items():
            if key == "kv" and count != base:
                continue
            own = key if key == "kv" else count_key(key, count, base)
            all_widths[own] = width
            all_labels[own] = labels[key] + (f" ({names[count]})" if count in names and key != "kv" else "")
            if own != key:
                ratio[own] = (count // g, base // g)
            if key in gates:
                all_gates.add(own)
    return HeadShape(all_widths, all_labels, kv_heads=True, config_head_dim=widths.get("q"), head_ratio=ratio,
                     gates=frozenset(all_gates))


def padded(counts: list[int], base: int, base2: int) -> list[int]:
    """Every layer's head count once the config's `base` heads became `base2` (whole kv groups)."""
    return [count * base2 // base for count in counts]
