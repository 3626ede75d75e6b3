"""Where upstream bytes come from: a local directory or a Hub repo pinned to a commit, read in ranges."""

from __future__ import annotations

from pathlib import Path

from hubpad.errors import ConfigError
from hubpad.source.base import CHUNK, FileEntry, Source, VerifiedReader
from hubpad.source.hub import HubSource
from hubpad.source.local import LocalSource, local_digest
from hubpad.util.refs import is_local

__all__ = ["CHUNK", "FileEntry", "LocalSource", "Source", "VerifiedReader", "local_digest", "open_source"]


def open_source(spec: str, revision: str | None = None) -> Source:
    """A Source for SRC: a LocalSource for a local directory, else a HubSource pinned to `revision` (main)."""
    if is_local(spec):
        if revision:
            raise ConfigError(f"{spec}: --revision only applies to Hub repos")
        return LocalSource(Path(spec).expanduser())

    return HubSource(spec, revision=revision or "main")
