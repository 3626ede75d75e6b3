"""The head geometry of an attention block: how many rows or columns every head-sharded layer holds per head.

Multi-head and grouped-query attention give every head-sharded layer `head_dim` per head (q/k/v rows, o
columns). Multi-head latent attention (DeepSeek-V3, Kimi-K2) differs: q_b_proj holds qk_nope + qk_rope rows per
head, kv_b_proj qk_nope + v rows per head, o_proj v columns per head, and there are no kv heads (the latent KV
is shared). Adapters describe their geometry with a HeadShape; choosing heads and the per-rank table read it,
and so does the TP advisor's KV cache figure: K and V per kv head, or MLA's latent, which no head count changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class HeadShape:
    """Per-head width of every head-sharded layer, keyed by `Role.width_key` ("q", "kv", "o", or an adapter's own).

    `labels` names each key in plans and errors; `kv_heads` is False where there are no kv heads to shard
    (MLA); `config_head_dim` is written to config.json as head_dim (None: head_dim is not a free key there).
    `latent_kv` is MLA's cached latent per token and layer (kv_lora_rank + qk_rope_head_dim), which vLLM keeps
    whole on every rank; None: the cache holds K and V of `widths["kv"]` per kv head.
    `kv_groups`: width keys of k/v layers whose kv head count is not the config's num_key_value_heads but
    heads // group (Gemma 4's global layers, MiMo-V2's sliding layers): key -> query heads per kv head. Padding keeps
    every such group whole, so query head i stays on kv head i // group in every layer type.
    `per_kv`: the keys sharded with the config's kv heads ("kv", and MiniMax-M3's indexer "index").
    `head_ratio`: width keys of q/o layers (and per-head gates) that hold a query head count of their own,
    heads x num // den (Step-3.7's sliding layers: 96 heads against 64, (3, 2)); padding in whole kv groups keeps it
    whole, and vLLM shards it by TP like the config's heads.
    `gates`: width keys of per-head gate layers (one row per head, Step-3.7's g_proj): unquantized, any whole number
    of rows per rank serves (vLLM's ColumnParallelLinear), so the dense layout's row alignment does not apply.
    `replicated`: width keys of per-head layers vLLM keeps whole on every rank and narrows to the rank's heads after
    the matmul (Dots3 Note's headwise g_proj, a ReplicatedLinear): no per-rank alignment, whatever the format.
    """

    widths: dict[str, int]
    labels: dict[str, str]
    kv_heads: bool = True
    config_head_dim: int | None = None
    latent_kv: int | None = None
    kv_groups: dict[str, int] = field(default_factory=dict)
    per_kv: tuple[str, ...] = ("kv",)  # the keys whose width is per kv head (the rest: per attention head)
    # Heads that move only in whole groups of `group` heads, and whose groups shard by TP too (DeepSeek-V4's o_groups:
    # wo_a projects each group of heads on its own, vLLM gives each rank o_groups // tp of them). `group_key` is the
    # config key that counts the groups (raised with the heads).
    group: int = 1
    group_key: str | None = None
    head_ratio: dict[str, tuple[int, int]] = field(default_factory=dict)
    gates: frozenset[str] = frozenset()
    replicated: frozenset[str] = frozenset()

    def head_count(self, key: str, heads: int) -> int:
        """Query heads of the q/o layers with width key `key`, for `heads` attention heads (rounded down: callers
        check `heads * num % den` first, as dims.head_problems does)."""
        num, den = self.head_ratio.get(key, (1, 1))
        return heads * num // den

    def kv_count(self, key: str, heads: int, kv: int) -> int:
        """kv heads of the k/v layers with width key `key`, for `heads` attention heads and `kv` config kv heads."""
        return heads // self.kv_groups[key] if key in self.kv_groups else kv

    @staticmethod
    def uniform(head_dim: int) -> "HeadShape":
        """Multi-head / grouped-query attention: q, k, v and o all hold head_dim per head."""
        return HeadShape({"q": head_dim, "kv": head_dim, "o": head_dim},
                         {"q": "q_proj rows", "kv": "k/v_proj rows", "o": "o_proj columns"},
                         kv_heads=True, config_head_dim=head_dim)

    @staticmethod
    def of(shape: "HeadShape | int") -> "HeadShape":
        """A HeadShape as is, or an int taken as head_dim for every layer (callers that only know head_dim)."""
        return shape if isinstance(shape, HeadShape) else HeadShape.uniform(int(shape))
