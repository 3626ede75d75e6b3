"""Building the provenance manifest `hubpad.json` and the derivative's config.json from a plan and a run.

An output shard is reusable exactly when its manifest entry's `inputs` key matches the new plan's:
same upstream file hashes, same byte ranges, same output header (hence same plan), same format version.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

from hubpad import FORMAT_VERSION, __version__
from hubpad.plan.model import Plan, ShardPlan


def shard_inputs_key(shard: ShardPlan, upstream_sha: dict[str, str | None]) -> str:
    """A digest of everything that determines a shard's bytes; equal keys mean identical shards."""
    h = hashlib.sha256()
    h.update(f"hubpad-format-{FORMAT_VERSION}\n".encode())
    h.update(shard.name.encode() + b"\n")
    h.update(hashlib.sha256(shard.header).digest())
    for t in shard.tensors:
        h.update(t.name.encode())
        for op in (t.op, *t.op.parts):  # a "sections" op: its own fields, then each part's
            h.update(f"|{op.kind}|{op.batch}|{op.rows}|{op.row_bytes}|{op.new_rows}|{op.new_row_bytes}|".encode())
            h.update(op.fill.hex().encode() + b"|" + op.data.hex().encode())
            if op.scale is not None:  # a scaled copy (keys of every other shard stay as they were)
                h.update(f"|scale={op.scale!r}".encode())
        h.update(b"\n")
    for file, ranges in shard.source_ranges().items():
        h.update(f"{file}|{upstream_sha.get(file)}|{ranges}\n".encode())
    return h.hexdigest()


def shard_entry(shard: ShardPlan, sha256: str, upstream_sha: dict[str, str | None]) -> dict:
    """The manifest record of one built output shard."""
    return {
        "name": shard.name,
        "size": shard.size,
        "sha256": sha256,
        "tensors": len(shard.tensors),
        "inputs": shard_inputs_key(shard, upstream_sha),
        "sources": [{"file": f, "sha256": upstream_sha.get(f), "ranges": r} for f, r in shard.source_ranges().items()],
    }


def build_manifest(plan: Plan, shards: list[dict], upstream_files: dict[str, dict], target: dict,
                   generated: list[str], serving: dict) -> dict:
    """Assemble hubpad.json from the plan and what the run actually produced."""
    p = plan.to_json()
    return {
        "hubpad_version": __version__,
        "format_version": FORMAT_VERSION,
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "upstream": {"repo": plan.source.ref, "kind": plan.source.kind, "revision": plan.source.revision,
                     "commit": plan.source.commit, "files": upstream_files},
        "target": target,
        "tp": plan.tp,
        "architecture": p["architecture"],
        "quantization": p["quantization"],
        "lossless": p["lossless"],
        "dims": p["dims"],
        "config_changes": p["config_changes"],
        "tensors": p["tensors"],
        "vocab": p["vocab"],
        "rank_table": p["rank_table"],
        "serving": serving,
        "shards": shards,
        "files": {"copied": plan.copied_files, "skipped": plan.skipped_files, "generated": generated},
    }




def config_json(plan: Plan) -> str:
    """config.json of the derivative: upstream's, with only the padded dims changed (head_dim kept explicit)."""
    return config_text(plan.new_config)


def config_text(config: dict) -> str:
    """A config.json as the derivative writes it (the root's, or a weight folder's: Plan.folder_configs)."""
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"
