"""Parse and validate safetensors headers before any tensor byte is trusted.

Everything downstream (planning, byte-range streaming, verification) relies on the offsets read here, so
a malformed or hostile header must fail here, with the file and tensor named, and never later.
"""

from __future__ import annotations

import json
import math
import struct
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import attrgetter
from typing import ClassVar

from hubpad.errors import HubpadError
from hubpad.formats.recipe import COPY_OP, PadOp
from hubpad.util.text import short

# safetensors refuses headers above 100 MB; a larger length field means a corrupt or hostile file.
MAX_HEADER_BYTES = 100_000_000

# Bits per element of every dtype safetensors defines that hubpad can move byte-exactly.
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64,
}


# Immutable by convention, not frozen: a frozen dataclass sets each field through object.__setattr__, 4x the
# cost of a plain slots class, and a real plan makes ~185k of these. unsafe_hash keeps the frozen hash.
@dataclass(slots=True, unsafe_hash=True)
class TensorInfo:
    """One tensor's place in a safetensors file; `start`/`end` are absolute file offsets."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str
    start: int
    end: int

    # Copied as it is, a tensor is its own plan (plan.model.TensorPlan's fields): no second object per tensor.
    op: ClassVar[PadOp] = COPY_OP
    padded: ClassVar[bool] = False

    @property
    def src(self) -> TensorInfo:
        return self

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    @property
    def itemsize(self) -> int:
        return DTYPE_BITS[self.dtype] // 8


@dataclass(frozen=True)
class SafetensorsHeader:
    """A validated header: tensors in file order, the metadata dict and the header's byte length."""

    file: str
    header_len: int
    metadata: dict[str, str]
    tensors: tuple[TensorInfo, ...]
    digest: str = ""  # sha256 of the file's first data_start bytes (length field + JSON), when read from a file

    @property
    def data_start(self) -> int:
        return 8 + self.header_len


def header_length(prefix: bytes, file: str, file_size: int) -> int:
    """Read and bound-check the 8-byte little-endian header length at the start of a safetensors file."""
    if file_size < 8 or len(prefix) < 8:
        raise HubpadError(f"{file}: not a safetensors file (only {file_size} bytes, the header length alone needs 8)")
    (n,) = struct.unpack("<Q", prefix[:8])
    if n > MAX_HEADER_BYTES:
        raise HubpadError(f"{file}: safetensors header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit")
    if 8 + n > file_size:
        raise HubpadError(f"{file}: safetensors header length {n} runs past the end of the file ({file_size} bytes)")
    return n


def parse_header(header_bytes: bytes, file: str, file_size: int) -> SafetensorsHeader:
    """Validate the JSON header (the bytes after the length field) against the file's real size."""
    n = len(header_bytes)
    floats: list[str] = []
    try:
        raw = json.loads(header_bytes.decode("utf-8"), parse_float=lambda s: floats.append(s) or float(s))
    except (ValueError, RecursionError) as exc:  # ValueError: bad UTF-8, bad JSON, an integer of 4300+ digits
        raise HubpadError(f"{file}: safetensors header is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(raw, dict):
        raise HubpadError(f"{file}: safetensors header is not a JSON object")
    data_len = file_size - 8 - n
    metadata = raw.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise HubpadError(f"{file}: safetensors __metadata__ must map strings to strings")
    # Equal (dtype, *shape) keys stand for identical JSON values only when the header holds no floats and no
    # booleans (4096.0 == 4096 and True == 1 in Python); otherwise every entry is checked on its own.
    same_values = not floats and b"true" not in header_bytes and b"false" not in header_bytes
    tensors = _tensor_entries(raw, file, data_len, 8 + n, same_values)
    tensors.sort(key=_BY_OFFSETS)
    previous = None
    for t in tensors:
        if previous is not None and t.start < previous.end:
            raise HubpadError(f"{file}: tensors {short(previous.name)} and {short(t.name)} overlap in the data section")
        previous = t
    return SafetensorsHeader(file=file, header_len=n, metadata=dict(metadata), tensors=tuple(tensors))


_BY_OFFSETS = attrgetter("start", "end")


def _tensor_entries(raw: dict, file: str, data_len: int, base: int, same_values: bool) -> list[TensorInfo]:
    """Every entry as a TensorInfo, in header order.

    Hot path (Hy3 has ~185k entries, a few dozen distinct dtype/shape pairs): the dtype and shape checks run
    once per distinct (dtype, *shape) and later entries share that shape tuple; offsets are checked for every
    entry. Anything that is not plainly valid goes through `_tensor_entry`, which raises the exact error.
    """
    checked: dict[tuple, tuple[str, tuple[int, ...], int]] = {}  # (dtype, *shape) -> (dtype, shape, nbytes)
    out = []
    for name, entry in raw.items():
        hit = None
        if same_values and type(entry) is dict:
            shape, offsets = entry.get("shape"), entry.get("data_offsets")
            try:
                key = (entry.get("dtype"), *shape)
                hit = checked.get(key)
            except TypeError:  # shape not iterable, or an unhashable element: the full check names it
                pass
            if hit is not None and type(offsets) is list and len(offsets) == 2:
                begin, end = offsets
                if (type(begin) is int and type(end) is int and 0 <= begin <= end <= data_len
                        and end - begin == hit[2]):
                    out.append(TensorInfo(name, hit[0], hit[1], file, base + begin, base + end))
                    continue
        t = _tensor_entry(name, entry, file, data_len, base)
        if same_values and hit is None:
            checked[(t.dtype, *t.shape)] = (t.dtype, t.shape, t.end - t.start)
        out.append(t)
    return out


def _tensor_entry(name: str, entry: object, file: str, data_len: int, base: int) -> TensorInfo:
    # Hot path (Hy3 has ~185k entries): the checks use exact JSON types (json.loads yields exactly int, never
    # an int subclass other than bool) and C-level helpers instead of per-element generator expressions.
    if not isinstance(entry, dict):
        raise HubpadError(f"{file}: tensor {short(name)}: header entry is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    bits = DTYPE_BITS.get(dtype) if type(dtype) is str else None
    if bits is None:
        raise HubpadError(f"{file}: tensor {short(name)}: unsupported dtype {short(dtype)}")
    if type(shape) is not list or (shape and (not _INT_ONLY.issuperset(map(type, shape)) or min(shape) < 0)):
        raise HubpadError(f"{file}: tensor {short(name)}: shape must be a list of non-negative integers, got "
                          f"{short(shape)}")
    if type(offsets) is not list or len(offsets) != 2 or type(offsets[0]) is not int or type(offsets[1]) is not int:
        raise HubpadError(f"{file}: tensor {short(name)}: data_offsets must be two integers, got {short(offsets)}")
    begin, end = offsets
    if not 0 <= begin <= end <= data_len:
        raise HubpadError(f"{file}: tensor {short(name)}: data_offsets {short(offsets)} fall outside the "
                          f"{data_len}-byte data section")
    nbits = math.prod(shape) * bits
    if nbits % 8 or nbits // 8 != end - begin:
        raise HubpadError(f"{file}: tensor {short(name)}: {dtype}{short(shape)} needs {short(nbits // 8)} bytes "
                          f"but data_offsets span {end - begin}")
    # The dtype is the module's own string: json.loads makes one per entry, ~10 MB of copies for Hy3's headers.
    return TensorInfo(name=name, dtype=_DTYPE_NAMES[dtype], shape=tuple(shape), file=file, start=base + begin,
                      end=base + end)


_INT_ONLY = frozenset({int})
_DTYPE_NAMES = {d: d for d in DTYPE_BITS}
def encode_header(entries: list[tuple[str, str, tuple[int, ...], int]], metadata: dict[str, str] | None) -> bytes:
    """Serialize a header for tensors laid out back to back in the given order.

    `entries` are (name, dtype, shape, nbytes). Returns the length prefix plus the JSON, padded with
    spaces to an 8-byte boundary as the safetensors library does, so tensor data stays aligned. The text is
    exactly `json.dumps(header, separators=(",", ":"))` of the header as a dict, written entry by entry
    (a real Hy3 plan encodes ~185k entries: each distinct (dtype, shape) is encoded once, the rest in C).
    """
    return encode_header_columns(*(zip(*entries) if entries else ((),) * 4), metadata)


def encode_header_columns(names: Sequence[str], dtypes: Sequence[str], shapes: Sequence[tuple[int, ...]],
                          sizes: Sequence[int], metadata: dict[str, str] | None) -> bytes:
    """`encode_header` of the entries zip(names, dtypes, shapes, sizes), given as columns (no tuple per entry)."""
    if len(set(names) | {"__metadata__"}) != len(names) + 1:  # repeated names collapse as in a dict: keep that
        return _encode_header_dict(list(zip(names, dtypes, shapes, sizes)), metadata)
    parts = [_metadata_entry(metadata)] if metadata else []
    kinds = list(zip(dtypes, shapes))
    middle = {kind: _middle(kind) for kind in set(kinds)}
    ends = list(accumulate(sizes))
    parts += map(_ENTRY.format, map(_json_str, names), map(middle.__getitem__, kinds), [0, *ends[:-1]], ends)
    return _frame(("{" + ",".join(parts) + "}").encode("utf-8"))


def encoded_header_size(names: Sequence[str], dtypes: Sequence[str], shapes: Sequence[tuple[int, ...]],
                        sizes: Sequence[int], metadata: dict[str, str] | None) -> int:
    """len(encode_header_columns(...)), counted without building the text (a plan measures every output shard's
    header; Hy3's hold ~185k entries): names once each, each distinct (dtype, shape) once, offset digits by
    bisection on the running totals (they only grow)."""
    if len(set(names) | {"__metadata__"}) != len(names) + 1:
        return len(encode_header_columns(names, dtypes, shapes, sizes, metadata))
    n = len(names)
    size = 2 + max(n - 1, 0)  # the braces and the commas between entries
    if metadata:
        size += len(_metadata_entry(metadata)) + (1 if n else 0)
    size += sum(map(len, map(_json_str, names)))
    size += sum(count * len(_middle(kind)) for kind, count in Counter(zip(dtypes, shapes)).items())
    ends = list(accumulate(sizes))
    size += n * len(_ENTRY.format("", "", "", "")) + _digits([0, *ends[:-1]] if n else []) + _digits(ends)
    return 8 + size + (-(8 + size) % 8)


def _digits(ascending: list[int]) -> int:
    """Total decimal digits of non-negative integers in ascending order."""
    total, power = len(ascending), 10
    while ascending and ascending[-1] >= power:
        total += len(ascending) - bisect_left(ascending, power)
        power *= 10
    return total


def _metadata_entry(metadata: dict[str, str]) -> str:
    return f'"__metadata__":{json.dumps(metadata, separators=(",", ":"))}'


def _middle(kind: tuple[str, tuple[int, ...]]) -> str:
    """What follows an entry's name up to its first offset: ':{"dtype":..,"shape":..,"data_offsets":['."""
    return f':{{"dtype":{_json_str(kind[0])},"shape":{json.dumps(list(kind[1]), separators=(",", ":"))},"data_offsets":['


_ENTRY = "{}{}{},{}]}}"  # name, ':{"dtype":..,"shape":..,"data_offsets":[', start, end


_json_str = json.encoder.encode_basestring_ascii  # what json.dumps writes for a str (ensure_ascii)


def _encode_header_dict(entries: list[tuple[str, str, tuple[int, ...], int]], metadata: dict[str, str] | None) -> bytes:
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape, nbytes in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    return _frame(json.dumps(header, separators=(",", ":")).encode("utf-8"))


def _frame(body: bytes) -> bytes:
    """The length prefix, then the JSON padded with spaces to an 8-byte boundary."""
    body += b" " * (-(8 + len(body)) % 8)
    return struct.pack("<Q", len(body)) + body
