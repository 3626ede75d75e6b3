"""Choosing padded dims: heads in whole GQA groups, MLP/expert widths in kernel tiles, and the per-rank table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import Adapter, routed_experts, width_kind
from hubpad.plan.heads import HeadShape

VLLM_VOCAB_PAD = 64


@dataclass
class Aligns:
    """What every rank's slice of the attention layers must be a multiple of (from their storage formats)."""

    q_n: int = 1  # q_proj rows
    kv_n: int = 1  # k/v_proj rows
    o_k: int = 1  # o_proj columns
    extra: dict[str, int] = field(default_factory=dict)  # an adapter's own per-head widths (MLA's kv_b_proj rows)

    def of(self, key: str) -> int:
        """The alignment of the layers whose per-head width is HeadShape.widths[key]."""
        return {"q": self.q_n, "kv": self.kv_n, "o": self.o_k}.get(key) or self.extra.get(key, 1)


def kv_per_rank(kv: int, tp: int) -> int | None:
    """kv heads each rank holds, or None when vLLM cannot shard them (neither divides the other)."""
    if kv % tp == 0:
        return kv // tp
    if tp % kv == 0:
        return 1  # replicated
    return None


def head_problems(h: int, kv: int, hs: HeadShape | int, tp: int, a: Aligns, hidden: int,
                  adapter: Adapter) -> list[str]:
    """Why (h heads, kv heads) cannot serve at `tp`; empty when they can (an int `hs` is head_dim everywhere)."""
    hs = HeadShape.of(hs)
    why = []
    if h % tp:
        why.append(f"{h} attention heads % tp {tp} != 0")
        return why
    if hs.group > 1 and (h % hs.group or (h // hs.group) % tp):
        why.append(f"{h} attention heads are not whole {hs.group_key} of {hs.group} that shard by tp {tp}")
        return why
    kvr = kv_per_rank(kv, tp) if hs.kv_heads else h // tp
    if kvr is None:
        why.append(f"{kv} kv heads neither divide nor are divided by tp {tp}")
        return why
    for key, group in hs.kv_groups.items():  # layer types with kv heads of their own (heads // group)
        if h % group:
            why.append(f"{h} attention heads are not a multiple of {group} (the {hs.labels[key]} group)")
        elif kv_per_rank(h // group, tp) is None:
            why.append(f"{h // group} kv heads ({hs.labels[key]}) neither divide nor are divided by tp {tp}")
    for key, (num, den) in hs.head_ratio.items():  # layer types with query heads of their own (heads x num / den)
        if h * num % den:
            why.append(f"{h} x {num} / {den} attention heads ({hs.labels[key]}) are not whole")
        elif h * num // den % tp:
            why.append(f"{h * num // den} attention heads ({hs.labels[key]}) % tp {tp} != 0")
    why += adapter.head_rules(h, kv, hs, tp, hidden)
    if why:
        return why
    for key, width in hs.widths.items():
        per_rank = _count_per_rank(key, h, kvr, hs, tp) * width
        if per_rank % a.of(key):
            why.append(f"{hs.labels[key]} per rank {per_rank} % {a.of(key)} != 0")
    if adapter.hidden_must_divide_by_heads and hidden % h:
        why.append(f"transformers' {adapter.name} config rejects hidden_size {hidden} % {h} heads != 0")
    head_dim = hs.widths.get("q")
    if adapter.vllm_head_dim_from_hidden and adapter.vllm_route is None and hidden // h != head_dim:
        why.append(f"vLLM's {adapter.name} model derives head_dim from hidden_size // heads and ignores config.head_dim "
                   f"({hidden} // {h} = {hidden // h}, not {head_dim}), so its heads cannot be padded")
    return why


def _count_per_rank(key: str, h: int, kvr: int, hs: HeadShape, tp: int) -> int:
    """Heads each rank holds of the layers with width key `key`: kv heads (the config's, or a layer type's own
    heads // group), else attention heads."""
    if key in hs.per_kv:
        return kvr
    if key in hs.kv_groups:
        return kv_per_rank(h // hs.kv_groups[key], tp) or 0
    return hs.head_count(key, h) // tp


def choose_heads(h: int, kv: int, hs: HeadShape, tp: int, aligns: Aligns, hidden: int,
                 adapter: Adapter) -> tuple[int, int]:
    """Smallest (heads, kv heads) that shard at `tp`, appending whole GQA groups so head i keeps kv head i//group."""
    if h % kv:
        raise ConfigError(f"config.json: {h} attention heads are not a multiple of {kv} kv heads")
    if not head_problems(h, kv, hs, tp, aligns, hidden, adapter):
        return h, kv
    group = h // kv
    candidates = [(k2 * group, k2) for k2 in range(kv + 1, kv * 8 + tp * 8)]
    # MQA: every head maps to kv head 0 whatever the group size (not with layer types of their own: their kv heads
    # are heads // group, and configs that derive one count from another, as MiMo's 2 x num_key_value_heads for its
    # SWA layers, stay consistent only in whole groups of every type)
    if kv == 1 and not HeadShape.of(hs).kv_groups:
        candidates += [(h2, 1) for h2 in range(h + 1, h * 8 + tp * 8)]
    for h2, k2 in sorted(candidates):
        if not head_problems(h2, k2, hs, tp, aligns, hidden, adapter):
            return h2, k2
    reasons = "; ".join(head_problems(h, kv, hs, tp, aligns, hidden, adapter))
    # Say what blocks the first candidate that shards at all: that is the constraint to relax.
    for h2, k2 in sorted(candidates):
        why = head_problems(h2, k2, hs, tp, aligns, hidden, adapter)
        if h2 % tp == 0 and kv_per_rank(k2, tp) is not None:
            reasons += f"; the first whole-group padding that shards, {h2} heads / {k2} kv heads, fails: " + "; ".join(why)
            break
    raise ConfigError(f"no valid head padding exists for tp={tp} ({reasons})")


# An MLP width that must grow grows to whole 128-wide GEMM tiles per rank whatever the format: it is what
# FP8-block, NVFP4 via Marlin and int4 need anyway, keeps a padded BF16 checkpoint re-quantizable without another
# pad, and gives Hy3's 13312 → 13440 (4480 = 35·128 per rank at TP=3). A width whose per-rank slice already meets
# its format's rules is left alone (Qwen2.5-72B's BF16 29568 serves at TP=2/4/8 as it is). Attention dims need no
# such rule: they move in whole heads.
# Routed experts only need what fused-MoE kernels need (Marlin MoE: intermediate per rank % 64), which keeps
# stock TP values working (Hy3's 1536 experts at TP=8 = 192 per rank).
MLP_TILE = 128


EXPERT_TILE = 64


def choose_intermediate(size: int, tp: int, n_align: int, k_align: int, tile: int = 1, multiple: int = 1) -> int:
    """`size` when its per-rank slice meets both alignments; else the smallest larger size whose per-rank slice
    is a multiple of the alignments and of `tile` (the width padding grows in), and whose total is a multiple of
    `multiple` (the widths a family's config can state: Adapter.intermediate_multiple)."""
    step = math.lcm(n_align, k_align)
    if size % tp == 0 and (size // tp) % step == 0 and size % multiple == 0:
        return size
    quantum = math.lcm(tp * math.lcm(step, tile), multiple)
    return -(-size // quantum) * quantum


def growth_tile(group: str) -> int:
    """What a padded intermediate group grows in per rank: routed experts' alignment already holds their tile."""
    return 1 if width_kind(group) == "expert" else MLP_TILE


def heads_shard_as_is(h: int, kv: int, hs: HeadShape, tp: int, aligns: Aligns, hidden: int, adapter: Adapter) -> bool:
    """True when the heads already shard at `tp` (no padding)."""
    return h % kv == 0 and not head_problems(h, kv, hs, tp, aligns, hidden, adapter)


def vocab_info(vocab: int, tp: int) -> dict:
    """Whether vLLM's 64-padded vocab shards at `tp`, and what the runtime patch pads to when it does not."""
    padded = -(-vocab // VLLM_VOCAB_PAD) * VLLM_VOCAB_PAD
    divisible = padded % tp == 0
    pad_to = math.lcm(VLLM_VOCAB_PAD, tp)
    return {"size": vocab, "padded_to_64": padded, "divisible_by_tp": divisible, "patch_needed": not divisible,
            "patch_pad_to": pad_to, "patched_size": -(-vocab // pad_to) * pad_to}


def make_rank_table(tp: int, h2: int, kv2: int, hs: HeadShape | int, aligns: Aligns, new_inter: dict[str, int],
                    group_align: dict[str, tuple[int, int]], vocab: dict, config: dict) -> list[dict]:
    """Per-rank divisibility of every sharded dim after padding, as vLLM will check it."""
    rows = []

    def row(dim, total, per_rank, ok, rule, required=True):
        rows.append({"dim": dim, "total": total, "per_rank": per_rank, "ok": bool(ok), "rule": rule,
                     "required": required})

    row("attention heads", h2, h2 // tp if h2 % tp == 0 else None, h2 % tp == 0, f"{h2} % {tp} == 0")
    kvr, hs = kv_per_rank(kv2, tp), HeadShape.of(hs)
    if hs.group > 1:  # heads in whole groups (DeepSeek-V4 o_groups): the groups shard too
        g2 = h2 // hs.group
        ok = h2 % hs.group == 0 and g2 % tp == 0
        row(f"{hs.group_key}", g2, g2 // tp if ok else None, ok, f"{g2} % {tp} == 0, {hs.group} heads each")
    if hs.kv_heads:  # MLA has none: its latent KV is replicated
        rule = f"{kv2} % {tp} == 0" if kv2 >= tp else f"{tp} % {kv2} == 0 (replicated)"
        row("kv heads", kv2, kvr, kvr is not None, rule)
    seen = {h2 // kv2 if kv2 else 0}
    for key, group in hs.kv_groups.items():
        if group in seen:  # the same kv heads as a row already listed (MiMo's v heads are its k heads)
            continue
        seen.add(group)
        k2 = h2 // group
        kr = kv_per_rank(k2, tp) if h2 % group == 0 else None
        rule = f"{k2} % {tp} == 0" if k2 >= tp else f"{tp} % {k2} == 0 (replicated)"
        row(f"{key.rsplit('_', 1)[-1]} kv heads", k2, kr, kr is not None, f"{h2} / {group} = {rule}")
    for key in sorted(hs.widths, key=lambda k: k in hs.per_kv or k in hs.kv_groups):  # head-sharded layers first, then k/v
        if key in hs.per_kv:
            count, per = kv2, kvr if hs.kv_heads else None
        elif key in hs.kv_groups:
            count = h2 // hs.kv_groups[key]
            per = kv_per_rank(count, tp) if h2 % hs.kv_groups[key] == 0 else None
        else:
            count = hs.head_count(key, h2)
            per = count // tp if count % tp == 0 and h2 % tp == 0 else None
        if per is not None:
            n, a = per * hs.widths[key], aligns.of(key)
            row(hs.labels[key], count * hs.widths[key], n, n % a == 0, f"{n} % {a} == 0")
    for group, size in new_inter.items():
        if group not in group_align:  # no layer has it (intermediate_size of an all-MoE model): nothing is sharded
            continue
        a = math.lcm(*group_align[group])
        per = size // tp if size % tp == 0 else None
        row(f"{group} intermediate", size, per, per is not None and per % a == 0, f"{size} / {tp} % {a} == 0")
    n_exp = routed_experts(config)
    if n_exp:
        row("experts (expert parallel)", n_exp, n_exp // tp if n_exp % tp == 0 else None, n_exp % tp == 0,
            f"{n_exp} % {tp} == 0 (only needed with --enable-expert-parallel)", required=False)
    if vocab["size"]:
        if vocab["divisible_by_tp"]:
            row("vocab (vLLM pads to 64)", vocab["padded_to_64"], vocab["padded_to_64"] // tp, True,
                f"{vocab['padded_to_64']} % {tp} == 0")
        else:
            row("vocab (runtime patch)", vocab["patched_size"], vocab["patched_size"] // tp, True,
                f"pad to lcm(64, {tp}) = {vocab['patch_pad_to']} at load time; not on disk")
    return rows
