"""A run as a job on Hugging Face Jobs, in the signed-in user's own namespace and billed to them: hubpad's own Jobs
code (run/hf_jobs.py: the account, the flavor's disk, the pinned install, the job's spec, following its log) with the
user's token. The job runs the command line `hubpad mirror` would run; this process follows its log and shows it in
the CLI's words (the shard lines read back with progress.line_kind), then reads the published card as a Space run
does. The token reaches the job only as its `HF_TOKEN` secret."""

from __future__ import annotations

import time
from contextlib import contextmanager

from hubpad.errors import HubError, HubpadError
from hubpad.run import hf_jobs
from hubpad.run.check import check_one
from hubpad.run.progress import line_kind
from hubpad.source.hub import HubSource
from hubpad.util.log import also_log_to, log
from hubpad.util.redact import redact
from hubpad.util.sizes import format_size

from hubpad_space.explain import jobs_refused
from hubpad_space.outcome import after_failure, result
from hubpad_space.runs import Request, Run
from hubpad_space.settings import Settings


def execute_on_jobs(run: Run, settings: Settings) -> None:
    """Run `run` as job(s) in its user's namespace: the draft's first when there is one, then the model's."""
    req, token = run.request, run.token
    with also_log_to(lambda line: run.notes.append(redact(line, token))):
        try:
            run.phase = f"reading {req.upstream}'s headers"
            source = HubSource(req.upstream, token=token or False)
            run.upstream_commit = source.commit
            if _up_to_date(req, token):  # nothing to build: no job is started (nor billed)
                run.result = result(run, settings, source.commit, {"up_to_date": True})
                return
            run.phase = "checking that your account can run Jobs"
            with _jobs_refused(req.user):
                launcher = hf_jobs.prepare(settings.jobs(), token=token)
            for argv in mirror_commands(req, source.commit, settings):
                command = hf_jobs.job_command(launcher, argv, disk=True, about=argv[1])
                run.phase = f"starting a job in {launcher.namespace} for {argv[1]}"
                with _jobs_refused(req.user):
                    hf_jobs.run(launcher, command, echo=lambda line: _show(run, line),
                                started=lambda job, src=argv[1]: _started(run, job, src))
            run.result = result(run, settings, source.commit,
                                {"jobs": list(run.jobs), "seconds": time.time() - run.submitted})
        except _Refused as exc:
            run.error = str(exc)
        except HubpadError as exc:
            run.error = after_failure(run, exc)
        except Exception as exc:  # noqa: BLE001 - said on the page in one line, logged without its token
            log(redact(f"space: run {run.id} failed: {type(exc).__name__}: {exc}", token))
            run.error = f"The run stopped on an unexpected error ({type(exc).__name__}); the Space's log has it."


class _Refused(HubpadError):
    """The Hub would not run Jobs for this user (402: no credits; 403: the sign-in may not): its page sentence."""


@contextmanager
def _jobs_refused(user: str):
    try:
        yield
    except HubError as exc:
        if exc.status in (402, 403):
            raise _Refused(jobs_refused(exc, user)) from None
        raise


def mirror_commands(req: Request, commit: str, settings: Settings) -> list[tuple[str, ...]]:
    """The `hubpad mirror` command lines the job(s) run: the same options a Space run uses, the upstream pinned to
    the commit this page read (so the page can tell whether it moved meanwhile); the draft's first."""
    common = ("--tp", str(req.tp), "--shard-size", format_size(settings.shard_size),
              *(("--private",) if req.private else ()))
    commands = []
    if req.draft:
        commands.append(("mirror", req.draft, "--to", req.draft_target, *common, "--draft-for", req.target))
    commands.append(("mirror", req.upstream, "--to", req.target, "--revision", commit, *common,
                     *(("--draft", req.draft_target) if req.draft else ())))
    return commands


def _up_to_date(req: Request, token) -> bool:
    pairs = [(req.upstream, req.target)] + ([(req.draft, req.draft_target)] if req.draft else [])
    return all(check_one(src, dst, req.tp, None, token=token or False)["status"] == "up-to-date" for src, dst in pairs)


def _started(run: Run, job, src: str) -> None:
    run.jobs.append({"id": job.id, "url": job.url, "for": src})
    run.phase = f"job {job.id} pads {src} on Hugging Face Jobs"


def _show(run: Run, line: str) -> None:
    """One line of the job's log (hubpad's own, its `error:` lines held back by hf_jobs.follow): a shard's progress
    replaces the last; a shard's final line joins the finished ones; anything else is a note."""
    line = redact(line, run.token)
    kind = line_kind(line)
    if kind == "live":
        run.live = line
    elif kind == "final":
        run.finished.append(line)
        run.live = None
    elif line.strip():
        run.notes.append(line)
