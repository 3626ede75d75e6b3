"""Progress for long byte streams: a live bar on a terminal, sparse plain lines in CI logs."""

from __future__ import annotations

import sys
import time

from hubpad.app.gha import group
from hubpad.run.mirror import RunHooks
from hubpad.run.progress import Meter
from hubpad.util.log import log

LOG_INTERVAL = 10.0  # seconds between plain progress lines where stderr is no terminal (CI logs, a file)


class Progress:
    """One output shard's bytes on stderr, in `Meter`'s words, throttled to a few updates a second."""

    def __init__(self, label: str, total: int, quiet: bool = False) -> None:
        self.meter = Meter(label, total)
        self._last = self.meter.start
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self._interval = 0.2 if self.tty else LOG_INTERVAL

    def update(self, n: int) -> None:
        self.meter.update(n)
        now = time.monotonic()
        if not self.quiet and now - self._last >= self._interval:
            self._last = now
            self._show(self.meter.line(now))

    def close(self) -> None:
        if not self.quiet:
            self._show(self.meter.line(final=True), final=True)

    def _show(self, line: str, final: bool = False) -> None:
        if self.tty:
            sys.stderr.write("\r\x1b[K" + line + ("\n" if final else ""))
            sys.stderr.flush()
        else:
            log(line)


def run_hooks() -> RunHooks:
    """What a run from the command line shows: a progress bar per shard, inside an Actions log group."""
    return RunHooks(progress=Progress, group=group)
