"""A lock file a run holds while it lives, with its pid inside: a later run that finds it free knows the run that made
it stopped (killed, power loss) and that the scratch it left may go.

flock, not the pid, decides: a lock is released by the kernel when its process dies, however it dies, while a pid
may have been reused since. The pid only says whom the lock belonged to.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class RunLock:
    """An exclusive, non-blocking lock on `path` (created if missing), held until `release`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = None

    def acquire(self) -> bool:
        """Take it (and write this process's pid into it); False when another process holds it."""
        f = open(self.path, "a+b")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Locked a file the run before us had already removed? Then someone else may hold the new one.
            held = os.fstat(f.fileno()).st_ino == os.stat(self.path).st_ino
        except (BlockingIOError, FileNotFoundError):
            held = False
        if not held:
            f.close()
            return False
        f.truncate(0)
        f.write(f"{os.getpid()}\n".encode())
        f.flush()
        self._file = f
        return True

    def release(self) -> None:
        """Remove the file while still holding it, then let go (a run waiting to take it finds it gone)."""
        if self._file is not None:
            self.path.unlink(missing_ok=True)
            self._file.close()
            self._file = None

    @property
    def held(self) -> bool:
        return self._file is not None


def abandoned(path: Path) -> bool:
    """A lock file that exists and that no process holds: the run that made it stopped."""
    try:
        f = open(path, "rb")
    except OSError:
        return False
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
    return True


def recorded_pid(path: Path) -> int | None:
    """The pid a lock file (or a scratch name's `-<pid>` suffix, `path` being that name) records, if any."""
    try:
        text = path.read_text().strip() if path.is_file() else path.name.rsplit("-", 1)[-1]
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def gone(pid: int | None) -> str:
    """How a stopped run's process is described: `process 1234 is gone` (or, where the pid was reused since,
    `process 1234 holds no lock`)."""
    if pid is None:
        return "its process is gone"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"process {pid} is gone"
    except PermissionError:
        pass
    return f"process {pid} holds no lock"
