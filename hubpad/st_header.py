"""Parse and validate safetensors headers before any tensor byte is trusted.

Everything downstream (planning, byte-range streaming, verification) relies on the offsets read here, so
a malformed or hostile header must fail here, with the file and tensor named, and never later.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

from .errors import HubpadError

# safetensors refuses headers above 100 MB; a larger length field means a corrupt or hostile file.
MAX_HEADER_BYTES = 100_000_000

# Bits per element of every dtype safetensors defines that hubpad can move byte-exactly.
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64,
}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's place in a safetensors file; `start`/`end` are absolute file offsets."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str
    start: int
    end: int

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
    try:
        raw = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise HubpadError(f"{file}: safetensors header is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(raw, dict):
        raise HubpadError(f"{file}: safetensors header is not a JSON object")
    data_len = file_size - 8 - n
    metadata = raw.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise HubpadError(f"{file}: safetensors __metadata__ must map strings to strings")
    tensors = []
    for name, entry in raw.items():
        tensors.append(_tensor_entry(name, entry, file, data_len, 8 + n))
    tensors.sort(key=lambda t: (t.start, t.end))
    previous = None
    for t in tensors:
        if previous is not None and t.start < previous.end:
            raise HubpadError(f"{file}: tensors {previous.name!r} and {t.name!r} overlap in the data section")
        previous = t
    return SafetensorsHeader(file=file, header_len=n, metadata=dict(metadata), tensors=tuple(tensors))


def _tensor_entry(name: str, entry: object, file: str, data_len: int, base: int) -> TensorInfo:
    where = f"{file}: tensor {name!r}"
    if not isinstance(entry, dict):
        raise HubpadError(f"{where}: header entry is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise HubpadError(f"{where}: unsupported dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise HubpadError(f"{where}: shape must be a list of non-negative integers, got {shape!r}")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
        raise HubpadError(f"{where}: data_offsets must be two integers, got {offsets!r}")
    begin, end = offsets
    if not 0 <= begin <= end <= data_len:
        raise HubpadError(f"{where}: data_offsets {offsets} fall outside the {data_len}-byte data section")
    nbits = math.prod(shape) * DTYPE_BITS[dtype]
    if nbits % 8 or nbits // 8 != end - begin:
        raise HubpadError(f"{where}: {dtype}{shape} needs {nbits // 8} bytes but data_offsets span {end - begin}")
    return TensorInfo(name=name, dtype=dtype, shape=tuple(shape), file=file, start=base + begin, end=base + end)


def encode_header(entries: list[tuple[str, str, tuple[int, ...], int]], metadata: dict[str, str] | None) -> bytes:
    """Serialize a header for tensors laid out back to back in the given order.

    `entries` are (name, dtype, shape, nbytes). Returns the length prefix plus the JSON, padded with
    spaces to an 8-byte boundary as the safetensors library does, so tensor data stays aligned.
    """
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape, nbytes in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    body = json.dumps(header, separators=(",", ":")).encode("utf-8")
    body += b" " * (-(8 + len(body)) % 8)
    return struct.pack("<Q", len(body)) + body
