"""Where upstream bytes come from: a local directory or a Hub repo pinned to a commit, read in ranges."""

from __future__ import annotations

from pathlib import Path

from hubpad.errors import ConfigError, HubError, NetworkError
from hubpad.source.base import CHUNK, FileEntry, Source, VerifiedReader
from hubpad.source.hub import HubSource
from hubpad.source.local import LocalSource, local_digest
from hubpad.util.refs import both_readings, is_local

__all__ = ["CHUNK", "FileEntry", "LocalSource", "Source", "VerifiedReader", "local_digest", "open_source"]


def open_source(spec: str, revision: str | None = None) -> Source:
    """A Source for SRC: a LocalSource for a local directory, else a HubSource pinned to `revision` (main)."""
    if is_local(spec):
        if revision:
            raise ConfigError(f"{spec}: --revision only applies to Hub repos")
        return LocalSource(Path(spec).expanduser())

    try:
        return HubSource(spec, revision=revision or "main")
    except HubError as exc:  # unreachable, or not found: the value may have meant a local path that is not there
        if not (isinstance(exc, NetworkError) or exc.status == 404):
            raise
        raise type(exc)(f"{exc}; {both_readings(spec)}", exc.status) from None
