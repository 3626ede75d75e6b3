"""One run of the Space, start to end, with hubpad's library: plan from headers, mirror with live progress, then
read back the published card for its serve commands. The same steps `hubpad mirror` takes, with the signed-in
user's token and Hub repo ids only (never a local path: a Space's disk is not the user's). A run whose route is
Jobs goes to on_jobs.py instead."""

from __future__ import annotations

import shutil

from hubpad.errors import HubpadError
from hubpad.plan.adapters.drafts import speculative_config
from hubpad.plan.planner import make_plan
from hubpad.publish.hub import HubPublisher
from hubpad.run.mirror import RunHooks, run_mirror
from hubpad.source.hub import HubSource
from hubpad.source.hub_api import api_for
from hubpad.source.readers import read_json
from hubpad.util.log import also_log_to, log
from hubpad.util.redact import redact

from hubpad_space.on_jobs import execute_on_jobs
from hubpad_space.outcome import after_failure, result
from hubpad_space.runs import ON_JOBS, Run
from hubpad_space.settings import Settings


def execute(run: Run, settings: Settings) -> None:
    """Run `run` to its end: on success `run.result` holds the links, on failure `run.error` one sentence."""
    if run.request.route == ON_JOBS:
        return execute_on_jobs(run, settings)
    req, token = run.request, run.token
    with also_log_to(lambda line: run.notes.append(redact(line, token))):
        try:
            serving = {}
            if req.draft:
                serving["speculative_config"] = _mirror_draft(run, settings)
            run.phase = f"reading {req.upstream}'s headers"
            source = HubSource(req.upstream, token=token or False)
            run.upstream_commit = source.commit
            summary = _mirror(run, settings, source, req.target, serving)
            run.result = result(run, settings, source.commit, _summary(summary))
        except HubpadError as exc:
            run.error = after_failure(run, exc)
        except Exception as exc:  # noqa: BLE001 - said on the page in one line, logged without its token
            log(redact(f"space: run {run.id} failed: {type(exc).__name__}: {exc}", token))
            run.error = f"The run stopped on an unexpected error ({type(exc).__name__}); the Space's log has it."
        finally:
            shutil.rmtree(settings.scratch() / run.id, ignore_errors=True)  # what the publisher left: nothing big


def _mirror(run: Run, settings: Settings, source: HubSource, target: str, serving: dict, draft_for: str | None = None):
    """Plan `source` at the run's TP and publish it to `target`, shard by shard, in the CLI's words."""
    req = run.request
    plan = make_plan(source, req.tp, settings.shard_size)
    if draft_for:
        serving = {**serving, "draft": {"target": draft_for, "num_speculative_tokens": None}}
    publisher = target_publisher(target, req.private, run.token, settings, settings.scratch() / run.id)
    run.phase = f"padding {source.label} into {target}: {len(plan.shards)} output shard(s)"
    return run_mirror(plan, publisher, serving_overrides=serving, hooks=RunHooks(progress=run.progress))


def target_publisher(target: str, private: bool, token: str | bool | None, settings: Settings,
                     workdir=None) -> HubPublisher:
    """Where a run publishes: the Hub repo `target`, written with the user's token, scratch disk held to the
    Space's budget (hubpad's --max-disk)."""
    return HubPublisher(api_for(token or False), target, private=private, max_disk=settings.max_disk, workdir=workdir)


def _mirror_draft(run: Run, settings: Settings) -> dict:
    """Pad the draft first (same TP, paired with the target), then name it in the target's serve command."""
    req = run.request
    run.phase = f"reading the draft {req.draft}'s headers"
    draft = HubSource(req.draft, token=run.token or False)
    spec = speculative_config(req.draft_target, read_json(draft, "config.json"))  # a non-draft is refused now
    _mirror(run, settings, draft, req.draft_target, {}, draft_for=req.target)
    return spec


def _summary(summary) -> dict:
    """What a Space run tells of itself (hubpad's run Summary)."""
    return {"commit": summary.commit, "up_to_date": summary.up_to_date, "built": len(summary.shards_built),
            "reused": len(summary.shards_reused), "seconds": summary.seconds, "peak_disk": summary.peak_disk}
