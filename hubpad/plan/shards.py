"""Cutting output shards, and splitting them into fan-out parts."""

from __future__ import annotations

from operator import attrgetter

from hubpad.formats.safetensors import encode_header
from hubpad.plan.model import Plan, ShardPlan, TensorPlan


_HEADER_ENTRY = attrgetter("name", "dtype", "shape", "nbytes")


def cut_shards(tensors: list[TensorPlan], shard_size: int, metadata: dict[str, str]) -> list[ShardPlan]:
    """Cut output shards at `shard_size` (a larger tensor gets a shard of its own), keeping upstream order."""
    groups: list[list[TensorPlan]] = [[]]
    size = 0
    for t in tensors:
        if groups[-1] and size + t.nbytes > shard_size:
            groups.append([])
            size = 0
        groups[-1].append(t)
        size += t.nbytes
    n = len(groups)
    shards = []
    for i, group in enumerate(groups, 1):
        shard = ShardPlan(f"model-{i:05d}-of-{n:05d}.safetensors", group, metadata)
        shard.header = encode_header(list(map(_HEADER_ENTRY, group)), metadata)
        shards.append(shard)
    return shards


def split_parts(plan: Plan, k: int) -> list[dict]:
    """Split the output shards into `k` contiguous parts of roughly equal bytes (each a stage job)."""
    k = max(1, min(k, len(plan.shards)))
    total = plan.bytes_out
    parts: list[dict] = [{"part": i + 1, "shards": [], "bytes": 0} for i in range(k)]
    acc = 0
    for s in plan.shards:
        i = min(k - 1, int(acc * k / total)) if total else 0
        parts[i]["shards"].append(s.name)
        parts[i]["bytes"] += s.size
        acc += s.size
    return [p for p in parts if p["shards"]]
