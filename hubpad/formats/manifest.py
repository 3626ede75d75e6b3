"""The provenance manifest `hubpad.json`: its schema, its serialisation, and the one freshness rule.

The manifest is the contract between the engine, the card and the Action (docs/design.md shows an example).
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

from hubpad import FORMAT_VERSION
from hubpad.errors import HubpadError
from hubpad.formats.names import MANIFEST


class UpstreamRecord(TypedDict, total=False):
    repo: str  # Hub repo id, or the local path
    kind: str  # "hub" | "local"
    revision: str | None  # what the user asked for
    commit: str | None  # the resolved commit sha (None for a local upstream)
    digest: str  # local upstreams: digest_of() over every file's sha256
    files: dict[str, "UpstreamFile"]


class BlockHashesRecord(TypedDict):
    """Per-block sha256s of an upstream weight file, recorded whenever hubpad read it in full (util/block_hashes)."""

    size: int  # block size in bytes (64 MiB by default); block k is bytes [k*size, (k+1)*size), the last shorter
    sha256: list[str]  # one hex digest per block, in file order


class UpstreamFile(TypedDict, total=False):
    size: int
    sha256: str | None
    # Weight files of a Hub upstream only. A later run whose upstream file has the same sha256 reads just the blocks its rebuilt
    # shards need and checks each against this (source/blocks.BlockReader); absent: the file is read in full.
    blocks: BlockHashesRecord
    header_sha256: str  # with `blocks`: sha256 of the file's header bytes (length field + JSON), checked when recorded


class DimRecord(TypedDict):
    name: str
    config_key: str | None
    config_keys: list[str]
    before: int
    after: int


class PaddedGroup(TypedDict):
    pattern: str  # tensor name with layer indices as *
    before: list[int]
    after: list[int]
    count: int
    bytes_added: int
    # scale: a scaled copy's factor (every stored element × it, rounded to the dtype); only in such groups


class TensorsRecord(TypedDict):
    total: int
    padded: int
    copied: int
    padded_groups: list[PaddedGroup]


class ShardRecord(TypedDict, total=False):
    name: str
    size: int
    sha256: str
    tensors: int
    inputs: str  # digest of everything that determines the shard's bytes (write/manifest.shard_inputs_key)
    sources: list[dict[str, Any]]  # [{file, sha256, ranges: [[start, end], ...]}]
    verified: bool  # staging only: every input file was fully hashed


class Manifest(TypedDict, total=False):
    hubpad_version: str
    format_version: int
    created: str
    upstream: UpstreamRecord
    target: dict[str, str]  # {repo, kind}
    tp: int
    architecture: dict[str, Any]  # {adapter, model_type, architectures, relabelled?, vllm_route?}
    quantization: dict[str, Any]  # {method, formats, weight_only_nvfp4}
    lossless: dict[str, list[str]]  # {mechanisms, formats}: why the outputs do not change (plan/lossless.py)
    dims: list[DimRecord]
    config_changes: dict[str, list[Any]]
    tensors: TensorsRecord
    vocab: dict[str, Any]
    rank_table: list[dict[str, Any]]
    serving: dict[str, Any]
    shards: list[ShardRecord]
    files: dict[str, list[str]]  # {copied, skipped, generated}
    published_commit: str


# What each top-level key holds when present: the engine, the card and the Action read these without more checks.
_TOP_LEVEL = {"hubpad_version": str, "format_version": int, "created": str, "upstream": dict, "target": dict, "tp": int,
              "architecture": dict, "quantization": dict, "lossless": dict, "dims": list, "config_changes": dict, "tensors": dict,
              "vocab": dict, "rank_table": list, "serving": dict, "shards": list, "files": dict,
              "published_commit": str}


def parse_manifest(data: bytes | str, where: str) -> dict:
    """hubpad.json as read back from a target, checked for the shape hubpad relies on.

    It lives on the target, where anyone with write access may edit it: a malformed one is one clear error
    naming what is wrong, not a crash deep inside a run.
    """
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError):  # ValueError: bad UTF-8 or JSON
        raise _malformed(where, "not valid JSON") from None
    if not isinstance(manifest, dict):
        raise _malformed(where, "not a JSON object")
    for key, kind in _TOP_LEVEL.items():
        if key in manifest and not _is(manifest[key], kind):
            raise _malformed(where, f"{key!r} is not {_KIND_NAMES[kind]}")
    _check_upstream(manifest.get("upstream", {}), where)
    _check_items(manifest, "shards", where, {"name": str, "sha256": str, "inputs": str, "size": int, "sources": list})
    _check_items(manifest, "dims", where, {"name": str, "before": int, "after": int})
    _check_items(manifest, "rank_table", where, {})
    _check_items(manifest.get("tensors", {}), "padded_groups", where, {"pattern": str, "count": int},
                 "tensors.padded_groups")
    for key, names in manifest.get("files", {}).items():
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise _malformed(where, f"files.{key} is not a list of file names")
    return manifest


_KIND_NAMES = {str: "a string", int: "an integer", dict: "an object", list: "a list"}


def _is(value: object, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _check_upstream(upstream: dict, where: str) -> None:
    for key in ("repo", "kind", "revision", "commit", "digest"):
        if upstream.get(key) is not None and not isinstance(upstream[key], str):
            raise _malformed(where, f"upstream.{key} is not a string")
    files = upstream.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(f, dict) for f in files.values()):
        raise _malformed(where, "upstream.files is not an object of file records")


def _check_items(parent: dict, key: str, where: str, fields: dict[str, type], label: str | None = None) -> None:
    """Every item of the list `parent[key]` is an object whose `fields`, when present, have their kinds."""
    items = parent.get(key)
    if items is None:
        return
    if not isinstance(items, list):
        raise _malformed(where, f"{label or key} is not a list")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _malformed(where, f"{label or key}[{i}] is not an object")
        for field, kind in fields.items():
            if field in item and not _is(item[field], kind):
                raise _malformed(where, f"{label or key}[{i}].{field} is not {_KIND_NAMES[kind]}")


def _malformed(where: str, problem: str) -> HubpadError:
    return HubpadError(f"{where}: {MANIFEST} is malformed ({problem}); restore it from the repo's history, or run "
                       f"`hubpad mirror` with --force to rebuild the derivative without it")


def dumps(data: dict) -> str:
    """How hubpad writes its JSON files: indented, key order kept, newline-terminated."""
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def same_build(record: dict | None, tp: int) -> bool:
    """A manifest or staging record written by this format version for this TP (its bytes could be reused)."""
    return isinstance(record, dict) and record.get("tp") == tp and record.get("format_version") == FORMAT_VERSION


def recorded_upstream(manifest: dict) -> str | None:
    """What a manifest says it was built from: the upstream commit, or a local upstream's content digest."""
    up = manifest.get("upstream", {})
    return up.get("commit") or up.get("digest")


def is_fresh(manifest: dict | None, tp: int, upstream_sha: str | None, upstream_repo: str | None = None,
             shard_names: list[str] | None = None) -> bool:
    """The one freshness rule: `manifest` records this upstream state padded for `tp` by this format version.

    `upstream_repo` and `shard_names`, when given, must match too (a mirror run also knows its planned shards).
    """
    return staleness(manifest, tp, upstream_sha, upstream_repo, shard_names) is None


def staleness(manifest: dict | None, tp: int, upstream_sha: str | None, upstream_repo: str | None = None,
              shard_names: list[str] | None = None) -> str | None:
    """Why `manifest` is not fresh by `is_fresh`'s rule, in a few words ("holds TP 6, checked for TP 3"); None when
    it is."""
    if not isinstance(manifest, dict):
        return f"no {MANIFEST}"
    if manifest.get("tp") != tp:
        return f"holds TP {manifest.get('tp')}, checked for TP {tp}"
    if manifest.get("format_version") != FORMAT_VERSION:
        return f"written in {MANIFEST} format {manifest.get('format_version')}, this hubpad writes {FORMAT_VERSION}"
    recorded = recorded_upstream(manifest)
    if upstream_sha is None or recorded != upstream_sha:
        return f"upstream {(upstream_sha or 'unknown')[:12]}, recorded {(recorded or '-')[:12]}"
    if upstream_repo is not None and manifest.get("upstream", {}).get("repo") != upstream_repo:
        return f"built from {manifest.get('upstream', {}).get('repo')}, not {upstream_repo}"
    if shard_names is not None and [s["name"] for s in manifest.get("shards", [])] != shard_names:
        return "its shards are not the ones planned now (another shard size?)"
    return None
