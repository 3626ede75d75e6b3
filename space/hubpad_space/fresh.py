"""Keeping a derivative up to date: the `hubpad.yaml` that names it, and either the scheduled refresh on Hugging Face
Jobs in the user's namespace (run/schedule.py, made from that very file) or a GitHub workflow for a repository of
their own (the Action, from the same file). The page always shows the file and the workflow."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import yaml

from hubpad.errors import HubError, HubpadError
from hubpad.formats.mirrors_file import DEFAULT_SHARD_SIZE, MIRRORS_FILE
from hubpad.run import hf_jobs
from hubpad.run.schedule import DEFAULT_CRON, schedule_refresh
from hubpad.util.sizes import format_size

from hubpad_space.explain import explain, jobs_refused
from hubpad_space.runs import Request
from hubpad_space.settings import ACTION_PLACEHOLDER, Settings

CHECKOUT = "actions/checkout@08c6903cd8c0fde910a37f88322edcfb5dd907a8  # v5.0.0"
EVERY = "every 6 hours"  # DEFAULT_CRON in words


def mirrors_entry(req: Request, shard_size: int | None = None) -> str:
    """The run as a `hubpad.yaml` (with its draft, when there is one): what a schedule or a workflow keeps fresh.
    `shard_size`: the Space's, named when it is not hubpad's default (a refresh builds the same shards)."""
    entry = {"upstream": req.upstream, "target": req.target}
    if req.private:
        entry["private"] = True
    mirrors = [entry]
    if req.draft:
        mirrors.append({"upstream": req.draft, "target": req.draft_target, "draft_for": req.upstream})
    defaults = {"tp": req.tp}
    if shard_size and shard_size != DEFAULT_SHARD_SIZE:
        defaults["shard_size"] = format_size(shard_size)
    text = yaml.safe_dump({"defaults": defaults, "mirrors": mirrors}, sort_keys=False)
    return "# hubpad.yaml: the padded copies this repository keeps up to date\n" + text


def workflow(req: Request, settings: Settings) -> str:
    """A GitHub workflow for a repo of the user's own: on the refresh's cron, re-pad whatever upstream moved (a run
    that finds its target up to date only asks the Hub and stops)."""
    steps = [(req.draft, req.draft_target)] if req.draft else []
    steps.append((req.upstream, req.target))
    lines = ["# .github/workflows/hubpad.yml", "name: hubpad", "on:", "  schedule:", f'    - cron: "{DEFAULT_CRON}"',
             "  workflow_dispatch:", "permissions:", "  contents: read", "jobs:", "  mirror:",
             "    runs-on: ubuntu-24.04", "    timeout-minutes: 360", "    steps:", f"      - uses: {CHECKOUT}",
             "        with:", "          persist-credentials: false"]
    for upstream, target in steps:
        lines += [f"      - name: keep {target} up to date", f"        uses: {settings.action}", "        with:",
                  "          config: hubpad.yaml", f"          upstream: {upstream}",
                  "          hf-token: ${{ secrets.HF_TOKEN }}"]
    return "\n".join(lines) + "\n"


def fresh_help(settings: Settings) -> str:
    pin = ("" if settings.action != ACTION_PLACEHOLDER else
           " Replace OWNER/hubpad@COMMIT with the GitHub repository you take hubpad from and the commit you trust.")
    return ("To keep the padded copy up to date when its upstream changes without this Space: in a GitHub repository "
            "of your own, add these two files, and a secret HF_TOKEN (Settings → Secrets and variables → Actions) "
            f"holding a Hugging Face token that may write to the padded repo.{pin} The workflow checks {EVERY} and "
            "re-pads only what changed.")


def schedule_name(req: Request) -> str:
    """One schedule per derivative (run/schedule.py knows a schedule by this name: made again, still one)."""
    return hf_jobs.label_value(f"refresh-{req.target}")


def keep_fresh(req: Request, token: str, expires_at: int | None, settings: Settings) -> str:
    """Create the scheduled refresh of `req`'s derivative in the user's namespace, or renew the one made before
    (replaced by one holding this sign-in's token: still one schedule); the sentence saying so, or ValueError with
    the one sentence for why not."""
    try:
        launcher = hf_jobs.prepare(settings.jobs(), token=token)
        with tempfile.TemporaryDirectory(prefix="hubpad-space-fresh-") as tmp:
            path = Path(tmp) / MIRRORS_FILE
            path.write_text(mirrors_entry(req, settings.shard_size), encoding="utf-8")
            done = schedule_refresh(launcher, str(path), name=schedule_name(req), replace=True)
    except HubError as exc:
        if exc.status in (402, 403):
            raise ValueError(jobs_refused(exc, req.user)) from None
        raise ValueError(explain(exc, req, token=token)) from None
    except HubpadError as exc:
        raise ValueError(explain(exc, req, token=token)) from None
    made = "Kept up to date" if done.action == "created" else "Renewed"
    until = (f"this sign-in, which ends {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(expires_at))}: then sign "
             f"in again and press Pad with this box ticked to renew it" if expires_at else "your Hub login's token")
    return (f"{made}: {EVERY} a job in your account (billed to you) checks {req.upstream} and re-pads {req.target} "
            f"when it changed (schedule {schedule_name(req)}; `hubpad schedule delete {schedule_name(req)}` stops it). "
            f"It runs with {until}; the workflow below does the same with a token of your own.")
