"""SHA-256 helpers: one file's digest, and one digest over a set of files (a local upstream's "commit")."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path


def file_sha256(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """The sha256 of a file, read in 1 MiB blocks (never whole into memory); `on_bytes(n)` after each (progress)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
    return h.hexdigest()


def bytes_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_of(file_hashes: dict[str, str]) -> str:
    """One digest over every file's path and sha256: the "commit" of a local upstream directory."""
    h = hashlib.sha256()
    for path in sorted(file_hashes):
        h.update(f"{path}\0{file_hashes[path]}\n".encode())
    return h.hexdigest()
