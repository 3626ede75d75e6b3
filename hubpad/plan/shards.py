"""Cutting output shards, and splitting them into fan-out parts."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate
from operator import attrgetter

from hubpad.plan.model import Plan, ShardPlan, TensorPlan


def cut_shards(tensors: list[TensorPlan], shard_size: float, metadata: dict[str, str],
               name: Callable[[int, int], str] | None = None) -> list[ShardPlan]:
    """Cut output shards at `shard_size` (a larger tensor gets a shard of its own), keeping upstream order; shard k of
    n is named `name(k, n)` (`model-0000k-of-0000n.safetensors` by default)."""
    totals = list(accumulate(map(_NBYTES, tensors)))  # running byte totals: one int per tensor, not two lists
    cuts = _cuts(totals, shard_size) or [(0, 0)]
    shards = []
    for k, (i, j) in enumerate(cuts, 1):
        shard = ShardPlan(name(k, len(cuts)) if name else f"model-{k:05d}-of-{len(cuts):05d}.safetensors",
                          tensors[i:j], metadata,
                          data_len=(totals[j - 1] if j else 0) - (totals[i - 1] if i else 0))
        shard.header_len = shard.measure_header()  # the header itself is encoded when the shard is written
        shards.append(shard)
    return shards


def _cuts(totals: list[int], shard_size: int) -> list[tuple[int, int]]:
    """[i, j) of each shard: a shard takes tensors while their total stays within `shard_size`, and at least one.
    Found by bisection on the running totals of the tensors' sizes (Hy3: 185k tensors, 36 shards)."""
    cuts, i = [], 0
    while i < len(totals):
        base = totals[i - 1] if i else 0
        j = max(i + 1, bisect_right(totals, base + shard_size, i))
        cuts.append((i, j))
        i = j
    return cuts


_NBYTES = attrgetter("nbytes")


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
