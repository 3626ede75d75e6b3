"""The webhook trigger: a small HTTP receiver for the Hub's repo-update webhook that mirrors on Hugging Face Jobs.

The Hub POSTs JSON to it on every update of a watched repo, with the webhook's secret verbatim in `X-Webhook-Secret`.
The receiver checks the secret in constant time (401 without one, 403 for a wrong one), ignores every event that is
not a content update of a branch some entry of its mirrors file tracks (default `main`), and hands the rest to a
`Trigger`: the first push to an upstream starts its mirror job `settle` seconds later (a burst of pushes in that
window starts one job), pinned to the newest commit pushed; pushes while that job runs start one more job when it
ends, pinned to the newest commit again. One job per mirror at a time; never more than one waiting.

Standard library only (http.server), so hubpad needs no web framework to run it: on any host, or in a Docker Space.
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from hubpad.errors import HubpadError
from hubpad.run.hf_jobs import CONFIG_NAME, TERMINAL, Command, Launcher, inspect, label_value, submit
from hubpad.util.log import log
from hubpad.util.redact import redact
from hubpad.util.refs import same_ref

SECRET_ENV = "WEBHOOK_SECRET"  # the name huggingface_hub's WebhooksServer reads too
DEFAULT_SETTLE = 15.0  # seconds between the first push of a burst and the job: well within a minute
MAX_BODY = 1 << 20


@dataclass(frozen=True)
class Watch:
    """One mirror the receiver keeps fresh: its upstream, the branch it tracks, its target."""

    upstream: str
    branch: str
    target: str


class Trigger:
    """One job per mirror at a time: a burst of pushes becomes one job, pushes during a job one more after it."""

    def __init__(self, start: Callable[[str, str], str], finished: Callable[[str], bool], *,
                 settle: float = DEFAULT_SETTLE, poll: float = 10.0) -> None:
        self.start, self.finished = start, finished
        self.settle, self.poll = settle, poll
        self.cond = threading.Condition()
        self.pending: dict[str, str] = {}  # target -> newest commit not yet built
        self.due: dict[str, float] = {}  # target -> when its pending commit may start (end of the burst window)
        self.running: dict[str, tuple[str, str]] = {}  # target -> (job id, commit)
        self.stopped = False
        self.thread = threading.Thread(target=self._loop, name="hubpad-webhook-trigger", daemon=True)
        self.thread.start()

    def notify(self, target: str, sha: str) -> None:
        with self.cond:
            self.pending[target] = sha
            if target not in self.running:
                self.due.setdefault(target, time.monotonic() + self.settle)
            self.cond.notify_all()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self.cond:
                if self.stopped:
                    return
                now = time.monotonic()
                waits = [d - now for d in self.due.values()] + ([self.poll] if self.running else [])
                self.cond.wait(timeout=max(min(waits), 0.05) if waits else None)
                if self.stopped:
                    return
            self._step()

    def _step(self) -> None:
        for target, (job_id, sha) in list(self.running.items()):
            if self._finished(job_id):
                with self.cond:
                    del self.running[target]
                    if self.pending.get(target) == sha:  # the job just built it
                        del self.pending[target]
                    elif target in self.pending:
                        self.due[target] = time.monotonic()
        now = time.monotonic()
        with self.cond:
            ready = [(t, self.pending.pop(t)) for t, d in list(self.due.items()) if d <= now and t not in self.running]
            for t, _ in ready:
                del self.due[t]
        for target, sha in ready:
            try:
                job_id = self.start(target, sha)
            except HubpadError as exc:
                log(f"webhook: could not start the mirror of {target}@{sha[:12]}: {redact(str(exc))}")
                continue
            with self.cond:
                self.running[target] = (job_id, sha)

    def _finished(self, job_id: str) -> bool:
        try:
            return self.finished(job_id)
        except HubpadError as exc:
            log(f"webhook: cannot tell whether job {job_id} ended ({redact(str(exc))}); asking again later")
            return False


def require_secret(secret: str | None) -> str:
    if not secret:
        raise HubpadError(f"set {SECRET_ENV} to the webhook's secret (the receiver refuses to run without one)")
    return secret


class Receiver:
    """The decision on one delivery: (HTTP status, JSON answer); accepted pushes go to the trigger."""

    def __init__(self, watches: list[Watch], secret: str, trigger: Trigger) -> None:
        self.watches, self.trigger = watches, trigger
        self.secret = require_secret(secret).encode()

    def deliver(self, secret: str | None, body: bytes) -> tuple[int, dict]:
        if secret is None:
            return 401, {"error": "missing X-Webhook-Secret"}
        if not hmac.compare_digest(secret.encode(), self.secret):
            return 403, {"error": "wrong X-Webhook-Secret"}
        try:
            payload = json.loads(body)
            event, repo = payload.get("event") or {}, payload.get("repo") or {}
        except (ValueError, AttributeError):
            return 400, {"error": "the body is not a Hub webhook's JSON"}
        if event.get("scope") != "repo.content" or event.get("action") != "update" or repo.get("type") != "model":
            return 200, {"ignored": f"not a model content update ({event.get('scope')} {event.get('action')})"}
        name = str(repo.get("name") or "")
        watched = [w for w in self.watches if same_ref(w.upstream, name)]
        if not watched:
            return 200, {"ignored": f"{name} is not in the mirrors file"}
        refs = {r.get("ref"): r.get("newSha") for r in payload.get("updatedRefs") or [] if isinstance(r, dict)}
        queued = []
        for w in watched:
            sha = refs.get(f"refs/heads/{w.branch}") if refs else (repo.get("headSha") if w.branch == "main" else None)
            if isinstance(sha, str) and sha:
                self.trigger.notify(w.target, sha)
                queued.append(w.target)
        if not queued:
            return 200, {"ignored": f"no tracked branch of {name} moved"}
        log(f"webhook: {name} moved; queued {', '.join(queued)}")
        return 202, {"queued": queued}


def watches_for(specs, namespace: str) -> list[Watch]:
    """The mirrors file's entries as watches (an entry pinned to a tag or commit never moves: not watched)."""
    return [Watch(s.upstream, s.revision or "main", s.resolved_target(namespace)) for s in specs]


def job_starter(launcher: Launcher, watches: list[Watch], config_text: str) -> tuple[Callable, Callable]:
    """(start, finished) for a Trigger: a detached `hubpad mirror UPSTREAM --to TARGET --revision SHA` job."""
    by_target = {w.target: w for w in watches}

    def start(target: str, sha: str) -> str:
        w = by_target[target]
        command = Command(("mirror", w.upstream, "--config", CONFIG_NAME, "--to", target, "--revision", sha),
                          config_text, f"hubpad-webhook-{target}", (("hubpad-target", label_value(target)),))
        job = submit(launcher, command)
        log(f"webhook: started job {job.id} for {w.upstream}@{sha[:12]} -> {target}: {job.url}")
        return job.id

    def finished(job_id: str) -> bool:
        return inspect(launcher, job_id).status.stage in TERMINAL

    return start, finished


def make_server(receiver: Receiver, host: str, port: int) -> ThreadingHTTPServer:
    """The HTTP front of a Receiver (POST: a delivery; GET: a one-line health answer)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "hubpad-webhook"

        def log_message(self, format, *args):  # noqa: A002 - requests are logged by the receiver's own lines
            pass

        def _answer(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 - http.server's naming
            self._answer(200, {"hubpad": "webhook receiver", "watching": len(receiver.watches)})

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.close_connection = True
                return self._answer(413, {"error": "body too large"})
            body = self.rfile.read(length)
            self._answer(*receiver.deliver(self.headers.get("X-Webhook-Secret"), body))

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def receiver_for(launcher: Launcher, config_file: str, secret: str, *, settle: float = DEFAULT_SETTLE,
                 poll: float = 10.0) -> Receiver:
    """The receiver of a mirrors file: its entries watched, jobs started by `launcher` (the file shipped to them)."""
    from hubpad.formats.mirrors_file import load_mirrors
    from hubpad.run.hf_jobs import ship_mirrors_file

    require_secret(secret)  # before any thread starts
    config_text = ship_mirrors_file(config_file, launcher.disk_budget)
    watches = watches_for(load_mirrors(config_file, namespace=launcher.namespace), launcher.namespace)
    start, finished = job_starter(launcher, watches, config_text)
    return Receiver(watches, secret, Trigger(start, finished, settle=settle, poll=poll))
