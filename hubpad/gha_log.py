"""Plain log lines to stderr (stdout stays free for --json output)."""

from __future__ import annotations

import sys

_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def log(message: str) -> None:
    if not _quiet:
        print(message, file=sys.stderr, flush=True)
