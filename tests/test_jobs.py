"""`--on hf-jobs`: hubpad commands as Hugging Face jobs, through the REAL huggingface_hub client and the emulator's
Jobs API (tests/hub_jobs.py), whose jobs run this checkout's hubpad as local subprocesses (tests/jobs_fixtures.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.emulator_fixtures import ALICE, ALICE_TOKEN, ORG
from tests.helpers import ROOT, cli
from tests.jobs_fixtures import PIN, jobs_hub  # noqa: F401
from tests.test_hub_mirror import SHARD, TARGET, UP, _hubpad_commits, upstream  # noqa: F401

SHA = PIN.split("@")[1]


def _jobs(hub):
    return sorted(hub.jobs.jobs.values(), key=lambda j: j.created)


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def _mirror_on_jobs(*extra):
    return cli("mirror", UP, "--tp", "3", "--shard-size", SHARD, "--on", "hf-jobs", *extra)


def _popen(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hubpad.app.cli", *args], cwd=ROOT, env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _until(condition, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _staged(hub) -> list[str]:
    if not hub.repo_exists(TARGET) or "hubpad-staging" not in hub.branches(TARGET):
        return []
    return sorted(p for p in hub.files(TARGET, "hubpad-staging") if p.endswith(".safetensors"))


def test_mirror_on_jobs_installs_the_pinned_hubpad_publishes_and_verifies(jobs_hub, upstream):
    r = _mirror_on_jobs()
    assert r.exit_code == 0, r.output
    (job,) = _jobs(jobs_hub)
    assert job.stage == "COMPLETED" and job.attempts_run == 1
    assert r.stdout.strip().endswith(f"job {job.id} completed: {jobs_hub.endpoint}/jobs/{ALICE}/{job.id}")
    assert "published alice/Tiny-Hy3-TP3" in r.stderr  # the job's own lines, followed live
    # The same command line ran there, with the flavor's disk budget; this exact hubpad was installed, never latest.
    script = job.spec["command"][2]
    assert script.splitlines()[-1] == "exec hubpad mirror RedHatAI/Tiny-Hy3 --tp 3 --shard-size 4MB --max-disk 45GB"
    pip_log = (jobs_hub.jobs.root / job.id / "attempt-1" / "pip.log").read_text()
    assert f"--require-hashes -r https://raw.githubusercontent.com/example/hubpad/{SHA}/requirements/runtime.txt" \
        in pip_log
    assert f"--no-deps hubpad @ https://github.com/example/hubpad/archive/{SHA}.tar.gz" in pip_log
    assert job.spec["flavor"] == "cpu-upgrade" and job.spec["timeoutSeconds"] == 6 * 3600
    assert job.spec["dockerImage"] == "python:3.12-slim" and job.spec["labels"]["hubpad-version"] == SHA
    assert len(_hubpad_commits(jobs_hub)) == 1
    assert cli("verify", UP, TARGET).exit_code == 0


def test_the_token_appears_nowhere_but_the_secrets(jobs_hub, upstream):
    r = _mirror_on_jobs()
    assert r.exit_code == 0, r.output
    r2 = cli("plan", UP, "--tp", "3", "--on", "hf-jobs")
    assert r2.exit_code == 0, r2.output
    assert "Padded dims" in r2.stderr or "padded" in r2.stderr.lower()  # the plan's text, from the job's log
    for job in _jobs(jobs_hub):
        assert job.spec["secrets"] == {"HF_TOKEN": ALICE_TOKEN}  # sent as the one secret...
        rest = {k: v for k, v in job.spec.items() if k != "secrets"}
        assert ALICE_TOKEN not in json.dumps(rest)  # ...and nowhere else: command, env, labels
        assert ALICE_TOKEN not in jobs_hub.jobs.log_text(job.id)
        for answer in (job.to_json(jobs_hub.endpoint),):
            assert ALICE_TOKEN not in json.dumps(answer)
    assert ALICE_TOKEN not in r.output + r2.output
    for path in jobs_hub.files(TARGET):
        assert ALICE_TOKEN.encode() not in jobs_hub.file_bytes(TARGET, path)


def test_detach_prints_the_job_and_leaves_it_running(jobs_hub, upstream):
    r = _mirror_on_jobs("--detach")
    assert r.exit_code == 0, r.output
    (job,) = _jobs(jobs_hub)
    assert r.stdout.strip() == f"job {job.id} started: {jobs_hub.endpoint}/jobs/{ALICE}/{job.id}"
    assert jobs_hub.jobs.wait(job.id).stage == "COMPLETED"
    assert cli("verify", UP, TARGET).exit_code == 0


def test_a_failing_job_passes_hubpads_error_line_through_and_exits_1(jobs_hub, upstream):
    jobs_hub.seed("alice/not-hubpad", {"precious.bin": b"x" * 10})
    r = _mirror_on_jobs("--to", "alice/not-hubpad")
    assert r.exit_code == 1
    (job,) = _jobs(jobs_hub)
    assert job.stage == "ERROR"
    remote = _error_lines(jobs_hub.jobs.log_text(job.id))
    assert len(remote) == 1 and "did not create" in remote[0]
    assert _error_lines(r.stderr) == remote  # exactly hubpad's own line, once
    assert jobs_hub.file_bytes("alice/not-hubpad", "precious.bin") == b"x" * 10


def test_ctrl_c_cancels_the_job(jobs_hub, upstream):
    jobs_hub.set_throttle(up_bytes_per_s=500_000)  # a slow upload: the job is still running when Ctrl-C comes
    proc = _popen("mirror", UP, "--tp", "3", "--shard-size", SHARD, "--on", "hf-jobs")
    _until(lambda: _jobs(jobs_hub) and jobs_hub.jobs.log_text(_jobs(jobs_hub)[0].id).count("\n") >= 2,
           what="the job's first log lines")
    (job,) = _jobs(jobs_hub)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"cancelled job {job.id}" in err and _error_lines(err) == ["error: interrupted"]
    assert jobs_hub.jobs.wait(job.id, timeout=30).stage == "CANCELED"
    assert job.proc.poll() is not None
    assert not jobs_hub.repo_exists(TARGET) or not _hubpad_commits(jobs_hub)  # nothing published


def test_unknown_flavor_and_a_namespace_without_jobs_are_one_line_and_start_nothing(jobs_hub, upstream):
    r = _mirror_on_jobs("--flavor", "cpu-upgrad")
    assert r.exit_code == 1 and len(_error_lines(r.stderr)) == 1
    assert "did you mean cpu-upgrade?" in r.stderr
    jobs_hub.jobs.deny(ALICE, 402)
    r = _mirror_on_jobs()
    assert r.exit_code == 1 and len(_error_lines(r.stderr)) == 1
    assert "cannot run Jobs" in r.stderr and "402" in r.stderr and "credit" in r.stderr
    jobs_hub.jobs.deny(ORG, 403)
    r = _mirror_on_jobs("--namespace", ORG)
    assert r.exit_code == 1 and len(_error_lines(r.stderr)) == 1 and "403" in r.stderr and ORG in r.stderr
    r = _mirror_on_jobs("--max-disk", "60GB")
    assert r.exit_code == 1 and "does not fit flavor cpu-upgrade" in r.stderr
    assert _jobs(jobs_hub) == [] and not jobs_hub.repo_exists(TARGET)
    r = cli("mirror", UP, "--tp", "3", "--flavor", "cpu-xl")
    assert r.exit_code == 2 and "add --on hf-jobs" in r.stderr


def test_a_timed_out_mirror_says_so_and_the_next_run_resumes(jobs_hub, upstream):
    jobs_hub.set_throttle(up_bytes_per_s=1_500_000)
    proc = _popen("mirror", UP, "--tp", "3", "--shard-size", SHARD, "--on", "hf-jobs", "--timeout", "90m")
    _until(lambda: len(_staged(jobs_hub)) >= 1, what="a staged shard")
    (job,) = _jobs(jobs_hub)
    jobs_hub.jobs.time_out(job.id)  # the job's timeout fires now
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    (line,) = _error_lines(err)
    assert f"job {job.id} timed out after 5400s (--timeout 90m)" in line and "run the same command again" in line
    assert job.spec["timeoutSeconds"] == 5400
    staged = _staged(jobs_hub)
    assert staged and len(_hubpad_commits(jobs_hub)) == 0
    jobs_hub.set_throttle(None, None)
    r = _mirror_on_jobs()
    assert r.exit_code == 0, r.output
    assert f"resuming: {len(staged)} shard(s) already staged" in r.stderr or "already staged" in r.stderr
    assert cli("verify", UP, TARGET).exit_code == 0


def test_fan_out_with_one_part_killed_and_retried(jobs_hub, upstream):
    jobs_hub.set_throttle(up_bytes_per_s=1_500_000)
    proc = _popen("mirror", UP, "--tp", "3", "--shard-size", SHARD, "--on", "hf-jobs", "--parts", "2")
    _until(lambda: "model-00001-of-00005.safetensors" in _staged(jobs_hub), what="part 1's first shard")
    part1 = next(j for j in _jobs(jobs_hub) if "--part 1/2" in j.spec["command"][2])
    jobs_hub.jobs.kill(part1.id)  # the machine under part 1 fails: Jobs run it again
    jobs_hub.set_throttle(None, None)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    parts = [j for j in _jobs(jobs_hub) if "--part " in j.spec["command"][2]]
    (publish,) = [j for j in _jobs(jobs_hub) if "exec hubpad publish" in j.spec["command"][2]]
    assert len(parts) == 2 and all(j.stage == "COMPLETED" for j in [*parts, publish])
    assert part1.attempts_run == 2 and part1.spec["attempts"] == 3
    second = jobs_hub.jobs.log_text(part1.id).split("===== Job started")[-1]
    assert "already staged" in second  # the retry resumed from what the killed attempt staged
    assert publish.created >= max(j.finished for j in parts)  # published after every part
    # Every job planned the same upstream commit.
    commit = jobs_hub.head(UP)
    assert all(f"--revision {commit}" in j.spec["command"][2] for j in [*parts, publish])
    assert "[part 1/2]" in err and "[part 2/2]" in err
    assert len(_hubpad_commits(jobs_hub)) == 1
    assert cli("verify", UP, TARGET).exit_code == 0


def test_fan_out_refuses_before_any_job_when_the_plan_fails(jobs_hub, tmp_path):
    jobs_hub.seed("org/not-a-model", {"config.json": b"{}"})
    r = cli("mirror", "org/not-a-model", "--tp", "3", "--on", "hf-jobs", "--parts", "2")
    assert r.exit_code == 1 and len(_error_lines(r.stderr)) == 1 and _jobs(jobs_hub) == []
    r = cli("mirror", UP, "--tp", "3", "--parts", "2")
    assert r.exit_code == 2 and "add --on hf-jobs" in r.stderr


def _mirrors_file(tmp_path: Path, tp: int = 3) -> Path:
    path = tmp_path / "mirrors" / "hubpad.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"defaults:\n  tp: {tp}\n  shard_size: 4MB\nmirrors:\n  - upstream: {UP}\n")
    return path


def test_a_schedule_made_twice_is_one_schedule_and_it_refreshes(jobs_hub, upstream, tmp_path):
    config = _mirrors_file(tmp_path)
    r = cli("schedule", "create", config, "--json")
    assert r.exit_code == 0, r.output
    first = json.loads(r.stdout)
    assert first["action"] == "created" and first["schedule"] == "17 */6 * * *"
    r = cli("schedule", "create", config, "--json")
    assert json.loads(r.stdout)["action"] == "unchanged"
    r = cli("schedule", "create", config, "--cron", "@daily", "--json")
    assert json.loads(r.stdout)["action"] == "updated"
    assert list(jobs_hub.jobs.schedules) == [first["id"]]  # the same schedule, its cron changed
    config.write_text(config.read_text().replace("shard_size: 4MB", "shard_size: 5MB"))
    r = cli("schedule", "create", config, "--cron", "@daily", "--json")
    replaced = json.loads(r.stdout)
    assert replaced["action"] == "replaced" and list(jobs_hub.jobs.schedules) == [replaced["id"]]
    r = cli("schedule", "list", "--json")
    (row,) = json.loads(r.stdout)
    assert row["name"] == first["name"] and row["schedule"] == "@daily"
    assert cli("schedule", "suspend", row["name"]).exit_code == 0
    assert jobs_hub.jobs.schedules[replaced["id"]].suspend is True
    assert cli("schedule", "resume", row["name"]).exit_code == 0
    sched = jobs_hub.jobs.schedules[replaced["id"]]
    assert sched.job_spec["secrets"] == {"HF_TOKEN": ALICE_TOKEN}
    assert ALICE_TOKEN not in json.dumps({k: v for k, v in sched.job_spec.items() if k != "secrets"})
    # The cron fires: the job checks the mirrors file and rebuilds what is stale (here: missing).
    job = jobs_hub.jobs.fire(sched.id)
    assert jobs_hub.jobs.wait(job.id).stage == "COMPLETED", jobs_hub.jobs.log_text(job.id)
    log_text = jobs_hub.jobs.log_text(job.id)
    assert "published alice/Tiny-Hy3-TP3" in log_text and ALICE_TOKEN not in log_text
    assert cli("verify", UP, TARGET).exit_code == 0
    # Fired again: up to date, nothing rebuilt.
    again = jobs_hub.jobs.fire(sched.id)
    assert jobs_hub.jobs.wait(again.id).stage == "COMPLETED"
    assert "published" not in jobs_hub.jobs.log_text(again.id)
    assert cli("schedule", "delete", row["name"]).exit_code == 0 and jobs_hub.jobs.schedules == {}
    r = cli("schedule", "delete", row["name"])
    assert r.exit_code == 1 and "no hubpad schedule called" in r.stderr


def test_the_jobs_live_check_script_passes_against_the_emulator(jobs_hub, upstream, tmp_path):
    image = tmp_path / "image-bin"  # jobs_fixtures' image: its `hubpad` runs this checkout
    env = dict(os.environ, PYTHON=sys.executable, TMPDIR=str(tmp_path), HUBPAD_LIVE_UPSTREAM=UP,
               PATH=os.pathsep.join([str(image), str(Path(sys.executable).parent), os.environ["PATH"]]))
    r = subprocess.run(["bash", str(ROOT / "scripts" / "jobs_live_check.sh")], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"jobs live check passed: {UP} -> alice/hubpad-jobs-live-check-" in r.stdout
    first, second = _jobs(jobs_hub)
    assert first.stage == second.stage == "COMPLETED" and first.spec["flavor"] == "cpu-basic"
    assert "is up to date" in jobs_hub.jobs.log_text(second.id)
    created = [e.repo_id for e in jobs_hub.find_requests("POST", kind="create-repo")]
    assert len(created) == 1 and not jobs_hub.repo_exists(created[0])  # the scratch repo is gone again
    assert ALICE_TOKEN not in r.stdout + r.stderr
