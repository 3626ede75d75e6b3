"""Make an output shard's bytes from the plan: source ranges plus fill runs, streamed, never a whole tensor.

Row padding is a straight copy followed by fill rows. Column padding moves a few MiB of rows at a time
into a buffer whose row tails already hold the fill, so each row costs one memcpy. Memory stays flat: the
writer's fixed ring of buffers, a reader chunk or two, one column-padding buffer.
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
    """Writes one file through a fixed ring of buffers, hashing and writing on two background threads.

    `write()` copies the caller's bytes into the ring and returns (so callers may reuse their buffers at once);
    full buffers go to a hashing thread, then to a writing thread, then back to the ring. Memory is the ring,
    whatever the shard or tensor sizes, and hashing, writing and the caller's reading and padding overlap on
    two cores (hashlib and file writes release the GIL).
    """

    BUFFERS = 6  # x CHUNK bytes: the producer fills one, the hasher and the writer hold one each, the rest is slack

    def __init__(self, path: Path | None, on_bytes: Callable[[int], None] | None = None) -> None:
        """`path` None: hash only, write nothing (checking a shard against bytes already somewhere else)."""
        self.path = path
        self.size = 0
        self._hash = hashlib.sha256()
        self._error: BaseException | None = None
        self._file = open(path, "wb", buffering=0) if path is not None else None
        self._on_bytes = on_bytes
        self._free: queue.Queue = queue.Queue()
        for _ in range(self.BUFFERS):
            self._free.put(bytearray(CHUNK))
        self._to_write: queue.Queue = queue.Queue()
        self._buf: bytearray | None = None
        self._fill = 0
        name = path.name if path is not None else "hash-only"
        self._threads = [threading.Thread(target=self._writer, name=f"write-{name}", daemon=True)]
        for t in self._threads:
            t.start()

    def _writer(self) -> None:
        while True:
            item = self._to_write.get()
            if item is None:
                return
            buf, n = item
            if self._error is None:
                try:
                    self._hash.update(memoryview(buf)[:n])
                except BaseException as exc:
                    self._error = exc
            if self._error is None and self._file is not None:
                try:
                    view = memoryview(buf)[:n]
                    while len(view):
                        written = self._file.write(view)
                        view = view[written:]
                except BaseException as exc:
                    self._error = exc
            self._free.put(buf)  # always back to the ring, so a failed write never blocks the producer

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise HubpadError(f"{self.path}: write failed: {self._error}")
        view = memoryview(data)
        n = len(view)
        if not n:
            return
        self.size += n
        while len(view):
            if self._buf is None:
                self._buf, self._fill = self._free.get(), 0
            take = min(len(view), CHUNK - self._fill)
            self._buf[self._fill:self._fill + take] = view[:take]
            self._fill += take
            view = view[take:]
            if self._fill == CHUNK:
                self._flush()
        if self._on_bytes:
            self._on_bytes(n)

    def reserve(self) -> memoryview:
        """The free tail of the current buffer, for a reader to fill in place; `commit(n)` takes n bytes of it."""
        if self._error is not None:
            raise HubpadError(f"{self.path}: write failed: {self._error}")
        if self._buf is None:
            self._buf, self._fill = self._free.get(), 0
        return memoryview(self._buf)[self._fill:]

    def commit(self, n: int) -> None:
        self._fill += n
        self.size += n
        if self._fill == CHUNK:
            self._flush()
        if self._on_bytes:
            self._on_bytes(n)

    def _flush(self) -> None:
        if self._buf is not None and self._fill:
            self._to_write.put((self._buf, self._fill))
        elif self._buf is not None:
            self._free.put(self._buf)
        self._buf, self._fill = None, 0

    def _stop(self) -> None:
        self._flush()
        self._to_write.put(None)
        for t in self._threads:
            t.join()

    def close(self) -> str:
        """Flush everything, fsync, and return the file's sha256."""
        self._stop()
        if self._file is not None:
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
        self._stop()
        if self._file is not None:
            self._file.close()


FILL_BLOCK = 1024 * 1024
_FILL_BLOCKS: dict[bytes, bytes] = {}


def fill_bytes(pattern: bytes, n: int) -> bytes:
    """`n` bytes of a repeated element pattern."""
    return (pattern * -(-n // len(pattern)))[:n]


def _fill_block(pattern: bytes) -> memoryview:
    """About 1 MiB of the pattern (a whole number of elements), one per pattern: the few fills recur everywhere."""
    if pattern not in _FILL_BLOCKS:
        _FILL_BLOCKS[pattern] = pattern * max(1, FILL_BLOCK // len(pattern))
    return memoryview(_FILL_BLOCKS[pattern])


def _write_fill(out: ShardWriter, pattern: bytes, n: int) -> None:
    block = _fill_block(pattern)
    while n > 0:
        take = min(len(block), n)  # both multiples of the element size
        out.write(block[:take])
        n -= take


def write_tensor(t: TensorPlan, reader: VerifiedReader, out: ShardWriter) -> None:
    """Stream one planned tensor from its source reader into the shard."""
    op, src = t.op, t.src
    if op.kind == "copy":
        reader.copy_to(src.start, src.nbytes, out)
        return
    if op.kind == "append":
        reader.copy_to(src.start, src.nbytes, out)
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
            reader.copy_to(pos, block_in, out)
        else:
            _pad_columns(op, reader, pos, out)
        pos += block_in
        _write_fill(out, op.fill, extra_rows)


def _pad_columns(op, reader: VerifiedReader, pos: int, out: ShardWriter) -> None:
    """Widen every row from `row_bytes` to `new_row_bytes`: a few MiB of rows at a time, in one reused buffer
    whose row tails already hold the fill, so each row costs one slice copy. Rows of a few bytes (group
    scales) are copied as `row_bytes` strided byte columns instead: 0.5 us per row adds up to seconds there."""
    rb, nrb = op.row_bytes, op.new_row_bytes
    per_chunk = max(1, min(op.rows, CHUNK // nrb))
    buf = bytearray((bytes(rb) + fill_bytes(op.fill, nrb - rb)) * per_chunk)
    done = 0
    while done < op.rows:
        k = min(per_chunk, op.rows - done)
        data = reader.read(pos + done * rb, k * rb)
        if rb <= 48 and rb < k:  # narrow rows: copy byte column j of all rows at once (rb strided copies, not k)
            end = k * nrb
            for j in range(rb):
                buf[j:end:nrb] = data[j::rb]
        else:
            for i in range(k):
                buf[i * nrb:i * nrb + rb] = data[i * rb:(i + 1) * rb]
        out.write(memoryview(buf)[:k * nrb])
        done += k


def build_shard(shard: ShardPlan, readers: Callable[[str], VerifiedReader], path: Path | None,
                on_bytes: Callable[[int], None] | None = None) -> str:
    """Write one output shard to `path`; returns its sha256. `readers(file)` gives each source file's reader.

    `path` None computes the sha256 only (nothing is written)."""
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
