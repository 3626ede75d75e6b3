"""Plan a padding from config.json, the index and the safetensors headers alone (never tensor data).

The plan fixes everything before a byte moves, as llm-compressor's model-free path does: the padded dims,
the byte recipe of every output tensor, the output shard layout and the per-rank divisibility table.
Every shard header is validated here, so a bad input fails before anything is written.

`make_plan` reads as its steps: read the inputs → group tensors by module → give each module a role and a
storage layout → gather the alignments each padded dim must meet → check config against headers → choose
the dims → write each tensor's byte recipe → cut shards → sort the other files.
"""

from __future__ import annotations

import fnmatch
import gc
import math
import re
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter

from hubpad.errors import ConfigError, HubpadError
from hubpad.formats.names import GENERATED, INDEX, SKIPPED_PATTERNS
from hubpad.formats.recipe import COPY_OP, PadOp
from hubpad.formats.safetensors import SafetensorsHeader, TensorInfo
from hubpad.plan.adapters import adapter_for, check_config_values, check_refused, mistral_format_refusal
from hubpad.plan.adapters.base import COPY, Adapter, FusedExperts, PreshardedQKV, Role, width_kind
from hubpad.plan.dims import (
    EXPERT_TILE,
    growth_tile,
    head_problems,
    Aligns,
    choose_intermediate,
    heads_shard_as_is,
    make_rank_table,
    vocab_info,
)
from hubpad.plan import folders, gdn, kda, lightning, lossless, mamba2, tower
from hubpad.plan.presharded import Chunks, presharded_op
from hubpad.plan.heads import HeadShape
from hubpad.plan.model import Dim, Plan, TensorPlan
from hubpad.plan.ops import SCALE_CARRIERS, _pad2d, fused_experts_op, scaled, tensor_op
from hubpad.plan.quant import LINEAR_SUFFIXES, LinearLayout, QuantConfig, detect_layout
from hubpad.plan.relabel import choose_heads_and_label, relabelled_config
from hubpad.plan.sections import qkv_rows, sections_op
from hubpad.plan.shards import cut_shards
from hubpad.source.base import FileEntry, Source
from hubpad.source.readers import WeightFolder, read_header, read_json, weight_folders


def make_plan(source: Source, tp: int, shard_size: int = 5 * 10**9) -> Plan:
    """Read config, index and headers from `source` and decide the whole padding for `tp`.

    Raises ConfigError (or another HubpadError) naming the file, tensor or key when anything cannot be
    planned exactly; nothing has been written then.
    """
    # A real Hy3 plan creates ~10^6 short-lived containers and no reference cycles: the cyclic collector would
    # only re-scan them over and over (8 % of planning time), so it pauses while planning.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _make_plan(source, tp, shard_size)
    finally:
        if enabled:
            gc.enable()


@dataclass
class _Inputs:
    """What planning reads: the file list, config (and the part of it with the language model's dims), quantization,
    adapter, index and shard headers."""

    files: dict[str, FileEntry]
    config: dict
    text: dict  # config.json's language-model dims: itself, or its text_config (adapter.dims_config)
    adapter: Adapter
    quant: QuantConfig
    names: list[str]
    folders: list[WeightFolder]  # where the weights are: the root, or the adapter's weight_folders
    headers: list[SafetensorsHeader]


@dataclass
class _Shape:
    """The config's sharded dims: attention heads, kv heads, head dim, hidden size and intermediate groups."""

    hidden: int
    heads: int
    kv: int
    head_dim: int
    inter: dict[str, tuple[tuple[str, ...], int]]  # group -> (config keys, size)
    geometry: HeadShape  # rows/columns per head of each head-sharded layer
    linear: gdn.Geometry | None = None  # Gated DeltaNet heads (plan/gdn.py), in families that have them
    tower: tower.Geometry | None = None  # a vision tower vLLM shards by head (plan/tower.py)


@dataclass
class _Modules:
    """Linear-layer parameters grouped by module, with each module's role and storage layout."""

    params: dict[str, dict[str, TensorInfo]] = field(default_factory=dict)
    plain: dict[str, TensorInfo] = field(default_factory=dict)  # tensors that are not `<module>.<suffix>`
    fused: dict[str, FusedExperts] = field(default_factory=dict)  # plain tensors that are fused 3-D experts
    presharded: dict[str, PreshardedQKV] = field(default_factory=dict)  # plain tensors of pre-sharded qkv_proj
    linear: dict[str, str] = field(default_factory=dict)  # plain tensors of Gated DeltaNet layers -> gdn.py kind
    tower: dict[str, str] = field(default_factory=dict)  # plain tensors of a head-sharded vision tower -> tower.py kind
    roles: dict[str, Role] = field(default_factory=dict)
    layouts: dict[str, LinearLayout] = field(default_factory=dict)  # one object per distinct parameter signature
    head_vectors: set[str] = field(default_factory=set)  # plain tensors with one value per attention head
    head_rows: dict[str, str] = field(default_factory=dict)  # plain tensors of whole heads -> HeadShape width key
    layer_norms: dict[str, TensorInfo] = field(default_factory=dict)  # q/k norms over all heads (module -> weight)
    norm_of: dict[str, str] = field(default_factory=dict)  # q/k projection -> the norm over all heads it feeds

    def distinct(self) -> list[tuple[str, Role, LinearLayout]]:
        """Each distinct (role, layout) pair of the padded modules, at its first module (in order)."""
        seen: dict[tuple[int, int], tuple[str, Role, LinearLayout]] = {}
        for module, role in self.roles.items():
            if role.kind != "copy":
                seen.setdefault((id(role), id(self.layouts[module])), (module, role, self.layouts[module]))
        return list(seen.values())


@dataclass
class Survey:
    """Everything about a checkpoint that does not depend on the TP size: read once, planned at any TP."""

    source: Source
    inputs: _Inputs
    shape: _Shape
    modules: _Modules
    aligns: Aligns
    group_align: dict[str, tuple[int, int]]
    linear_align: int = 1  # what each rank's rows of a GDN section must be a multiple of (gdn.row_align)
    # the storage layouts of the layers each part pads ("heads", an intermediate group, "linear"): what the card
    # says of the padded formats (plan/lossless.py)
    layouts: dict[str, frozenset[str]] = field(default_factory=dict)


def survey(source: Source) -> Survey:
    """Read config, index and headers, classify every tensor and check the config against the headers."""
    inputs = _read_inputs(source)
    shape = _shape(inputs.text, inputs.adapter, inputs.config)
    modules = _classify(inputs.headers, inputs.adapter, inputs.quant, shape.head_dim, _linear_layers(inputs))
    _check_head_vectors(modules, shape.heads)
    _check_head_rows(modules, shape)
    distinct = modules.distinct()
    if modules.fused and "expert" not in shape.inter:
        raise ConfigError(f"tensor {next(iter(modules.fused))}: fused experts, but config.json has no expert "
                          f"intermediate size ({', '.join(inputs.adapter.intermediate_keys.get('expert', ()))})")
    aligns, group_align = _alignments(distinct, fused=bool(modules.fused), gates=shape.geometry.gates,
                                      replicated=shape.geometry.replicated)
    _check_config_against_headers(distinct, shape, inputs.adapter)
    if shape.linear is not None and not modules.linear:
        raise ConfigError(f"config.json: {inputs.adapter.name} has linear-attention keys but no shard holds a tensor "
                          f"of its linear-attention layers ({inputs.adapter.linear_attention_family})")
    if shape.tower is not None and not modules.tower:
        raise ConfigError(f"config.json: {inputs.adapter.name} has a {shape.tower.spec.node} but no shard holds a tensor "
                          f"of its vision tower")
    linear_align = gdn.row_align({n: (modules.plain[n], k) for n, k in modules.linear.items()}, inputs.quant)
    return Survey(source, inputs, shape, modules, aligns, group_align, linear_align, _layouts_by_part(distinct, modules))


def _layouts_by_part(distinct: list[tuple[str, Role, LinearLayout]], m: _Modules) -> dict[str, frozenset[str]]:
    """The storage layouts of the layers each part of the model pads: "heads" (attention, fused pre-sharded qkv, other
    tensors of whole heads), an intermediate group (its rows/cols layers, fused experts: dense floats only) and
    "linear" (GDN / KDA / Mamba2 tensors: dense floats, FP8 with block scales or, Mamba2's, one scale per tensor)."""
    out: dict[str, set[str]] = {}
    for _, role, lay in distinct:
        out.setdefault("heads" if role.kind in ("q", "kv", "o") else str(role.group), set()).add(lay.name)
    for part, names in (("heads", m.presharded), ("heads", m.head_rows), ("linear", m.linear), ("expert", m.fused)):
        for name in names:
            t = m.plain[name]
            block = f"{name.rpartition('.')[0]}.weight_scale_inv" in m.plain
            out.setdefault(part, set()).add("dense" if not t.dtype.startswith("F8") else
                                            "fp8-block" if block else "fp8-tensor")
    return {part: frozenset(names) for part, names in out.items()}


def _make_plan(source: Source, tp: int, shard_size: int) -> Plan:
    if tp < 1:
        raise ConfigError(f"--tp must be at least 1, got {tp}")
    return plan_for(survey(source), tp, shard_size)


def plan_for(s: Survey, tp: int, shard_size: int = 5 * 10**9) -> Plan:
    """Choose the dims for `tp` and every tensor's byte recipe (the TP advisor calls this once per TP)."""
    inputs, shape, modules, aligns, group_align = s.inputs, s.shape, s.modules, s.aligns, s.group_align
    inputs.adapter.check_tp(inputs.text, tp)
    linear2 = gdn.choose(shape.linear, tp, s.linear_align) if shape.linear is not None else None
    if inputs.adapter.heads_follow_linear and linear2 is not None:
        (h2, kv2), relabelled = _heads_of_linear(shape, linear2, tp, aligns, inputs.adapter), None
    else:
        h2, kv2, relabelled = choose_heads_and_label(shape.heads, shape.kv, shape.geometry, tp, aligns, shape.hidden,
                                                     inputs.adapter, inputs.text)
    # A group no layer has (the dense size of an all-MoE model) shards nothing: it is left as it is.
    multiple = inputs.adapter.intermediate_multiple
    new_inter = {g: choose_intermediate(size, tp, *group_align[g], tile=growth_tile(g), multiple=multiple)
                 if g in group_align else size for g, (_, size) in shape.inter.items()}
    new_inter = inputs.adapter.tied_intermediate(inputs.text, new_inter)
    tower2 = tower.choose(shape.tower, tp) if shape.tower is not None else None
    dims = _dims(shape, h2, kv2, new_inter, linear2, inputs.adapter.kv_group_keys(inputs.text), tower2)
    tensors = _tensor_plans(modules, shape, h2, kv2, new_inter, linear2, inputs.quant, tower2)

    ordered = _upstream_order(tensors, inputs.names)
    metadata = next((h.metadata for h in inputs.headers if h.metadata), {"format": "pt"})
    in_folders = bool(inputs.adapter.weight_folders)
    shards = folders.cut_folder_shards(ordered, inputs.folders, shard_size, metadata) if in_folders else \
        cut_shards(ordered, shard_size, metadata)
    folder_configs = folders.folder_configs(s.source, inputs.folders, dims, ordered) if in_folders else {}
    rewritten = set(folder_configs) | {f.index for f in inputs.folders if in_folders and f.index}
    copied, skipped = _other_files(inputs.files, inputs.names, inputs.adapter.keep_files, rewritten)
    vocab = _vocab(inputs, tp)
    new_config = relabelled_config(_new_config(inputs.config, dims, inputs.adapter), relabelled)
    new_config = inputs.adapter.padded_config(inputs.config, new_config, h2, kv2)
    if tower2 is not None:
        new_config = tower2.write(new_config)
    inputs.adapter.check_derivative(inputs.adapter.dims_config(new_config), tp)
    return Plan(
        source=s.source, tp=tp, config=inputs.config, relabelled=relabelled,
        vllm_route=inputs.adapter.route_for(inputs.adapter.dims_config(new_config)), new_config=new_config,
        warnings=[f"{w}; the derivative keeps config.json as upstream has it (published configs set the key)"
                  for w in inputs.adapter.missing_vllm_keys(inputs.config)],
        adapter=inputs.adapter, quant=inputs.quant, formats=sorted({lay.format_tag for lay in modules.layouts.values()}),
        dims=dims, tensors=ordered, shards=shards, files=inputs.files,
        weight_files=inputs.names, copied_files=copied, skipped_files=skipped,
        rank_table=make_rank_table(tp, h2, kv2, shape.geometry, aligns, new_inter, group_align, vocab, inputs.text)
        + _linear_rank_rows(shape.linear, linear2, tp, s.linear_align) + (tower2.rank_rows(tp) if tower2 else []),
        vocab=vocab, upstream_tp_values=_stock_tp_values(shape, aligns, group_align, inputs.adapter, s.linear_align),
        index_metadata={k: v for k, v in inputs.folders[0].metadata.items() if k != "total_size"} if not in_folders
        else {}, folders=inputs.folders if in_folders else [], folder_configs=folder_configs,
        header_digests={h.file: (h.data_start, h.digest) for h in inputs.headers if h.digest},
        lossless=_lossless(s, h2, kv2, new_inter, linear2, tower2),
    )


def _heads_of_linear(shape: _Shape, linear2: gdn.Geometry, tp: int, aligns: Aligns,
                     adapter: Adapter) -> tuple[int, int]:
    """(heads, kv heads) when the attention heads are the linear layers' count (Adapter.heads_follow_linear): the
    padded linear count, which the attention layers' own rules must accept too."""
    h2 = linear2.nk
    kv2 = h2 if shape.kv == shape.heads else shape.kv
    why = head_problems(h2, kv2, shape.geometry, tp, aligns, shape.hidden, adapter)
    if why:
        raise ConfigError(f"no valid head padding exists for tp={tp}: the linear-attention layers need {h2} heads "
                          f"(one num_attention_heads for both layer kinds), which the attention layers cannot take "
                          f"({'; '.join(why)})")
    return h2, kv2


def _lossless(s: Survey, h2: int, kv2: int, new_inter: dict[str, int], linear2: gdn.Geometry | None,
              tower2: tower.Geometry | None) -> dict:
    """Why the outputs do not change at this TP (plan/lossless.py): the mechanisms of what grew, the formats it is in."""
    shape, m = s.shape, s.modules
    grown = {g for g, (_, size) in shape.inter.items() if new_inter[g] != size}
    linear = linear2 is not None and linear2 != shape.linear
    parts = grown | ({"heads"} if (h2, kv2) != (shape.heads, shape.kv) else set()) | ({"linear"} if linear else set())
    found = {key for key, tensors in (("heads.sinks", m.head_vectors), ("heads.presharded", m.presharded),
                                      ("heads.head_rows", m.head_rows), ("norm.rescale", m.layer_norms)) if tensors}
    return lossless.record(s.inputs.adapter, shape.geometry, heads=h2 != shape.heads, kv=kv2 != shape.kv,
                           mlp=bool(grown), linear=linear, found=found,
                           tower=tower2 is not None and tower2 != shape.tower,
                           layouts=set().union(*(s.layouts.get(part, ()) for part in parts)))


def _vocab(inputs: _Inputs, tp: int) -> dict:
    """vocab_info of the model's vocab; where the adapter names several vocab-parallel sizes (a draft's lm_head and
    embedding), the first one that does not shard at `tp` (the vocab plugin pads them all)."""
    sizes = inputs.adapter.vocab_sizes({**inputs.config, **inputs.text})
    infos = [vocab_info(size, tp) for size in sizes if size] or [
        vocab_info(int(inputs.text.get("vocab_size") or inputs.config.get("vocab_size") or 0), tp)]
    return next((v for v in infos if v["patch_needed"]), infos[0])


def _read_inputs(source: Source) -> _Inputs:
    """config.json (and hf_quant_config.json), the adapter and quantization they name, the index and the headers,
    checked against the index: every tensor is in exactly one header, the one the index says."""
    files = source.files()
    if "config.json" not in files and "params.json" in files:  # Mistral's own format (Mistral Large 3's repos)
        raise ConfigError(f"{source.label}: {mistral_format_refusal(read_json(source, 'params.json'))}")
    if "config.json" not in files:
        raise ConfigError(f"{source.label}: no config.json (is this a model checkpoint?)")
    config = read_json(source, "config.json")
    hf_quant = read_json(source, "hf_quant_config.json") if "hf_quant_config.json" in files else None
    check_config_values(config)
    check_refused(config)
    adapter = adapter_for(config)
    if adapter.text_config is None and isinstance(config.get("text_config"), dict):
        raise ConfigError(f"config.json: a multimodal {config.get('model_type')} (text_config) is not supported")
    text = adapter.dims_config(config)
    if text is not config:
        check_config_values(text, where=f"config.json: {adapter.text_config}")
    # Kimi-K2.5 keeps its quantization_config in text_config (vLLM reads it there too)
    quant = QuantConfig.read(config if "quantization_config" in config else text, hf_quant)
    where, weight_map = weight_folders(source, adapter.weight_folders)
    names = [name for folder in where for name in folder.files]
    indexed = {name for folder in where if folder.index for name in folder.files}
    headers = _read_headers(source, [files[n] for n in names], weight_map, indexed, where)
    return _Inputs(files, config, text, adapter, quant, names, where, headers)


def _read_headers(source: Source, entries: list[FileEntry], weight_map: dict | None, indexed: set[str],
                  where: list[WeightFolder]) -> list[SafetensorsHeader]:
    """Every shard's header, each checked to hold exactly the names the index's `weight_map` gives its file (the
    files an index lists, `indexed`; several weight folders' tensors must have names of their own as well).

    The index's names partition into its files, so headers that match it hold every tensor once: no name -> tensor
    dict is needed to find a tensor in two shards (Hy3: 185k entries, 10 MB). The index is kept only as its names
    grouped by file, each group dropped once its header matched it. Any mismatch is explained from the index read
    again, with the errors of reading everything first: a bad header, then a tensor in two shards, then the first
    misplaced tensor, then the first (sorted) name no header holds.
    """
    listed = _names_by_file(weight_map) if weight_map is not None else None
    del weight_map
    headers: list[SafetensorsHeader] = []
    mismatch = False
    for entry in entries:
        h = read_header(source, entry)
        headers.append(h)
        if listed is not None and not mismatch and h.file in indexed:
            expected, names = listed.pop(h.file, ()), list(map(_NAME, h.tensors))
            mismatch = len(expected) != len(names) or set(expected) != set(names)
    if mismatch or listed or len(where) > 1:  # no index: a single file, so no tensor can be in two
        _raise_duplicate(headers)
    if mismatch or listed:
        _raise_index_mismatch(weight_folders(source, tuple(f.path for f in where if f.path))[1] or {},
                              [h for h in headers if h.file in indexed])
    return headers


def _names_by_file(weight_map: dict) -> dict[str, list[str]]:
    """The index's tensor names, grouped by the file it gives for each."""
    groups: dict[str, list[str]] = {}
    for name, file in weight_map.items():
        group = groups.get(file)
        if group is None:
            group = groups[file] = []
        group.append(name)
    return groups


def _raise_index_mismatch(weight_map: dict, headers: list[SafetensorsHeader]) -> None:
    """Name the first tensor (in file order) the index places elsewhere, else the first name no header holds."""
    for h in headers:
        for t in h.tensors:
            indexed = weight_map.pop(t.name, None)
            if indexed != h.file:
                raise ConfigError(f"{INDEX}: tensor {t.name!r} is in {h.file} but the index says {indexed!r}")
    if weight_map:
        raise ConfigError(f"{INDEX}: tensor {min(weight_map)!r} is listed but not in any shard header")
    raise HubpadError(f"internal error: {INDEX} and the shard headers disagree, but on no tensor")


_NAME, _TENSORS = attrgetter("name"), attrgetter("tensors")


def _raise_duplicate(headers: list[SafetensorsHeader]) -> None:
    """Name the first tensor that appears in two shards (and where it was first)."""
    seen: dict[str, str] = {}
    for h in headers:
        for t in h.tensors:
            if t.name in seen:
                raise ConfigError(f"tensor {t.name!r} appears in both {seen[t.name]} and {t.file}")
            seen[t.name] = t.file


def _shape(config: dict, adapter: Adapter, full: dict | None = None) -> _Shape:
    """The language model's dims from `config` (its part of config.json), and a head-sharded vision tower's from
    `full` (config.json itself)."""
    hidden = int(config.get("hidden_size") or 0)
    heads = int(_required(config, "num_attention_heads"))
    kv = adapter.kv_heads(config)
    geometry = adapter.head_shape(config)
    linear = _LINEAR_FAMILIES[adapter.linear_attention_family].read(config) if adapter.linear_attention else None
    vision = tower.Geometry.read(full if full is not None else config, adapter.vision_tower) \
        if adapter.vision_tower is not None else None
    return _Shape(hidden, heads, kv, geometry.config_head_dim or geometry.widths["q"], adapter.intermediate_sizes(config),
                  geometry, linear, vision)


# Adapter.linear_attention_family -> the geometry of its layers (read from config.json; its own rules and recipes)
_LINEAR_FAMILIES = {"gdn": gdn.Geometry, "kda": kda.Geometry, "mamba2": mamba2.Geometry,
                    "lightning": lightning.Geometry}


def _required(config: dict, key: str):
    if config.get(key) is None:
        raise ConfigError(f"config.json: missing {key}")
    return config[key]


_LINEAR_SUFFIXES = {s: s for s in LINEAR_SUFFIXES}


def _upstream_order(tensors: list[TensorPlan], weight_names: list[str]) -> list[TensorPlan]:
    """Output tensors in upstream order: by file (in `weight_names` order), then offset; stable."""
    if weight_names == sorted(weight_names):  # the usual case: file order is name order, so no Python key
        return sorted(sorted(tensors, key=_BY_START), key=_BY_FILE)  # stable: by file, then offset
    file_order = {n: i for i, n in enumerate(weight_names)}
    return sorted(tensors, key=lambda p: (file_order[p.src.file], p.src.start))


_BY_FILE, _BY_START = attrgetter("src.file"), attrgetter("src.start")
_DTYPE, _SHAPE = attrgetter("dtype"), attrgetter("shape")


def _linear_layers(inputs: _Inputs) -> frozenset[int] | None:
    """The layers whose names are linear attention, where a family shares names between its layer kinds (KDA,
    lightning)."""
    if inputs.adapter.linear_attention_family == "lightning":
        return lightning.layers(inputs.text)
    if inputs.adapter.linear_attention_family != "kda":
        return None
    found = kda.layers(inputs.text)
    if found is None:
        raise ConfigError("config.json: no linear_attn_config.kda_layers or layer_types, so the Kimi Delta Attention "
                          "layers cannot be told from the full-attention ones")
    return found


_LAYER = re.compile(r"\blayers\.(\d+)\.")


def _classify(headers: list[SafetensorsHeader], adapter: Adapter, quant: QuantConfig, head_dim: int,
              linear_layers: frozenset[int] | None = None) -> _Modules:
    """Group parameters by module and give each module a role and (when padded) a storage layout.

    Every tensor must be one the adapter knows: copying a tensor that should have been padded would publish
    a broken model that loads fine, so an unknown name is an error naming it.
    """
    m = _Modules()
    params = m.params
    surely_linear = frozenset(s for s in _LINEAR_SUFFIXES if adapter.never_copy_param(s))  # most names: one lookup
    linear_attention = bool(adapter.linear_attention)
    presharded = bool(adapter.presharded_qkv)
    head_rows = bool(adapter.head_rows)
    towered = adapter.vision_tower is not None
    for t in chain.from_iterable(map(_TENSORS, headers)):
        name = t.name
        if head_rows and (key := adapter.head_rows_of(name)) is not None:
            m.plain[name] = t  # whole heads along its first axis, whatever its suffix
            m.head_rows[name] = key
            continue
        if towered and (kind := adapter.tower_kind(name)) is not None:
            m.plain[name] = t  # a head-sharded vision tower's tensor: its recipe comes from plan/tower.py
            m.tower[name] = kind
            continue
        if presharded and (spec := adapter.presharded_qkv_of(name.rpartition(".")[0])) is not None:
            m.plain[name] = t  # a fused pre-sharded qkv_proj: its recipe comes from plan/presharded.py
            m.presharded[name] = spec
            continue
        if linear_attention and (kind := adapter.linear_attention_kind(name)) is not None and (
                linear_layers is None or ((n := _LAYER.search(name)) is not None and int(n[1]) in linear_layers)):
            m.plain[name] = t  # a GDN tensor: its recipe comes from plan/gdn.py, whatever its suffix
            m.linear[name] = kind
            continue
        module, _, suffix = name.rpartition(".")  # `<module>.<suffix>` of a linear layer?
        suffix = _LINEAR_SUFFIXES.get(suffix)  # the one string per suffix, not one per tensor (185k for Hy3)
        if module and suffix and (suffix in surely_linear or not adapter.is_copy_param(name)):
            group = params.get(module)
            if group is None:
                group = params[module] = {}
            group[suffix] = t
        elif adapter.is_copy_param(name):
            m.plain[name] = t
        elif adapter.is_head_vector(name):
            m.plain[name] = t
            m.head_vectors.add(name)
        elif (fused := adapter.fused_experts_of(name)) is not None:
            m.plain[name] = t
            m.fused[name] = fused
        else:
            raise ConfigError(f"tensor {name}: not a tensor hubpad knows for {adapter.name}; refusing to guess")
    if adapter.layer_qk_norms:
        for module in [mod for mod in m.params if adapter.is_layer_qk_norm(mod)]:
            params = m.params.pop(module)
            if set(params) != {"weight"}:
                raise ConfigError(f"tensor {module}.{sorted(set(params) - {'weight'})[0]}: a q/k norm over all heads "
                                  f"has a weight only")
            m.layer_norms[module] = params["weight"]
        m.norm_of = {mod: norm for mod in m.params if (norm := adapter.layer_qk_norm_of(mod)) is not None}
    layout_of: dict[tuple, LinearLayout] = {}
    for module, params in m.params.items():
        role = m.roles[module] = _role(module, params, adapter, head_dim)
        if role.kind != "copy":
            # The layout follows from the parameters' names, dtypes and shapes (and the config): identical
            # expert modules share one, detected (with every check) on the first of them.
            sig = tuple(zip(params, map(_DTYPE, params.values()), map(_SHAPE, params.values())))
            if sig not in layout_of:
                layout_of[sig] = detect_layout(module, params, quant)
            m.layouts[module] = layout_of[sig]
    return m


def _check_head_vectors(m: _Modules, heads: int) -> None:
    """A per-head vector (attention sinks) must hold exactly one value per attention head."""
    for name in m.head_vectors:
        if m.plain[name].shape != (heads,):
            raise ConfigError(f"tensor {name}: shape {list(m.plain[name].shape)}, expected [{heads}] (one value per "
                              f"attention head)")


def _head_count(hs: HeadShape, key: str, heads: int, kv: int) -> int:
    """Heads of the layers with width key `key`: kv heads (the config's, or a layer type's own), else query heads."""
    if key in hs.per_kv or key in hs.kv_groups:
        return hs.kv_count(key, heads, kv)
    return hs.head_count(key, heads)


def _check_head_rows(m: _Modules, shape: _Shape) -> None:
    """A tensor of whole heads (adapter.head_rows) must hold its layer type's heads x rows per head."""
    hs = shape.geometry
    for name, key in m.head_rows.items():
        t, want = m.plain[name], _head_count(hs, key, shape.heads, shape.kv) * hs.widths[key]
        if not t.shape or t.shape[0] != want:
            raise ConfigError(f"tensor {name}: shape {list(t.shape)}, expected {want} rows first "
                              f"({_head_count(hs, key, shape.heads, shape.kv)} heads of {hs.widths[key]}, "
                              f"{hs.labels[key]})")


def _role(module: str, params: dict[str, TensorInfo], adapter: Adapter, head_dim: int) -> Role:
    role = adapter.linear_role(module)
    if role is not None:
        return role
    if adapter.is_per_head_norm(module) and set(params) == {"weight"}:
        if params["weight"].shape != (head_dim,):
            raise ConfigError(f"tensor {module}.weight: per-head norm of shape {list(params['weight'].shape)}, "
                              f"expected [{head_dim}]")
        return COPY
    raise ConfigError(f"tensor {module}.{next(iter(params))}: not a tensor hubpad knows for {adapter.name}; "
                      f"refusing to guess")


def _alignments(distinct: list[tuple[str, Role, LinearLayout]], fused: bool = False,
                gates: frozenset[str] = frozenset(),
                replicated: frozenset[str] = frozenset()) -> tuple[Aligns, dict[str, tuple[int, int]]]:
    """What every layer sharing a padded dim demands of each rank's slice: attention rows/columns, and per
    intermediate group (rows, columns). Routed experts run in fused-MoE kernels, with their own rules (`fused`:
    the checkpoint stores them as fused 3-D dense tensors)."""
    aligns = Aligns()
    group_align: dict[str, list[int]] = {"expert": [EXPERT_TILE, EXPERT_TILE]} if fused else {}
    for _, role, lay in distinct:
        if role.kind in ("q", "kv", "o") and role.width_key not in ("q", "kv", "o"):
            key = role.width_key
            need = (1 if key in replicated or (key in gates and lay.name == "dense")
                    else lay.k_align if role.kind == "o" else lay.n_align)
            aligns.extra[key] = math.lcm(aligns.of(key), need)
        elif role.kind in ("q", "qkv"):  # a fused [q | k | v] layer's q and k/v sections each shard by rank
            aligns.q_n = math.lcm(aligns.q_n, lay.n_align)
            if role.kind == "qkv":
                aligns.kv_n = math.lcm(aligns.kv_n, lay.n_align)
        elif role.kind == "kv":
            aligns.kv_n = math.lcm(aligns.kv_n, lay.n_align)
        elif role.kind == "o":
            aligns.o_k = math.lcm(aligns.o_k, lay.k_align)
        elif width_kind(role.group) == "expert":
            a = group_align.setdefault(role.group, [EXPERT_TILE, EXPERT_TILE])
            a[0] = a[1] = math.lcm(a[0], lay.moe_align)
        else:
            a = group_align.setdefault(role.group, [1, 1])  # the format's rules; padding grows in MLP_TILE
            if role.kind in ("rows", "gate_up"):  # a fused [gate | up]: each half shards by rank
                a[0] = math.lcm(a[0], lay.n_align)
            else:
                a[1] = math.lcm(a[1], lay.k_align)
    return aligns, {g: (a[0], a[1]) for g, a in group_align.items()}


def _check_config_against_headers(distinct: list[tuple[str, Role, LinearLayout]], shape: _Shape,
                                  adapter: Adapter) -> None:
    """Every padded layer's width must be the one config.json states, before anything is chosen from it."""
    for module, role, lay in distinct:
        if role.kind == "qkv":
            attr, want = "out_features", sum(qkv_rows(shape.geometry, shape.heads, shape.kv))
        elif role.kind in ("q", "kv", "o"):
            attr = "in_features" if role.kind == "o" else "out_features"
            count = (shape.geometry.kv_count(role.width_key, shape.heads, shape.kv) if role.kind == "kv" else
                     shape.geometry.head_count(role.width_key, shape.heads))
            want = count * shape.geometry.widths[role.width_key]
        else:
            if role.group not in shape.inter:
                raise ConfigError(f"tensor {module}: config.json has no size for its {role.group} intermediate "
                                  f"({', '.join(adapter.intermediate_keys.get(role.group, ()))})")
            attr = "in_features" if role.kind == "cols" else "out_features"
            want = shape.inter[role.group][1] * (2 if role.kind == "gate_up" else 1)
        if getattr(lay, attr) != want:
            raise ConfigError(f"tensor {module}: {attr.replace('_', ' ')} {getattr(lay, attr)} disagrees with "
                              f"config.json ({want})")


def _dims(shape: _Shape, h2: int, kv2: int, new_inter: dict[str, int],
          linear2: gdn.Geometry | None = None, keys: dict[str, tuple[str, ...]] | None = None,
          tower2: tower.Geometry | None = None) -> list[Dim]:
    keys = keys or {}
    dims = [Dim("attention heads", ("num_attention_heads",), shape.heads, h2),
            Dim("kv heads", ("num_key_value_heads",), shape.kv, kv2)]
    if shape.geometry.config_head_dim is not None:  # MLA: head_dim is not a key of its config
        dims.append(Dim("head dim", ("head_dim",), shape.head_dim, shape.head_dim))
    if shape.geometry.group > 1 and shape.geometry.group_key:  # heads moved in whole groups (DeepSeek-V4 o_groups)
        g = shape.geometry.group
        dims.append(Dim("output groups", (shape.geometry.group_key,), shape.heads // g, h2 // g))
    for key, group in shape.geometry.kv_groups.items():  # a layer type's own kv heads (keys: the adapter's)
        if keys.get(key) and any(d.config_keys == keys[key] for d in dims):
            continue  # the same count as a dim already listed (MiMo's v heads are its k heads)
        dims.append(Dim(f"{key.rsplit('_', 1)[-1]} kv heads", keys.get(key, ()), shape.heads // group,
                        h2 // group))
    if shape.linear is not None and linear2 is not None:
        dims += [Dim(*d) for d in shape.linear.dims(linear2)]
    if shape.tower is not None and tower2 is not None:
        dims += [Dim(*d) for d in shape.tower.dims(tower2)]
    for group, (keys, size) in shape.inter.items():
        dims.append(Dim(f"{group} intermediate", keys, size, new_inter[group]))
    return dims


def _new_config(config: dict, dims: list[Dim], adapter: Adapter) -> dict:
    """config.json of the derivative: upstream's with the padded dims (head_dim always written explicitly), in
    `text_config` when the language model's dims live there, and the keys tied to them (adapter.tied_keys)."""
    merged = dict(config)
    target = merged
    if adapter.text_config is not None:
        target = merged[adapter.text_config] = dict(config[adapter.text_config])
    for d in dims:
        for k in d.config_keys:
            if "." not in k:
                target[k] = d.after
            else:  # a key of a sub-object (KDA's linear_attn_config) or a list entry (Puzzle's block_configs.N.*)
                _set_existing(target, k.split("."), d.after)
    for path in adapter.tied_values(config):
        *parents, last = path.split(".")
        node = target
        for part in parents:
            node[part] = dict(node[part])
            node = node[part]
        node[last] = target[adapter.tied_keys[path]]
    return merged


def _set_existing(node: dict | list, path: list[str], value) -> None:
    """Set the value at `path` (keys of objects, indices of lists) in `node`, copying each container on the way so
    upstream's config stays as it is; a path config.json does not hold as such is left alone (a dotted key naming
    values deeper down, as Gemma 4's per_layer_config: the adapter's padded_config writes those)."""
    part, rest = path[0], path[1:]
    if isinstance(node, list):
        if not part.isdigit() or int(part) >= len(node):
            return
        part = int(part)
    elif not isinstance(node, dict) or part not in node:
        return
    if not rest:
        node[part] = value
        return
    child = node[part]
    if isinstance(child, (dict, list)):
        node[part] = copy = dict(child) if isinstance(child, dict) else list(child)
        _set_existing(copy, rest, value)


def _tensor_plans(m: _Modules, shape: _Shape, h2: int, kv2: int, new_inter: dict[str, int],
                  linear2: gdn.Geometry | None, quant: QuantConfig,
                  tower2: tower.Geometry | None = None) -> list[TensorPlan]:
    """The byte recipe of every output tensor.

    A recipe depends only on the layout, the parameter's dtype/shape and the target dims, so the thousands
    of identical expert tensors share one (computed, with every check, for the first of them).
    """
    plans: list[TensorPlan] = []
    # A layout is shared by the modules whose parameters have the same names, dtypes and shapes (in order), so a
    # (layout, role) pair fixes every parameter's recipe: (op, shape, nbytes; None: the source's), in order.
    recipes: dict[tuple[int, int, float], list[tuple[PadOp, tuple, int | None]]] = {}
    factors = _layer_norm_factors(m, shape, h2, kv2)
    for module, params in m.params.items():
        role = m.roles[module]
        if role.kind == "copy":
            plans.extend(params.values())  # a tensor copied as it is is its own plan
            continue
        lay = m.layouts[module]
        factor = factors.get(module, 1.0)
        kind = (id(lay), id(role), factor)  # layouts and roles are shared objects
        recipe = recipes.get(kind)
        if recipe is None:
            out2, in2 = padded_features(role, lay, shape.geometry, h2, kv2, new_inter)
            if role.kind in ("qkv", "gate_up"):
                rows, rows2 = _sections(role, shape, h2, kv2, new_inter)
                recipe = recipes[kind] = [_fused_recipe(t, suffix, lay, rows, rows2, in2, role)
                                          for suffix, t in params.items()]
            else:
                recipe = recipes[kind] = [_recipe(t, suffix, lay, out2, in2, role, factor)
                                          for suffix, t in params.items()]
        plans.extend(t if nbytes is None and op.kind == "copy"  # copied as it is: its own plan
                     else TensorPlan(t.name, t.dtype, shape, t, op, t.nbytes if nbytes is None else nbytes)
                     for t, (op, shape, nbytes) in zip(params.values(), recipe))
    for module, t in m.layer_norms.items():
        heads2 = h2 if factors[module][0] == "q" else kv2
        op = _pad2d(t, 1, (heads2 * shape.head_dim,), b"\x00" * t.itemsize)
        plans.append(_finish(t, scaled(t, op, 1 / factors[module][1]) if factors[module][1] != 1 else op,
                             (heads2 * shape.head_dim,)))
    for t in m.plain.values():
        if t.name in m.head_vectors:
            plans.append(_finish(t, _pad2d(t, 1, (h2,), b"\x00" * t.itemsize), (h2,)))
        elif t.name in m.head_rows:
            key = m.head_rows[t.name]
            rows2 = _head_count(shape.geometry, key, h2, kv2) * shape.geometry.widths[key]
            rest = math.prod(t.shape[1:]) * t.itemsize
            op = PadOp("pad", 1, t.shape[0], rest, rows2, rest, b"\x00" * t.itemsize) if rows2 != t.shape[0] else COPY_OP
            plans.append(_finish(t, op, (rows2, *t.shape[1:])))
        elif t.name in m.presharded:
            chunks = Chunks.of(m.presharded[t.name], shape.geometry, shape.heads, shape.kv, h2, kv2)
            plans.append(_finish(t, *presharded_op(t, t.name.rpartition(".")[2], chunks, shape.hidden, quant)))
        elif t.name in m.fused:
            plans.append(_finish(t, *fused_experts_op(t, m.fused[t.name], shape.hidden, shape.inter["expert"][1],
                                                      new_inter["expert"])))
        elif t.name in m.tower:
            plans.append(_finish(t, *tower.tower_op(t, m.tower[t.name], shape.tower, tower2)))
        elif t.name in m.linear:
            plans.append(_finish(t, *shape.linear.tensor_op(t, m.linear[t.name], linear2, shape.hidden, quant)))
        else:
            plans.append(t)
    return plans


def _layer_norm_factors(m: _Modules, shape: _Shape, h2: int, kv2: int) -> dict:
    """For q/k norms over all heads (adapter.layer_qk_norms): each projection's factor sqrt(r), r = heads after /
    before (kv heads for k), and each norm's (kind, sqrt(r)); a norm needs its projection and the heads' width."""
    out: dict = {}
    for module, role in m.roles.items():
        norm = m.norm_of.get(module) if role.kind in ("q", "kv") else None
        heads, heads2 = (shape.heads, h2) if role.kind == "q" else (shape.kv, kv2)
        if norm is not None and norm not in m.layer_norms and heads2 != heads:
            raise ConfigError(f"tensor {module}: no {norm}.weight, but vLLM and transformers normalize its output over "
                              f"all heads anyway (with a weight of ones), so zero heads would change it; hubpad "
                              f"rescales only with the norm's weight in the checkpoint")
        if norm in m.layer_norms:
            if m.layer_norms[norm].shape != (heads * shape.head_dim,):
                raise ConfigError(f"tensor {norm}.weight: shape {list(m.layer_norms[norm].shape)}, expected "
                                  f"[{heads * shape.head_dim}] (a norm over {heads} heads of {shape.head_dim})")
            out[module] = math.sqrt(heads2 / heads)
            out[norm] = (role.kind, out[module])
    orphan = sorted(set(m.layer_norms) - set(out))
    if orphan:
        raise ConfigError(f"tensor {orphan[0]}.weight: a q/k norm over all heads without its q/k projection")
    return out


def _recipe(t: TensorInfo, suffix: str, lay: LinearLayout, out2: int, in2: int,
            role: Role, factor: float = 1.0) -> tuple[PadOp, tuple, int | None]:
    """(op, new shape, new byte size) of one parameter, checked; the size is None when it is the source's. A layer
    whose output a norm over all heads takes is rescaled by `factor` in the parameters that carry its scale."""
    if suffix == "bias" and role.kind in ("o", "cols"):  # a bias follows the output dim, not padded here
        return COPY_OP, t.shape, None
    if factor != 1.0:
        if lay.name not in SCALE_CARRIERS:
            raise ConfigError(f"tensor {t.name}: a {lay.name} layer cannot be rescaled (its q/k norm spans all heads; "
                              f"hubpad rescales {', '.join(SCALE_CARRIERS)} layers)")
        op, new_shape = tensor_op(t, suffix, lay, out2, in2, role)
        if suffix in SCALE_CARRIERS[lay.name]:
            op = scaled(t, op, factor)
        plan = _finish(t, op, new_shape)
        return plan.op, plan.shape, (None if plan is t else plan.nbytes)
    plan = _finish(t, *tensor_op(t, suffix, lay, out2, in2, role))
    if plan.op.kind == "copy" and plan.shape == t.shape:
        return plan.op, plan.shape, None
    return plan.op, plan.shape, plan.nbytes


def _sections(role: Role, shape: _Shape, h2: int, kv2: int, new_inter: dict[str, int]) -> tuple[list[int], list[int]]:
    """The rows of a fused layer's sections before and after padding: [q | k | v], or [gate | up]."""
    if role.kind == "qkv":
        return qkv_rows(shape.geometry, shape.heads, shape.kv), qkv_rows(shape.geometry, h2, kv2)
    return [shape.inter[role.group][1]] * 2, [new_inter[role.group]] * 2


def _fused_recipe(t: TensorInfo, suffix: str, lay: LinearLayout, rows: list[int], rows2: list[int], in2: int,
                  role: Role) -> tuple[PadOp, tuple, int | None]:
    """_recipe's answer for a parameter of a fused [q | k | v] or [gate | up] layer (plan/sections.py)."""
    plan = _finish(t, *sections_op(t, suffix, lay, rows, rows2, in2, role))
    return plan.op, plan.shape, (None if plan is t else plan.nbytes)


def padded_features(role: Role, lay: LinearLayout, hs: HeadShape | int, h2: int, kv2: int,
                    new_inter: dict[str, int]) -> tuple[int, int]:
    """(out, in) features of a padded layer after padding: which one grows depends on its role (and, for head
    layers, on its per-head width; an int `hs` is head_dim everywhere)."""
    out2, in2 = lay.out_features, lay.in_features
    width = HeadShape.of(hs).widths.get(role.width_key, 0)
    if role.kind == "qkv":
        out2 = sum(qkv_rows(HeadShape.of(hs), h2, kv2))
    elif role.kind == "q":
        out2 = HeadShape.of(hs).head_count(role.width_key, h2) * width
    elif role.kind == "kv":
        out2 = HeadShape.of(hs).kv_count(role.width_key, h2, kv2) * width
    elif role.kind == "o":
        in2 = HeadShape.of(hs).head_count(role.width_key, h2) * width
    elif role.kind == "rows":
        out2 = new_inter[role.group]
    elif role.kind == "gate_up":
        out2 = 2 * new_inter[role.group]
    elif role.kind == "cols":
        in2 = new_inter[role.group]
    return out2, in2


def _finish(t: TensorInfo, op: PadOp, shape: tuple[int, ...]) -> TensorPlan | TensorInfo:
    if op.kind == "copy" and shape == t.shape:  # most tensors: size already checked against the shape by the header
        return t
    if op.kind == "copy":
        nbytes = t.nbytes
    elif op.kind in ("pad", "sections"):
        nbytes = op.out_bytes
    elif op.kind == "append":
        nbytes = t.nbytes + len(op.data)
    else:
        nbytes = len(op.data)
    if nbytes != math.prod(shape) * t.itemsize:
        raise HubpadError(f"tensor {t.name}: internal error, {nbytes} bytes planned for shape {list(shape)}")
    return TensorPlan(t.name, t.dtype, tuple(shape), t, op, nbytes)


def _other_files(files: dict[str, FileEntry], weight_names: list[str], keep: tuple[str, ...] = (),
                 rewritten: set[str] = frozenset()) -> tuple[list[str], list[str]]:
    """Upstream files carried over unchanged, and the ones left out (other weight formats; `keep`: the family's own
    components that only look like one; `rewritten`: a weight folder's index and config, written from the plan)."""
    copied, skipped = [], []
    for path in files:
        if path in GENERATED or path in weight_names or path in rewritten or path == ".gitattributes":
            continue
        if not any(fnmatch.fnmatch(path, p) for p in keep) and any(fnmatch.fnmatch(path, p) for p in SKIPPED_PATTERNS):
            skipped.append(path)
        else:
            copied.append(path)
    return copied, skipped


def _stock_tp_values(shape: _Shape, aligns: Aligns, group_align: dict[str, tuple[int, int]],
                     adapter: Adapter, linear_align: int = 1) -> list[int]:
    """TP sizes 1..8 the upstream already serves at without padding (the card says so)."""
    return [t for t in range(1, 9)
            if heads_shard_as_is(shape.heads, shape.kv, shape.geometry, t, aligns, shape.hidden, adapter)
            and (shape.linear is None or not gdn.problems(shape.linear, t, linear_align))
            and (shape.tower is None or not tower.problems(shape.tower, t))
            and all(choose_intermediate(s, t, *group_align[g]) == s for g, (_, s) in shape.inter.items()
                    if g in group_align)]


def _linear_rank_rows(before: gdn.Geometry | None, after: gdn.Geometry | None, tp: int,
                      align: int) -> list[dict]:
    """The per-rank table's rows for linear-attention heads (each geometry states vLLM's rules for its own)."""
    if before is None or after is None:
        return []
    return after.rank_rows(tp, align)
