"""Issue 13 bar 5: an incremental Hub run reads only the blocks of unchanged upstream files its rebuilt shards
need, each checked against the block sha256s `hubpad.json` recorded when hubpad last read the file in full."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.helpers import cli
from tests.test_hub_mirror import SHARD, TARGET, UP, _hubpad_commits, _mirror, _seed_dir, _shards  # noqa: F401
from tests.test_hub_mirror import upstream  # noqa: F401  (fixture)

BLOCK = 1024 * 1024  # the tiny upstream files are ~8.7 MB: small blocks so that a partial read is visible
HEADER_WINDOW = 100_000  # planning reads at most this much of a file to find its header
F1, F2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setenv("HUBPAD_BLOCK_SIZE", str(BLOCK))


def _blocks_of(data: bytes) -> list[str]:
    return [hashlib.sha256(data[i:i + BLOCK]).hexdigest() for i in range(0, len(data), BLOCK)]


def _manifest(hub) -> dict:
    return json.loads(hub.file_bytes(TARGET, "hubpad.json"))


def _change_second_file(hub, upstream) -> None:
    """Change tensor bytes (not the header) near the end of the second upstream file."""
    f2 = upstream / F2
    data = bytearray(f2.read_bytes())
    data[-10] ^= 0xFF
    f2.write_bytes(bytes(data))
    hub.seed(UP, {F2: f2}, message="fix lm_head")


def _needed_blocks(manifest: dict, file: str, changed: str) -> tuple[set[str], set[int]]:
    """The output shards built from `changed`, and the blocks of `file` they read."""
    affected = {s["name"] for s in manifest["shards"] if any(x["file"] == changed for x in s["sources"])}
    blocks = {k for s in manifest["shards"] if s["name"] in affected for x in s["sources"] if x["file"] == file
              for a, b in x["ranges"] for k in range(a // BLOCK, (b - 1) // BLOCK + 1)}
    return affected, blocks


def _check_records(manifest: dict, upstream) -> None:
    for f in (F1, F2):
        rec = manifest["upstream"]["files"][f]
        assert rec["blocks"] == {"size": BLOCK, "sha256": _blocks_of((upstream / f).read_bytes())}, f


def test_first_run_records_block_hashes_of_every_weight_file(hub, upstream):
    _mirror()
    _check_records(_manifest(hub), upstream)


def test_incremental_run_reads_only_needed_blocks_and_matches_a_full_rebuild(hub, upstream, tmp_path):
    _mirror()
    before = _manifest(hub)
    _change_second_file(hub, upstream)
    affected, blocks = _needed_blocks(before, F1, F2)
    assert blocks, "the rebuilt shards read nothing of the unchanged file: the test would prove nothing"
    size1 = (upstream / F1).stat().st_size
    needed = sum(min(BLOCK, size1 - k * BLOCK) for k in blocks)
    assert needed < size1
    hub.reset_log()
    summary = _mirror()
    assert set(summary["shards_built"]) == affected
    served = hub.bytes_served(UP, F1)
    assert needed <= served <= needed + HEADER_WINDOW, (served, needed, size1)
    assert hub.bytes_served(UP, F2) >= (upstream / F2).stat().st_size  # changed: read (and checked) in full
    # Byte-identical to a full local rebuild of the new upstream.
    local = tmp_path / "local"
    assert cli("mirror", upstream, "--tp", "3", "--to", local, "--shard-size", SHARD).exit_code == 0
    assert {p: sha for p, sha in _shards(hub).items()} == {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in local.glob("*.safetensors")}
    _check_records(_manifest(hub), upstream)  # the partially read file carries its record over


def test_corrupted_byte_in_a_needed_block_fails_and_publishes_nothing(hub, upstream):
    _mirror()
    before, head = _manifest(hub), hub.head(TARGET)
    _change_second_file(hub, upstream)
    _, blocks = _needed_blocks(before, F1, F2)
    assert blocks
    # Past the header window: only the ranged block reads are that long; the byte lies in the first block read.
    hub.faults.corrupt(r"model-00001-of-00002", origin="cdn", at=HEADER_WINDOW + 1000, times=None)
    r = _mirror(check=False)
    assert r.exit_code == 1, r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "does not match the sha256 recorded in hubpad.json" in lines[0], r.output
    assert "Traceback" not in r.output
    assert hub.head(TARGET) == head and len(_hubpad_commits(hub)) == 1
    assert _manifest(hub) == before


def test_manifest_without_block_records_falls_back_to_full_reads(hub, upstream, tmp_path):
    _mirror()
    before = _manifest(hub)
    stripped = json.loads(json.dumps(before))
    for rec in stripped["upstream"]["files"].values():
        rec.pop("blocks", None)
    hub.seed(TARGET, {"hubpad.json": json.dumps(stripped, indent=2).encode()}, message="older hubpad.json")
    _change_second_file(hub, upstream)
    _, blocks = _needed_blocks(before, F1, F2)
    assert blocks
    hub.reset_log()
    _mirror()
    assert hub.bytes_served(UP, F1) >= (upstream / F1).stat().st_size  # no record: read and checked in full
    _check_records(_manifest(hub), upstream)  # both files were read in full: records again


def test_fanout_publish_records_the_block_hashes_its_parts_read(hub, upstream):
    """The publish step reads no upstream file: the parts that did leave the block hashes in their staging
    records, so the next incremental run after a fan-out reads only the blocks it needs too."""
    for i in (1, 2):
        r = cli("mirror", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD, "--part", f"{i}/2")
        assert r.exit_code == 0, r.output
    r = cli("publish", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD)
    assert r.exit_code == 0, r.output
    before = _manifest(hub)
    _check_records(before, upstream)
    _change_second_file(hub, upstream)
    affected, blocks = _needed_blocks(before, F1, F2)
    assert blocks
    hub.reset_log()
    assert set(_mirror()["shards_built"]) == affected
    size1 = (upstream / F1).stat().st_size
    needed = sum(min(BLOCK, size1 - k * BLOCK) for k in blocks)
    assert needed <= hub.bytes_served(UP, F1) <= needed + HEADER_WINDOW


def test_fanout_publish_survives_malformed_staged_file_records(hub, upstream):
    """A staging record whose `upstream_files` someone mangled costs the block records, never the publish."""
    for i in (1, 2):
        assert cli("mirror", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD, "--part", f"{i}/2").exit_code == 0
    staged = sorted(p for p in hub.files(TARGET, "hubpad-staging") if p.startswith(".hubpad-staging/"))
    assert len(staged) >= 3
    mangled = {}
    for path, bad in zip(staged, ("garbage", {F1: []}, {F2: {"sha256": ["x"], "blocks": {}}})):
        record = json.loads(hub.file_bytes(TARGET, path, revision="hubpad-staging"))
        record["upstream_files"] = bad
        mangled[path] = json.dumps(record).encode()
    # Records that are not records at all are not staged shards (hubpad rebuilds nothing from them).
    mangled[".hubpad-staging/list.json"] = b"[1, 2]"
    mangled[".hubpad-staging/shard-not-an-object.json"] = json.dumps(
        {**json.loads(mangled[staged[0]]), "shard": "x"}).encode()
    hub.seed(TARGET, mangled, branch="hubpad-staging", message="mangled records")
    r = cli("publish", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD)
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("record", [
    None, [], "x", {"sha256": "s"}, {"sha256": "s", "size": 10, "blocks": []},
    {"sha256": "s", "size": "10", "blocks": {"size": 4, "sha256": ["a", "b", "c"]}},
    {"sha256": "s", "size": 10, "blocks": {"size": 0, "sha256": ["a", "b", "c"]}},
    {"sha256": "s", "size": 10, "blocks": {"size": 4, "sha256": ["a", "b"]}},
    {"sha256": "s", "size": 10, "blocks": {"size": 4, "sha256": ["a", "b", 3]}},
    {"sha256": "other", "size": 10, "blocks": {"size": 4, "sha256": ["a", "b", "c"]}},
])
def test_malformed_block_records_are_no_record(record):
    """hubpad.json and staging records can be edited by anyone who can write the target: never a crash."""
    from hubpad.util.block_hashes import usable_record

    assert usable_record(record, "s") is None
    good = {"sha256": "s", "size": 10, "blocks": {"size": 4, "sha256": ["a", "b", "c"]}}
    assert usable_record(good, "s") == good["blocks"]


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1000"])
def test_bad_block_size_is_one_config_error(monkeypatch, value):
    from hubpad.errors import ConfigError
    from hubpad.util.block_hashes import block_size

    monkeypatch.setenv("HUBPAD_BLOCK_SIZE", value)
    with pytest.raises(ConfigError, match=r"HUBPAD_BLOCK_SIZE must be a byte count of at least 4096, got"):
        block_size()
