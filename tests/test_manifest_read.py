"""A target's hubpad.json is read back by mirror, check, card and verify. It lives where anyone with write access
may edit it, so a malformed one is one `error:` line naming what is wrong (never an internal error), nothing is
published, and `mirror --force` rebuilds the derivative without it."""

from __future__ import annotations

import json

import pytest

from hubpad.errors import HubpadError
from hubpad.formats.manifest import parse_manifest
from tests.helpers import cli
from tests.test_hub_mirror import SHARD, TARGET, UP, _hubpad_commits, _mirror, _shards  # noqa: F401
from tests.test_hub_mirror import upstream  # noqa: F401  (fixture)

GOOD = {"format_version": 1, "tp": 3, "upstream": {"repo": "a/b", "commit": "c" * 40, "files": {"x": {"size": 1}}},
        "shards": [{"name": "model-00001-of-00001.safetensors", "size": 8, "sha256": "s", "sources": []}],
        "dims": [{"name": "attention heads", "before": 64, "after": 72}], "files": {"copied": ["LICENSE"]},
        "tensors": {"total": 1, "padded_groups": [{"pattern": "p", "count": 1}]}}

# (what replaces hubpad.json, or which key of a good one is set to what) -> the problem named
MALFORMED = {
    "not json": (b"{not json", "not valid JSON"),
    "a list": (b"[]", "not a JSON object"),
    "bad utf-8": (b'{"tp": "\xff"}', "not valid JSON"),
    "tp a string": (("tp", "3"), "'tp' is not an integer"),
    "tp a bool": (("tp", True), "'tp' is not an integer"),
    "shards a string": (("shards", "x"), "'shards' is not a list"),
    "shard an int": (("shards", [1]), "shards[0] is not an object"),
    "shard name an int": (("shards", [{"name": 5}]), "shards[0].name is not a string"),
    "upstream a list": (("upstream", []), "'upstream' is not an object"),
    "upstream commit an int": (("upstream", {"commit": 5}), "upstream.commit is not a string"),
    "upstream files a list": (("upstream", {"files": []}), "upstream.files is not an object of file records"),
    "dims item a string": (("dims", ["x"]), "dims[0] is not an object"),
    "files copied a string": (("files", {"copied": "LICENSE"}), "files.copied is not a list of file names"),
    "padded groups an object": (("tensors", {"padded_groups": {}}), "tensors.padded_groups is not a list"),
}


def _bytes_of(case: str) -> bytes:
    value, _ = MALFORMED[case]
    if isinstance(value, bytes):
        return value
    key, bad = value
    return json.dumps({**GOOD, key: bad}).encode()


def test_a_well_formed_manifest_reads_back():
    assert parse_manifest(json.dumps(GOOD).encode(), "t") == GOOD


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_manifest_is_one_error_naming_the_problem(case):
    with pytest.raises(HubpadError) as info:
        parse_manifest(_bytes_of(case), "target alice/x")
    assert str(info.value) == (f"target alice/x: hubpad.json is malformed ({MALFORMED[case][1]}); restore it from "
                               f"the repo's history, or run `hubpad mirror` with --force to rebuild the derivative "
                               f"without it")


@pytest.mark.parametrize("case", ["not json", "shards a string", "upstream a list"])
def test_hub_target_with_a_malformed_manifest(hub, upstream, case):
    _mirror()
    hub.seed(TARGET, {"hubpad.json": _bytes_of(case)}, message="someone edits hubpad.json")
    head, shards = hub.head(TARGET), _shards(hub)
    for args in (("mirror", UP, "--tp", "3", "--shard-size", SHARD), ("check", UP, "--tp", "3", "--to", TARGET),
                 ("card", TARGET)):
        r = cli(*args)
        errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
        assert r.exit_code == 1 and len(errors) == 1, r.output
        assert "hubpad.json is malformed" in errors[0] and "internal error" not in r.output, r.output
    assert hub.head(TARGET) == head  # nothing published
    # --force: rebuilt as for a target without a manifest, and the same shards come out.
    assert _mirror("--force")["changed"]
    assert _shards(hub) == shards and len(_hubpad_commits(hub)) == 2
    assert json.loads(hub.file_bytes(TARGET, "hubpad.json"))["tp"] == 3


def test_local_target_with_a_malformed_manifest(upstream, tmp_path):
    dst = tmp_path / "dst"
    assert cli("mirror", upstream, "--tp", "3", "--to", dst, "--shard-size", SHARD).exit_code == 0
    (dst / "hubpad.json").write_bytes(_bytes_of("shard name an int"))
    for args in (("mirror", upstream, "--tp", "3", "--to", dst, "--shard-size", SHARD), ("verify", upstream, dst),
                 ("check", upstream, "--tp", "3", "--to", dst), ("card", dst)):
        r = cli(*args)
        assert r.exit_code == 1, r.output
        assert r.output.count("error:") == 1 and "shards[0].name is not a string" in r.output, r.output
    r = cli("mirror", upstream, "--tp", "3", "--to", dst, "--shard-size", SHARD, "--force")
    assert r.exit_code == 0 and "rebuilding the derivative without it" in r.output, r.output
    assert cli("verify", upstream, dst).exit_code == 0
