"""A local directory as a Source."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from hubpad.errors import HubpadError
from hubpad.source.base import CHUNK, CHUNK_POOL, FileEntry, Source
from hubpad.util.hashing import digest_of, file_sha256

READ = 1024 * 1024


class LocalSource(Source):
    """A checkpoint directory on local disk."""

    kind = "local"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise HubpadError(f"{root}: no such directory" if not self.root.exists() else f"{root}: not a directory")
        self.label = str(root)
        self._files: dict[str, FileEntry] | None = None

    @property
    def ref(self) -> str:
        return str(self.root.expanduser().resolve())

    def files(self) -> dict[str, FileEntry]:
        if self._files is None:
            found = {}
            for p in sorted(self.root.rglob("*")):
                rel = p.relative_to(self.root).as_posix()
                if p.is_file() and not any(part.startswith(".") for part in Path(rel).parts):
                    found[rel] = FileEntry(rel, p.stat().st_size)
            self._files = found
        return self._files

    def read_range(self, path: str, start: int, end: int) -> bytes:
        with open(self.root / path, "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def stream(self, path: str, start: int, end: int) -> Iterator[memoryview]:
        """Chunks are read into reused buffers (CHUNK_POOL): read-only views, valid as long as they are held.

        Each CHUNK buffer is filled and handed out READ bytes at a time, so a piece is still in the CPU cache when
        the reader hashes it (hashing 8 MiB read at once ran ~30 % slower, from memory)."""
        with open(self.root / path, "rb", buffering=0) as f:
            f.seek(start)
            pos = start
            while pos < end:
                view, fill = CHUNK_POOL.get(), 0
                while fill < CHUNK and pos < end:
                    got = f.readinto(view[fill:fill + min(READ, CHUNK - fill, end - pos)])
                    if not got:
                        raise HubpadError(f"{self.label}/{path}: file ended at byte {pos}, expected {end}")
                    piece = view.toreadonly()[fill:fill + got]
                    fill, pos = fill + got, pos + got
                    yield piece
                    del piece
                del view

    def local_path(self, path: str) -> Path | None:
        return self.root / path


def local_digest(path: Path) -> str:
    """digest_of() for a directory as it is now (same file set as LocalSource lists)."""
    return digest_of({rel: file_sha256(path / rel) for rel in LocalSource(path).files()})
