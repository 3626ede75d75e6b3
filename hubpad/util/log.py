"""Plain log lines to stderr (stdout stays free for --json output)."""

from __future__ import annotations

import sys


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
