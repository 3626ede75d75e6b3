"""Weight files kept in git rather than LFS (a repo whose .gitattributes does not route *.safetensors to LFS) have no
sha256 on the Hub, only their git blob id: hubpad checks that instead, so a corrupted download is still caught and
nothing built from it is published."""

from __future__ import annotations

import hashlib

from hubpad.testing import build_tiny_hy3
from tests.helpers import cli
from tests.test_hub_mirror import SHARD, TARGET, UP, _hubpad_commits, _shards
from tests.test_hub_mirror import upstream  # noqa: F401  (fixture)


def _seed_in_git(hub, tmp_path):
    src = build_tiny_hy3(tmp_path / "up")
    hub.seed(UP, {p.relative_to(src).as_posix(): p for p in src.rglob("*") if p.is_file()}, lfs=False)
    assert not any(hub.is_lfs(UP, p) for p in hub.files(UP))
    return src


def test_git_stored_weights_mirror_and_match_local_mode(hub, tmp_path):
    src = _seed_in_git(hub, tmp_path)
    r = cli("mirror", UP, "--tp", "3", "--shard-size", SHARD)
    assert r.exit_code == 0, r.output
    local = tmp_path / "local"
    assert cli("mirror", src, "--tp", "3", "--to", local, "--shard-size", SHARD).exit_code == 0
    assert _shards(hub) == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in local.glob("*.safetensors")}


def test_corrupted_git_stored_weights_fail_and_publish_nothing(hub, tmp_path):
    _seed_in_git(hub, tmp_path)
    hub.faults.corrupt(r"model-00002-of-00002", at=200_000, times=None)  # past the header window
    r = cli("mirror", UP, "--tp", "3", "--shard-size", SHARD)
    assert r.exit_code == 1, r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "git blob id mismatch" in errors[0], r.output
    assert not hub.repo_exists(TARGET) or not _hubpad_commits(hub)


def test_corrupted_git_stored_side_file_copied_to_a_local_target_fails(hub, tmp_path):
    """A Hub upstream mirrored into a local folder: the untouched files are streamed and checked too."""
    _seed_in_git(hub, tmp_path)
    hub.faults.corrupt(r"tokenizer_config\.json", times=None)
    dst = tmp_path / "dst"
    r = cli("mirror", UP, "--tp", "3", "--to", dst, "--shard-size", SHARD)
    assert r.exit_code == 1, r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "tokenizer_config.json: git blob id mismatch" in errors[0], r.output
    assert not dst.exists()


def test_corrupted_config_json_read_for_planning_fails(hub, upstream):
    """config.json (kept in git on the Hub, as small files are) is checked against its blob id before it is used."""
    hub.faults.corrupt(r"config\.json", times=None)
    r = cli("plan", UP, "--tp", "3")
    assert r.exit_code == 1, r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "config.json: git blob id mismatch" in errors[0], r.output
