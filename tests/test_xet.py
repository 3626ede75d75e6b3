"""Xet: the emulator speaks Xet's side of the protocol, and hubpad mirrors with the REAL hf_xet uploading.

Every test here runs with xet enabled in the client (``HF_HUB_DISABLE_XET`` unset, ``constants.HF_HUB_DISABLE_XET``
False): huggingface_hub uploads LFS files through hf_xet 1.8, which asks the emulator's ``xet-write-token`` route for
a token and a CAS address and gets ``local://<dir>``, a real hf_xet store on disk. The emulator learns what was
uploaded from the shards hf_xet writes there (sha256 → Xet hash, size) and rebuilds file bodies from the store with
hf_xet's own download API. Nothing stands in for hf_xet, except in ``test_xet_auth_and_not_found_errors_*``: the
real hf_xet cannot produce ``XetAuthenticationError``/``XetObjectNotFoundError`` against ``local://`` storage (no
token check, a missing object reads as empty), so that test replaces only the hf_xet session, whose contract is
kept (it is asked for an upload commit with the token URL of the branch), by one that raises them.

hf_xet's local store admits one process at a time, so subprocess steps here never overlap (see ``xet_client``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationCopy, hf_hub_download
from huggingface_hub.errors import FileDuplicationError

from hubpad.errors import HubpadError
from hubpad.render.paths import builtin_templates_dir
from hubpad.source.hub_api import hub_errors
from tests.emulator_fixtures import ALICE_TOKEN, release_xet_session, xet_client
from tests.helpers import cli
from tests.test_hub_mirror import SHARD, TARGET, UP, _hubpad_commits, _kill_9_after_first_staging_commit, _mirror, _shards
from tests.test_hub_mirror import upstream  # noqa: F401  (fixture)


@pytest.fixture
def hub(hub, monkeypatch):
    """The shared emulator fixture, speaking Xet, with the client uploading through the real hf_xet."""
    with xet_client(hub, monkeypatch):
        yield hub


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _no_token_anywhere(hub, *texts: str) -> None:
    """The Hub token went only to the Hub's API origin: never to the CDN/storage origin, never into Xet storage
    (hf_xet's local store: xorbs, shards, its caches), never into any output."""
    for e in hub.requests:
        if e.origin == "cdn":
            assert not e.authorization and not any(hub.token in v for v in e.headers.values()), e.path
    needle = hub.token.encode()
    for p in Path(hub.xet.root).rglob("*"):
        if p.is_file():
            assert needle not in p.read_bytes(), p
    for text in texts:
        assert hub.token not in text


def _token_route_calls(hub, kind="xet-write-token"):
    calls = hub.find_requests("GET", kind=kind)
    assert calls, f"no {kind} request: the upload did not go through Xet"
    for e in calls:
        assert e.headers.get("authorization") == f"Bearer {hub.token}"  # the Hub token goes to the Hub only
    return calls


# ----------------------------------------------------------------------------------------------------------------
# the emulator's Xet side, driven by the real client
# ----------------------------------------------------------------------------------------------------------------


def test_upload_through_real_hf_xet_then_read_back_every_way(hub, hub_api, tmp_path):
    hub_api.create_repo("alice/x")
    data = os.urandom(3_000_000)
    (tmp_path / "w.safetensors").write_bytes(data)
    hub.reset_log()
    hub_api.upload_file(path_or_fileobj=str(tmp_path / "w.safetensors"), path_in_repo="w.safetensors",
                        repo_id="alice/x")
    assert [e.kind for e in hub.requests] == ["preupload", "xet-write-token", "commit"]  # no LFS batch, no PUT
    _token_route_calls(hub)
    assert hub.bytes_uploaded() == 0 and hub.xet_bytes_stored() >= len(data)
    # The commit named the file by sha256 only; the emulator found it in the uploaded shards.
    xet_hash = hub.xet_hash("alice/x", "w.safetensors")
    assert xet_hash and len(xet_hash) == 64 and xet_hash != _sha(data)
    assert hub.files("alice/x")["w.safetensors"] == _sha(data)
    info = hub_api.get_paths_info("alice/x", ["w.safetensors"])[0]
    assert info.lfs.sha256 == _sha(data) and info.xet_hash == xet_hash
    tree = {f.path: f for f in hub_api.list_repo_tree("alice/x")}
    assert tree["w.safetensors"].xet_hash == xet_hash and tree[".gitattributes"].xet_hash is None
    # resolve: the redirect carries the Xet headers; the LFS oid stays the sha256.
    from huggingface_hub.utils import get_session

    r = get_session().head(hub.url("alice/x", "w.safetensors"), headers={"authorization": f"Bearer {ALICE_TOKEN}"},
                           follow_redirects=False)
    assert r.status_code == 302 and r.headers["X-Xet-Hash"] == xet_hash
    assert r.headers["X-Linked-Etag"] == f'"{_sha(data)}"'
    assert r.links["xet-auth"]["url"] == f"{hub.endpoint}/api/models/alice/x/xet-read-token/{hub.head('alice/x')}"
    # hf_hub_download reads it through hf_xet (read-token route, the local store), not the CDN.
    hub.reset_log()
    out = hf_hub_download("alice/x", "w.safetensors", cache_dir=str(tmp_path / "cache"))
    assert Path(out).read_bytes() == data
    _token_route_calls(hub, "xet-read-token")
    assert not hub.find_requests(origin="cdn")
    # A ranged HTTP read (what hubpad's HubSource does) gets the same bytes from the CDN origin, without the token.
    from huggingface_hub.utils import http_stream_backoff

    with http_stream_backoff("GET", hub.url("alice/x", "w.safetensors"), follow_redirects=True,
                             headers={"authorization": f"Bearer {ALICE_TOKEN}", "Range": "bytes=1000-1999"}) as r:
        assert r.status_code == 206 and r.read() == data[1000:2000]
    _no_token_anywhere(hub)


def test_token_routes_need_the_right_token(hub, hub_api):
    from huggingface_hub.utils import get_session

    def get(route, token=None):
        return get_session().get(f"{hub.endpoint}/api/models/{route}",
                                 headers={"authorization": f"Bearer {token}"} if token else {})

    hub_api.create_repo("alice/x")
    hub_api.create_repo("alice/private", private=True)
    assert get("alice/x/xet-write-token/main").status_code == 401
    assert get("alice/x/xet-write-token/main", hub.read_token).status_code == 403
    r = get("alice/x/xet-write-token/main", hub.token)
    assert r.status_code == 200 and r.headers["X-Xet-Cas-Url"] == f"local://{hub.xet.root}"
    assert r.headers["X-Xet-Access-Token"] != hub.token and int(r.headers["X-Xet-Token-Expiration"]) > time.time()
    assert r.json()["casUrl"] == r.headers["X-Xet-Cas-Url"]  # hf_xet itself reads the JSON body
    assert get("alice/x/xet-read-token/main").status_code == 200  # public repo: anyone may read
    assert get("alice/private/xet-read-token/main").status_code == 404  # private: hidden
    assert get("alice/private/xet-read-token/main", hub.token).status_code == 200
    assert get("alice/x/xet-write-token/nope", hub.token).status_code == 404


def test_cross_repo_copies_xet_classic_lfs_and_other_regions(hub, hub_api):
    xet_file, classic = os.urandom(200_000), os.urandom(100_000)
    hub.seed("org/up", {"a.safetensors": xet_file})
    hub.seed("org/up", {"b.safetensors": classic}, xet=False)  # classic LFS: no Xet hash
    assert hub.xet_hash("org/up", "a.safetensors") not in (None, _sha(xet_file))
    assert hub.xet_hash("org/up", "b.safetensors") is None
    infos = {i.path: i for i in hub_api.get_paths_info("org/up", ["a.safetensors", "b.safetensors"])}
    assert infos["a.safetensors"].xet_hash and infos["b.safetensors"].xet_hash is None
    hub_api.create_repo("alice/dst")

    def copy(path):
        return CommitOperationCopy(src_path_in_repo=path, path_in_repo=path, src_repo_id="org/up",
                                   src_repo_type="model")

    hub.reset_log()
    hub_api.create_commit("alice/dst", [copy("a.safetensors")], commit_message="copy")
    assert hub.file_bytes("alice/dst", "a.safetensors") == xet_file and hub.bytes_uploaded() == 0
    assert len(hub.find_requests("POST", kind="lfs-duplicate")) == 1
    # Classic LFS source: the client refuses before sending anything.
    hub.reset_log()
    with pytest.raises(ValueError, match="has no xet hash"):
        hub_api.create_commit("alice/dst", [copy("b.safetensors")], commit_message="copy b")
    assert not hub.find_requests(kind="lfs-duplicate") and not hub.find_requests(kind="commit")
    # Another storage region: the Hub refuses per file, the client raises FileDuplicationError; nothing committed.
    hub.seed("org/up", {"c.safetensors": os.urandom(50_000)})
    hub.set_storage_region("org/up", "eu")
    head = hub.head("alice/dst")
    with pytest.raises(FileDuplicationError, match="storage regions"):
        hub_api.create_commit("alice/dst", [copy("c.safetensors")], commit_message="copy c")
    assert hub.head("alice/dst") == head


def test_hub_errors_turn_copy_and_xet_failures_into_one_line(hub, hub_api):
    hub.seed("org/up", {"b.safetensors": os.urandom(100_000)}, xet=False)
    hub_api.create_repo("alice/dst")
    op = CommitOperationCopy(src_path_in_repo="b.safetensors", path_in_repo="b.safetensors", src_repo_id="org/up",
                             src_repo_type="model")
    with pytest.raises(HubpadError) as info:
        with hub_errors("target alice/dst: publish"):
            hub_api.create_commit("alice/dst", [op], commit_message="copy")
    assert str(info.value) == ("target alice/dst: publish: cannot copy b.safetensors server-side from models/org/up: "
                               "it is stored as classic LFS, not in Xet (no xetHash), and the Hub copies only Xet "
                               "files between repos")
    hub.seed("org/up", {"c.safetensors": os.urandom(1000)})
    hub.set_storage_region("alice/dst", "eu")
    op = CommitOperationCopy(src_path_in_repo="c.safetensors", path_in_repo="c.safetensors", src_repo_id="org/up",
                             src_repo_type="model")
    with pytest.raises(HubpadError) as info:
        with hub_errors("target alice/dst: publish"):
            hub_api.create_commit("alice/dst", [op], commit_message="copy")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("target alice/dst: publish: server-side copy failed for 1 file(s) (Failed "
                                      "to duplicate files from models/org/up to models/alice/dst: ")
    assert str(info.value).endswith("cannot duplicate across storage regions (us -> eu))")
    # The real hf_xet, refused a write token: one line naming the route, never the token.
    hub.faults.status(403, r"/xet-write-token/", times=None)
    with pytest.raises(HubpadError) as info:
        with hub_errors("target alice/dst: stage w"):
            hub_api.upload_file(path_or_fileobj=os.urandom(2000), path_in_repo="w.safetensors", repo_id="alice/dst")
    assert str(info.value) == ("target alice/dst: stage w: the Hub refused a Xet write token (HTTP 403 from "
                               "xet-write-token); check that HF_TOKEN has write access to the repo, then re-run")


# ----------------------------------------------------------------------------------------------------------------
# hubpad with the real hf_xet: mirror, resume, card refresh
# ----------------------------------------------------------------------------------------------------------------


def test_xet_mirror_publishes_once_dedups_and_verifies(hub, upstream, tmp_path):
    hub.reset_log()
    before = hub.xet_bytes_stored()
    summary = _mirror()
    assert len(_hubpad_commits(hub)) == 1 and "hubpad-staging" not in hub.branches(TARGET)
    local = tmp_path / "local"
    assert cli("mirror", upstream, "--tp", "3", "--to", local, "--shard-size", SHARD).exit_code == 0
    assert _shards(hub) == {p.name: _sha(p.read_bytes()) for p in local.glob("*.safetensors")}
    # Every shard went through Xet: no LFS PUT, one write token per upload commit, shards are Xet-backed.
    assert hub.bytes_uploaded(TARGET) == 0
    _token_route_calls(hub)
    for name, sha in _shards(hub).items():
        assert hub.xet_hash(TARGET, name) not in (None, sha)
    # Xet deduplicated the copied and row-padded tensors against the upstream already in storage.
    shard_bytes = sum(s["size"] for s in json.loads(hub.file_bytes(TARGET, "hubpad.json"))["shards"])
    assert 0 < hub.xet_bytes_stored() - before < shard_bytes
    # Untouched upstream files: copied (regular files inline, nothing streamed).
    for f in ("LICENSE", "chat_template.jinja", "generation_config.json", "tokenizer_config.json"):
        assert hub.file_bytes(TARGET, f) == (upstream / f).read_bytes()
    assert summary["commit"] == hub.head(TARGET)
    r = cli("verify", UP, TARGET)
    assert r.exit_code == 0, r.output
    _no_token_anywhere(hub, r.output)


def test_xet_kill_9_after_first_staging_commit_then_resume(hub, upstream):
    # Each staging commit is held 1 s: time to kill the run between two of them.
    hub.faults.delay(r"/commit/hubpad-staging$", 1.0, method="POST", times=None)
    release_xet_session()  # the subprocess must own hf_xet's local store (one process at a time)
    staged = _kill_9_after_first_staging_commit(hub)
    assert hub.find_requests("GET", kind="xet-write-token") and not hub.find_requests(kind="lfs-upload")
    hub.faults.clear()
    hub.reset_log()
    summary = _mirror()
    assert set(staged) <= set(summary["shards_reused"])
    assert not set(staged) & set(summary["shards_built"]) and summary["shards_built"]
    assert len(_hubpad_commits(hub)) == 1 and hub.bytes_uploaded(TARGET) == 0
    _token_route_calls(hub)
    assert cli("verify", UP, TARGET).exit_code == 0


def test_xet_card_refresh_commits_only_card_files(hub, upstream, tmp_path):
    _mirror()
    head = hub.head(TARGET)
    templates = tmp_path / "templates"
    templates.mkdir()
    for name, extra in (("README.md.j2", "\nRefreshed by a custom template.\n"),
                        ("vocab_patch.pth.j2", "\n# refreshed\n")):
        (templates / name).write_text((builtin_templates_dir() / name).read_text() + extra)
    files_before = hub.files(TARGET)
    hub.reset_log()
    r = cli("card", TARGET, "--templates", templates)
    assert r.exit_code == 0, r.output
    assert hub.commits(TARGET)[1].id == head  # exactly one new commit
    after = hub.files(TARGET)
    changed = {p for p in after if after[p] != files_before.get(p)}
    assert "README.md" in changed and not any(p.endswith(".safetensors") for p in changed)
    pth = [p for p in changed if p.endswith(".pth")]
    assert pth and hub.xet_hash(TARGET, pth[0])  # the .pth is an LFS file: it went through Xet
    _token_route_calls(hub)
    assert "Refreshed by a custom template." in hub.file_bytes(TARGET, "README.md").decode()
    _no_token_anywhere(hub, r.output)


# ----------------------------------------------------------------------------------------------------------------
# failure modes: one line, or a fallback with one log line; never half-published
# ----------------------------------------------------------------------------------------------------------------

TOKENIZER = os.urandom(300_000)  # an untouched LFS file of the upstream (*.model is LFS by .gitattributes)


def _add_tokenizer(hub, *, xet: bool) -> None:
    hub.seed(UP, {"tokenizer.model": TOKENIZER}, message="add tokenizer", xet=xet)
    hub.reset_log()


def test_classic_lfs_upstream_file_is_streamed_and_uploaded_instead(hub, upstream):
    _add_tokenizer(hub, xet=False)
    r = _mirror(check=False)
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.output.splitlines() if "tokenizer.model" in ln]
    assert lines == [f"tokenizer.model: the Hub cannot copy it server-side from {UP} (it is stored as classic LFS, "
                     f"not in Xet: no xetHash); streamed it from the upstream (sha256 checked) and uploaded it "
                     f"instead"]
    assert hub.file_bytes(TARGET, "tokenizer.model") == TOKENIZER
    assert hub.xet_hash(TARGET, "tokenizer.model")  # re-uploaded through Xet
    assert len(_hubpad_commits(hub)) == 1 and "hubpad-staging" not in hub.branches(TARGET)
    assert not hub.find_requests(kind="lfs-duplicate")  # known up front: no copy was even attempted
    assert hub.bytes_served(UP, "tokenizer.model") == len(TOKENIZER)
    manifest = json.loads(hub.file_bytes(TARGET, "hubpad.json"))
    assert manifest["upstream"]["files"]["tokenizer.model"]["sha256"] == _sha(TOKENIZER)
    _no_token_anywhere(hub, r.output)


def test_copy_refused_per_file_falls_back_to_streaming(hub, upstream):
    _add_tokenizer(hub, xet=True)
    hub.set_storage_region(UP, "eu")  # the Hub answers {"failed": [...]}: FileDuplicationError
    r = _mirror(check=False)
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.output.splitlines() if "tokenizer.model" in ln]
    assert len(lines) == 1 and "cannot duplicate across storage regions (eu -> us)" in lines[0]
    assert "streamed it from the upstream (sha256 checked) and uploaded it instead" in lines[0]
    assert hub.file_bytes(TARGET, "tokenizer.model") == TOKENIZER
    assert len(hub.find_requests("POST", kind="lfs-duplicate")) >= 1
    assert len(_hubpad_commits(hub)) == 1


def test_streamed_upstream_file_is_staged_once_across_a_lost_publish(hub, upstream):
    _add_tokenizer(hub, xet=False)
    # Another writer lands on main first: the publish commit loses, nothing is published.
    hub.faults.add("stale_parent", rf"/api/models/{TARGET}/commit/main$", method="POST", origin="api",
                   message="concurrent commit", files={})
    r = _mirror(check=False)
    assert r.exit_code == 1 and "changed while this run was publishing" in r.output
    assert hub.files(TARGET, "hubpad-staging")["tokenizer.model"] == _sha(TOKENIZER)
    served = hub.bytes_served(UP, "tokenizer.model")
    summary = _mirror()
    assert summary["shards_built"] == [] and hub.bytes_served(UP, "tokenizer.model") == served  # not streamed again
    assert hub.file_bytes(TARGET, "tokenizer.model") == TOKENIZER and len(_hubpad_commits(hub)) == 1


def test_fallback_that_reads_bad_bytes_fails_in_one_line_and_publishes_nothing(hub, upstream):
    _add_tokenizer(hub, xet=False)
    hub.faults.corrupt(r"tokenizer\.model", origin="cdn", times=None)
    r = _mirror(check=False)
    assert r.exit_code == 1
    err = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "tokenizer.model: sha256 mismatch" in err[0] and "Traceback" not in r.output
    assert len(_hubpad_commits(hub)) == 0 and not any(p.endswith(".safetensors") for p in hub.files(TARGET))
    assert "tokenizer.model" not in hub.files(TARGET, "hubpad-staging")


def test_refused_xet_token_is_one_line_and_publishes_nothing(hub, upstream):
    hub.faults.status(403, r"/xet-write-token/", times=None)
    r = _mirror(check=False)
    assert r.exit_code == 1
    err = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert err == [f"error: target {TARGET}: stage model-00001-of-00005.safetensors: the Hub refused a Xet write "
                   f"token (HTTP 403 from xet-write-token); check that HF_TOKEN has write access to the repo, then "
                   f"re-run"], r.output
    assert len(_hubpad_commits(hub)) == 0 and not any(p.endswith(".safetensors") for p in hub.files(TARGET))
    _no_token_anywhere(hub, r.output)


class _RaisingXetSession:
    """Stands in for hf_xet's session (see the module docstring): asked for an upload commit with the write-token
    URL of the branch being committed to, as huggingface_hub asks the real one, it raises what the CAS raises."""

    def __init__(self, exc: BaseException, calls: list):
        self.exc, self.calls = exc, calls

    def new_upload_commit(self, *, token_refresh_url, token_refresh_headers, custom_headers, progress_callback):
        assert "/xet-write-token/" in token_refresh_url
        assert "authorization" not in {k.lower() for k in custom_headers}  # the Hub token never goes to storage
        self.calls.append(token_refresh_url)
        raise self.exc


@pytest.mark.parametrize(("error", "expected"), [
    ("XetAuthenticationError", "Xet storage refused the access token (Authentication error: token expired); check "
                               "that HF_TOKEN has write access to the repo, then re-run"),
    ("XetObjectNotFoundError", "Xet storage has no data for a file this run needs (Object not found: 1f2e3d); "
                               "re-run to upload it again"),
])
def test_xet_auth_and_not_found_errors_are_one_line(hub, upstream, monkeypatch, error, expected):
    import hf_xet
    from huggingface_hub.utils import _xet

    message = {"XetAuthenticationError": "Authentication error: token expired",
               "XetObjectNotFoundError": "Object not found: 1f2e3d"}[error]
    calls: list = []
    monkeypatch.setattr(_xet, "get_xet_session",
                        lambda: _RaisingXetSession(getattr(hf_xet, error)(message), calls))
    r = _mirror(check=False)
    assert r.exit_code == 1
    err = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert err == [f"error: target {TARGET}: stage model-00001-of-00005.safetensors: {expected}"], r.output
    assert calls and calls[0].endswith(f"/api/models/{TARGET}/xet-write-token/hubpad-staging")
    assert len(_hubpad_commits(hub)) == 0


# ----------------------------------------------------------------------------------------------------------------
# the Action keeps hf_xet's cache between runs
# ----------------------------------------------------------------------------------------------------------------


def _action_steps() -> list[dict]:
    import yaml

    from tests.helpers import ROOT

    return yaml.safe_load((ROOT / "action.yml").read_text())["runs"]["steps"]


def _bash_step(script: str, tmp_path: Path, env: dict) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "github_output"
    out.write_text("")
    full = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "RUNNER_TEMP": str(tmp_path / "runner temp"),
            "GITHUB_OUTPUT": str(out), "GITHUB_RUN_ID": "123", "GITHUB_RUN_ATTEMPT": "2", **env}
    r = subprocess.run(["bash", "-c", script], env=full, capture_output=True, text=True, timeout=60)
    return r, dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)


def test_action_restores_and_saves_the_xet_cache_for_uploading_modes(tmp_path):
    steps = _action_steps()
    index = {s.get("id") or s.get("uses", "").split("@")[0]: i for i, s in enumerate(steps)}
    prep, restore, save = (steps[index[k]] for k in ("xet-cache", "actions/cache/restore", "actions/cache/save"))
    assert index["xet-cache"] < index["actions/cache/restore"] < index["hubpad"] < index["actions/cache/save"]
    for step in (restore, save):  # pinned, driven only by the key step's outputs
        assert re.fullmatch(r"actions/cache/(restore|save)@[0-9a-f]{40}", step["uses"])
        assert "inputs." not in json.dumps(step)
    assert restore["uses"].split("@")[1] == save["uses"].split("@")[1]
    assert restore["with"]["path"] == save["with"]["path"] and restore["with"]["key"] == save["with"]["key"]
    assert "!${{ steps.xet-cache.outputs.path }}/logs" in save["with"]["path"]  # hf_xet's logs are not cached
    assert save["if"].startswith("always()")  # a failed run's uploads still help its re-run
    assert restore["with"]["restore-keys"].splitlines() == ["${{ steps.xet-cache.outputs.part-prefix }}",
                                                            "${{ steps.xet-cache.outputs.prefix }}"]

    r, out = _bash_step(prep["run"], tmp_path, {"HUBPAD_MODE": "mirror", "HUBPAD_TARGET": "alice/Hy3 TP3",
                                               "HUBPAD_UPSTREAM": "RedHatAI/Hy3", "HUBPAD_PART": "2/5",
                                               "HUBPAD_XET_CACHE": "true"})
    assert r.returncode == 0, r.stderr
    assert out == {"enabled": "true", "path": f"{tmp_path}/runner temp/hubpad-xet-cache",
                   "prefix": "hubpad-xet-v1-alice-Hy3-TP3-", "part-prefix": "hubpad-xet-v1-alice-Hy3-TP3-2-5-",
                   "key": "hubpad-xet-v1-alice-Hy3-TP3-2-5-123-2"}
    _, out = _bash_step(prep["run"], tmp_path, {"HUBPAD_MODE": "publish", "HUBPAD_UPSTREAM": "RedHatAI/Hy3",
                                               "HF_XET_CACHE": "/big/xet"})
    assert out["enabled"] == "true" and out["path"] == "/big/xet" and out["key"] == "hubpad-xet-v1-RedHatAI-Hy3-whole-123-2"
    for env in ({"HUBPAD_MODE": "check"}, {"HUBPAD_MODE": "card"}, {"HUBPAD_MODE": "plan"},
                {"HUBPAD_MODE": "mirror", "HUBPAD_XET_CACHE": "false"}):
        assert _bash_step(prep["run"], tmp_path, env)[1]["enabled"] == "false"


@pytest.mark.parametrize(("flag", "expected"), [("true", "{runner}/hubpad-xet-cache"), ("false", "")])
def test_action_runs_hubpad_with_the_cached_xet_dir(tmp_path, flag, expected):
    from tests.test_action import BLANK_INPUTS

    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "hubpad"
    fake.write_text('#!/usr/bin/env bash\nprintf %s "${HF_XET_CACHE:-}" >"$RECORD"\n')
    fake.chmod(0o755)
    hubpad_step = next(s for s in _action_steps() if s.get("id") == "hubpad")
    env = {**BLANK_INPUTS, "HUBPAD_UPSTREAM": "a/b", "HUBPAD_XET_CACHE": flag, "RECORD": str(tmp_path / "rec"),
           "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    r, _ = _bash_step(hubpad_step["run"], tmp_path, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "rec").read_text() == expected.format(runner=f"{tmp_path}/runner temp")


# ----------------------------------------------------------------------------------------------------------------
# the opt-in live check script, rehearsed against the emulator (the real run needs a token and the Hub)
# ----------------------------------------------------------------------------------------------------------------


def _tiny_qwen3(path: Path) -> Path:
    """Shaped like trl-internal-testing/tiny-Qwen3ForCausalLM (hidden 8, 4 heads of 128, 2 kv heads, 32-wide MLP,
    2 layers, BF16), with a smaller vocab and a tokenizer.json big enough to be an LFS file."""
    from hubpad.testing import write_checkpoint

    vocab = 1000
    cfg = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 8, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 32, "num_hidden_layers": 2,
           "vocab_size": vocab, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    tensors = [("model.embed_tokens.weight", "BF16", (vocab, 8))]
    for i in range(2):
        p = f"model.layers.{i}"
        tensors += [(f"{p}.self_attn.q_proj.weight", "BF16", (512, 8)),
                    (f"{p}.self_attn.k_proj.weight", "BF16", (256, 8)),
                    (f"{p}.self_attn.v_proj.weight", "BF16", (256, 8)),
                    (f"{p}.self_attn.o_proj.weight", "BF16", (8, 512)),
                    (f"{p}.self_attn.q_norm.weight", "BF16", (128,)), (f"{p}.self_attn.k_norm.weight", "BF16", (128,)),
                    (f"{p}.mlp.gate_proj.weight", "BF16", (32, 8)), (f"{p}.mlp.up_proj.weight", "BF16", (32, 8)),
                    (f"{p}.mlp.down_proj.weight", "BF16", (8, 32)), (f"{p}.input_layernorm.weight", "BF16", (8,)),
                    (f"{p}.post_attention_layernorm.weight", "BF16", (8,))]
    tensors += [("model.norm.weight", "BF16", (8,)), ("lm_head.weight", "BF16", (vocab, 8))]
    tokenizer = json.dumps({"model": {"vocab": {f"t{i}": i for i in range(vocab)}}, "pad": "x" * 200_000})
    return write_checkpoint(path, cfg, tensors, n_shards=1,
                            extra_files={"README.md": "---\nlicense: apache-2.0\n---\n", "tokenizer.json": tokenizer})


def test_live_check_script_passes_against_the_emulator(hub, tmp_path):
    import sys

    from tests.helpers import ROOT

    up = "trl-internal-testing/tiny-Qwen3ForCausalLM"
    src = _tiny_qwen3(tmp_path / "up")
    hub.seed(up, {p.relative_to(src).as_posix(): p for p in src.rglob("*") if p.is_file()},
             lfs={"model.safetensors", "tokenizer.json"})
    release_xet_session()  # the script's hubpad processes must own hf_xet's local store
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_XET"}
    env.update(PYTHON=sys.executable, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               TMPDIR=str(tmp_path))
    hub.reset_log()
    r = subprocess.run(["bash", str(ROOT / "scripts" / "live_check.sh")], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"live check passed: {up} -> alice/hubpad-live-check-" in r.stdout
    assert "1 shard(s) Xet-backed; 1 upstream file(s) copied (1 LFS/Xet: ['tokenizer.json'])" in r.stdout
    assert '"up_to_date": true' in r.stdout and "ok: 25 tensors checked" in r.stdout
    assert len(hub.find_requests("POST", kind="lfs-duplicate")) == 1  # tokenizer.json: copied server-side
    _token_route_calls(hub)
    created = [e.repo_id for e in hub.find_requests("POST", kind="create-repo")]
    assert len(created) == 1 and not hub.repo_exists(created[0])  # the scratch repo is gone again
    assert hub.token not in r.stdout + r.stderr
