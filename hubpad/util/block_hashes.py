"""Per-block sha256s of a file streamed front to back: what `hubpad.json` records for each upstream weight file
(`upstream.files[path].blocks`), so a later run can check a partial read block by block (source/blocks.py).
"""

from __future__ import annotations

import hashlib
import os
from functools import partial

from hubpad.errors import ConfigError, HubpadError
from hubpad.util.hash_queue import HashQueue

DEFAULT_BLOCK_SIZE = 64 * 1024 * 1024


def block_size() -> int:
    """The block size new records use (HUBPAD_BLOCK_SIZE overrides it: tests and benches on small files)."""
    raw = os.environ.get("HUBPAD_BLOCK_SIZE")
    if raw is None:
        return DEFAULT_BLOCK_SIZE
    try:
        size = int(raw)
    except ValueError:
        size = 0
    if size < 4096:
        raise ConfigError(f"HUBPAD_BLOCK_SIZE must be a byte count of at least 4096, got {raw!r}")
    return size


def usable_record(record: dict | None, sha256: str | None, header_sha256: str | None = None) -> dict | None:
    """The block record of a manifest's upstream file entry, if it describes the file now known as `sha256`
    and (given `header_sha256`) vouches for the header bytes a plan was made from: a partial read may never
    stream them, so the record recorded from a checked full read is what checks them."""
    # hubpad.json and staging records live on the target, where anyone with write access may edit them: anything
    # malformed is no record (the file is then read in full), never a crash.
    blocks = record.get("blocks") if isinstance(record, dict) else None
    if not sha256 or not isinstance(blocks, dict) or record.get("sha256") != sha256:
        return None
    if header_sha256 is not None and record.get("header_sha256") != header_sha256:
        return None
    file_size, size, hashes = record.get("size"), blocks.get("size"), blocks.get("sha256")
    if not (isinstance(file_size, int) and isinstance(size, int) and size > 0 and isinstance(hashes, list)
            and all(isinstance(h, str) for h in hashes)):
        return None
    return blocks if len(hashes) == -(-file_size // size) else None


class BlockHashes:
    """Splits a forward byte stream at block boundaries and hashes each block on `queue`.

    `expected` None: record each block's sha256 (`record()`); else compare each completed block with it and
    keep the indices that differ (`mismatches`, read after queue.wait()). `file_hash` is fed too.
    """

    def __init__(self, size: int, file_size: int, queue: HashQueue, expected: list[str] | None = None,
                 file_hash=None) -> None:
        self.size, self.file_size, self.queue = size, file_size, queue
        self.expected, self.file_hash = expected, file_hash
        self.digests: dict[int, str] = {}
        self.mismatches: list[int] = []
        self._block = -1
        self._hash = None

    def feed(self, pos: int, view) -> None:
        """Queue the bytes at file offset `pos` for hashing (a new block must be entered at its first byte)."""
        while len(view):
            k = pos // self.size
            end = min((k + 1) * self.size, self.file_size)
            if k != self._block:
                if pos != k * self.size:  # its hash could not be checked or recorded
                    raise HubpadError(f"internal error: block {k} entered at byte {pos}, not at its start")
                self._block, self._hash = k, hashlib.sha256()
            take = min(len(view), end - pos)
            self.queue.submit(partial(self._update, self._hash, k, pos + take == end), view[:take])
            pos, view = pos + take, view[take:]

    def _update(self, h, k: int, done: bool, view) -> None:  # on the hash thread, in order
        if self.file_hash is not None:
            self.file_hash.update(view)
        h.update(view)
        if done:
            digest = h.hexdigest()
            if self.expected is None:
                self.digests[k] = digest
            elif self.expected[k] != digest:
                self.mismatches.append(k)

    def record(self) -> dict | None:
        """{"size", "sha256": [...]} once every block has been hashed (after queue.wait())."""
        n = -(-self.file_size // self.size)
        if len(self.digests) != n:
            return None
        return {"size": self.size, "sha256": [self.digests[k] for k in range(n)]}
