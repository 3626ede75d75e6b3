"""The emulator's Jobs API (tests/hub_jobs.py) answers the REAL huggingface_hub client as the Hub would."""

from __future__ import annotations

import sys
import time

import pytest
from huggingface_hub.errors import HfHubHTTPError

from tests.emulator_fixtures import ALICE, ORG


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_hardware_list_parses(hub_api):
    flavors = {hw.name: hw for hw in hub_api.list_jobs_hardware()}
    assert flavors["cpu-upgrade"].ephemeral_storage == "50 GB"
    assert flavors["t4-small"].accelerator.model == "T4"


def test_run_follow_logs_inspect_and_list(hub, hub_api):
    job = hub_api.run_job(image="python:3.12", command=_py("import os; print('hi'); print(os.environ['X'])"),
                          env={"X": "from-env"}, secrets={"S": "secret-value"}, labels={"app": "t"})
    assert job.status.stage in ("SCHEDULING", "RUNNING") and job.owner.name == ALICE
    assert job.url == f"{hub.endpoint}/jobs/{ALICE}/{job.id}"
    lines = list(hub_api.fetch_job_logs(job_id=job.id, follow=True))
    assert lines == ["hi", "from-env"]  # the "===== Job started" line is hidden by the client
    info = hub_api.inspect_job(job_id=job.id)
    assert info.status.stage == "COMPLETED" and info.secrets == {"S": None} and info.labels["app"] == "t"
    # list_jobs() asks the module-level whoami() (the default endpoint) for the namespace: name it.
    assert [j.id for j in hub_api.list_jobs(labels={"app": "t"}, namespace=ALICE)] == [job.id]
    assert list(hub_api.list_jobs(labels={"app": "other"}, namespace=ALICE)) == []


def test_secrets_reach_the_process_env_and_not_the_answers(hub, hub_api):
    job = hub_api.run_job(image="python:3.12", command=_py("import os; print(len(os.environ['S']))"),
                          secrets={"S": "very-secret"})
    assert list(hub_api.fetch_job_logs(job_id=job.id, follow=True)) == ["11"]
    assert "very-secret" not in str(hub_api.inspect_job(job_id=job.id))


def test_cancel_stops_the_process(hub, hub_api):
    job = hub_api.run_job(image="python:3.12", command=_py("import time; print('up', flush=True); time.sleep(60)"))
    hub.jobs.wait(job.id, stages=("RUNNING",))
    hub_api.cancel_job(job_id=job.id)
    assert hub.jobs.wait(job.id, timeout=10).stage == "CANCELED"


def test_attempts_rerun_a_failed_command_under_the_same_id(hub, hub_api, tmp_path):
    marker = tmp_path / "tried"
    code = f"import pathlib,sys; p=pathlib.Path({str(marker)!r}); first=not p.exists(); p.touch(); sys.exit(3 if first else 0)"
    job = hub_api.run_job(image="python:3.12", command=_py(code), attempts=2)
    done = hub.jobs.wait(job.id)
    assert done.stage == "COMPLETED" and done.attempts_run == 2
    failing = hub_api.run_job(image="python:3.12", command=_py("import sys; print('no'); sys.exit(3)"))
    info = hub.jobs.wait(failing.id)
    assert info.stage == "ERROR" and "exit code 3" in info.message


def test_timeout_ends_the_job_with_an_error(hub, hub_api):
    job = hub_api.run_job(image="python:3.12", command=_py("import time; time.sleep(30)"), timeout=1)
    t0 = time.time()
    info = hub.jobs.wait(job.id, timeout=20)
    assert info.stage == "ERROR" and "timed out" in info.message and time.time() - t0 < 15


def test_denied_namespace_and_unknown_flavor(hub, hub_api):
    hub.jobs.deny(ORG, 402)
    with pytest.raises(HfHubHTTPError) as exc:
        hub_api.run_job(image="python:3.12", command=["true"], namespace=ORG)
    assert exc.value.response.status_code == 402
    with pytest.raises(HfHubHTTPError) as exc:
        hub_api.run_job(image="python:3.12", command=["true"], flavor="cpu-nope")
    assert exc.value.response.status_code == 400


def test_scheduled_jobs_lifecycle(hub, hub_api):
    sched = hub_api.create_scheduled_job(image="python:3.12", command=_py("print('tick')"), schedule="@hourly",
                                         labels={"app": "t"}, secrets={"S": "x"})
    assert sched.schedule == "@hourly" and sched.job_spec.labels["app"] == "t"
    assert [s.id for s in hub_api.list_scheduled_jobs(labels={"app": "t"})] == [sched.id]
    hub_api.suspend_scheduled_job(scheduled_job_id=sched.id)
    assert hub_api.inspect_scheduled_job(scheduled_job_id=sched.id).suspend is True
    hub_api.resume_scheduled_job(scheduled_job_id=sched.id)
    assert hub_api.update_scheduled_job_schedule(scheduled_job_id=sched.id, schedule="@daily").schedule == "@daily"
    run = hub_api.trigger_scheduled_job(scheduled_job_id=sched.id)
    assert list(hub_api.fetch_job_logs(job_id=run.id, follow=True)) == ["tick"]
    assert hub_api.inspect_job(job_id=run.id).initiator.type == "scheduled-job"
    hub_api.delete_scheduled_job(scheduled_job_id=sched.id)
    assert hub_api.list_scheduled_jobs() == []
