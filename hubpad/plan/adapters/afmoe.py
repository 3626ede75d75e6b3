"""Arcee Trinity (`afmoe`, AfmoeForCausalLM: Trinity-Large, Trinity-Mini, Trinity-Nano): GQA with per-head q/k
RMSNorms and a gated output, `self_attn.gate_proj` [heads x head_dim, hidden] (vLLM's ColumnParallelLinear over the
heads, sigmoid(gate) x attention output: a zero row gates a zero head's zero output, 0.5 x 0), sliding and global
layers with the same heads, depth-scaled sandwich norms (`pre_mlp_layernorm`, `post_mlp_layernorm` beside the usual
two), dense first layers (`num_dense_layers`), routed experts per expert with a sigmoid router `mlp.router.gate` and
its `mlp.expert_bias`, and the shared experts as one MLP of moe_intermediate_size x num_shared_experts (vLLM and
transformers). muP scales the embeddings by sqrt(hidden_size), which padding never changes.

head_dim is explicit (vLLM's AfmoeDecoderLayer reads config.head_dim with no fallback); hubpad writes it all the same.
vLLM's MoE block reads n_group / topk_group / score_func / route_norm / route_scale from config.json.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, ROUTERS, Adapter, L, Role)
from hubpad.plan.adapters.vllm import serving


class AfmoeAdapter(Adapter):
    """No parsers: vLLM 0.32 registers none for Trinity, and its cards' serving commands were not confirmed offline."""

    def serving(self, config: dict) -> dict:
        return serving(features=("arch:AfmoeForCausalLM",))


AFMOE = AfmoeAdapter(
    name="afmoe", model_types=("afmoe",),
    linear_patterns=ATTENTION + [(L + r"self_attn\.gate_proj$", Role("q"))] + DENSE_MLP + EXPERTS + [
        (L + r"mlp\.shared_experts\.(gate_proj|up_proj)$", Role("rows", "shared")),
        (L + r"mlp\.shared_experts\.down_proj$", Role("cols", "shared"))],
    copy_modules=COPY_MODULES + ROUTERS + [L + r"(pre_mlp_layernorm|post_mlp_layernorm)$"], copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    shared_experts_key="num_shared_experts", per_head_norms=True, tp_at_most_experts=True,
    vllm_reads={k: f"vLLM's AfmoeMoE reads (config.{k}) without a default: it stops at load"
                for k in ("n_group", "topk_group", "score_func", "route_norm")},
)
