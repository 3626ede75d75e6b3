"""Laguna (`laguna`, LagunaForCausalLM: poolside's Laguna XS.2, XS-2.1, M.1): GQA whose layers hold their own query
head counts (`num_attention_heads_per_layer`, XS.2: 48 on full layers and 64 on sliding ones) over one kv head count,
per-head q/k RMSNorms, a softplus output gate `self_attn.g_proj` (one row per head for `gating` true / "per-head",
head_dim rows per head for "per-element"), a dense first layer, routed experts per expert with a sigmoid router
`mlp.gate` and `mlp.experts.e_score_correction_bias`, and a shared expert of its own width.

Every entry of the per-layer list is padded (plan/adapters/layer_heads.py): whole kv groups appended in every layer,
so XS.2's 48 / 64 heads over 8 kv become 54 / 72 over 9 at TP 3 and 72 / 96 over 12 at TP 6. A padded head's gate is
softplus(0) = log 2 times its zero output. vLLM's LagunaAttention asserts heads % TP and the kv heads' sharding per
layer, and its MoE block refuses a TP larger than num_experts.
"""

from __future__ import annotations

import dataclasses

from hubpad.plan.adapters import layer_heads
from hubpad.plan.adapters.base import COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, ROUTERS, SHARED, Adapter, L, Role
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

_ATTENTION = {rf"self_attn\.{p}_proj$": r for p, r in
              {"q": Role("q"), "k": Role("kv"), "v": Role("kv"), "o": Role("o"), "g": Role("q", "g")}.items()}


def _counts(config: dict) -> list[int]:
    return [int(c) for c in config.get("num_attention_heads_per_layer") or []]


class LagunaAdapter(Adapter):
    """Per-layer query heads; poolside's tool-call and reasoning parsers (vLLM's poolside_v1)."""

    def for_config(self, config: dict) -> "LagunaAdapter":
        heads = int(config.get("num_attention_heads") or 1)
        return dataclasses.replace(self, linear_patterns=layer_heads.patterns(L, _counts(config), heads, _ATTENTION)
                                   + self.linear_patterns)

    def head_shape(self, config: dict) -> HeadShape:
        heads, hd = int(config.get("num_attention_heads") or 1), int(config.get("head_dim") or 128)
        kv = int(config.get("num_key_value_heads") or heads)
        gate = 1 if config.get("gating", True) in (True, "per-head") else hd
        return layer_heads.head_shape({"q": hd, "kv": hd, "o": hd, "g": gate},
                                      {"q": "q_proj rows", "kv": "k/v_proj rows", "o": "o_proj columns",
                                       "g": "g_proj rows"}, _counts(config), heads, kv,
                                      names={c: f"{c}-head layers" for c in set(_counts(config))},
                                      gates=frozenset({"g"}))

    def padded_config(self, upstream: dict, config: dict, heads: int, kv: int) -> dict:
        counts = _counts(upstream)
        if not counts:
            return config
        return {**config, "num_attention_heads_per_layer": layer_heads.padded(
            counts, int(upstream.get("num_attention_heads") or 1), heads)}

    def serving(self, config: dict) -> dict:
        return serving(tool="poolside_v1", reasoning="poolside_v1", features=("arch:LagunaForCausalLM",))


LAGUNA = LagunaAdapter(
    name="laguna", model_types=("laguna",), linear_patterns=DENSE_MLP + EXPERTS + SHARED,
    copy_modules=COPY_MODULES + ROUTERS + [L + r"self_attn\.(q_norm|k_norm)$"],
    copy_params=COPY_PARAMS + [L + r"mlp\.experts\.e_score_correction_bias$"],
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",),
                       "shared": ("shared_expert_intermediate_size",)},
    tp_at_most_experts=True,
)
