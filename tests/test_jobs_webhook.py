"""`hubpad webhook`: the Hub's repo-update webhook starts mirror jobs (run/webhook.py), against the emulator's Jobs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from hubpad.errors import HubpadError
from hubpad.run.hf_jobs import Settings, prepare
from hubpad.run.webhook import make_server, receiver_for
from tests.helpers import ROOT, cli
from tests.jobs_fixtures import jobs_hub  # noqa: F401
from tests.test_hub_mirror import TARGET, UP, upstream  # noqa: F401
from tests.test_jobs import _error_lines, _jobs, _mirrors_file, _until

SECRET = "webhook-secret-for-tests"


def _push(name: str, sha: str, branch: str = "main") -> dict:
    """A Hub webhook delivery for a push (payload version 3, as huggingface_hub's WebhookPayload models it)."""
    return {"event": {"action": "update", "scope": "repo.content"},
            "repo": {"type": "model", "name": name, "id": "0" * 24, "private": False, "headSha": sha,
                     "owner": {"id": "1" * 24}, "url": {"web": f"https://huggingface.co/{name}"}},
            "updatedRefs": [{"ref": f"refs/heads/{branch}", "oldSha": "2" * 40, "newSha": sha}],
            "webhook": {"id": "3" * 24, "version": 3}}


@pytest.fixture
def receiver(jobs_hub, upstream, tmp_path):
    rcv = receiver_for(prepare(Settings()), str(_mirrors_file(tmp_path)), SECRET, settle=2.0, poll=0.2)
    server = make_server(rcv, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        yield url
    finally:
        rcv.trigger.stop()
        server.shutdown()
        server.server_close()


def _post(url: str, payload: dict, secret: str | None = SECRET) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json", **({"X-Webhook-Secret": secret} if secret is not None else {})}
    request = urllib.request.Request(url, json.dumps(payload).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _commits(hub, n: int) -> list[str]:
    """n new commits on the upstream (a README edit each): the pushes the webhook reports."""
    return [hub.seed(UP, {"README.md": f"push {time.time()} {i}\n".encode()}, message=f"push {i}") for i in range(n)]


def test_wrong_or_missing_secret_is_refused_and_other_events_are_ignored(jobs_hub, receiver):
    sha = _commits(jobs_hub, 1)[0]
    assert _post(receiver, _push(UP, sha), secret="wrong")[0] == 403
    assert _post(receiver, _push(UP, sha), secret=None)[0] == 401
    status, answer = _post(receiver, _push("someone/else", sha))
    assert status == 200 and "not in the mirrors file" in answer["ignored"]
    status, answer = _post(receiver, _push(UP, sha, branch="dev"))
    assert status == 200 and "no tracked branch" in answer["ignored"]
    assert _post(receiver, {"event": {"action": "update", "scope": "repo.config"}, "repo": {"type": "model"}})[0] == 200
    time.sleep(0.5)  # nothing was queued, so nothing starts
    assert _jobs(jobs_hub) == []


def test_a_burst_of_pushes_starts_one_job_and_later_pushes_one_more_after_it(jobs_hub, receiver):
    shas = _commits(jobs_hub, 5)
    for sha in shas:
        status, answer = _post(receiver, _push(UP, sha))
        assert status == 202 and answer["queued"] == [TARGET]
    _until(lambda: _jobs(jobs_hub), what="the job")
    (first,) = _jobs(jobs_hub)
    assert f"--revision {shas[-1]}" in first.spec["command"][2]  # pinned to the newest push
    # Pushes while it runs: one more job, after this one ends, pinned to the newest of them.
    later = _commits(jobs_hub, 3)
    for sha in later:
        assert _post(receiver, _push(UP, sha))[0] == 202
    assert jobs_hub.jobs.wait(first.id).stage == "COMPLETED", jobs_hub.jobs.log_text(first.id)
    _until(lambda: len(_jobs(jobs_hub)) == 2, what="the second job")
    second = _jobs(jobs_hub)[1]
    assert second.created >= first.finished
    assert f"--revision {later[-1]}" in second.spec["command"][2]
    assert jobs_hub.jobs.wait(second.id).stage == "COMPLETED", jobs_hub.jobs.log_text(second.id)
    time.sleep(1.0)
    assert len(_jobs(jobs_hub)) == 2
    assert cli("verify", UP, TARGET).exit_code == 0


def test_the_receiver_refuses_to_run_without_a_secret(jobs_hub, upstream, tmp_path, monkeypatch):
    with pytest.raises(HubpadError, match="WEBHOOK_SECRET"):
        receiver_for(prepare(Settings()), str(_mirrors_file(tmp_path)), "")
    monkeypatch.delenv("WEBHOOK_SECRET", raising=False)
    r = cli("webhook", "--config", _mirrors_file(tmp_path), "--port", "0")
    assert r.exit_code == 1 and len(_error_lines(r.stderr)) == 1 and "WEBHOOK_SECRET" in r.stderr


def test_hubpad_webhook_serves_until_interrupted(jobs_hub, upstream, tmp_path):
    env = dict(os.environ, WEBHOOK_SECRET=SECRET)
    proc = subprocess.Popen([sys.executable, "-m", "hubpad.app.cli", "webhook", "--config", str(_mirrors_file(tmp_path)),
                             "--host", "127.0.0.1", "--port", "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()
        m = re.search(r"webhook receiver on http://127\.0\.0\.1:(\d+): watching (\S+)", first)
        assert m and m[2] == UP, first
        url = f"http://127.0.0.1:{m[1]}/"
        with urllib.request.urlopen(url, timeout=30) as response:
            assert json.loads(response.read()) == {"hubpad": "webhook receiver", "watching": 1}
        assert _post(url, _push(UP, "4" * 40), secret="nope")[0] == 403
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and _error_lines(err) == ["error: interrupted"]
    assert SECRET not in first + err and _jobs(jobs_hub) == []
