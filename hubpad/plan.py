"""Plan a padding from config.json, the index and the safetensors headers alone (never tensor data).

The plan fixes everything before a byte moves, as llm-compressor's model-free path does: the padded dims,
the byte recipe of every output tensor, the output shard layout and the per-rank divisibility table.
Every shard header is validated here, so a bad input fails before anything is written.
"""

from __future__ import annotations

import fnmatch
import gc
import json
import math
import re
import struct
from collections import OrderedDict
from dataclasses import dataclass, field

from . import FORMAT_VERSION, __version__
from .adapters import COPY, Adapter, Role, adapter_for
from .errors import HubpadError
from .quant import (LINEAR_SUFFIXES, SCALAR_SUFFIXES, ZERO_NIBBLES_INT4, LinearLayout, QuantConfig, detect_layout,
                    one_bytes)
from .source import FileEntry, Source
from .st_header import SafetensorsHeader, TensorInfo, encode_header, header_length, parse_header

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
# Files hubpad writes itself in the derivative; never copied from upstream.
GENERATED = {"config.json", INDEX, "hubpad.json", "README.md"}
# Other weight files (consolidated / original / GGUF / pickles) are not padded, so they are left out.
SKIPPED_PATTERNS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.gguf", "*.h5", "*.msgpack", "*.onnx", "original/*",
                    "*.safetensors", ".gitattributes")
VLLM_VOCAB_PAD = 64


@dataclass(frozen=True)
class PadOp:
    """Byte recipe for one output tensor, seen as `batch` blocks of `rows` rows of `row_bytes` bytes.

    kind "copy": bytes as they are; "pad": each block grows to `new_rows` rows of `new_row_bytes`, new
    cells repeat `fill` (one element); "append": source bytes then `data`; "replace": `data` instead.
    """

    kind: str
    batch: int = 1
    rows: int = 0
    row_bytes: int = 0
    new_rows: int = 0
    new_row_bytes: int = 0
    fill: bytes = b""
    data: bytes = b""


_COPY_OP = PadOp("copy")


@dataclass(frozen=True, slots=True)
class TensorPlan:
    """One output tensor: where it comes from and how its bytes are made."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    src: TensorInfo
    op: PadOp
    nbytes: int

    @property
    def padded(self) -> bool:
        return self.op.kind != "copy"


@dataclass
class ShardPlan:
    """One output shard: its tensors in order, and the header that precedes them."""

    name: str
    tensors: list[TensorPlan]
    metadata: dict[str, str]
    header: bytes = b""

    @property
    def size(self) -> int:
        return len(self.header) + sum(t.nbytes for t in self.tensors)

    def source_ranges(self) -> dict[str, list[list[int]]]:
        """Per upstream file, the coalesced byte ranges this shard is built from."""
        out: dict[str, list[list[int]]] = OrderedDict()
        for t in self.tensors:
            ranges = out.setdefault(t.src.file, [])
            if ranges and ranges[-1][1] == t.src.start:
                ranges[-1][1] = t.src.end
            else:
                ranges.append([t.src.start, t.src.end])
        return out


@dataclass
class Dim:
    name: str
    config_keys: tuple[str, ...]
    before: int
    after: int


@dataclass
class Plan:
    """Everything a mirror needs, decided up front."""

    source: Source
    tp: int
    config: dict
    new_config: dict
    adapter: Adapter
    quant: QuantConfig
    formats: list[str]
    dims: list[Dim]
    tensors: list[TensorPlan]
    shards: list[ShardPlan]
    files: dict[str, FileEntry]
    weight_files: list[str]
    copied_files: list[str]
    skipped_files: list[str]
    rank_table: list[dict]
    vocab: dict
    upstream_tp_values: list[int]
    index_metadata: dict = field(default_factory=dict)

    @property
    def needs_padding(self) -> bool:
        return any(d.before != d.after for d in self.dims)

    @property
    def bytes_in(self) -> int:
        return sum(self.files[f].size for f in self.weight_files)

    @property
    def bytes_out(self) -> int:
        return sum(s.size for s in self.shards)

    def index_json(self) -> dict:
        weight_map = {t.name: s.name for s in self.shards for t in s.tensors}
        metadata = dict(self.index_metadata)
        metadata["total_size"] = sum(t.nbytes for t in self.tensors)
        return {"metadata": metadata, "weight_map": dict(sorted(weight_map.items()))}

    def padded_groups(self) -> list[dict]:
        """Padded tensors grouped by name pattern (layer index → *), for humans and the card."""
        groups: dict[tuple, dict] = OrderedDict()
        for t in self.tensors:
            if not t.padded:
                continue
            pattern = re.sub(r"\.(\d+)\.", ".*.", t.name)
            key = (pattern, t.src.shape, t.shape)
            g = groups.setdefault(key, {"pattern": pattern, "before": list(t.src.shape), "after": list(t.shape),
                                        "count": 0, "bytes_added": 0})
            g["count"] += 1
            g["bytes_added"] += t.nbytes - t.src.nbytes
        return list(groups.values())

    def to_json(self) -> dict:
        """The plan as `hubpad plan --json` prints it (and the manifest reuses)."""
        return {
            "hubpad_version": __version__,
            "format_version": FORMAT_VERSION,
            "source": {"repo": self.source.label, "kind": self.source.kind, "revision": self.source.revision,
                       "commit": self.source.commit},
            "tp": self.tp,
            "needs_padding": self.needs_padding,
            "architecture": {"adapter": self.adapter.name, "model_type": self.config.get("model_type"),
                             "architectures": self.config.get("architectures", [])},
            "quantization": {"method": self.quant.method, "formats": self.formats,
                             "weight_only_nvfp4": self.quant.weight_only_nvfp4},
            "dims": [{"name": d.name, "config_key": d.config_keys[0] if d.config_keys else None,
                      "config_keys": list(d.config_keys), "before": d.before, "after": d.after} for d in self.dims],
            "config_changes": {k: [self.config.get(k), v] for k, v in self.new_config.items()
                               if self.config.get(k) != v},
            "changed_tensors": [{"name": t.name, "before": list(t.src.shape), "after": list(t.shape),
                                 "bytes_added": t.nbytes - t.src.nbytes} for t in self.tensors if t.padded],
            "tensors": {"total": len(self.tensors), "padded": sum(t.padded for t in self.tensors),
                        "copied": sum(not t.padded for t in self.tensors), "padded_groups": self.padded_groups()},
            "rank_table": self.rank_table,
            "vocab": self.vocab,
            "upstream_tp_values": self.upstream_tp_values,
            "shards": [{"name": s.name, "size": s.size, "tensors": len(s.tensors),
                        "sources": [{"file": f, "ranges": r} for f, r in s.source_ranges().items()]}
                       for s in self.shards],
            "files": {"weights": self.weight_files, "copied": self.copied_files, "skipped": self.skipped_files},
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
        }


# --------------------------------------------------------------------------------------------------
# Reading the source


def read_json(source: Source, path: str) -> dict:
    try:
        data = json.loads(source.read_file(path))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HubpadError(f"{source.label}/{path}: not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise HubpadError(f"{source.label}/{path}: expected a JSON object")
    return data


def read_header(source: Source, entry: FileEntry) -> SafetensorsHeader:
    """Read and validate one shard's header with at most two small range reads."""
    first = source.read_range(entry.path, 0, min(entry.size, 100_000))  # as get_safetensors_metadata does
    n = header_length(first, entry.path, entry.size)
    if 8 + n > len(first):
        first += source.read_range(entry.path, len(first), 8 + n)
    return parse_header(first[8:8 + n], entry.path, entry.size)


def weight_files(source: Source) -> tuple[list[str], dict]:
    """The safetensors files holding the model, from the index (or the single-file layout)."""
    files = source.files()
    if INDEX in files:
        index = read_json(source, INDEX)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise HubpadError(f"{source.label}/{INDEX}: no weight_map")
        names = list(OrderedDict.fromkeys(sorted(set(weight_map.values()))))
        for name in names:
            if name not in files:
                raise HubpadError(f"{source.label}/{INDEX}: lists {name!r}, which the repo does not have")
        return names, index
    if SINGLE in files:
        return [SINGLE], {}
    raise HubpadError(f"{source.label}: no {INDEX} or {SINGLE}")


# --------------------------------------------------------------------------------------------------
# Choosing dims


def _divides(total: int, tp: int) -> bool:
    return total % tp == 0


def kv_per_rank(kv: int, tp: int) -> int | None:
    """kv heads each rank holds, or None when vLLM cannot shard them (neither divides the other)."""
    if kv % tp == 0:
        return kv // tp
    if tp % kv == 0:
        return 1  # replicated
    return None


def _heads_ok(h: int, kv: int, hd: int, tp: int, a: dict, hidden: int, adapter: Adapter) -> list[str]:
    why = []
    if h % tp:
        why.append(f"{h} attention heads % tp {tp} != 0")
        return why
    kvr = kv_per_rank(kv, tp)
    if kvr is None:
        why.append(f"{kv} kv heads neither divide nor are divided by tp {tp}")
        return why
    q_rows = h // tp * hd
    if q_rows % a["q_n"]:
        why.append(f"q_proj rows per rank {q_rows} % {a['q_n']} != 0")
    if kvr * hd % a["kv_n"]:
        why.append(f"k/v_proj rows per rank {kvr * hd} % {a['kv_n']} != 0")
    if q_rows % a["o_k"]:
        why.append(f"o_proj columns per rank {q_rows} % {a['o_k']} != 0")
    if adapter.hidden_must_divide_by_heads and hidden % h:
        why.append(f"transformers' {adapter.name} config rejects hidden_size {hidden} % {h} heads != 0")
    return why


def choose_heads(h: int, kv: int, hd: int, tp: int, aligns: dict, hidden: int, adapter: Adapter) -> tuple[int, int]:
    """Smallest (heads, kv heads) that shard at `tp`, appending whole GQA groups so head i keeps kv head i//group."""
    if h % kv:
        raise HubpadError(f"config.json: {h} attention heads are not a multiple of {kv} kv heads")
    if not _heads_ok(h, kv, hd, tp, aligns, hidden, adapter):
        return h, kv
    group = h // kv
    candidates = [(k2 * group, k2) for k2 in range(kv + 1, kv * 8 + tp * 8)]
    if kv == 1:  # MQA: every head maps to kv head 0 whatever the group size
        candidates += [(h2, 1) for h2 in range(h + 1, h * 8 + tp * 8)]
    for h2, k2 in sorted(candidates):
        if not _heads_ok(h2, k2, hd, tp, aligns, hidden, adapter):
            return h2, k2
    reasons = "; ".join(_heads_ok(h, kv, hd, tp, aligns, hidden, adapter))
    # Say what blocks the first candidate that shards at all: that is the constraint to relax.
    for h2, k2 in sorted(candidates):
        why = _heads_ok(h2, k2, hd, tp, aligns, hidden, adapter)
        if h2 % tp == 0 and kv_per_rank(k2, tp) is not None:
            reasons += f"; the first whole-group padding that shards, {h2} heads / {k2} kv heads, fails: " + "; ".join(why)
            break
    raise HubpadError(f"no valid head padding exists for tp={tp} ({reasons})")


# MLP widths per rank are kept to whole 128-wide GEMM tiles whatever the format: it is what FP8-block, NVFP4
# via Marlin and int4 need anyway, keeps a padded BF16 checkpoint re-quantizable without another pad, and gives
# Hy3's 13312 → 13440 (4480 = 35·128 per rank at TP=3). Attention dims need no such rule: they move in whole heads.
# Routed experts only need what fused-MoE kernels need (Marlin MoE: intermediate per rank % 64), which keeps
# stock TP values working (Hy3's 1536 experts at TP=8 = 192 per rank).
MLP_TILE = 128
EXPERT_TILE = 64


def choose_intermediate(size: int, tp: int, n_align: int, k_align: int) -> int:
    """Smallest size >= `size` whose per-rank slice is a multiple of both alignments (tiles included)."""
    step = math.lcm(n_align, k_align)
    if size % tp == 0 and (size // tp) % step == 0:
        return size
    quantum = tp * step
    return -(-size // quantum) * quantum


# --------------------------------------------------------------------------------------------------
# Per-tensor byte recipes


def _pad2d(t: TensorInfo, tail_ndim: int, new_shape: tuple[int, ...], fill: bytes) -> PadOp:
    """Pad the last `tail_ndim` (1 or 2) dims of `t` to `new_shape`; the leading dims are repeated blocks."""
    s = t.itemsize
    if tail_ndim == 1:
        batch, rows, cols = math.prod(t.shape[:-1]), t.shape[-1], 1
        new_rows, new_cols = new_shape[-1], 1
    else:
        batch, (rows, cols) = math.prod(t.shape[:-2]), t.shape[-2:]
        new_rows, new_cols = new_shape[-2:]
    if (rows, cols) == (new_rows, new_cols):
        return PadOp("copy")
    if new_rows < rows or new_cols < cols:
        raise HubpadError(f"tensor {t.name}: internal error, padding would shrink {list(t.shape)}")
    if len(fill) != s:
        raise HubpadError(f"tensor {t.name}: internal error, fill of {len(fill)} bytes for {t.dtype}")
    return PadOp("pad", batch, rows, cols * s, new_rows, new_cols * s, fill)


def _tensor_op(t: TensorInfo, suffix: str, layout: LinearLayout, out2: int, in2: int, role: Role) -> tuple[PadOp, tuple]:
    """The byte recipe and new shape of one parameter of a padded linear layer."""
    b = layout.batch
    nb = len(b)
    out1, in1 = layout.out_features, layout.in_features

    def expect(shape: tuple[int, ...]) -> None:
        if t.shape != shape:
            raise HubpadError(f"tensor {t.name}: shape {list(t.shape)}, expected {list(shape)} for a {layout.name} layer")

    def pad(new_tail: tuple[int, ...], fill: bytes) -> tuple[PadOp, tuple]:
        new_shape = (*t.shape[:len(t.shape) - len(new_tail)], *new_tail)
        return _pad2d(t, len(new_tail), new_shape, fill), new_shape

    zero = b"\x00" * t.itemsize
    if suffix in ("weight", "weight_packed"):
        if layout.name in ("dense", "fp8-tensor", "fp8-channel", "fp8-block"):
            expect((*b, out1, in1))
            return pad((out2, in2), zero)
        if layout.name in ("nvfp4", "nvfp4-modelopt"):
            expect((*b, out1, in1 // 2))
            return pad((out2, in2 // 2), zero)
        if layout.name == "int4":
            expect((*b, out1, in1 // 8))
            return pad((out2, in2 // 8), ZERO_NIBBLES_INT4)
    if suffix in ("weight_scale", "weight_scale_inv"):
        one = one_bytes(t.dtype)
        if layout.name == "fp8-tensor":
            return PadOp("copy"), t.shape
        if layout.name == "fp8-channel":
            return pad((out2,) if t.shape[nb:] == (out1,) else (out2, 1), one)
        if layout.name == "fp8-block":
            bn, bk = layout.block
            expect((*b, -(-out1 // bn), -(-in1 // bk)))
            return pad((-(-out2 // bn), -(-in2 // bk)), one)
        if layout.name in ("nvfp4", "nvfp4-modelopt"):
            expect((*b, out1, in1 // 16))
            return pad((out2, in2 // 16), one)
        if layout.name == "int4":
            if layout.group is None:
                return pad((out2, 1), one)
            expect((*b, out1, in1 // layout.group))
            return pad((out2, in2 // layout.group), one)
    if suffix == "bias":
        expect((*b, out1))
        return pad((out2,), zero)
    if suffix in SCALAR_SUFFIXES:
        if math.prod(t.shape) not in (1, math.prod(b) or 1):
            raise HubpadError(f"tensor {t.name}: expected a single value, got shape {list(t.shape)}")
        return PadOp("copy"), t.shape
    if suffix == "weight_shape" and layout.name == "int4":
        if t.dtype not in ("I64", "I32") or t.shape != (2,):
            raise HubpadError(f"tensor {t.name}: weight_shape must be a 2-element integer tensor")
        fmt = "<2q" if t.dtype == "I64" else "<2i"
        if (out1, in1) == (out2, in2):
            return PadOp("copy"), t.shape
        return PadOp("replace", data=struct.pack(fmt, out2, in2)), t.shape
    if suffix == "weight_zero_point" and layout.name == "int4":
        c1, c2 = (1, 1) if layout.group is None else (in1 // layout.group, in2 // layout.group)
        if t.dtype == "I32":  # packed 8 per word along the output dim
            expect((-(-out1 // 8), c1))
            if out1 % 8 and out2 != out1:
                # The last word's unused nibbles hold 0x0 (zero point -8), not 0x8: rows appended there would
                # dequantize to 8, not 0, and fixing them means rewriting upstream bytes. Refuse rather than guess.
                raise HubpadError(f"tensor {t.name}: asymmetric int4 zero points are packed 8 rows per word and "
                                  f"{out1} rows is not a multiple of 8; padding it cannot be made exactly zero")
            return pad((-(-out2 // 8), c2), ZERO_NIBBLES_INT4)
        expect((out1, c1))
        return pad((out2, c2), zero)
    if suffix == "weight_g_idx" and layout.name == "int4" and layout.group:
        expect((in1,))
        if in2 == in1:
            return PadOp("copy"), t.shape
        fmt = {"I32": "<i", "I64": "<q"}.get(t.dtype)
        if fmt is None:
            raise HubpadError(f"tensor {t.name}: g_idx dtype {t.dtype} is not supported")
        tail = b"".join(struct.pack(fmt, c // layout.group) for c in range(in1, in2))
        return PadOp("append", data=tail), (in2,)
    raise HubpadError(f"tensor {t.name}: parameter {suffix!r} is not supported for a {layout.name} layer ({role.kind})")


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


def choose_heads_quiet(h, kv, hd, tp, aligns, hidden, adapter) -> bool:
    """True when the heads already shard at `tp` (no padding)."""
    return h % kv == 0 and not _heads_ok(h, kv, hd, tp, aligns, hidden, adapter)


def cut_shards(tensors: list[TensorPlan], shard_size: int, metadata: dict[str, str]) -> list[ShardPlan]:
    """Cut output shards at `shard_size` (a larger tensor gets a shard of its own), keeping upstream order."""
    groups: list[list[TensorPlan]] = [[]]
    size = 0
    for t in tensors:
        if groups[-1] and size + t.nbytes > shard_size:
            groups.append([])
            size = 0
        groups[-1].append(t)
        size += t.nbytes
    n = len(groups)
    shards = []
    for i, group in enumerate(groups, 1):
        shard = ShardPlan(f"model-{i:05d}-of-{n:05d}.safetensors", group, metadata)
        shard.header = encode_header([(t.name, t.dtype, t.shape, t.nbytes) for t in group], metadata)
        shards.append(shard)
    return shards


def vocab_info(vocab: int, tp: int) -> dict:
    """Whether vLLM's 64-padded vocab shards at `tp`, and what the runtime patch pads to when it does not."""
    padded = -(-vocab // VLLM_VOCAB_PAD) * VLLM_VOCAB_PAD
    divisible = padded % tp == 0
    pad_to = math.lcm(VLLM_VOCAB_PAD, tp)
    return {"size": vocab, "padded_to_64": padded, "divisible_by_tp": divisible, "patch_needed": not divisible,
            "patch_pad_to": pad_to, "patched_size": -(-vocab // pad_to) * pad_to}


def make_rank_table(tp, h2, kv2, hd, aligns, new_inter, group_align, vocab, config, adapter, hidden) -> list[dict]:
    """Per-rank divisibility of every sharded dim after padding, as vLLM will check it."""
    rows = []

    def row(dim, total, per_rank, ok, rule, required=True):
        rows.append({"dim": dim, "total": total, "per_rank": per_rank, "ok": bool(ok), "rule": rule,
                     "required": required})

    row("attention heads", h2, h2 // tp if h2 % tp == 0 else None, h2 % tp == 0, f"{h2} % {tp} == 0")
    kvr = kv_per_rank(kv2, tp)
    rule = f"{kv2} % {tp} == 0" if kv2 >= tp else f"{tp} % {kv2} == 0 (replicated)"
    row("kv heads", kv2, kvr, kvr is not None, rule)
    if h2 % tp == 0:
        q = h2 // tp * hd
        row("q_proj rows", h2 * hd, q, q % aligns["q_n"] == 0, f"{q} % {aligns['q_n']} == 0")
        row("o_proj columns", h2 * hd, q, q % aligns["o_k"] == 0, f"{q} % {aligns['o_k']} == 0")
    if kvr is not None:
        k = kvr * hd
        row("k/v_proj rows", kv2 * hd, k, k % aligns["kv_n"] == 0, f"{k} % {aligns['kv_n']} == 0")
    for group, size in new_inter.items():
        n_al, k_al = group_align.get(group, [MLP_TILE, MLP_TILE])
        a = math.lcm(n_al, k_al)
        per = size // tp if size % tp == 0 else None
        row(f"{group} intermediate", size, per, per is not None and per % a == 0, f"{size} / {tp} % {a} == 0")
    n_exp = config.get("num_experts") or config.get("num_local_experts") or config.get("n_routed_experts")
    if n_exp:
        row("experts (expert parallel)", n_exp, n_exp // tp if n_exp % tp == 0 else None, n_exp % tp == 0,
            f"{n_exp} % {tp} == 0 (only needed with --enable-expert-parallel)", required=False)
    if vocab["size"]:
        if vocab["divisible_by_tp"]:
            row("vocab (vLLM pads to 64)", vocab["padded_to_64"], vocab["padded_to_64"] // tp, True,
                f"{vocab['padded_to_64']} % {tp} == 0")
        else:
            row("vocab (runtime patch)", vocab["patched_size"], vocab["patched_size"] // tp, True,
                f"pad to lcm(64, {tp}) = {vocab['patch_pad_to']} at load time; not on disk")
    return rows
