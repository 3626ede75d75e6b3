"""Progress for long byte streams: a live bar on a terminal, sparse plain lines in CI logs."""

from __future__ import annotations

import sys
import time

from hubpad.app.gha import group
from hubpad.run.mirror import RunHooks
from hubpad.util.log import log
from hubpad.util.sizes import human


class Progress:
    """Bytes done for one item (an output shard): rate and ETA, throttled to a few updates a second."""

    def __init__(self, label: str, total: int, quiet: bool = False) -> None:
        self.label, self.total, self.done = label, total, 0
        self.start = self._last = time.monotonic()
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self._interval = 0.2 if self.tty else 30.0

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if not self.quiet and now - self._last >= self._interval:
            self._last = now
            self._show(now, final=False)

    def close(self) -> None:
        if not self.quiet:
            self._show(time.monotonic(), final=True)

    def _show(self, now: float, final: bool) -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        if final:
            line = f"{self.label}: {human(self.done)} in {elapsed:.1f}s ({human(rate)}/s)"
        else:
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            pct = 100 * self.done / self.total if self.total else 100
            width = 24
            fill = int(width * pct / 100)
            bar = "#" * fill + "." * (width - fill)
            line = f"{self.label} [{bar}] {pct:5.1f}% {human(self.done)}/{human(self.total)} {human(rate)}/s ETA {eta:.0f}s"
        if self.tty:
            sys.stderr.write("\r\x1b[K" + line + ("\n" if final else ""))
            sys.stderr.flush()
        else:
            log(line)


def run_hooks() -> RunHooks:
    """What a run from the command line shows: a progress bar per shard, inside an Actions log group."""
    return RunHooks(progress=Progress, group=group)
