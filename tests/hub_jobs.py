"""Hugging Face Jobs for the Hub emulator (tests/hub_emulator.py): the routes ``huggingface_hub`` 2.4 calls.

Read in huggingface_hub 2.4.0 (``hf_api.py``: ``run_job``, ``inspect_job``, ``list_jobs``, ``fetch_job_logs``,
``cancel_job``, ``list_jobs_hardware``, ``create_scheduled_job`` and its siblings; ``_jobs_api.py``: the payloads):

* ``GET  /api/jobs/hardware`` - the flavors (``name``, ``prettyName``, ``cpu``, ``ram``, ``ephemeralStorage``,
  ``accelerator``, ``unitCostMicroUSD``, ``unitCostUSD``, ``unitLabel``);
* ``POST /api/jobs/{namespace}`` - a job spec (``dockerImage`` or ``spaceId``, ``command``, ``arguments``,
  ``environment``, ``secrets``, ``flavor``, ``timeoutSeconds``, ``attempts``, ``labels``) -> the job (JobInfo);
* ``GET  /api/jobs/{namespace}`` (``stage=``, ``label=k=v`` filters) and ``GET /api/jobs/{namespace}/{id}``;
* ``GET  /api/jobs/{namespace}/{id}/logs`` - server-sent events ``data: {"data": line, "timestamp": iso}``, the
  whole log from its start on every connection (the client skips the events it has seen by their index), live
  until the job ends; the client then asks ``inspect`` whether the job is over;
* ``POST /api/jobs/{namespace}/{id}/cancel``;
* ``/api/scheduled-jobs/{namespace}`` (POST ``{"jobSpec", "schedule", "suspend"?, "concurrency"?}``, GET with one
  ``label=k=v``), ``/{id}`` (GET, DELETE), ``/{id}/suspend``, ``/{id}/resume``, ``/{id}/run`` (POST),
  ``/{id}/schedule`` (POST ``{"schedule"}``), ``/{id}/labels`` (PUT ``{"labels"}``).

There is no Docker here: a job's ``command`` runs as a LOCAL SUBPROCESS in a fresh folder (its HOME and TMPDIR),
with only :attr:`JobsService.image_env` (what the tests say the image provides: PATH, PYTHONPATH...), the job's
``environment`` and its ``secrets`` in its environment. Its stdout and stderr, merged, are the job's log. What the
emulator assumes where the client's source does not say (marked here, kept small): a job with ``attempts`` > 1 whose
command exits non-zero is run again under the same id (a ``===== Job started`` line per attempt, which the client
hides); a timeout ends the attempt with stage ERROR and the message "Job timed out after N seconds", without a retry;
a namespace without Jobs access answers 402 or 403 at creation (:meth:`JobsService.deny`); a schedule never fires by
the clock, only through ``/run`` or :meth:`JobsService.fire`; secrets are never echoed (their names map to null).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__:
    from .hub_emulator import HubError, _iso
else:  # pragma: no cover - tests/ itself on sys.path
    from hub_emulator import HubError, _iso

TERMINAL = ("COMPLETED", "CANCELED", "ERROR", "DELETED")

# The flavors the emulator offers: the CPU ones with the specs and prices huggingface.co's Jobs pricing page lists
# (https://huggingface.co/docs/hub/jobs-pricing, read through the search tool; not confirmed against the live API),
# and one GPU flavor so a list has an accelerator in it.
HARDWARE = [
    {"name": "cpu-basic", "prettyName": "CPU Basic", "cpu": "2 vCPU", "ram": "16 GB", "ephemeralStorage": "50 GB",
     "accelerator": None, "unitCostMicroUSD": 167, "unitCostUSD": 0.000167, "unitLabel": "minute"},
    {"name": "cpu-upgrade", "prettyName": "CPU Upgrade", "cpu": "8 vCPU", "ram": "32 GB", "ephemeralStorage": "50 GB",
     "accelerator": None, "unitCostMicroUSD": 500, "unitCostUSD": 0.0005, "unitLabel": "minute"},
    {"name": "cpu-xl", "prettyName": "CPU XL", "cpu": "16 vCPU", "ram": "124 GB", "ephemeralStorage": "1000 GB",
     "accelerator": None, "unitCostMicroUSD": 16667, "unitCostUSD": 0.016667, "unitLabel": "minute"},
    {"name": "t4-small", "prettyName": "Nvidia T4 - small", "cpu": "4 vCPU", "ram": "15 GB",
     "ephemeralStorage": "50 GB", "accelerator": {"type": "gpu", "model": "T4", "quantity": "1", "vram": "16 GB",
                                                  "manufacturer": "Nvidia"},
     "unitCostMicroUSD": 6667, "unitCostUSD": 0.006667, "unitLabel": "minute"},
]


def _new_id() -> str:
    return uuid.uuid4().hex[:24]  # the Hub's ids are 24 hex digits (Mongo object ids)


@dataclass
class EmuJob:
    """One job: its spec as sent, its state, and its log."""

    id: str
    namespace: str
    owner: dict
    spec: dict  # the request body as the client sent it (secrets included: tests check where the token went)
    initiator: dict
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    stage: str = "SCHEDULING"
    message: str | None = None
    attempts_run: int = 0
    lines: list[tuple[float, str]] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    cancel_requested: bool = False
    timed_out: threading.Event = field(default_factory=threading.Event)
    cond: threading.Condition = field(default_factory=threading.Condition)

    @property
    def labels(self) -> dict:
        return dict(self.spec.get("labels") or {})

    def to_json(self, endpoint: str) -> dict:
        spec = self.spec
        now = self.finished or time.time()
        running = (now - self.started) if self.started else None
        return {
            "id": self.id,
            "createdAt": _iso(self.created),
            "startedAt": _iso(self.started) if self.started else None,
            "finishedAt": _iso(self.finished) if self.finished else None,
            "dockerImage": spec.get("dockerImage"),
            "spaceId": spec.get("spaceId"),
            "command": spec.get("command"),
            "arguments": spec.get("arguments") or [],
            "environment": spec.get("environment") or {},
            "secrets": {k: None for k in spec.get("secrets") or {}},  # never echoed
            "flavor": spec.get("flavor"),
            "labels": spec.get("labels"),
            "status": {"stage": self.stage, "message": self.message},
            "durations": {"schedulingSecs": int((self.started or now) - self.created),
                          "runningSecs": int(running) if running is not None else None,
                          "totalSecs": int(now - self.created)},
            "owner": self.owner,
            "initiator": self.initiator,
            "retry": max(int(spec.get("attempts") or 1) - 1, 0),
            "timeoutSeconds": spec.get("timeoutSeconds"),
        }


@dataclass
class Schedule:
    id: str
    namespace: str
    owner: dict
    job_spec: dict
    schedule: str
    suspend: bool = False
    concurrency: bool = False
    created: float = field(default_factory=time.time)
    last_job: tuple[str, float] | None = None

    def to_json(self) -> dict:
        spec = dict(self.job_spec)
        spec["secrets"] = {k: None for k in spec.get("secrets") or {}}
        spec["timeout"] = spec.get("timeoutSeconds")
        return {"id": self.id, "createdAt": _iso(self.created), "jobSpec": spec, "schedule": self.schedule,
                "suspend": self.suspend, "concurrency": self.concurrency, "owner": self.owner,
                "status": {"lastJob": {"id": self.last_job[0], "at": _iso(self.last_job[1])} if self.last_job
                           else None, "nextJobRunAt": None if self.suspend else _iso(time.time() + 3600)}}


class JobsService:
    """The Jobs API of one emulator: jobs run as local subprocesses; schedules fire on request only."""

    def __init__(self, emu) -> None:
        self.emu = emu
        self.jobs: dict[str, EmuJob] = {}
        self.schedules: dict[str, Schedule] = {}
        self.hardware: list[dict] = [dict(h) for h in HARDWARE]
        self.image_env: dict[str, str] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        self.denied: dict[str, tuple[int, str]] = {}
        self.root = Path(emu.root) / "jobs"
        self.lock = threading.Lock()
        self.stopping = False

    # -- test-side helpers --------------------------------------------------------------------------------------

    def deny(self, namespace: str, status: int = 402, message: str | None = None) -> None:
        """Make job creation in `namespace` answer `status` (402: no credits; 403: not allowed)."""
        self.denied[namespace] = (status, message or (
            "Jobs require a positive credit balance in this namespace" if status == 402
            else f"You are not allowed to run Jobs in {namespace}"))

    def wait(self, job_id: str, timeout: float = 120, stages=TERMINAL) -> EmuJob:
        job = self.jobs[job_id]
        with job.cond:
            if not job.cond.wait_for(lambda: job.stage in stages, timeout=timeout):
                raise TimeoutError(f"job {job_id} still {job.stage} after {timeout}s")
        return job

    def wait_all(self, timeout: float = 120) -> None:
        deadline = time.time() + timeout
        for job_id in list(self.jobs):
            self.wait(job_id, max(deadline - time.time(), 0.1))

    def kill(self, job_id: str, sig: int = signal.SIGKILL) -> None:
        """Kill the running attempt's processes (as if the machine failed): the job retries if attempts remain."""
        proc = self.jobs[job_id].proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, sig)

    def time_out(self, job_id: str) -> None:
        """End the running attempt as its timeout would, now (so a test picks the moment, not the clock)."""
        job = self.jobs[job_id]
        job.timed_out.set()
        self.kill(job_id)

    def log_text(self, job_id: str) -> str:
        return "\n".join(line for _, line in self.jobs[job_id].lines)

    def fire(self, schedule_id: str) -> EmuJob:
        """Run a schedule's job now, as its cron would."""
        sched = self.schedules[schedule_id]
        return self._start(sched.namespace, sched.owner, dict(sched.job_spec),
                           {"type": "scheduled-job", "id": sched.id}, schedule=sched)

    def shutdown(self) -> None:
        self.stopping = True
        for job in list(self.jobs.values()):
            job.cancel_requested = True
            if job.proc is not None and job.proc.poll() is None:
                try:
                    os.killpg(job.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    # -- routing ------------------------------------------------------------------------------------------------

    def handle(self, h, m: str, segs: list[str]) -> None:
        """`segs` after /api: ["jobs", ...] or ["scheduled-jobs", ...]."""
        kind, rest = segs[0], segs[1:]
        if kind == "jobs":
            if rest == ["hardware"] and m == "GET":
                h.entry.kind = "jobs-hardware"
                return h.send_json(self.hardware)
            if len(rest) == 1 and m == "POST":
                h.entry.kind = "jobs-create"
                return self._create(h, rest[0])
            if len(rest) == 1 and m == "GET":
                h.entry.kind = "jobs-list"
                return self._list(h, rest[0])
            if len(rest) == 2 and m == "GET":
                h.entry.kind = "jobs-inspect"
                return h.send_json(self._job(h, rest[0], rest[1]).to_json(h.ep()))
            if len(rest) == 3 and rest[2] == "logs" and m == "GET":
                h.entry.kind = "jobs-logs"
                return self._logs(h, self._job(h, rest[0], rest[1]))
            if len(rest) == 3 and rest[2] == "cancel" and m == "POST":
                h.entry.kind = "jobs-cancel"
                self.cancel(self._job(h, rest[0], rest[1], write=True))
                return h.send_json({})
        if kind == "scheduled-jobs":
            return self._route_scheduled(h, m, rest)
        raise HubError(404, f"Not found: {m} /api/{'/'.join(segs)}")

    def _route_scheduled(self, h, m: str, rest: list[str]) -> None:
        if len(rest) == 1 and m == "POST":
            h.entry.kind = "scheduled-create"
            return self._create_schedule(h, rest[0])
        if len(rest) == 1 and m == "GET":
            h.entry.kind = "scheduled-list"
            self._caller(h, rest[0], write=False)
            label = (h.query.get("label") or [None])[-1]
            found = [s.to_json() for s in self.schedules.values() if s.namespace == rest[0]
                     and (label is None or _has_label(s.job_spec.get("labels"), label))]
            return h.send_json(found)
        if len(rest) >= 2:
            sched = self._schedule(h, rest[0], rest[1], write=m != "GET")
            action = rest[2] if len(rest) == 3 else None
            h.entry.kind = f"scheduled-{action or m.lower()}"
            if action is None and m == "GET":
                return h.send_json(sched.to_json())
            if action is None and m == "DELETE":
                del self.schedules[sched.id]
                return h.send_json({})
            if action in ("suspend", "resume") and m == "POST":
                sched.suspend = action == "suspend"
                return h.send_json({})
            if action == "schedule" and m == "POST":
                sched.schedule = str(h.read_json().get("schedule") or "")
                return h.send_json(sched.to_json())
            if action == "labels" and m == "PUT":
                sched.job_spec["labels"] = dict(h.read_json().get("labels") or {})
                return h.send_json(sched.to_json())
            if action == "run" and m == "POST":
                if not sched.concurrency and any(j.stage not in TERMINAL for j in self.jobs.values()
                                                 if j.initiator.get("id") == sched.id):
                    raise HubError(409, "An instance of this scheduled job is already running")
                return h.send_json(self.fire(sched.id).to_json(h.ep()))
        raise HubError(404, f"Not found: {m} /api/scheduled-jobs/{'/'.join(rest)}")

    # -- access -------------------------------------------------------------------------------------------------

    def _caller(self, h, namespace: str, *, write: bool, creating: bool = False) -> dict:
        """The namespace as the owner of a job, if the caller may read (or write) its Jobs; 402/403 of `deny` when
        creating one."""
        user = h.user()
        if user is None:
            raise HubError(401, "You must be authenticated to use Jobs")
        if not user.can_read_private(namespace) or (write and not user.can_write(namespace)):
            raise HubError(403, f"You don't have the rights to manage Jobs in {namespace}")
        if creating and namespace in self.denied:
            status, message = self.denied[namespace]
            raise HubError(status, message)
        kind = "user" if namespace == user.name else "org"
        return {"id": hashlib.sha1(namespace.encode()).hexdigest()[:24], "name": namespace, "type": kind}

    def _job(self, h, namespace: str, job_id: str, *, write: bool = False) -> EmuJob:
        self._caller(h, namespace, write=write)
        job = self.jobs.get(job_id)
        if job is None or job.namespace != namespace:
            raise HubError(404, f"Job {job_id} not found")
        return job

    def _schedule(self, h, namespace: str, sched_id: str, *, write: bool) -> Schedule:
        self._caller(h, namespace, write=write)
        sched = self.schedules.get(sched_id)
        if sched is None or sched.namespace != namespace:
            raise HubError(404, f"Scheduled job {sched_id} not found")
        return sched

    # -- jobs ---------------------------------------------------------------------------------------------------

    def _check_spec(self, spec: dict) -> None:
        if not isinstance(spec, dict) or not (spec.get("dockerImage") or spec.get("spaceId")):
            raise HubError(400, "A job needs a dockerImage or a spaceId")
        if not isinstance(spec.get("command"), list) or not spec["command"]:
            raise HubError(400, "A job needs a command")
        flavors = {hw["name"] for hw in self.hardware}
        if spec.get("flavor") not in flavors:
            raise HubError(400, f"Invalid flavor {spec.get('flavor')!r}")
        for key, value in (spec.get("labels") or {}).items():
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,100}", key) or not re.fullmatch(r"[A-Za-z0-9._-]{0,100}", value):
                raise HubError(400, f"Invalid label {key}={value}")

    def _create(self, h, namespace: str) -> None:
        spec = h.read_json()
        owner = self._caller(h, namespace, write=True, creating=True)
        self._check_spec(spec)
        job = self._start(namespace, owner, spec, {"type": "user", "id": owner["id"], "name": h.user().name})
        h.send_json(job.to_json(h.ep()))

    def _start(self, namespace: str, owner: dict, spec: dict, initiator: dict, schedule: Schedule | None = None):
        job = EmuJob(id=_new_id(), namespace=namespace, owner=owner, spec=spec, initiator=initiator)
        with self.lock:
            self.jobs[job.id] = job
        if schedule is not None:
            schedule.last_job = (job.id, job.created)
        threading.Thread(target=self._run, args=(job,), name=f"emu-job-{job.id}", daemon=True).start()
        return job

    def _list(self, h, namespace: str) -> None:
        self._caller(h, namespace, write=False)
        stages = {s.upper() for s in h.query.get("stage") or []}
        labels = h.query.get("label") or []
        found = [j.to_json(h.ep()) for j in self.jobs.values() if j.namespace == namespace
                 and (not stages or j.stage in stages) and all(_has_label(j.labels, lab) for lab in labels)]
        h.send_json(found)

    def cancel(self, job: EmuJob) -> None:
        with job.cond:
            job.cancel_requested = True
            proc = job.proc
            if proc is None and job.stage not in TERMINAL:  # not started yet: it never will
                self._finish(job, "CANCELED", None)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def _finish(self, job: EmuJob, stage: str, message: str | None) -> None:
        with job.cond:
            if job.stage in TERMINAL:
                return
            job.stage, job.message, job.finished = stage, message, time.time()
            job.cond.notify_all()

    def _add_line(self, job: EmuJob, line: str) -> None:
        with job.cond:
            job.lines.append((time.time(), line))
            job.cond.notify_all()

    def _run(self, job: EmuJob) -> None:
        """Run the command, attempt after attempt, in a fresh folder with the image env + env + secrets."""
        spec = job.spec
        attempts = max(int(spec.get("attempts") or 1), 1)
        timeout = spec.get("timeoutSeconds")
        for attempt in range(1, attempts + 1):
            if job.cancel_requested or self.stopping:
                return self._finish(job, "CANCELED", None)
            home = self.root / job.id / f"attempt-{attempt}"
            (home / "tmp").mkdir(parents=True, exist_ok=True)
            env = {**self.image_env, "HOME": str(home), "TMPDIR": str(home / "tmp"),
                   **{k: str(v) for k, v in (spec.get("environment") or {}).items()},
                   **{k: str(v) for k, v in (spec.get("secrets") or {}).items()}}
            with job.cond:  # started under the lock: a cancel either sees the process or stops it starting
                if job.cancel_requested:
                    return self._finish(job, "CANCELED", None)
                try:
                    job.proc = subprocess.Popen([*spec["command"], *(spec.get("arguments") or [])], cwd=home,
                                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                start_new_session=True)
                except OSError as exc:
                    self._add_line(job, f"failed to start the command: {exc}")
                    return self._finish(job, "ERROR", f"Failed to start the command: {exc}")
                job.attempts_run = attempt
                job.stage, job.started = "RUNNING", job.started or time.time()
                job.lines.append((time.time(), f"===== Job started at {_iso(time.time())} ====="))
                job.cond.notify_all()
            timer = None
            timed_out = job.timed_out
            if timeout:
                def expire(proc=job.proc):
                    timed_out.set()
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass

                timer = threading.Timer(float(timeout), expire)
                timer.daemon = True
                timer.start()
            for raw in job.proc.stdout:
                self._add_line(job, raw.decode("utf-8", "replace").rstrip("\r\n"))
            code = job.proc.wait()
            if timer is not None:
                timer.cancel()
            if timed_out.is_set():
                return self._finish(job, "ERROR", f"Job timed out after {int(timeout or 0)} seconds")
            if job.cancel_requested:
                return self._finish(job, "CANCELED", None)
            if code == 0:
                return self._finish(job, "COMPLETED", None)
            if attempt == attempts:
                return self._finish(job, "ERROR", f"Job failed with exit code {code}")

    def _logs(self, h, job: EmuJob) -> None:
        """Server-sent events: the log from its start, then live lines until the job ends."""
        h._start(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "close"})
        h.close_connection = True
        sent = 0
        tail = (h.query.get("tail") or [None])[-1]
        if tail is not None:
            with job.cond:
                sent = max(len(job.lines) - int(tail), 0)
        while True:
            with job.cond:
                job.cond.wait_for(lambda: len(job.lines) > sent or job.stage in TERMINAL, timeout=1.0)
                new = job.lines[sent:]
                over = job.stage in TERMINAL and sent + len(new) == len(job.lines)
            for ts, line in new:
                h._write(f"data: {json.dumps({'data': line, 'timestamp': _iso(ts)})}\n\n".encode())
            sent += len(new)
            if over:
                return
            if not new:
                h._write(b": keep-alive\n\n")

    # -- schedules ----------------------------------------------------------------------------------------------

    def _create_schedule(self, h, namespace: str) -> None:
        body = h.read_json()
        owner = self._caller(h, namespace, write=True, creating=True)
        spec = body.get("jobSpec")
        self._check_spec(spec)
        if not str(body.get("schedule") or "").strip():
            raise HubError(400, "A scheduled job needs a schedule")
        sched = Schedule(id=_new_id(), namespace=namespace, owner=owner, job_spec=spec, schedule=body["schedule"],
                         suspend=bool(body.get("suspend")), concurrency=bool(body.get("concurrency")))
        self.schedules[sched.id] = sched
        h.send_json(sched.to_json())


def _has_label(labels: dict | None, query: str) -> bool:
    key, _, value = query.partition("=")
    return (labels or {}).get(key) == value
