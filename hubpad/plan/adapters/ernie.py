"""ERNIE-4.5 MoE (`ernie4_5_moe`, Ernie4_5_MoeForCausalLM: ERNIE-4.5-300B-A47B, -21B-A3B): Llama attention (q/k/v/o,
optional biases under `use_bias`), dense MLPs before `moe_layer_start_index`, routed experts per expert
(`mlp.experts.N.*`) with a router `mlp.gate` and its `mlp.moe_statics.e_score_correction_bias`, the shared experts as
one MLP of moe_intermediate_size x moe_num_shared_experts (vLLM and transformers alike), and one MTP block
(`model.mtp_block.0.*`, a Llama decoder layer with a dense MLP, beside `mtp_emb_norm`, `mtp_hidden_norm` and the
replicated `mtp_linear_proj`).

head_dim: vLLM's Ernie4_5_MoeAttention takes `head_dim or hidden_size // heads`, transformers' `getattr(config,
"head_dim", hidden // heads)`, and the published configs carry none, so the derivative writes it (hubpad always does):
8192 // 72 would be 113, not 128. vLLM's MoE block refuses a TP larger than moe_num_experts.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, ROUTERS, Adapter, L, Role,
                                       mtp_speculative)
from hubpad.plan.adapters.vllm import serving

_MTP = r"^model\.mtp_block\.(\d+)\."
_SHARED = [(L + r"mlp\.shared_experts\.(gate_proj|up_proj)$", Role("rows", "shared")),
           (L + r"mlp\.shared_experts\.down_proj$", Role("cols", "shared"))]


def _in_mtp_block(patterns: list) -> list:
    """A decoder layer's patterns for the MTP block's own layer (`model.mtp_block.N.`)."""
    return [(p.replace(L, _MTP, 1), r) if isinstance(p, str) and p.startswith(L) else p for p, r in patterns]


class Ernie45MoeAdapter(Adapter):
    """MTP drafting through vLLM's ErnieMTP (method "mtp": vLLM relabels an ernie4_5_moe draft ernie_mtp). No parsers:
    vLLM's ernie45 tool and reasoning parsers read the Thinking models' `</think>` / `<response>` format, which the
    300B-A47B and 21B-A3B chat models do not emit."""

    def serving(self, config: dict) -> dict:
        spec = mtp_speculative(config)
        return serving(spec=spec, features=("arch:Ernie4_5_MoeForCausalLM",) + (("spec:mtp", "spec:ernie_mtp") if spec
                                                                             else ()))


ERNIE45_MOE = Ernie45MoeAdapter(
    name="ernie4_5_moe", model_types=("ernie4_5_moe",),
    linear_patterns=ATTENTION + DENSE_MLP + EXPERTS + _SHARED + _in_mtp_block(ATTENTION + DENSE_MLP),
    copy_modules=COPY_MODULES + ROUTERS + [L + r"mlp\.moe_statics$", _MTP + r"(input_layernorm|post_attention_layernorm)$",
                                           r"^model\.(mtp_emb_norm|mtp_hidden_norm|mtp_linear_proj)\.\d+$"],
    copy_params=COPY_PARAMS + [L + r"mlp\.moe_statics\.e_score_correction_bias$"],
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    shared_experts_key="moe_num_shared_experts", tp_at_most_experts=True,
)
