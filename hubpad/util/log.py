"""Plain log lines to stderr (stdout stays free for --json output), and to a front end's own view of a run."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_also: ContextVar[Callable[[str], None] | None] = ContextVar("hubpad_log_also", default=None)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    also = _also.get()
    if also is not None:
        also(message)


@contextmanager
def also_log_to(sink: Callable[[str], None]) -> Iterator[None]:
    """Within this block (this thread or task), every log line also goes to `sink`: a web page shows a run's notes
    ("resuming: 2 shard(s) already staged") to the user who started it."""
    token = _also.set(sink)
    try:
        yield
    finally:
        _also.reset(token)
