"""A real, small filesystem for a test (tmpfs), and a bounded wait for a run that might hang.

Mounting needs root (CI's containers, this project's machines) or passwordless sudo (GitHub's runners); anywhere
else the test is skipped, saying why (and on GitHub Actions, where one of the two is there, it fails instead).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.helpers import tool_missing


def _as_root() -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    tool_missing("mounting a small tmpfs needs root or passwordless sudo")
    return []  # unreachable: tool_missing skips or fails


@contextlib.contextmanager
def tmpfs(where: Path, size: int) -> Iterator[Path]:
    """A tmpfs of `size` bytes mounted at `where` (made if missing) for the block, writable by this process."""
    root = _as_root()
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([*root, "mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "hubpad-test", str(where)],
                       capture_output=True, text=True)
    if r.returncode:
        tool_missing(f"cannot mount a tmpfs here: {r.stderr.strip() or r.stdout.strip()}")
    try:
        yield where
    finally:
        subprocess.run([*root, "umount", "-l", str(where)], capture_output=True)


def bounded(fn: Callable[[], object], seconds: float) -> object:
    """fn()'s result, or an AssertionError when it has not returned within `seconds` (a hang, not a slow run: the
    thread is left behind, a daemon)."""
    box: dict = {}

    def call() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # re-raised below, in the test's thread
            box["error"] = exc

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds}s: hung"
    if "error" in box:
        raise box["error"]
    return box["result"]
