"""Scheduled refresh on Hugging Face Jobs: a mirrors file as a scheduled job that rebuilds what is stale.

The scheduled job runs `hubpad check --config hubpad.yaml --json` and then `hubpad mirror UPSTREAM --config
hubpad.yaml --to TARGET` for each mirror the check found stale or missing (one failing mirror does not stop the
others; the job then ends in error). A schedule is known by its name (label `hubpad-schedule`), so making it again
from the same file updates it: the same job (label `hubpad-spec`, a digest of everything the job runs) only gets
its cron and suspension set; another job replaces it (the new one is created before the old one is deleted).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from hubpad.errors import HubpadError
from hubpad.run.hf_jobs import CONFIG_NAME, Command, Launcher, job_spec, jobs_errors, label_value, ship_mirrors_file

DEFAULT_CRON = "17 */6 * * *"  # every 6 hours, as the Action's mirror.yml
NAME_LABEL, SPEC_LABEL, KIND = "hubpad-schedule", "hubpad-spec", "refresh"


def default_name(config_file: str) -> str:
    """The schedule of one mirrors file: its folder's name and a digest of its absolute path."""
    path = Path(config_file).expanduser().resolve()
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return label_value(f"refresh-{path.parent.name}-{digest}")


_STALE = ("import json, sys\n"
          "for m in json.load(sys.stdin)['mirrors']:\n"
          "    if m['changed']:\n"
          "        print(m['upstream'] + '\\t' + m['target'])\n")
# Check, then rebuild each stale mirror; one failure does not stop the others, but fails the job at the end.
_REFRESH = (
    "set -o pipefail",
    f"hubpad check --config {CONFIG_NAME} --json | python3 -c \"$HUBPAD_STALE\" > stale.tsv",
    "status=0",
    "while IFS=\"$(printf '\\t')\" read -r upstream target; do",
    f"  hubpad mirror \"$upstream\" --config {CONFIG_NAME} --to \"$target\" || status=1",
    "done < stale.tsv",
    "exit \"$status\"",
)


def refresh_spec(launcher: Launcher, config_text: str, name: str) -> dict:
    """The scheduled job's spec: hubpad's job script running the refresh, labelled with its name and digest."""
    command = Command(("check", "--config", CONFIG_NAME), config_text, f"hubpad-{name}", ((NAME_LABEL, name),))
    spec = job_spec(launcher, command, _REFRESH)
    spec["env"] = {**spec["env"], "HUBPAD_STALE": _STALE}
    spec["labels"] = {**spec["labels"], "hubpad": KIND}
    spec["labels"][SPEC_LABEL] = _digest(spec)
    return spec


def _digest(spec: dict) -> str:
    """What the job runs (image, command, env, flavor, timeout, hubpad version), not the token: equal digests, same
    job."""
    seen = {k: spec[k] for k in ("image", "command", "env", "flavor", "timeout")}
    seen["labels"] = {k: v for k, v in spec["labels"].items() if k != SPEC_LABEL}
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Result:
    action: str  # "created", "updated", "replaced", "unchanged"
    info: object


def schedule_refresh(launcher: Launcher, config_file: str, *, cron: str = DEFAULT_CRON, name: str | None = None,
                     suspend: bool = False, replace: bool = False) -> Result:
    """Create the schedule of a mirrors file, or update the one made from it before (see the module docstring)."""
    name = label_value(name) if name else default_name(config_file)
    text = ship_mirrors_file(config_file, launcher.disk_budget)
    spec = refresh_spec(launcher, text, name)
    existing = find(launcher, name)
    api, ns = launcher.api, launcher.namespace
    if len(existing) == 1 and not replace and (existing[0].job_spec.labels or {}).get(SPEC_LABEL) == \
            spec["labels"][SPEC_LABEL]:
        old = existing[0]
        if old.schedule == cron and bool(old.suspend) == suspend:
            return Result("unchanged", old)
        with jobs_errors(ns, f"update schedule {name}"):
            info = api.update_scheduled_job_schedule(scheduled_job_id=old.id, schedule=cron, namespace=ns) \
                if old.schedule != cron else old
            if bool(old.suspend) != suspend:
                (api.suspend_scheduled_job if suspend else api.resume_scheduled_job)(scheduled_job_id=old.id,
                                                                                     namespace=ns)
            info = api.inspect_scheduled_job(scheduled_job_id=info.id, namespace=ns)
        return Result("updated", info)
    with jobs_errors(ns, f"create schedule {name}"):
        info = api.create_scheduled_job(**spec, schedule=cron, suspend=suspend, attempts=launcher.attempts,
                                        namespace=ns)
    for old in existing:  # the new one exists: only now the old one goes
        with jobs_errors(ns, f"delete the schedule it replaces ({old.id})"):
            api.delete_scheduled_job(scheduled_job_id=old.id, namespace=ns)
    return Result("replaced" if existing else "created", info)


def find(launcher: Launcher, name: str | None = None) -> list:
    """hubpad's refresh schedules in the namespace (only the one called `name`, when given)."""
    labels = {"hubpad": KIND, **({NAME_LABEL: label_value(name)} if name else {})}
    with jobs_errors(launcher.namespace, "list schedules"):
        return launcher.api.list_scheduled_jobs(labels=labels, namespace=launcher.namespace)


def one(launcher: Launcher, name: str):
    """The schedule called `name` (its label, or its id)."""
    found = find(launcher, name) or [s for s in find(launcher) if s.id == name]
    if not found:
        raise HubpadError(f"no hubpad schedule called {name} in {launcher.namespace} (hubpad schedule list)")
    return found[0]


def set_state(launcher: Launcher, name: str, action: str) -> object:
    """Suspend, resume or delete the schedule called `name`."""
    sched = one(launcher, name)
    api, ns = launcher.api, launcher.namespace
    call = {"suspend": api.suspend_scheduled_job, "resume": api.resume_scheduled_job,
            "delete": api.delete_scheduled_job}[action]
    with jobs_errors(ns, f"{action} schedule {name}"):
        call(scheduled_job_id=sched.id, namespace=ns)
    return sched


def describe(sched) -> dict:
    """One schedule as the list shows it."""
    labels = sched.job_spec.labels or {}
    last = sched.status.last_job
    return {"name": labels.get(NAME_LABEL, "?"), "id": sched.id, "schedule": sched.schedule,
            "suspended": bool(sched.suspend), "hubpad": labels.get("hubpad-version", "?"),
            "last_job": last.id if last else None,
            "next_run": sched.status.next_job_run_at.isoformat() if sched.status.next_job_run_at else None}
