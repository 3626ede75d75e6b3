"""The Space's runs: one mirror at a time, first come first served, and each waiting run's place in the queue; a run
on Hugging Face Jobs (in the user's own namespace) starts at once, beside the queue, and this process follows it.

A run lives in this process only. Its user's token is held in memory while the run waits or works and is dropped
when it ends; it is never written anywhere. A run outlives the browser tab that started it (the page polls it), and
what a run leaves on the Hub (its staged shards) outlives the process: a restarted Space cannot continue a run by
itself (it has no token), but the next run into the same target resumes from those shards.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from hubpad.run.progress import Meter

# Where a run executes: this Space's queue, or a job in the user's namespace (billed to them, no queue)
ON_SPACE, ON_JOBS = "space", "jobs"


@dataclass(frozen=True)
class Request:
    """What a user asked for: pad `upstream` for `tp` into `target` (and the draft beside it, if any), on `route`."""

    user: str
    upstream: str
    tp: int
    target: str
    private: bool = False
    draft: str | None = None
    draft_target: str | None = None
    route: str = ON_SPACE


@dataclass
class Run:
    """One request's life: waiting, running, then done or failed; what the page shows of it."""

    request: Request
    token: str | None = field(repr=False, default=None)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    state: str = "waiting"  # waiting | running | done | failed
    phase: str = ""  # what a running run is doing, in words
    meter: Meter | None = None  # the shard being streamed now
    live: str | None = None  # on Jobs: the job's last progress line (Meter's words, read from its log)
    finished: list[str] = field(default_factory=list)  # each built shard's final line, in order
    jobs: list[dict] = field(default_factory=list)  # on Jobs: each job started ({"id", "url"}), in order
    notes: list[str] = field(default_factory=list)  # the run's log lines (resuming, created repo, warnings)
    upstream_commit: str | None = None  # the upstream commit the run pinned and reads
    result: dict | None = None  # links and commands of the published derivative
    error: str | None = None  # one sentence
    submitted: float = field(default_factory=time.time)
    ended: float | None = None

    @property
    def active(self) -> bool:
        return self.state in ("waiting", "running")

    def progress(self, label: str, total: int) -> "_ShardProgress":
        """RunHooks.progress: one output shard, counted in the CLI's own words (Meter)."""
        self.meter = Meter(label, total)
        return _ShardProgress(self, self.meter)


class _ShardProgress:
    def __init__(self, run: Run, meter: Meter) -> None:
        self.run, self.meter = run, meter

    def update(self, n: int) -> None:
        self.meter.update(n)

    def close(self) -> None:
        self.run.finished.append(self.meter.line(final=True))
        self.run.meter = None


class Busy(Exception):
    """The user already has a run waiting or working (one at a time each, so nobody fills the queue alone)."""

    def __init__(self, run: Run) -> None:
        super().__init__(run.request.target)
        self.run = run


class Runs:
    """A FIFO of runs and one worker that executes them in order (`execute(run)` sets the result or raises)."""

    def __init__(self, execute: Callable[[Run], None]) -> None:
        self._execute = execute
        self._lock = threading.Condition()
        self._waiting: deque[Run] = deque()
        self._current: Run | None = None
        self._others: list[Run] = []  # running beside the queue (on Jobs)
        self._by_id: dict[str, Run] = {}
        self._worker: threading.Thread | None = None

    def submit(self, request: Request, token: str | None) -> Run:
        with self._lock:
            mine = self.active_run(request.user)
            if mine is not None:
                raise Busy(mine)
            run = Run(request, token)
            self._by_id[run.id] = run
            if request.route != ON_SPACE:  # runs elsewhere: no reason to wait for this Space's queue
                run.state = "running"
                self._others.append(run)
                threading.Thread(target=self._run, args=(run,), name=f"hubpad-space-{request.route}",
                                 daemon=True).start()
                return run
            self._waiting.append(run)
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="hubpad-space-runs", daemon=True)
                self._worker.start()
            self._lock.notify_all()
            return run

    def get(self, run_id: str | None) -> Run | None:
        return self._by_id.get(run_id or "")

    def active_run(self, user: str) -> Run | None:
        with self._lock:
            runs = ([self._current] if self._current else []) + list(self._waiting) + self._others
            return next((r for r in runs if r.request.user == user and r.active), None)

    def place(self, run: Run) -> int:
        """0: running now; n >= 1: n-th in line (n - 1 runs wait before it, after the one running)."""
        with self._lock:
            if run is self._current:
                return 0
            try:
                return list(self._waiting).index(run) + 1
            except ValueError:
                return 0

    def size(self) -> tuple[bool, int]:
        """(a run is working now, how many wait)."""
        with self._lock:
            return self._current is not None, len(self._waiting)

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._waiting:
                    self._lock.wait()
                run = self._current = self._waiting.popleft()
                run.state = "running"
            self._run(run)

    def _run(self, run: Run) -> None:
        try:
            self._execute(run)
            run.state = "done" if run.error is None else "failed"
        except BaseException as exc:  # noqa: BLE001 - a run's failure never stops the queue
            run.state = "failed"
            run.error = run.error or f"The run stopped on an unexpected error ({type(exc).__name__}); it was logged."
        finally:
            run.token = None  # the token lives no longer than the run
            run.ended = time.time()
            run.meter = run.live = None
            with self._lock:
                if run is self._current:
                    self._current = None
                elif run in self._others:
                    self._others.remove(run)
