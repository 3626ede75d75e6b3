"""The plan is made from safetensors headers read apart from each file's checked stream (small range reads).
hubpad checks those header bytes against the same bytes of the stream it verifies, so a header that changed
between planning and reading, or a planning read that went wrong, can never shape a published shard; on an
incremental run the block record (made from a checked full read) vouches for the header instead."""

from __future__ import annotations

import json

import pytest

from hubpad.errors import IntegrityError
from hubpad.plan.planner import make_plan
from hubpad.publish.local import LocalPublisher
from hubpad.run.mirror import run_mirror
from hubpad.source.local import LocalSource
from hubpad.testing import build_tiny_hy3
from tests.test_hub_mirror import SHARD, TARGET, UP, _hubpad_commits, _mirror  # noqa: F401
from tests.test_hub_mirror import upstream  # noqa: F401  (fixture)
from tests.test_incremental_ranges import F1, F2, BLOCK, _change_second_file, _manifest, small_blocks  # noqa: F401

F = "model-00001-of-00002.safetensors"


def _same_length_metadata_edit(path):
    """Rewrite one character of the header's __metadata__ in place: a header that still parses, same offsets."""
    data = bytearray(path.read_bytes())
    i = data.index(b'"format":"pt"')
    data[i + len('"format":"')] = ord("q")
    path.write_bytes(bytes(data))


def test_local_header_changed_between_plan_and_read_fails_and_writes_nothing(tmp_path):
    src, dst = build_tiny_hy3(tmp_path / "up"), tmp_path / "dst"
    plan = make_plan(LocalSource(src), 3, shard_size=2_000_000)
    _same_length_metadata_edit(src / F)
    with pytest.raises(IntegrityError, match=f"{F}: the safetensors header the plan was made from is not the one"):
        run_mirror(plan, LocalPublisher(dst))
    assert not dst.exists()


def test_hub_planning_header_that_differs_from_the_stream_fails(hub, upstream, monkeypatch):
    """The emulator serves the real bytes; the plan's record of its header read is what is made wrong here."""
    from hubpad.publish.hub import HubPublisher
    from hubpad.source.hub import HubSource

    plan = make_plan(HubSource(UP), 3, shard_size=2_000_000)
    end, _ = plan.header_digests[F]
    plan.header_digests[F] = (end, "0" * 64)
    with pytest.raises(IntegrityError, match="the safetensors header the plan was made from"):
        run_mirror(plan, HubPublisher.for_target(plan.source, TARGET, 3))
    assert not hub.repo_exists(TARGET) or not _hubpad_commits(hub)


def test_records_carry_the_header_digest_and_an_older_manifest_reads_in_full(hub, upstream):
    _mirror()
    before = _manifest(hub)
    for f in (F1, F2):
        assert len(before["upstream"]["files"][f]["header_sha256"]) == 64
    # hubpad.json from before header digests: its block records cannot vouch for the headers, so a file they
    # cover is read (and its header checked) in full, and the new records carry the digest.
    older = json.loads(json.dumps(before))
    for rec in older["upstream"]["files"].values():
        rec.pop("header_sha256", None)
    hub.seed(TARGET, {"hubpad.json": json.dumps(older, indent=2).encode()}, message="older hubpad.json")
    _change_second_file(hub, upstream)
    hub.reset_log()
    _mirror()
    assert hub.bytes_served(UP, F1) >= (upstream / F1).stat().st_size
    after = _manifest(hub)
    assert after["upstream"]["files"][F1]["header_sha256"] == before["upstream"]["files"][F1]["header_sha256"]
