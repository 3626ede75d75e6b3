"""Cohere2 (`cohere2`, Cohere2ForCausalLM: Command A, Command R7B; vLLM serves it with commandr.py's
CohereForCausalLM), Cohere (`cohere`: Command R / R+, the same class; R+ with per-head q/k LayerNorms of shape
[heads, head_dim], padded by heads) and Cohere2-MoE (`cohere2_moe`, Cohere2MoeForCausalLM): Llama attention names,
one LayerNorm per layer feeding attention and MLP in parallel, the embedding tied to the head (logits scaled by
logit_scale), sliding layers with RoPE and global layers without.

Two config quirks, both read in the sources:
- vLLM's CohereAttention (and Cohere2MoeAttention) set num_heads = num_attention_heads // tp and never check the
  remainder (only the kv heads are asserted): a derivative whose heads do not divide its TP would load and serve
  wrong outputs. hubpad pads heads until they divide (whole GQA groups), and checks it again on the derivative's
  config.json in `hubpad plan` and `hubpad verify` (`check_derivative`).
- transformers' Cohere2Config sets head_dim = hidden_size // heads in __post_init__ unless config.json carries it (its
  kwargs then win; read in transformers 5.19 and 5.24), and vLLM's CohereAttention reads config.head_dim: the
  derivative writes head_dim (12288 // 108 would be 113, not 128).

Cohere2-MoE: routed experts per expert of width `intermediate_size` (vLLM and transformers build them from that key),
shared experts as one MLP of intermediate_size x num_shared_experts, and dense prefix layers of
`prefix_dense_intermediate_size` (intermediate_size when the key is absent: the derivative then writes the key, so the
dense layers keep their own padded width in both engines).
"""

from __future__ import annotations

import dataclasses

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, ROUTERS, Adapter, L, Role)
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.dims import kv_per_rank
from hubpad.plan.heads import HeadShape


class CohereAdapter(Adapter):
    """The Command tool-call and reasoning parsers (vLLM's cohere_command3 for Command A: `<|START_ACTION|>` tool calls
    and `<|START_THINKING|>` reasoning; they need the cohere-melody package in vLLM's environment). Cohere2 derivatives
    need vLLM 0.29.0 or newer: commandr.py took head_dim = hidden_size // heads before (vllm.py)."""

    def check_derivative(self, config: dict, tp: int) -> None:
        heads, kv = int(config.get("num_attention_heads") or 0), int(config.get("num_key_value_heads") or 0)
        if heads % tp or (kv and kv_per_rank(kv, tp) is None):
            raise ConfigError(f"config.json: {heads} attention heads / {kv} kv heads do not shard at tp {tp}, and vLLM's "
                              f"CohereAttention computes num_attention_heads // tp without checking: it would serve "
                              f"wrong outputs")

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        out = super().intermediate_sizes(config)
        dense_layers = "dense" in (config.get("mlp_layer_types") or [])
        if self.name == "cohere2_moe" and dense_layers and "dense" not in out and config.get("intermediate_size"):
            out["dense"] = (("prefix_dense_intermediate_size",), int(config["intermediate_size"]))
        return out

    def head_shape(self, config: dict) -> HeadShape:
        """Command R+'s q/k LayerNorms hold one row of head_dim weights per head ([heads, head_dim], [kv, head_dim]),
        which vLLM's row-parallel loader shards by heads: rows per head 1, unquantized (any number per rank)."""
        shape = super().head_shape(config)
        return dataclasses.replace(shape, widths={**shape.widths, "q_norm": 1, "k_norm": 1},
                                   labels={**shape.labels, "q_norm": "q_norm rows", "k_norm": "k_norm rows"},
                                   per_kv=("kv", "k_norm"), gates=frozenset({"q_norm", "k_norm"}))

    def serving(self, config: dict) -> dict:
        if self.name == "cohere":  # Command R / R+: their tool-call format is neither command3's nor command4's
            return serving(features=("head_dim:cohere",))
        moe = self.name == "cohere2_moe"
        return serving(tool="cohere_command3", reasoning="cohere_command3",
                       features=("arch:Cohere2MoeForCausalLM" if moe else "head_dim:cohere",))


# Command R / R+ (`cohere`, CohereForCausalLM): the same attention class; R+ adds per-head q/k LayerNorms
COHERE = CohereAdapter(
    name="cohere", model_types=("cohere",),
    linear_patterns=ATTENTION + [(L + r"self_attn\.q_norm$", Role("q", "q_norm")),
                                 (L + r"self_attn\.k_norm$", Role("kv", "k_norm"))] + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
)

COHERE2 = CohereAdapter(
    name="cohere2", model_types=("cohere2",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
)

COHERE2_MOE = CohereAdapter(
    name="cohere2_moe", model_types=("cohere2_moe",),
    linear_patterns=ATTENTION + DENSE_MLP + EXPERTS + [
        (L + r"mlp\.shared_experts\.(gate_proj|up_proj)$", Role("rows", "shared")),
        (L + r"mlp\.shared_experts\.down_proj$", Role("cols", "shared"))],
    copy_modules=COPY_MODULES + ROUTERS, copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("prefix_dense_intermediate_size",), "expert": ("intermediate_size",)},
    shared_experts_key="num_shared_experts", tp_at_most_experts=True,
)
