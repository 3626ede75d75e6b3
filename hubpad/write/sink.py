"""Put a shard's bytes on disk without the kernel's page-cache copy, on an I/O thread, fsync only when it matters.

Why: on the machines measured, the kernel's copy into the page cache cost more CPU than hashing the same bytes
(~2.5 s/GB, against ~0.7 s/GB for SHA-256), and a durable file then still waited for writeback at the end. Bytes are
copied instead into page-aligned staging buffers and written with O_DIRECT: the device reads them by DMA while the
next buffer is filled and hashed, so the disk fills while the CPU works and the final fsync only has metadata and
the device cache left to flush. Where the filesystem refuses O_DIRECT (tmpfs, some network filesystems), the same
buffers go through the page cache instead: same bytes, just slower.
"""

from __future__ import annotations

import errno
import fcntl
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hubpad.util.buffers import aligned, is_idle
from hubpad.util.disk import write_failed, writing

BLOCK = 4096  # O_DIRECT alignment of buffer address, file offset and length (covers 512 B and 4 KiB devices)
STAGE = 8 * 1024 * 1024  # one staging buffer (a multiple of BLOCK)
STAGES = 4  # being filled, being hashed, being written, one spare
PIECE = 1024 * 1024  # bytes per commit: a piece is still in the CPU cache when the hash thread takes it
POLL = 0.05  # seconds between looks at the threads' error while waiting for a free buffer
_O_DIRECT = getattr(os, "O_DIRECT", 0)


class _Stage:
    """A page-aligned STAGE-byte window of a bytearray (a bytearray tells when no view of it is left)."""

    def __init__(self) -> None:
        self.raw, self.off = aligned(STAGE, BLOCK)

    def view(self, start: int = 0, end: int = STAGE) -> memoryview:
        return memoryview(self.raw)[self.off + start:self.off + end]

    def idle(self) -> bool:
        """Nothing holds a view of it any more (the upstream hash may still be reading it)."""
        return is_idle(self.raw)


class FileSink:
    """A new file, filled in file order by one producer (the padding thread) through page-aligned staging buffers.

    The producer copies bytes in with `write`, or reads them in place: `reserve` a slice, fill it, `commit` it. A hash
    thread passes each committed piece to `on_staged` (the shard's sha256: taken of the very bytes written); an I/O
    thread writes each full buffer, then frees it. Memory is STAGES buffers, whatever the file size.

    `durable`: fsync at close (a file that is published from disk). A scratch file that is uploaded and then deleted
    needs none: if the machine dies, the run starts over from what the Hub holds.

    A failed write (a full disk, EIO, a read-only filesystem) is raised to the producer at its next `reserve` or
    `raise_error`, and at `close`, as one HubpadError naming the file and the cause; the producer never waits for a
    buffer after it.
    """

    def __init__(self, path: Path, durable: bool, on_staged: Callable[[memoryview], None]) -> None:
        self.path, self.durable, self.on_staged = path, durable, on_staged
        with writing(path):
            self.fd, self.direct = _open_new(path)
        self.error: BaseException | None = None
        self._free: queue.Queue = queue.Queue()
        for _ in range(STAGES):
            self._free.put(_Stage())
        self._staged: queue.Queue = queue.Queue()  # (piece or None, (stage, bytes) to write or None)
        self._full: queue.Queue = queue.Queue()  # (stage, bytes)
        self._stage: _Stage | None = None
        self._fill = 0
        self._threads = [threading.Thread(target=self._hash_loop, name=f"hash-{path.name}", daemon=True),
                         threading.Thread(target=self._io_loop, name=f"io-{path.name}", daemon=True)]
        for t in self._threads:
            t.start()

    def reserve(self, n: int) -> memoryview:
        """A writable slice of staging for the next bytes of the file: at most `n` long, shorter at a buffer's end."""
        if self._stage is None:
            self._stage, self._fill = self._next_stage(), 0
        return self._stage.view(self._fill, self._fill + min(n, STAGE - self._fill))

    def raise_error(self) -> None:
        """Raise the first error of either thread, if there was one (as one line: the file and the cause)."""
        if self.error is not None:
            raise write_failed(self.path, self.error)

    def _next_stage(self) -> _Stage:
        """A free buffer nothing reads any more. A failed write ends the wait: the I/O thread gives its buffers back
        unwritten once it has failed, and nothing else would tell the producer."""
        while True:
            self.raise_error()
            try:
                stage = self._free.get(timeout=POLL)
            except queue.Empty:
                continue
            while not stage.idle():
                self.raise_error()
                time.sleep(0.0005)
            return stage

    def commit(self, n: int) -> None:
        """The first `n` bytes of the last reserved slice are filled: hash them, and write the buffer once full."""
        piece = self._stage.view(self._fill, self._fill + n)
        self._fill += n
        full = self._fill == STAGE
        self._staged.put((piece, (self._stage, STAGE) if full else None))
        if full:
            self._stage, self._fill = None, 0

    def write(self, data: memoryview) -> None:
        """Copy `data` in, PIECE by PIECE (each is hashed soon after, while it is still in the CPU cache)."""
        pos, n = 0, len(data)
        while pos < n:
            dst = self.reserve(min(PIECE, n - pos))
            take = len(dst)
            dst[:] = data[pos:pos + take]
            del dst
            self.commit(take)
            pos += take

    def close(self) -> None:
        """Write what is staged, fsync when durable, close; raises the first error of either thread."""
        try:
            if self._fill:
                self._staged.put((None, (self._stage, self._fill)))
                self._stage = None
            self._stop()
            if self.error is None and self.durable:
                with writing(self.path):
                    os.fsync(self.fd)
        finally:
            with writing(self.path):
                self._close_fd()
        self.raise_error()

    def abort(self) -> None:
        """Stop writing; the caller removes the file."""
        self._record(OSError(errno.ECANCELED, "aborted"))
        self._stop()
        try:
            self._close_fd()
        except OSError:
            pass  # the file is removed; a close that fails too changes nothing

    def _stop(self) -> None:
        if self._threads[0].is_alive():
            self._staged.put(None)
        for t in self._threads:
            t.join()

    def _close_fd(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def _record(self, exc: BaseException) -> None:
        """Keep the first error, without its traceback: the traceback's frames hold a view of the staging buffer
        that failed, and a buffer with a view alive is never free again (the producer would wait for it forever)."""
        exc.__traceback__ = exc.__context__ = exc.__cause__ = None
        if self.error is None:
            self.error = exc

    def _hash_loop(self) -> None:
        """The hash thread: each committed piece in order; full buffers go on to the I/O thread."""
        while (item := self._staged.get()) is not None:
            piece, full = item
            if piece is not None and self.error is None:
                try:
                    self.on_staged(piece)
                except BaseException as exc:  # surfaced to the producer
                    self._record(exc)
            del piece, item
            if full is not None:
                self._full.put(full)
        self._full.put(None)

    def _io_loop(self) -> None:
        """The I/O thread: write each full staging buffer, then give it back."""
        while (item := self._full.get()) is not None:
            stage, n = item
            if self.error is None:
                try:
                    self._write(stage.view(0, n))
                except BaseException as exc:  # surfaced to the producer
                    self._record(exc)
            self._free.put(stage)

    def _write(self, view: memoryview) -> None:
        """Whole blocks go straight to the device; the file's last partial block through the page cache."""
        while len(view):
            aligned = len(view) - len(view) % BLOCK if self.direct else 0
            if not aligned:
                self._buffered()
                view = view[os.write(self.fd, view):]
                continue
            try:
                view = view[os.write(self.fd, view[:aligned]):]
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                self._buffered()  # taken at open, refused at write (some filesystems do that): same bytes, buffered

    def _buffered(self) -> None:
        if self.direct:
            fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) & ~_O_DIRECT)
            self.direct = False


def _open_new(path: Path) -> tuple[int, bool]:
    """The file, created empty (its folder too: a weight folder's shard), with O_DIRECT when the platform and
    filesystem take it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
    if _O_DIRECT:
        try:
            return os.open(path, flags | _O_DIRECT, 0o644), True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    return os.open(path, flags, 0o644), False
