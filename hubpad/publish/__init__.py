"""Where a derivative goes: a local directory built beside its final place, or a Hub repo via a staging branch."""

from __future__ import annotations

from pathlib import Path

from hubpad.errors import ConfigError
from hubpad.publish.base import Publisher, Summary
from hubpad.publish.hub import HubPublisher
from hubpad.publish.local import LocalPublisher
from hubpad.source.base import Source
from hubpad.util.refs import is_local

__all__ = ["Publisher", "Summary", "make_publisher"]


def make_publisher(source: Source, dst: str | None, tp: int, *, force: bool, private: bool, workdir,
                   max_disk: int | None, repo_id: str | None = None) -> Publisher:
    """The publisher for DST: local for a local path, else the Hub (DST None: `<your user>/<name>-TP<N>`)."""
    if dst is not None and is_local(dst):

        return LocalPublisher(Path(dst).expanduser(), force=force, repo_id=repo_id, max_disk=max_disk, workdir=workdir)
    if repo_id is not None:
        raise ConfigError("--repo-id names the Hub repo of a local DST; a Hub DST is its own repo id (use --to)")

    return HubPublisher.for_target(source, dst, tp, force=force, private=private, workdir=workdir, max_disk=max_disk)
