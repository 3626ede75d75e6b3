"""Param-2 MoE (`param2moe`, Param2MoEForCausalLM: BharatGen's Param2-17B-A2.4B): Ling's layout, one stricter rule.

vLLM 0.32's param2moe.py loads Ling's tensor names (its WeightsMapper: `word_embeddings`, the fused
`attention.query_key_value` split [q | k | v] by QKVParallelLinear, `attention.dense`, `query_layernorm` /
`key_layernorm` over one head's head_dim, `mlp.gate.expert_bias` zero-centred at load, routed experts per expert and
one shared MLP whose width is moe_shared_expert_intermediate_size itself when the config states it, else
moe_intermediate_size x num_shared_experts: Ling multiplies its own width by the count too), computes
head_dim as `config.head_dim or hidden // heads`, and asserts heads % TP == 0 and, unlike Ling's class, kv heads %
TP == 0: it never replicates kv heads. So bailing.py's rules hold with two changes: the padded kv heads must shard
(`head_rules`), and a shared width of its own is padded under its key whatever the number of shared experts
(`intermediate_sizes`; Ling refuses more than one there) (Param2-17B's 32 / 8 -> 36 / 9 at TP 3, 48 / 12 at TP 6). vLLM registers no config class for
`param2moe` (transformers 5.19, its CPU build's, has none): the card serves it with --trust-remote-code.
"""

from __future__ import annotations

import dataclasses

from hubpad.plan.adapters.bailing import BAILING_MOE, BailingAdapter
from hubpad.plan.adapters.base import Adapter
from hubpad.plan.heads import HeadShape


class Param2Adapter(BailingAdapter):
    """Ling's rules, the kv heads always sharded (vLLM's Param2MoEAttention asserts it)."""

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        out = Adapter.intermediate_sizes(self, config)
        own = config.get("moe_shared_expert_intermediate_size")
        if own is not None and int(config.get("num_shared_experts") or 0) > 0:
            out["shared"] = (("moe_shared_expert_intermediate_size",), int(own))  # the whole shared MLP's width
        return out

    def head_rules(self, heads: int, kv: int, hs: HeadShape, tp: int, hidden: int) -> list[str]:
        if kv % tp:
            return [f"{kv} kv heads % tp {tp} != 0 (vLLM's Param2MoEAttention shards them, never replicates)"]
        return []


PARAM2_MOE = Param2Adapter(**{f.name: getattr(BAILING_MOE, f.name) for f in dataclasses.fields(BAILING_MOE)
                              if f.init} | {"name": "param2moe", "model_types": ("param2moe",)})
