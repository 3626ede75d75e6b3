"""Where upstream bytes come from: a local directory here, the Hub in `hub_source.py`.

A source only lists files, reads small byte ranges (config, headers) and streams byte windows. Every file
whose tensor bytes are used is read front to back exactly once by a `VerifiedReader`, which hashes all of
it (and each of its blocks, for `hubpad.json`), so nothing is published from bytes that were not checked
against the file's sha256; or, on an incremental run, only the blocks it needs by a `blocks.BlockReader`,
which checks each against the block hashes recorded by an earlier full read.
"""

from __future__ import annotations

import hashlib
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hubpad.errors import HubpadError, IntegrityError
from hubpad.util.block_hashes import BlockHashes, block_size
from hubpad.util.buffers import is_idle
from hubpad.util.hash_queue import HashQueue

CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class FileEntry:
    """A file of the source; `sha256` is known up front on the Hub (LFS oid) and None locally. A Hub file kept in
    git rather than LFS has no sha256 there, only its git blob id (`git_oid`), which is checked instead."""

    path: str
    size: int
    sha256: str | None = None
    git_oid: str | None = None


class ContentHash:
    """sha256 of a file's bytes and, when `git_blob_size` is set, git's blob id (sha1 of "blob <size>\\0" + bytes)."""

    def __init__(self, git_blob_size: int | None) -> None:
        self.sha256 = hashlib.sha256()
        self.git = None
        if git_blob_size is not None:
            self.git = hashlib.sha1(usedforsecurity=False)
            self.git.update(b"blob %d\0" % git_blob_size)

    def update(self, data) -> None:
        self.sha256.update(data)
        if self.git is not None:
            self.git.update(data)

    def check(self, entry: FileEntry, label: str) -> str:
        """The sha256 of the bytes hashed; IntegrityError when they are not the file `entry` lists (its LFS
        sha256, or the git blob id of a file kept in git)."""
        digest = self.sha256.hexdigest()
        if entry.sha256 and digest != entry.sha256:
            raise IntegrityError(f"{label}/{entry.path}: sha256 mismatch (expected {entry.sha256[:12]}…, got "
                                 f"{digest[:12]}…); nothing built from it is published")
        if self.git is not None and self.git.hexdigest() != entry.git_oid:
            raise IntegrityError(f"{label}/{entry.path}: git blob id mismatch (expected {entry.git_oid[:12]}…, got "
                                 f"{self.git.hexdigest()[:12]}…); nothing built from it is published")
        return digest

    @classmethod
    def for_entry(cls, entry: FileEntry) -> "ContentHash":
        """The hashes `entry` can be checked by: its sha256, and its git blob id when that is all the Hub gives."""
        return cls(entry.size if entry.git_oid and not entry.sha256 else None)


class Source(ABC):
    """Read-only access to one upstream checkpoint, pinned to one revision for the whole run."""

    kind: str = "local"
    label: str = ""  # as the user wrote it, for messages
    revision: str | None = None
    commit: str | None = None

    @property
    def ref(self) -> str:
        """What hubpad.json records and the card's commands name: the repo id, or a local directory's absolute path."""
        return self.label

    @abstractmethod
    def files(self) -> dict[str, FileEntry]:
        """Every file of the checkpoint, keyed by its path relative to the repo root."""

    @abstractmethod
    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of a file: for headers and other small reads."""

    @abstractmethod
    def stream(self, path: str, start: int, end: int) -> Iterator[bytes]:
        """Bytes [start, end) of a file as successive chunks, for the bulk copy."""

    def read_file(self, path: str) -> bytes:
        """A whole small file (config.json, the index, a tokenizer), checked against the hash the source lists."""
        entry = self.files().get(path)
        if entry is None:
            raise HubpadError(f"{self.label}: no file {path!r}")
        data = self.read_range(path, 0, entry.size)
        if len(data) != entry.size:
            raise IntegrityError(f"{self.label}/{path}: read {len(data)} bytes of {entry.size}")
        content = ContentHash.for_entry(entry)
        content.update(data)
        content.check(entry, self.label)
        return data

    def local_path(self, path: str) -> Path | None:
        """The file on local disk, when there is one (lets copies skip the bytes-through-Python path)."""
        return None




class _ChunkPool:
    """CHUNK-sized buffers for LocalSource.stream, reused instead of allocating 8 MB per chunk.

    A buffer goes back into use only when nothing holds a view of it any more (util.buffers.is_idle).
    Allocating and freeing a chunk per read lets the C allocator's heap drift, and with it peak memory, with
    the length of the run; a fixed set of buffers, all allocated on first use, keeps it flat: `limit` covers
    what the shard writer may queue (writer.HashQueue.MAX_INFLIGHT) plus the chunks being read and padded.
    Past `limit` busy buffers, new ones are allocated and dropped (correct, just not pooled).
    """

    def __init__(self, limit: int = 10) -> None:
        self.limit = limit
        self._buffers: list[bytearray] = []
        self._lock = threading.Lock()

    def get(self) -> memoryview:
        """A writable view of an idle buffer; the buffer stays taken while any view of it is alive."""
        with self._lock:
            if not self._buffers:
                self._buffers = [bytearray(CHUNK) for _ in range(self.limit)]
            for buf in self._buffers:
                if is_idle(buf):
                    return memoryview(buf)
            return memoryview(bytearray(CHUNK))


CHUNK_POOL = _ChunkPool()
# Every upstream byte is hashed here, off the thread that reads and pads (each file's bytes in order).
INPUT_HASHING = HashQueue("hash-in")


class VerifiedReader:
    """Reads one source file strictly front to back, hashing every byte, and checks the sha256 at the end.

    Callers ask for increasing byte ranges; bytes between them (the header, gaps) are read and hashed
    too. `window_end` tells a remote source how far one request may reach (one GET per output shard).
    With `blocks=True` it also records per-block sha256s (`block_record()`). With `rewind=True` (verifying a
    layout hubpad did not write) a range behind the position reopens the stream there; the file is then no
    longer hashed and `finish()` returns None.
    """

    def __init__(self, source: Source, entry: FileEntry, rewind: bool = False, blocks: bool = False,
                 header: tuple[int, str] | None = None) -> None:
        self.source, self.entry, self.rewind = source, entry, rewind
        # header: (end, sha256) of the bytes [0, end) a plan was made from; the same bytes of this stream must match
        self._header = header
        self._header_hash = hashlib.sha256() if header else None
        self.hashing = True
        self.pos = 0
        self.window_end = entry.size
        self.bytes_read = 0
        self._hash = ContentHash.for_entry(entry)
        # blocks: also record per-block sha256s (hubpad.json), so a later run can read this file partially
        self._blocks = BlockHashes(block_size(), entry.size, INPUT_HASHING, file_hash=self._hash) if blocks else None
        self._stream: Iterator[bytes] | None = None
        self._stream_end = 0
        self._pending = memoryview(b"")
        self._local = source.local_path(entry.path)
        self._file = None  # opened on the first readinto() of a local file

    def set_window(self, end: int) -> None:
        """Limit the next request to [pos, end): the bytes the current output shard needs from this file."""
        self.window_end = max(min(end, self.entry.size), self.pos)

    def _next_chunk(self, need_until: int) -> memoryview:
        if len(self._pending):
            return self._pending
        if self._stream is None or self.pos >= self._stream_end:
            end = self._request_end(need_until)
            if self.pos >= end:
                raise HubpadError(f"{self.source.label}/{self.entry.path}: read past the requested window")
            self._stream = iter(self.source.stream(self.entry.path, self.pos, end))
            self._stream_end = end
        try:
            chunk = next(self._stream)
        except StopIteration:
            raise HubpadError(
                f"{self.source.label}/{self.entry.path}: stream ended at byte {self.pos}, expected {self._stream_end}"
            ) from None
        if self.hashing:
            self._feed(memoryview(chunk))
        self.bytes_read += len(chunk)
        self._pending = memoryview(chunk)
        return self._pending

    def _feed(self, view: memoryview) -> None:
        """Queue the bytes at `pos` for hashing (on the shared thread, in order)."""
        if self._header_hash is not None and self.pos < self._header[0]:
            INPUT_HASHING.submit(self._header_hash.update, view[:self._header[0] - self.pos])
        if self._blocks is not None:
            self._blocks.feed(self.pos, view)
        else:
            INPUT_HASHING.submit(self._hash.update, view)

    def _request_end(self, need_until: int) -> int:
        """Where a new request from `pos` ends: the current window (one GET per output shard)."""
        return max(self.window_end, need_until)

    def iter_range(self, start: int, n: int) -> Iterator[memoryview]:
        """Yield the bytes [start, start+n) in pieces; skipping forward reads (and hashes) the gap."""
        if start < self.pos:
            if not self.rewind:
                raise HubpadError(f"{self.entry.path}: internal error, range {start} requested behind position {self.pos}")
            self.hashing, self.pos, self._stream, self._pending = False, start, None, memoryview(b"")
        end = start + n
        while self.pos < end:
            chunk = self._next_chunk(end)
            take = min(len(chunk), end - self.pos)
            piece, self._pending = chunk[:take], chunk[take:]
            skip = max(0, start - self.pos)
            self.pos += take
            if skip < take:
                yield piece[skip:]

    def read(self, start: int, n: int) -> bytes:
        """The bytes [start, start+n) as one bytes object (for column padding chunks)."""
        return b"".join(self.iter_range(start, n))

    def readinto(self, start: int, dst: memoryview) -> None:
        """Fill `dst` with the bytes [start, start+len(dst)), hashed in order like every other byte.

        A local file is read straight into `dst` (the shard writer's staging buffer: one copy in all); other
        sources copy their chunks in. `dst` must stay untouched until INPUT_HASHING has hashed it (the writer
        reuses a staging buffer only once no view of it is left)."""
        got = 0
        if self._local is None or start < self.pos:
            for piece in self.iter_range(start, len(dst)):
                dst[got:got + len(piece)] = piece
                got += len(piece)
            return
        for _ in self.iter_range(start, 0):  # the gap before `start`, read and hashed
            pass
        take = min(len(self._pending), len(dst))
        if take:  # already read (and hashed) with the gap
            dst[:take], self._pending = self._pending[:take], self._pending[take:]
            self.pos += take
        if take < len(dst):
            self._read_local(dst[take:])

    def _read_local(self, dst: memoryview) -> None:
        if self._file is None:
            self._file = open(self._local, "rb", buffering=0)
        self._stream = None  # it stands behind the new position now
        got = os.preadv(self._file.fileno(), [dst], self.pos)
        while got < len(dst):
            more = os.preadv(self._file.fileno(), [dst[got:]], self.pos + got)
            if not more:
                raise HubpadError(f"{self.source.label}/{self.entry.path}: file ended at byte {self.pos + got}, "
                                  f"expected {self.pos + len(dst)}")
            got += more
        if self.hashing:
            self._feed(dst)
        self.bytes_read += len(dst)
        self.pos += len(dst)

    def finish(self) -> str | None:
        """Read what is left of the file, then check and return its sha256 (None when rewinding stopped hashing)."""
        self._close()
        if not self.hashing:
            return None
        if self.pos < self.entry.size:
            self.window_end = self.entry.size
            for _ in self.iter_range(self.entry.size, 0):  # skipping to EOF reads and hashes the tail
                pass
        INPUT_HASHING.wait()
        digest = self._hash.check(self.entry, self.source.label)
        if self._header_hash is not None and self._header_hash.hexdigest() != self._header[1]:
            raise IntegrityError(f"{self.source.label}/{self.entry.path}: the safetensors header the plan was made "
                                 f"from is not the one in the file's checked bytes (it changed, or a read went "
                                 f"wrong); nothing built from it is published")
        return digest

    def block_record(self) -> dict | None:
        """The per-block sha256s of the file (after finish() read and checked all of it), for hubpad.json."""
        return self._blocks.record() if self.hashing and self._blocks is not None else None

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
