"""Ling / Ring 1.x and 2.0 (`bailing_moe`: BailingMoeForCausalLM, BailingMoeV2ForCausalLM; remote-code configs):
GQA behind one fused `attention.query_key_value` [q | k | v] (vLLM's QKVParallelLinear loads it whole and splits it by
the config's head counts before each rank takes its share of every part), optional per-head q/k norms
(`attention.query_layernorm` / `key_layernorm`, over one head's head_dim), the output projection `attention.dense`,
dense first layers (`first_k_dense_replace`), routed experts per expert with a router `mlp.gate` (and its
`mlp.gate.expert_bias` under sigmoid routing), and the shared experts as one MLP of moe_shared_expert_intermediate_size
(else moe_intermediate_size) x num_shared_experts.

Padding appends whole GQA groups: each of the fused tensor's three sections grows at its own end (plan/sections.py),
so query head i keeps kv head i // group on every rank. head_dim: vLLM's BailingAttention takes `config.head_dim or
hidden_size // heads`, so the derivative writes it. vLLM asserts heads % TP and the kv heads' sharding, and computes
num_kv_heads = max(1, kv // TP) for its cache.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import DENSE_MLP, EXPERTS, ROUTERS, Adapter, L, Role
from hubpad.plan.adapters.vllm import serving

_ATTENTION = [(L + r"attention\.query_key_value$", Role("qkv")), (L + r"attention\.dense$", Role("o"))]
_SHARED = [(L + r"mlp\.shared_experts\.(gate_proj|up_proj)$", Role("rows", "shared")),
           (L + r"mlp\.shared_experts\.down_proj$", Role("cols", "shared"))]
_COPY = [r"^model\.word_embeddings$", r"^model\.norm$", r"^lm_head$",
         L + r"(input_layernorm|post_attention_layernorm)$", L + r"attention\.(query_layernorm|key_layernorm)$"]


class BailingAdapter(Adapter):
    """The shared experts' width: moe_shared_expert_intermediate_size when the config states one (then exactly one
    shared expert, or refused), else moe_intermediate_size x num_shared_experts (base.shared_experts_key). Ling /
    Ring 2.0 serve with --trust-remote-code (vLLM registers no config class for bailing_moe)."""

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        out = super().intermediate_sizes(config)
        own = config.get("moe_shared_expert_intermediate_size")
        if own is not None and int(config.get("num_shared_experts") or 0) > 0:
            if int(config["num_shared_experts"]) != 1:
                raise ConfigError(f"config.json: {config['num_shared_experts']} shared experts of "
                                  f"moe_shared_expert_intermediate_size {own}: vLLM builds them as one MLP of both "
                                  f"multiplied, which hubpad pads only for one shared expert")
            out["shared"] = (("moe_shared_expert_intermediate_size",), int(own))
        return out

    def tied_intermediate(self, config: dict, new_inter: dict[str, int]) -> dict[str, int]:
        if config.get("moe_shared_expert_intermediate_size") is not None:
            return new_inter  # a width of its own
        return super().tied_intermediate(config, new_inter)

    def serving(self, config: dict) -> dict:
        arch = (config.get("architectures") or ["BailingMoeForCausalLM"])[0]
        out = serving(features=(f"arch:{arch}",))
        return {**out, "extra_args": ["--trust-remote-code"]}


BAILING_MOE = BailingAdapter(
    name="bailing_moe", model_types=("bailing_moe",),
    linear_patterns=_ATTENTION + DENSE_MLP + EXPERTS + _SHARED,
    copy_modules=_COPY + ROUTERS, copy_params=[L + r"mlp\.gate\.expert_bias$"],
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    shared_experts_key="num_shared_experts", tp_at_most_experts=False,
)
