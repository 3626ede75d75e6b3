"""The plan model: every decision a mirror needs, made before a byte moves (dims, tensor recipes, shards)."""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter, ne, or_

from hubpad import FORMAT_VERSION, __version__
from hubpad.formats.names import BUILT, MANIFEST
from hubpad.formats.recipe import PadOp
from hubpad.formats.safetensors import TensorInfo, encode_header_columns, encoded_header_size
from hubpad.plan.adapters.base import Adapter
from hubpad.plan.quant import QuantConfig
from hubpad.source.base import FileEntry, Source


@dataclass(slots=True, unsafe_hash=True)  # not frozen, for speed: see TensorInfo
class TensorPlan:
    """One output tensor: where it comes from and how its bytes are made.

    A tensor copied as it is needs none: its TensorInfo has the same fields (`src` is itself, `op` COPY_OP), so a
    plan holds no second object for each of the ~185k tensors a real Hy3 copies."""

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
    header_len: int = 0  # len(header), set when the shard is cut
    data_len: int = 0  # the tensors' bytes, set when the shard is cut

    @property
    def header(self) -> bytes:
        """The safetensors header (length prefix, JSON, padding), encoded when asked: a real plan's headers are
        as large as the upstream ones (24 MB for Hy3), and a mirror needs one shard's at a time."""
        return encode_header_columns(*self._columns(), self.metadata)

    def measure_header(self) -> int:
        """len(header), counted without encoding it."""
        return encoded_header_size(*self._columns(), self.metadata)

    def _columns(self) -> list[list]:
        """Names, dtypes, shapes and byte sizes of the tensors, as four lists (the header's entries)."""
        return [list(map(attr, self.tensors)) for attr in (_NAME, _DTYPE, _SHAPE, _NBYTES)]

    @property
    def size(self) -> int:
        return self.header_len + self.data_len

    def source_ranges(self) -> dict[str, list[list[int]]]:
        """Per upstream file, the coalesced byte ranges this shard is built from.

        Runs of tensors that follow each other in one file are found in C (a real shard has ~37k tensors and a
        handful of runs); each run then joins its file's last range when it starts where that one ends.
        """
        out: dict[str, list[list[int]]] = OrderedDict()
        srcs = list(map(_SRC, self.tensors))
        files, starts, ends = list(map(_FILE, srcs)), list(map(_START, srcs)), list(map(_END, srcs))
        n = len(srcs)
        cuts = [0, *compress(range(1, n), map(or_, map(ne, files, files[1:]), map(ne, ends, starts[1:]))), n]
        for a, b in zip(cuts, cuts[1:]) if n else ():
            ranges = out.setdefault(files[a], [])
            if ranges and ranges[-1][1] == starts[a]:
                ranges[-1][1] = ends[b - 1]
            else:
                ranges.append([starts[a], ends[b - 1]])
        return out


_NAME, _DTYPE, _SHAPE, _NBYTES, _SRC, _FILE, _START, _END = (
    attrgetter(a) for a in ("name", "dtype", "shape", "nbytes", "src", "file", "start", "end"))


@dataclass
class Dim:
    name: str
    config_keys: tuple[str, ...]
    before: int
    after: int


def config_changes(before: dict, after: dict) -> dict[str, list]:
    """{key: [before, after]} of every changed config.json key; a nested object's keys as `outer.key`
    (a multimodal model's text_config)."""
    out: dict[str, list] = {}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out.update({f"{key}.{k}": [old.get(k), v] for k, v in value.items() if old.get(k) != v})
        elif old != value:
            out[key] = [old, value]
    return out


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
    relabelled: dict | None = None  # plan/relabel.py: the derivative's new architecture label, and why
    vllm_route: dict | None = None  # adapters VllmRoute.record: the vLLM class the derivative must be served with
    warnings: list[str] = field(default_factory=list)  # what the user should know (config keys vLLM will miss)
    # weight file -> (header end, sha256 of its bytes [0, end)) as read while planning: checked when the file streams
    header_digests: dict[str, tuple[int, str]] = field(default_factory=dict)
    # why the outputs do not change (plan/lossless.py record): the mechanisms and padded formats at this TP
    lossless: dict = field(default_factory=dict)
    # the adapter's weight folders (readers.WeightFolder: a Diffusers pipeline's transformer/ ...; none: the root), and
    # the config.json of each whose dims grew, padded (plan/folders.py)
    folders: list = field(default_factory=list)
    folder_configs: dict[str, dict] = field(default_factory=dict)

    def built_files(self) -> list[str]:
        """The files a mirror writes from the plan: config.json, the index (the root's, or that of each weight folder
        which had one), the weight folders' padded config.json, hubpad.json."""
        if not self.folders:
            return list(BUILT)
        return ["config.json", *(f.index for f in self.folders if f.index), *self.folder_configs, MANIFEST]

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

    def padded_tensors(self) -> list[TensorPlan]:
        """The tensors whose bytes change (a few hundred of Hy3's ~185k), in output order."""
        return [t for t in self.tensors if t.op.kind != "copy"]

    def padded_groups(self) -> list[dict]:
        """Padded tensors grouped by name pattern (layer index → *), for humans and the card; a scaled copy's group
        says its factor (`scale`: every stored element × it, correctly rounded)."""
        groups: dict[tuple, dict] = OrderedDict()
        for t in self.padded_tensors():
            pattern = re.sub(r"\.(\d+)\.", ".*.", t.name)
            scale = t.op.scale
            key = (pattern, t.src.shape, t.shape, scale)
            g = groups.setdefault(key, {"pattern": pattern, "before": list(t.src.shape), "after": list(t.shape),
                                        "count": 0, "bytes_added": 0} | ({"scale": scale} if scale is not None else {}))
            g["count"] += 1
            g["bytes_added"] += t.nbytes - t.src.nbytes
        return list(groups.values())

    def to_json(self) -> dict:
        """The plan as `hubpad plan --json` prints it (and the manifest reuses)."""
        padded = self.padded_tensors()
        return {
            "hubpad_version": __version__,
            "format_version": FORMAT_VERSION,
            "source": {"repo": self.source.label, "kind": self.source.kind, "revision": self.source.revision,
                       "commit": self.source.commit},
            "tp": self.tp,
            "needs_padding": self.needs_padding,
            "architecture": {"adapter": self.adapter.name, "model_type": self.config.get("model_type"),
                             "architectures": self.config.get("architectures", []), "relabelled": self.relabelled,
                             "vllm_route": self.vllm_route},
            "quantization": {"method": self.quant.method, "formats": self.formats,
                             "weight_only_nvfp4": self.quant.weight_only_nvfp4},
            "lossless": self.lossless,
            "dims": [{"name": d.name, "config_key": d.config_keys[0] if d.config_keys else None,
                      "config_keys": list(d.config_keys), "before": d.before, "after": d.after} for d in self.dims],
            "config_changes": config_changes(self.config, self.new_config),
            "changed_tensors": [{"name": t.name, "before": list(t.src.shape), "after": list(t.shape),
                                 "bytes_added": t.nbytes - t.src.nbytes} for t in padded],
            "tensors": {"total": len(self.tensors), "padded": len(padded), "copied": len(self.tensors) - len(padded),
                        "padded_groups": self.padded_groups()},
            "rank_table": self.rank_table,
            "vocab": self.vocab,
            "upstream_tp_values": self.upstream_tp_values,
            "shards": [{"name": s.name, "size": s.size, "tensors": len(s.tensors),
                        "sources": [{"file": f, "ranges": r} for f, r in s.source_ranges().items()]}
                       for s in self.shards],
            "files": {"weights": self.weight_files, "copied": self.copied_files, "skipped": self.skipped_files}
            | ({"folders": [f.path for f in self.folders]} if self.folders else {}),
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
        }
