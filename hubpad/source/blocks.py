"""Per-block sha256s of upstream files: recorded on a full read, checked on a partial one.

A file's sha256 verifies its bytes only once all of them are read. So whenever a file is read in full (and
its sha256 checked), the sha256 of each fixed-size block is recorded too (`hubpad.json`:
`upstream.files[path].blocks`). A later incremental run whose upstream file still has that sha256 then reads
only the blocks its rebuilt shards need, each whole and checked against its recorded hash (`BlockReader`);
a mismatch is an IntegrityError and nothing is published. Blocks are hashed as they stream, never held.
"""

from __future__ import annotations

from hubpad.errors import IntegrityError
from hubpad.source.base import INPUT_HASHING, FileEntry, Source, VerifiedReader
from hubpad.util.block_hashes import BlockHashes

class BlockReader(VerifiedReader):
    """Reads only the recorded blocks that cover the wanted ranges, each whole and checked against its hash.

    `want(ranges)` names the byte ranges a shard about to be built needs; a request opens one GET per run of
    consecutive wanted blocks, and skips forward over the blocks no range needs. `finish()` completes the
    current block, waits for the hashes and raises IntegrityError on any mismatch.
    """

    def __init__(self, source: Source, entry: FileEntry, record: dict) -> None:
        super().__init__(source, entry)
        self.block = record["size"]
        self._blocks = BlockHashes(self.block, entry.size, INPUT_HASHING, expected=record["sha256"])
        self._wanted: set[int] = set()

    def want(self, ranges: list[list[int]]) -> None:
        for start, end in ranges:
            if end > start:
                self._wanted.update(range(start // self.block, (end - 1) // self.block + 1))

    def _round_up(self, pos: int) -> int:
        return min(-(-pos // self.block) * self.block, self.entry.size)

    def _request_end(self, need_until: int) -> int:
        k = self.pos // self.block
        while k + 1 in self._wanted:
            k += 1
        return max(min((k + 1) * self.block, self.entry.size), self._round_up(need_until))

    def iter_range(self, start: int, n: int):
        if start > self.pos and start // self.block > self.pos // self.block:
            if self.pos % self.block:  # complete the block in progress (its bytes were used)
                yield from super().iter_range(self._round_up(self.pos), 0)
            first = start // self.block * self.block
            if first > self.pos:  # skip the blocks no range needs
                self.pos, self._stream, self._pending = first, None, memoryview(b"")
        yield from super().iter_range(start, n)

    def finish(self) -> str | None:
        if self.pos % self.block and self.pos < self.entry.size:
            for _ in self.iter_range(self._round_up(self.pos), 0):
                pass
        self._close()
        INPUT_HASHING.wait()
        if self._blocks.mismatches:
            k = self._blocks.mismatches[0]
            raise IntegrityError(
                f"{self.source.label}/{self.entry.path}: block {k} (bytes {k * self.block}-"
                f"{min((k + 1) * self.block, self.entry.size)}) does not match the sha256 recorded in hubpad.json "
                f"for this file; nothing built from it is published")
        return self.entry.sha256
