"""A local target is updated incrementally too: when the upstream changes, only the output shards built from the
changed bytes are rebuilt; the others are carried over (hard links) after their bytes are checked against
hubpad.json, and the result is byte-identical to a fresh full mirror."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from hubpad.testing import build_tiny_hy3
from tests.helpers import cli

SHARD = "2MB"
F2 = "model-00002-of-00002.safetensors"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return build_tiny_hy3(tmp_path_factory.mktemp("up") / "up")


def _mirror(src, dst, *extra):
    r = cli("mirror", src, "--tp", "3", "--to", dst, "--shard-size", SHARD, "--json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout[r.stdout.index("{"):]), r.output


def _shards(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.glob("*.safetensors"))}


def _change_last_tensor_bytes(src):
    f = src / F2
    data = bytearray(f.read_bytes())
    data[-10] ^= 0xFF  # tensor bytes near the end of the last file, not its header
    f.write_bytes(bytes(data))


def _affected(manifest: dict, file: str) -> set[str]:
    return {s["name"] for s in manifest["shards"] if any(x["file"] == file for x in s["sources"])}


def test_local_target_rebuilds_only_the_affected_shards(pristine, tmp_path):
    src, dst = tmp_path / "up", tmp_path / "dst"
    shutil.copytree(pristine, src)
    first, _ = _mirror(src, dst)
    manifest = json.loads((dst / "hubpad.json").read_text())
    assert len(manifest["shards"]) >= 4
    before = _shards(dst)

    _change_last_tensor_bytes(src)
    affected = _affected(manifest, F2)
    assert 0 < len(affected) < len(manifest["shards"])
    summary, _ = _mirror(src, dst)
    assert set(summary["shards_built"]) == affected
    assert set(summary["shards_reused"]) == set(before) - affected
    sizes = {s["name"]: s["size"] for s in manifest["shards"]}
    assert summary["peak_disk"] <= sum(sizes[n] for n in affected)  # kept shards are links, not new space

    fresh = tmp_path / "fresh"
    _mirror(src, fresh)
    assert _shards(dst) == _shards(fresh)
    assert {n: h for n, h in _shards(dst).items() if n not in affected} == {
        n: h for n, h in before.items() if n not in affected}
    assert cli("verify", src, dst).exit_code == 0


def test_a_kept_shard_that_changed_on_disk_is_built_again(pristine, tmp_path):
    src, dst = tmp_path / "up", tmp_path / "dst"
    shutil.copytree(pristine, src)
    _mirror(src, dst)
    manifest = json.loads((dst / "hubpad.json").read_text())
    _change_last_tensor_bytes(src)
    unaffected = sorted({s["name"] for s in manifest["shards"]} - _affected(manifest, F2))
    victim = dst / unaffected[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01  # bit rot in a shard the update would otherwise keep
    victim.write_bytes(bytes(data))

    summary, output = _mirror(src, dst)
    assert victim.name in summary["shards_built"]
    assert f"{victim.name} does not match hubpad.json; building it again" in output
    fresh = tmp_path / "fresh"
    _mirror(src, fresh)
    assert _shards(dst) == _shards(fresh)


def test_nothing_changed_is_up_to_date(pristine, tmp_path):
    src, dst = tmp_path / "up", tmp_path / "dst"
    shutil.copytree(pristine, src)
    _mirror(src, dst)
    summary, _ = _mirror(src, dst)
    assert summary["up_to_date"] and not summary["shards_built"]


def test_verify_checks_the_files_carried_unchanged(pristine, tmp_path):
    src, dst = tmp_path / "up", tmp_path / "dst"
    shutil.copytree(pristine, src)
    _mirror(src, dst)
    assert cli("verify", src, dst).exit_code == 0
    (dst / "chat_template.jinja").write_text("{{ tampered }}")
    r = cli("verify", src, dst)
    assert r.exit_code == 1 and "chat_template.jinja differs from upstream's" in r.output, r.output
    (dst / "chat_template.jinja").unlink()
    r = cli("verify", src, dst)
    assert r.exit_code == 1 and "chat_template.jinja from upstream is missing" in r.output, r.output


def test_files_hubpad_did_not_create_survive_a_local_update(pristine, tmp_path):
    src, dst = tmp_path / "up", tmp_path / "dst"
    shutil.copytree(pristine, src)
    _mirror(src, dst)
    (dst / "NOTES.md").write_text("benchmarked on 3 Sparks")
    (dst / "eval").mkdir()
    (dst / "eval" / "results.json").write_text("{}")
    _change_last_tensor_bytes(src)
    _mirror(src, dst)
    assert (dst / "NOTES.md").read_text() == "benchmarked on 3 Sparks"
    assert (dst / "eval" / "results.json").read_text() == "{}"
    assert cli("verify", src, dst).exit_code == 0


def test_force_into_a_folder_hubpad_did_not_make_keeps_its_other_files(pristine, tmp_path):
    src, dst = tmp_path / "up", tmp_path / "dst"
    shutil.copytree(pristine, src)
    dst.mkdir()
    (dst / "keep.txt").write_text("mine")
    (dst / "config.json").write_text("{}")
    r = cli("mirror", src, "--tp", "3", "--to", dst, "--shard-size", SHARD)
    assert r.exit_code == 1 and "was not made by hubpad" in r.output
    _mirror(src, dst, "--force")
    assert (dst / "keep.txt").read_text() == "mine"  # kept: hubpad never deletes files it did not create
    assert json.loads((dst / "config.json").read_text())["num_attention_heads"] > 0  # replaced by the derivative's
    assert cli("verify", src, dst).exit_code == 0


@pytest.mark.parametrize("where", ["inside", "contains"])
def test_a_destination_nested_with_the_source_is_refused(pristine, tmp_path, where):
    if where == "inside":
        src = tmp_path / "up"
        shutil.copytree(pristine, src)
        dst = src / "derivative"
    else:
        src = tmp_path / "work" / "up"
        shutil.copytree(pristine, src)
        dst = tmp_path / "work"
    r = cli("mirror", src, "--tp", "3", "--to", dst, "--shard-size", SHARD, "--force")
    assert r.exit_code == 1 and f"destination {where} the source" in r.output.replace("is inside", "inside"), r.output
    assert (src / "config.json").is_file() and not (tmp_path / "up" / "derivative").exists()


def test_a_second_run_into_the_same_local_target_waits_for_none(pristine, tmp_path):
    """Two runs publishing into one local DST at once: the second fails at once, in one line, and the first's
    result is untouched (their final renames must not interleave)."""
    import fcntl

    src, dst = tmp_path / "up", tmp_path / "dst"
    shutil.copytree(pristine, src)
    _mirror(src, dst)
    before = _shards(dst)
    _change_last_tensor_bytes(src)
    with open(tmp_path / ".dst.hubpad-lock", "a+b") as held:  # what a run in progress holds
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = cli("mirror", src, "--tp", "3", "--to", dst, "--shard-size", SHARD)
    assert r.exit_code == 1, r.output
    assert r.output.strip().splitlines()[-1] == f"error: {dst}: another hubpad run is publishing into it; try again " \
                                                "when it is done"
    assert _shards(dst) == before
    _mirror(src, dst)  # released: the next run goes ahead
