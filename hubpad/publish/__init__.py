"""Where a derivative goes: a local directory built beside its final place, or a Hub repo via a staging branch."""

from __future__ import annotations

from pathlib import Path

from hubpad.publish.base import Publisher, Summary
from hubpad.publish.hub import HubPublisher
from hubpad.publish.local import LocalPublisher
from hubpad.source.base import Source
from hubpad.util.refs import is_local

__all__ = ["Publisher", "Summary", "make_publisher"]


def make_publisher(source: Source, dst: str | None, tp: int, *, force: bool, private: bool, workdir,
                   max_disk: int | None) -> Publisher:
    """The publisher for DST: local for a local path, else the Hub (DST None: `<your user>/<name>-TP<N>`)."""
    if dst is not None and is_local(dst):

        return LocalPublisher(Path(dst).expanduser(), force=force)

    return HubPublisher.for_target(source, dst, tp, force=force, private=private, workdir=workdir, max_disk=max_disk)
