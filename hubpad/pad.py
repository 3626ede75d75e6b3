"""Make an output shard's bytes from the plan: source ranges plus fill runs, streamed, never a whole tensor.

Row padding is a straight copy followed by fill rows. Column padding moves a few MiB of rows at a time
into a buffer whose row tails already hold the fill, so each row costs one memcpy.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

from .errors import HubpadError
from .plan import ShardPlan, TensorPlan
from .source import CHUNK, VerifiedReader


class ShardWriter:
    """Writes one file and hashes it on a background thread, so padding and hashing overlap on two cores."""

    def __init__(self, path: Path, on_bytes: Callable[[int], None] | None = None) -> None:
        self.path = path
        self.size = 0
        self._hash = hashlib.sha256()
        self._queue: queue.Queue = queue.Queue(maxsize=8)
        self._error: BaseException | None = None
        self._file = open(path, "wb", buffering=0)
        self._on_bytes = on_bytes
        self._thread = threading.Thread(target=self._drain, name=f"write-{path.name}", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is not None:
                continue
            try:
                self._hash.update(item)
                view = memoryview(item)
                while len(view):
                    written = self._file.write(view)
                    view = view[written:]
            except BaseException as exc:  # surfaced to the producer on the next write/close
                self._error = exc

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise HubpadError(f"{self.path}: write failed: {self._error}")
        if len(data):
            self._queue.put(data)
            self.size += len(data)
            if self._on_bytes:
                self._on_bytes(len(data))

    def close(self) -> str:
        """Flush everything, fsync, and return the file's sha256."""
        self._queue.put(None)
        self._thread.join()
        try:
            if self._error is None:
                os.fsync(self._file.fileno())
        finally:
            self._file.close()
        if self._error is not None:
            raise HubpadError(f"{self.path}: write failed: {self._error}")
        return self._hash.hexdigest()

    def abort(self) -> None:
        self._error = self._error or HubpadError("aborted")
        self._queue.put(None)
        self._thread.join()
        self._file.close()


_FILL_CACHE: dict[tuple[bytes, int], bytes] = {}


def fill_bytes(pattern: bytes, n: int) -> bytes:
    """`n` bytes of a repeated element pattern (cached: the same few patterns recur in every layer)."""
    key = (pattern, n)
    if key not in _FILL_CACHE:
        if len(_FILL_CACHE) > 64:
            _FILL_CACHE.clear()
        reps = -(-n // len(pattern))
        _FILL_CACHE[key] = (pattern * reps)[:n]
    return _FILL_CACHE[key]


def _write_fill(out: ShardWriter, pattern: bytes, n: int) -> None:
    step = max(len(pattern), CHUNK - CHUNK % len(pattern))
    while n > 0:
        take = min(step, n)
        out.write(fill_bytes(pattern, take))
        n -= take


def write_tensor(t: TensorPlan, reader: VerifiedReader, out: ShardWriter) -> None:
    """Stream one planned tensor from its source reader into the shard."""
    op, src = t.op, t.src
    if op.kind == "copy":
        for piece in reader.iter_range(src.start, src.nbytes):
            out.write(piece)
        return
    if op.kind == "append":
        for piece in reader.iter_range(src.start, src.nbytes):
            out.write(piece)
        out.write(op.data)
        return
    if op.kind == "replace":
        for _ in reader.iter_range(src.start, src.nbytes):  # consumed (and hashed), not written
            pass
        out.write(op.data)
        return
    block_in = op.rows * op.row_bytes
    extra_rows = (op.new_rows - op.rows) * op.new_row_bytes
    pos = src.start
    for _ in range(op.batch):
        if op.new_row_bytes == op.row_bytes:
            for piece in reader.iter_range(pos, block_in):
                out.write(piece)
        else:
            _pad_columns(op, reader, pos, out)
        pos += block_in
        _write_fill(out, op.fill, extra_rows)


def _pad_columns(op, reader: VerifiedReader, pos: int, out: ShardWriter) -> None:
    rb, nrb = op.row_bytes, op.new_row_bytes
    tail = fill_bytes(op.fill, nrb - rb)
    per_chunk = max(1, CHUNK // nrb)
    done = 0
    while done < op.rows:
        k = min(per_chunk, op.rows - done)
        data = memoryview(reader.read(pos + done * rb, k * rb))
        buf = bytearray((bytes(rb) + tail) * k)
        for i in range(k):
            buf[i * nrb:i * nrb + rb] = data[i * rb:(i + 1) * rb]
        out.write(buf)
        done += k


def build_shard(shard: ShardPlan, readers: Callable[[str], VerifiedReader], path: Path,
                on_bytes: Callable[[int], None] | None = None) -> str:
    """Write one output shard to `path`; returns its sha256. `readers(file)` gives each source file's reader."""
    ends: dict[str, int] = {}
    for t in shard.tensors:
        ends[t.src.file] = max(ends.get(t.src.file, 0), t.src.end)
    for file, end in ends.items():
        readers(file).set_window(end)
    out = ShardWriter(path, on_bytes)
    try:
        out.write(shard.header)
        for t in shard.tensors:
            write_tensor(t, readers(t.src.file), out)
    except BaseException:
        out.abort()
        raise
    digest = out.close()
    if out.size != shard.size:
        raise HubpadError(f"{shard.name}: internal error, wrote {out.size} bytes, planned {shard.size}")
    return digest
