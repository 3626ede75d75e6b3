"""Plan a padding from config.json, the index and the safetensors headers alone (never tensor data).

The plan fixes everything before a byte moves, as llm-compressor's model-free path does: the padded dims,
the byte recipe of every output tensor, the output shard layout and the per-rank divisibility table.
Every shard header is validated here, so a bad input fails before anything is written.
"""

from __future__ import annotations

import fnmatch
import gc
import math
from collections import OrderedDict

from hubpad.errors import HubpadError
from hubpad.formats.names import GENERATED, INDEX, SKIPPED_PATTERNS
from hubpad.formats.safetensors import SafetensorsHeader, TensorInfo
from hubpad.plan.adapters import adapter_for
from hubpad.plan.adapters.base import COPY, Role
from hubpad.plan.dims import (
    EXPERT_TILE,
    MLP_TILE,
    choose_heads,
    choose_heads_quiet,
    choose_intermediate,
    make_rank_table,
    vocab_info,
)
from hubpad.plan.model import _COPY_OP, Dim, PadOp, Plan, TensorPlan
from hubpad.plan.ops import _tensor_op
from hubpad.plan.quant import LINEAR_SUFFIXES, LinearLayout, QuantConfig, detect_layout
from hubpad.plan.shards import cut_shards
from hubpad.source.base import Source
from hubpad.source.readers import read_header, read_json, weight_files

# --------------------------------------------------------------------------------------------------
# Reading the source








# --------------------------------------------------------------------------------------------------
# Choosing dims














# --------------------------------------------------------------------------------------------------
# Per-tensor byte recipes






# --------------------------------------------------------------------------------------------------
# The planner


def _split_param(name: str) -> tuple[str, str] | None:
    module, _, suffix = name.rpartition(".")
    if module and suffix in LINEAR_SUFFIXES:
        return module, suffix
    return None


def make_plan(source: Source, tp: int, shard_size: int = 5 * 10**9) -> Plan:
    """Read config, index and headers from `source` and decide the whole padding for `tp`."""
    # A real Hy3 plan creates ~10^6 short-lived containers and no reference cycles: the cyclic collector would
    # only re-scan them over and over (8 % of planning time), so it pauses while planning.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _make_plan(source, tp, shard_size)
    finally:
        if enabled:
            gc.enable()


def _make_plan(source: Source, tp: int, shard_size: int) -> Plan:
    if tp < 1:
        raise HubpadError(f"--tp must be at least 1, got {tp}")
    files = source.files()
    if "config.json" not in files:
        raise HubpadError(f"{source.label}: no config.json (is this a model checkpoint?)")
    config = read_json(source, "config.json")
    hf_quant = read_json(source, "hf_quant_config.json") if "hf_quant_config.json" in files else None
    text_cfg = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    if text_cfg is not None:
        raise HubpadError("config.json: multimodal checkpoints (text_config) are not supported yet")
    adapter = adapter_for(config)
    quant = QuantConfig.read(config, hf_quant)
    names, index = weight_files(source)

    headers: list[SafetensorsHeader] = [read_header(source, files[n]) for n in names]
    infos: dict[str, TensorInfo] = {}
    for h in headers:
        for t in h.tensors:
            if t.name in infos:
                raise HubpadError(f"tensor {t.name!r} appears in both {infos[t.name].file} and {t.file}")
            infos[t.name] = t
    if index:
        weight_map = index["weight_map"]
        for name, t in infos.items():
            if weight_map.get(name) != t.file:
                raise HubpadError(f"{INDEX}: tensor {name!r} is in {t.file} but the index says {weight_map.get(name)!r}")
        missing = set(weight_map) - set(infos)
        if missing:
            raise HubpadError(f"{INDEX}: tensor {sorted(missing)[0]!r} is listed but not in any shard header")

    # Group linear-layer parameters by module; everything else must be a known copy.
    modules: dict[str, dict[str, TensorInfo]] = OrderedDict()
    plain: dict[str, TensorInfo] = {}
    for name, t in infos.items():
        split = _split_param(name)
        if split and not adapter.is_copy_param(name):
            modules.setdefault(split[0], {})[split[1]] = t
        else:
            plain[name] = t
    for name in plain:
        if not adapter.is_copy_param(name):
            raise HubpadError(f"tensor {name}: not a tensor hubpad knows for {adapter.name}; refusing to guess")

    hidden = int(config.get("hidden_size", 0))
    heads = int(_required(config, "num_attention_heads"))
    kv = int(config.get("num_key_value_heads") or heads)
    hd = int(config.get("head_dim") or (hidden // heads))
    inter = adapter.intermediate_sizes(config)

    roles: dict[str, Role] = {}
    layouts: dict[str, LinearLayout] = {}
    layout_of: dict[tuple, LinearLayout] = {}
    for module, params in modules.items():
        role = adapter.linear_role(module)
        if role is None:
            if adapter.is_per_head_norm(module) and set(params) == {"weight"}:
                if params["weight"].shape != (hd,):
                    raise HubpadError(f"tensor {module}.weight: per-head norm of shape {list(params['weight'].shape)}, "
                                      f"expected [{hd}]")
                role = COPY
            else:
                raise HubpadError(f"tensor {module}.{next(iter(params))}: not a tensor hubpad knows for "
                                  f"{adapter.name}; refusing to guess")
        roles[module] = role
        if role.kind != "copy":
            # The layout follows from the parameters' names, dtypes and shapes (and the config): identical
            # expert modules share one, detected (with every check) on the first of them.
            sig = tuple((suffix, p.dtype, p.shape) for suffix, p in params.items())
            if sig not in layout_of:
                layout_of[sig] = detect_layout(module, params, quant)
            layouts[module] = layout_of[sig]

    # Alignment demanded by every layer that shares a padded dim. Both loops below depend only on the
    # (role, layout) pair, so they visit each distinct pair once, at its first module (same answers and errors).
    distinct: dict[tuple[int, int], tuple[str, Role, LinearLayout]] = {}
    for module, role in roles.items():
        if role.kind != "copy":
            distinct.setdefault((id(role), id(layouts[module])), (module, role, layouts[module]))
    aligns = {"q_n": 1, "kv_n": 1, "o_k": 1}
    group_align: dict[str, list[int]] = {}
    for module, role, lay in distinct.values():
        key = {"q": "q_n", "kv": "kv_n", "o": "o_k"}.get(role.kind)
        if key:
            aligns[key] = math.lcm(aligns[key], lay.n_align if role.kind != "o" else lay.k_align)
        elif role.group == "expert":  # routed experts run in fused-MoE kernels, with their own rules
            a = group_align.setdefault(role.group, [EXPERT_TILE, EXPERT_TILE])
            a[0] = a[1] = math.lcm(a[0], lay.moe_align)
        else:
            a = group_align.setdefault(role.group, [MLP_TILE, MLP_TILE])
            if role.kind == "rows":
                a[0] = math.lcm(a[0], lay.n_align)
            else:
                a[1] = math.lcm(a[1], lay.k_align)

    # Check the config against the headers before choosing anything.
    expected = {"q": ("out_features", heads * hd), "kv": ("out_features", kv * hd), "o": ("in_features", heads * hd)}
    for module, role, lay in distinct.values():
        if role.kind in expected:
            attr, want = expected[role.kind]
        else:
            if role.group not in inter:
                raise HubpadError(f"tensor {module}: config.json has no size for its {role.group} intermediate "
                                  f"({', '.join(adapter.intermediate_keys.get(role.group, ()))})")
            attr, want = ("out_features" if role.kind == "rows" else "in_features"), inter[role.group][1]
        if getattr(lay, attr) != want:
            raise HubpadError(f"tensor {module}: {attr.replace('_', ' ')} {getattr(lay, attr)} disagrees with "
                              f"config.json ({want})")

    h2, kv2 = choose_heads(heads, kv, hd, tp, aligns, hidden, adapter)
    dims = [Dim("attention heads", ("num_attention_heads",), heads, h2),
            Dim("kv heads", ("num_key_value_heads",), kv, kv2),
            Dim("head dim", ("head_dim",), hd, hd)]
    new_inter: dict[str, int] = {}
    for group, (keys, size) in inter.items():
        n_al, k_al = group_align.get(group, [MLP_TILE, MLP_TILE])
        new_inter[group] = choose_intermediate(size, tp, n_al, k_al)
        dims.append(Dim(f"{group} intermediate", keys, size, new_inter[group]))

    new_config = {"num_attention_heads": h2, "num_key_value_heads": kv2, "head_dim": hd}
    for d in dims[3:]:
        for k in d.config_keys:
            new_config[k] = d.after

    # Byte recipes. A recipe depends only on the layout, the parameter's dtype/shape and the target dims, so
    # the thousands of identical expert tensors share one (computed, with every check, for the first of them).
    tplans: dict[str, TensorPlan] = {}
    recipes: dict[tuple, tuple[PadOp, tuple]] = {}
    for module, params in modules.items():
        role = roles[module]
        for suffix, t in params.items():
            if role.kind == "copy":
                op, shape = _COPY_OP, t.shape
            else:
                lay = layouts[module]
                out2, in2 = lay.out_features, lay.in_features
                if role.kind == "q":
                    out2 = h2 * hd
                elif role.kind == "kv":
                    out2 = kv2 * hd
                elif role.kind == "o":
                    in2 = h2 * hd
                elif role.kind == "rows":
                    out2 = new_inter[role.group]
                elif role.kind == "cols":
                    in2 = new_inter[role.group]
                if suffix == "bias" and role.kind in ("o", "cols"):
                    op, shape = _COPY_OP, t.shape
                else:
                    key = (id(lay), id(role), suffix, t.dtype, t.shape, out2, in2)  # layouts are shared objects
                    recipe = recipes.get(key)
                    if recipe is None:
                        recipe = recipes[key] = _tensor_op(t, suffix, lay, out2, in2, role)
                    op, shape = recipe
            tplans[t.name] = _finish(t, op, shape)
    for name, t in plain.items():
        tplans[name] = _finish(t, _COPY_OP, t.shape)

    file_order = {n: i for i, n in enumerate(names)}
    ordered = sorted(tplans.values(), key=lambda p: (file_order[p.src.file], p.src.start))
    metadata = next((h.metadata for h in headers if h.metadata), {"format": "pt"})
    shards = cut_shards(ordered, shard_size, metadata)

    formats = sorted({lay.format_tag for lay in layouts.values()})
    copied, skipped = [], []
    for path in files:
        if path in GENERATED or path in names:
            continue
        if any(fnmatch.fnmatch(path, p) for p in SKIPPED_PATTERNS) and path != ".gitattributes":
            skipped.append(path)
        elif path != ".gitattributes":
            copied.append(path)

    merged = dict(config)
    merged.update(new_config)
    vocab = vocab_info(int(config.get("vocab_size", 0)), tp)
    rank_table = make_rank_table(tp, h2, kv2, hd, aligns, new_inter, group_align, vocab, config, adapter, hidden)
    upstream_ok = [t for t in range(1, 9) if choose_heads_quiet(heads, kv, hd, t, aligns, hidden, adapter)
                   and all(choose_intermediate(s, t, *group_align.get(g, [MLP_TILE, MLP_TILE])) == s
                           for g, (_, s) in inter.items())]
    index_metadata = {k: v for k, v in (index.get("metadata") or {}).items() if k != "total_size"}
    return Plan(source=source, tp=tp, config=config, new_config=merged, adapter=adapter, quant=quant, formats=formats,
                dims=dims, tensors=ordered, shards=shards, files=files, weight_files=names, copied_files=copied,
                skipped_files=skipped, rank_table=rank_table, vocab=vocab, upstream_tp_values=upstream_ok,
                index_metadata=index_metadata)


def _required(config: dict, key: str):
    if config.get(key) is None:
        raise HubpadError(f"config.json: missing {key}")
    return config[key]


def _finish(t: TensorInfo, op: PadOp, shape: tuple[int, ...]) -> TensorPlan:
    if op.kind == "copy" and shape == t.shape:  # most tensors: size already checked against the shape by the header
        return TensorPlan(t.name, t.dtype, t.shape, t, op, t.end - t.start)
    if op.kind == "copy":
        nbytes = t.nbytes
    elif op.kind == "pad":
        nbytes = op.batch * op.new_rows * op.new_row_bytes
    elif op.kind == "append":
        nbytes = t.nbytes + len(op.data)
    else:
        nbytes = len(op.data)
    if nbytes != math.prod(shape) * t.itemsize:
        raise HubpadError(f"tensor {t.name}: internal error, {nbytes} bytes planned for shape {list(shape)}")
    return TensorPlan(t.name, t.dtype, tuple(shape), t, op, nbytes)








