"""The words of progress on one byte stream (an output shard): bytes done, rate, time left.

One wording for every front end: the CLI prints these lines (a live bar on a terminal, plain lines in CI logs) and
a web page shows the same ones, so a user reads the same thing wherever a run is watched.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from hubpad.util.sizes import human

BAR_WIDTH = 24
# The two forms of `Meter.line`, read back from a log (a job's, followed by a page).
_SIZE = r"\d[\d.]* [KMGT]?B"
_LIVE = re.compile(rf"\S.* \[[#.]{{{BAR_WIDTH}}}\] +[\d.]+% {_SIZE}/{_SIZE} {_SIZE}/s ETA \S+")
_FINAL = re.compile(rf"\S.*: {_SIZE} in [\d.]+s \({_SIZE}/s\)")


@dataclass
class Meter:
    """Bytes done of `total` for `label`, timed from creation (monotonic clock)."""

    label: str
    total: int
    done: int = 0
    start: float = field(default_factory=lambda: time.monotonic())  # looked up at each call (a test's clock)

    def update(self, n: int) -> None:
        self.done += n

    def rate(self, now: float) -> float:
        return self.done / max(now - self.start, 1e-9)

    def eta(self, now: float) -> float:
        """Seconds left at the rate so far (inf before the first byte)."""
        rate = self.rate(now)
        return (self.total - self.done) / rate if rate > 0 else float("inf")

    def fraction(self) -> float:
        return min(self.done / self.total, 1.0) if self.total else 1.0

    def line(self, now: float | None = None, final: bool = False) -> str:
        """`label [####....]  42.0% 1.2 GB/2.3 GB 410 MB/s ETA 3s`, or at the end `label: 2.3 GB in 5.6s (410 MB/s)`."""
        now = time.monotonic() if now is None else now
        if final:
            return f"{self.label}: {human(self.done)} in {max(now - self.start, 0):.1f}s ({human(self.rate(now))}/s)"
        pct = 100 * self.fraction()
        fill = int(BAR_WIDTH * pct / 100)
        bar = "#" * fill + "." * (BAR_WIDTH - fill)
        eta = self.eta(now)
        left = f"{eta:.0f}s" if eta != float("inf") else "?"
        return (f"{self.label} [{bar}] {pct:5.1f}% {human(self.done)}/{human(self.total)} "
                f"{human(self.rate(now))}/s ETA {left}")


def line_kind(line: str) -> str | None:
    """"live" or "final" for a line `Meter.line` wrote (a front end reading another's log: a job's), else None."""
    if _LIVE.fullmatch(line):
        return "live"
    return "final" if _FINAL.fullmatch(line) else None
