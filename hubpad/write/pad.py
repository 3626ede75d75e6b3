"""Make an output shard's bytes from the plan: source ranges plus fill runs, streamed, never a whole tensor.

Row padding is a straight copy followed by fill rows. Column padding moves a few MiB of rows at a time
into a buffer whose row tails already hold the fill, so each row costs one memcpy. Memory stays flat: the
writer stages a fixed number of buffers (or, hashing only, queues at most HashQueue.MAX_INFLIGHT bytes of
them), plus a reader chunk or two.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hubpad.errors import HubpadError
from hubpad.formats.floats import scale_elements
from hubpad.plan.model import ShardPlan, TensorPlan
from hubpad.source.base import CHUNK, CHUNK_POOL, VerifiedReader
from hubpad.write.writer import ShardWriter

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
        out.copy_from(reader, src.start, src.nbytes)
        return
    if op.kind == "append":
        out.copy_from(reader, src.start, src.nbytes)
        out.write(op.data)
        return
    if op.kind == "replace":
        for _ in reader.iter_range(src.start, src.nbytes):  # consumed (and hashed), not written
            pass
        out.write(op.data)
        return
    pos = src.start
    for part in op.parts if op.kind == "sections" else (op,):
        _write_padded(part, reader, pos, out, t.dtype)
        pos += part.in_bytes


def _write_padded(op, reader: VerifiedReader, pos: int, out: ShardWriter, dtype: str = "") -> None:
    """One "pad" op's bytes: its blocks, each copied (scaled, for a scaled copy; or widened row by row) and followed
    by its fill rows."""
    block_in = op.rows * op.row_bytes
    extra_rows = (op.new_rows - op.rows) * op.new_row_bytes
    for _ in range(op.batch):
        if op.scale is not None:
            if op.new_row_bytes != op.row_bytes:
                raise HubpadError("internal error: a scaled copy that widens rows")
            _write_scaled(reader, pos, block_in, out, dtype, op.scale)
        elif op.new_row_bytes == op.row_bytes:
            out.copy_from(reader, pos, block_in)
        else:
            _pad_columns(op, reader, pos, out)
        pos += block_in
        _write_fill(out, op.fill, extra_rows)


def _write_scaled(reader: VerifiedReader, pos: int, n: int, out: ShardWriter, dtype: str, factor: float) -> None:
    """`n` source bytes from `pos`, each element × `factor` correctly rounded, a few MiB at a time."""
    step = CHUNK - CHUNK % 8  # whole elements of every scalable dtype
    done = 0
    while done < n:
        k = min(step, n - done)
        out.write(scale_elements(dtype, bytes(reader.read(pos + done, k)), factor))
        done += k


def _pad_columns(op, reader: VerifiedReader, pos: int, out: ShardWriter) -> None:
    """Widen every row from `row_bytes` to `new_row_bytes`, a few MiB of rows at a time: the rows are read straight
    into a pooled buffer (hashed there, as every upstream byte), then each goes to its place in a second one with
    its fill tail after it, each byte copied once. Rows of a few bytes (group scales) are copied as `row_bytes`
    strided byte columns over a template of tails instead (0.5 us per row adds up)."""
    rb, nrb = op.row_bytes, op.new_row_bytes
    per_chunk = max(1, min(op.rows, CHUNK // nrb))
    tail = fill_bytes(op.fill, nrb - rb)
    template = None
    done = 0
    while done < op.rows:
        k = min(per_chunk, op.rows - done)
        data = _pooled(k * rb)
        reader.readinto(pos + done * rb, data)
        buf = _pooled(k * nrb)
        if rb <= 48 and rb < k:
            template = template or (bytes(rb) + tail) * per_chunk
            end = k * nrb
            buf[:] = memoryview(template)[:end]
            for j in range(rb):
                buf[j:end:nrb] = data[j::rb]
        else:
            for i in range(k):
                row = i * nrb
                buf[row:row + rb] = data[i * rb:(i + 1) * rb]
                buf[row + rb:row + nrb] = tail
        del data  # its pooled buffer is free again once the input hash has read it
        out.write(buf)
        done += k


def _pooled(n: int) -> memoryview:
    """`n` writable bytes: a pooled buffer (idle again once nothing holds a view of it), or a new one over CHUNK."""
    return CHUNK_POOL.get()[:n] if n <= CHUNK else memoryview(bytearray(n))


def build_shard(shard: ShardPlan, readers: Callable[[str], VerifiedReader], path: Path | None,
                on_bytes: Callable[[int], None] | None = None, durable: bool = True,
                reserve: Callable[[int], None] | None = None) -> str:
    """Write one output shard to `path`; returns its sha256. `readers(file)` gives each source file's reader.

    `path` None computes the sha256 only (nothing is written); `durable` False skips the fsync (scratch files);
    `reserve(n)` is called before n more bytes are written (it may wait for disk)."""
    ends: dict[str, int] = {}
    for t in shard.tensors:
        ends[t.src.file] = max(ends.get(t.src.file, 0), t.src.end)
    for file, end in ends.items():
        readers(file).set_window(end)
    out = ShardWriter(path, on_bytes, durable, reserve)
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
