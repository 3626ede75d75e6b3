"""Write one output safetensors shard while hashing it, off the padding thread, with bounded memory."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from hubpad.errors import HubpadError
from hubpad.source.base import VerifiedReader
from hubpad.util.disk import write_failed
from hubpad.util.hash_queue import HashQueue
from hubpad.write.sink import PIECE, FileSink


class ShardWriter:
    """One output shard, fed in file order by the padding thread; its sha256 at close.

    To a file, bytes go through a FileSink (staging buffers, hashed and written on its own threads); upstream
    ranges that are copied unchanged are read straight into its staging. With no file (`path` None: checking a
    shard against bytes already somewhere else), a HashQueue hashes what it is given on a thread, by reference.
    """

    def __init__(self, path: Path | None, on_bytes: Callable[[int], None] | None = None, durable: bool = True,
                 reserve: Callable[[int], None] | None = None) -> None:
        """`durable` False: no fsync (a scratch file that is uploaded, then deleted). `reserve(n)` is called before
        n more bytes go to the file, and may wait (a disk budget)."""
        self.path = path
        self.size = 0
        self._hash = hashlib.sha256()
        self._on_bytes = on_bytes
        self._reserve = reserve if path is not None else None
        self._sink = FileSink(path, durable, self._hash.update) if path is not None else None
        self._queue = HashQueue("hash-only") if path is None else None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._check()
        view = memoryview(data)
        if self._sink is not None:
            if self._reserve:
                self._reserve(len(view))
            self._sink.write(view)
        else:
            self._queue.submit(self._hash.update, view)
        self._count(len(view))

    def copy_from(self, reader: VerifiedReader, start: int, n: int) -> None:
        """The upstream bytes [start, start+n) of `reader`'s file, unchanged: read into staging, no copy between."""
        if self._sink is None:
            for piece in reader.iter_range(start, n):
                self.write(piece)
            return
        end = start + n
        while start < end:
            self._check()
            dst = self._sink.reserve(min(PIECE, end - start))
            take = len(dst)
            if self._reserve:
                self._reserve(take)
            reader.readinto(start, dst)
            del dst
            self._sink.commit(take)
            start += take
            self._count(take)

    def close(self) -> str:
        """Write everything (fsync when durable) and return the file's sha256."""
        try:
            (self._sink or self._queue).close()
        except Exception as exc:
            raise write_failed(self.path, exc) from None
        return self._hash.hexdigest()

    def abort(self) -> None:
        """Stop, and remove the partial file: nothing half-written is left behind (a Hub run's --workdir too)."""
        (self._sink or self._queue).abort()
        if self.path is not None:
            try:
                self.path.unlink(missing_ok=True)
            except OSError:
                pass  # a filesystem that refuses even that: the caller's cleanup (its scratch folder) is next

    def _check(self) -> None:
        if self._sink is not None:
            self._sink.raise_error()
        elif self._queue.error is not None:
            raise HubpadError(f"hashing failed: {self._queue.error}")

    def _count(self, n: int) -> None:
        self.size += n
        if self._on_bytes:
            self._on_bytes(n)
