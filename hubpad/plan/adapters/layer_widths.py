"""Decoder layers whose MLP or expert widths are their own: Nemotron-H Puzzle's `block_configs`, where almost every MoE
layer has a moe_intermediate_size of its own (Nemotron-Labs-3-Puzzle-75B-A9B: 1280, 1536, 1792, 2048, 2688). Written
once here: which width each layer has, the intermediate group of each width with the config keys that state it, and
each group's tensor roles.

A layer's width is its block's value, else config.json's (as vLLM's get_nemotron_h_config_for_layer overlays a block on
the config). The layers of one width share a group, `<kind>@<width>` ("expert@1280"; the kind alone when every layer
has the same width): the planner pads it as it pads that kind (adapters/base.py `width_kind`: routed experts in
64-wide per-rank tiles, dense and shared MLPs in 128-wide ones), and writes the padded width at every key that stated
it (`block_configs.9.moe_intermediate_size`). Zero columns of a relu2 / silu MLP add nothing, whatever its width.
"""

from __future__ import annotations

from dataclasses import dataclass

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import Role


@dataclass(frozen=True)
class Layer:
    """One decoder layer as its config states it: its tensor-name prefix (a regex from `^` to the layer's `.`), where
    its block lives in config.json (a dotted path, "block_configs.9"), and the block."""

    prefix: str
    path: str
    block: dict


@dataclass(frozen=True)
class Width:
    """The layers of one width: the width, the config keys stating it, and the layers' name prefixes."""

    size: int
    keys: tuple[str, ...]
    prefixes: tuple[str, ...]


def widths(layers: list[Layer], kind: str, key: str, config: dict) -> dict[str, Width]:
    """The intermediate groups of `kind` over `layers` (those that have the sublayer), by width: `key` in each layer's
    block, else config.json's `key`; empty when no layer has it."""
    by_size: dict[int, list[tuple[str, str]]] = {}
    for layer in layers:
        stated = key in layer.block
        size = layer.block[key] if stated else config.get(key)
        if type(size) is not int or size <= 0:
            where = f"{layer.path}.{key}" if stated else key
            raise ConfigError(f"config.json: {where} is {size!r}, not a positive integer (the {kind} width of the "
                              f"layer {layer.path} describes)")
        by_size.setdefault(size, []).append((f"{layer.path}.{key}" if stated else key, layer.prefix))
    return {(kind if len(by_size) == 1 else f"{kind}@{size}"):
            Width(size, tuple(dict.fromkeys(k for k, _ in found)), tuple(p for _, p in found))
            for size, found in sorted(by_size.items())}


def patterns(groups: dict[str, Width], tails: dict[str, str]) -> list[tuple[str, Role]]:
    """Each group's (pattern, role) for its layers: `tails` maps a tensor-name tail (a regex after the layer prefix) to
    its role kind, "rows" (the width is its output) or "cols" (its input)."""
    out = []
    for group, width in groups.items():
        layers = "^(?:" + "|".join(p[1:] for p in width.prefixes) + ")"
        out += [(layers + tail, Role(kind, group)) for tail, kind in tails.items()]
    return out
