"""Make an output shard's bytes from the plan: source ranges plus fill runs, streamed, never a whole tensor.

Row padding is a straight copy followed by fill rows. Column padding moves a few MiB of rows at a time
into a buffer whose row tails already hold the fill, so each row costs one memcpy. Memory stays flat: the
writer queues at most ShardWriter.MAX_INFLIGHT bytes of buffers, plus a reader chunk or two.
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
from .source import CHUNK, CHUNK_POOL, VerifiedReader


class ShardWriter:
    """Writes one file and hashes it on a background thread, so padding and hashing overlap on two cores.

    Data is queued by reference, never copied. What the queue keeps alive is bounded by bytes, not by items:
    a queued slice keeps its whole buffer (a reader chunk, a fill block) alive, so each distinct buffer is
    counted once, whole, and the producer waits while more than MAX_INFLIGHT bytes of them are queued. Peak
    memory is then the same for a 0.5 GB shard and a 50 GB one, whatever the tensor sizes.
    """

    MAX_INFLIGHT = 48 * 1024 * 1024

    def __init__(self, path: Path | None, on_bytes: Callable[[int], None] | None = None) -> None:
        """`path` None: hash only, write nothing (checking a shard against bytes already somewhere else)."""
        self.path = path
        self.size = 0
        self._hash = hashlib.sha256()
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._file = open(path, "wb", buffering=0) if path is not None else None
        self._on_bytes = on_bytes
        self._cond = threading.Condition()
        self._live: dict[int, list] = {}  # id(buffer) -> [queued slices, bytes, the buffer (keeps its id unique)]
        self._inflight = 0
        name = path.name if path is not None else "hash-only"
        self._thread = threading.Thread(target=self._drain, name=f"write-{name}", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            key, view = item
            if self._error is None:
                try:
                    self._hash.update(view)
                    while self._file is not None and len(view):
                        written = self._file.write(view)
                        view = view[written:]
                except BaseException as exc:  # surfaced to the producer on the next write/close
                    self._error = exc
            del view, item
            with self._cond:
                entry = self._live[key]
                entry[0] -= 1
                if not entry[0]:
                    del self._live[key]
                    self._inflight -= entry[1]
                    self._cond.notify()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise HubpadError(f"{self.path}: write failed: {self._error}")
        view = memoryview(data)
        if not len(view):
            return
        owner = view.obj
        key = id(owner)
        with self._cond:
            entry = self._live.get(key)
            if entry is None:
                nbytes = memoryview(owner).nbytes
                while self._inflight and self._inflight + nbytes > self.MAX_INFLIGHT and self._error is None:
                    self._cond.wait()
                entry = self._live[key] = [0, nbytes, owner]
                self._inflight += nbytes
            entry[0] += 1
        self._queue.put((key, view))
        self.size += len(view)
        if self._on_bytes:
            self._on_bytes(len(view))

    def close(self) -> str:
        """Flush everything, fsync, and return the file's sha256."""
        self._queue.put(None)
        self._thread.join()
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
        with self._cond:
            self._cond.notify_all()
        self._queue.put(None)
        self._thread.join()
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
    """Widen every row from `row_bytes` to `new_row_bytes`, a few MiB of rows at a time: each chunk starts as a
    copy of a template whose row tails already hold the fill, so each row costs one slice copy. Rows of a few
    bytes (group scales) are copied as `row_bytes` strided byte columns instead (0.5 us per row adds up)."""
    rb, nrb = op.row_bytes, op.new_row_bytes
    per_chunk = max(1, min(op.rows, CHUNK // nrb))
    template = (bytes(rb) + fill_bytes(op.fill, nrb - rb)) * per_chunk
    done = 0
    while done < op.rows:
        k = min(per_chunk, op.rows - done)
        data = reader.read(pos + done * rb, k * rb)
        # A pooled buffer (idle again once the writer has written it), else a new one for rows over CHUNK.
        buf = CHUNK_POOL.get()[:k * nrb] if k * nrb <= CHUNK else bytearray(k * nrb)
        buf[:] = memoryview(template)[:k * nrb]
        if rb <= 48 and rb < k:
            end = k * nrb
            for j in range(rb):
                buf[j:end:nrb] = data[j::rb]
        else:
            for i in range(k):
                buf[i * nrb:i * nrb + rb] = data[i * rb:(i + 1) * rb]
        out.write(buf)
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
