"""`hubpad card` refreshes on the Hub, and the fan-out (`mirror --part i/K` ×K, then `publish`)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

from hubpad.render.paths import builtin_templates_dir
from tests.helpers import ROOT, cli
from tests.test_hub_mirror import SHARD, TARGET, UP, _hubpad_commits, _mirror, _shards, upstream  # noqa: F401


def test_card_refresh_commits_only_card_files_and_nothing_when_unchanged(hub, upstream, tmp_path):
    _mirror()
    head = hub.head(TARGET)
    hub.reset_log()
    r = cli("card", TARGET)
    assert r.exit_code == 0, r.output
    assert "up to date" in r.output
    assert hub.head(TARGET) == head

    # The owner writes their own section on the Hub; a template change then refreshes the card.
    readme = hub.file_bytes(TARGET, "README.md").decode()
    start, end = "<!-- hubpad:owner-section:start -->", "<!-- hubpad:owner-section:end -->"
    before, _, rest = readme.partition(start)
    _, _, after = rest.partition(end)
    owned = before + start + "\nTested on three DGX Sparks by alice.\n" + end + after
    hub.seed(TARGET, {"README.md": owned.encode()}, message="owner notes")
    templates = tmp_path / "templates"
    templates.mkdir()
    src = (builtin_templates_dir() / "README.md.j2").read_text()
    (templates / "README.md.j2").write_text(src + "\nRefreshed by a custom template.\n")
    files_before = hub.files(TARGET)
    head = hub.head(TARGET)
    hub.reset_log()
    r = cli("card", TARGET, "--templates", templates)
    assert r.exit_code == 0, r.output
    commits = hub.commits(TARGET)
    assert commits[1].id == head  # exactly one new commit
    files_after = hub.files(TARGET)
    changed = {p for p in files_after if files_after[p] != files_before.get(p)}
    assert changed == {"README.md"}
    text = hub.file_bytes(TARGET, "README.md").decode()
    assert "Tested on three DGX Sparks by alice." in text and "Refreshed by a custom template." in text
    # No shard crossed the wire either way.
    assert hub.bytes_uploaded(TARGET) == 0
    assert not any(e.file and e.file.endswith(".safetensors") for e in hub.requests if e.kind in ("resolve", "cdn"))


def _part(i, k):
    return subprocess.Popen([sys.executable, "-m", "hubpad.app.cli", "mirror", UP, "--tp", "3", "--to", TARGET,
                             "--shard-size", SHARD, "--part", f"{i}/{k}"], cwd=ROOT, env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_fanout_three_concurrent_parts_then_publish_equals_single_run(hub, upstream, tmp_path):
    procs = [_part(i, 3) for i in (1, 2, 3)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert len(_hubpad_commits(hub)) == 0  # parts stage only
    r = cli("publish", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD, "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert not summary["shards_built"]
    assert len(_hubpad_commits(hub)) == 1
    local = tmp_path / "local"
    assert cli("mirror", upstream, "--tp", "3", "--to", local, "--shard-size", SHARD).exit_code == 0
    assert _shards(hub) == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in local.glob("*.safetensors")}
    assert "hubpad-staging" not in hub.branches(TARGET)


def test_publish_with_a_missing_part_fails_clearly(hub, upstream):
    for i in (1, 3):
        p = _part(i, 3)
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    r = cli("publish", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD)
    assert r.exit_code == 1
    assert "is not staged" in r.output and "--part" in r.output
    assert len(_hubpad_commits(hub)) == 0


def test_plan_parts_are_balanced_and_cover_every_shard(hub, upstream):
    r = cli("plan", UP, "--tp", "3", "--shard-size", SHARD, "--parts", "3", "--json")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    names = [s["name"] for s in plan["shards"]]
    assert [n for p in plan["parts"] for n in p["shards"]] == names
    assert len(plan["parts"]) == 3


