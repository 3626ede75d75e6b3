"""The local disk: the room a run needs, said up front with numbers, and a failed write said in one line.

Why up front: a run that finds the disk full 40 % of the way in has cost the user that time for nothing; the free
space of the filesystem a run writes to is known before the first byte.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hubpad.errors import HubpadError
from hubpad.util.sizes import human

# errno values that mean "this disk cannot take the bytes": the message adds how much it has free
_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def existing(path: str | os.PathLike[str]) -> Path:
    """`path`, or its nearest parent that exists (where a folder not made yet will live)."""
    p = Path(path).absolute()
    return next(q for q in (p, *p.parents) if q.exists())


def mount_point(path: str | os.PathLike[str]) -> Path:
    """The mount point of the filesystem `path` (or its nearest existing parent) is on."""
    p = existing(path).resolve()
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return p


def free_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes an unprivileged writer may still put on the filesystem of `path`."""
    return shutil.disk_usage(existing(path)).free


@dataclass(frozen=True)
class Room:
    """`need` bytes wanted for `what` (`least` of them will do, when less) on a filesystem that has `free`, mounted
    at `where`."""

    need: int
    free: int
    where: Path
    least: int | None = None
    what: str = ""

    @property
    def enough(self) -> bool:
        return self.free >= (self.need if self.least is None else self.least)

    def line(self) -> str:
        """`needs 2.3 GB, 290.0 MB free on /small-disk` (the one wording of a room check)."""
        least = f" (at least {human(self.least)})" if self.least is not None and self.least < self.need else ""
        return f"needs {human(self.need)}{least}, {human(self.free)} free on {self.where}"

    def said(self) -> str:
        """`disk: the derivative needs 2.3 GB, 290.0 MB free on /small-disk` (a run's log line, a dry run's too)."""
        return f"disk: {self.what + ' ' if self.what else ''}{self.line()}"


def room(path: str | os.PathLike[str], need: int, least: int | None = None, what: str = "") -> Room:
    """What the filesystem of `path` has for `need` bytes of `what` (`least` of them will do)."""
    return Room(need, free_bytes(path), mount_point(path), least, what)


def write_failed(path: str | os.PathLike[str], exc: BaseException) -> HubpadError:
    """One line naming the file and the cause (`…: write failed: No space left on device (ENOSPC) on /small-disk`)."""
    if isinstance(exc, HubpadError):
        return exc
    code = getattr(exc, "errno", None)
    cause = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    if code in errno.errorcode:
        cause += f" ({errno.errorcode[code]})"
    if code in _FULL:  # which disk (or quota) is full: the file's path may not say
        try:
            cause += f" on {mount_point(path)}"
        except OSError:
            pass
    return HubpadError(f"{path}: write failed: {cause}")


@contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """Any OSError while writing `path` becomes write_failed's one line."""
    try:
        yield
    except OSError as exc:
        raise write_failed(path, exc) from None
