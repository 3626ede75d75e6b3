"""Ling / Ring 2.5 and 2.6 (`bailing_hybrid` with architectures BailingMoeV2_5ForCausalLM; vLLM 0.32's
bailing_moe_linear.py, BailingMoeV25ForCausalLM): lightning attention layers (plan/lightning.py) and MLA layers, a
dense first MLP (`first_k_dense_replace`) and Ling's MoE (adapters/bailing.py: per-expert experts, a router `mlp.gate`
with `expert_bias`, one shared expert of its own width).

Published names (the publisher's remote code, which vLLM's loader reads): `model.word_embeddings`,
`model.layers.N.attention.*`, `model.norm`, `lm_head`; MTP layers after the last (`model.layers.N`, N >=
num_hidden_layers: MLA and MoE, `enorm` / `hnorm` / `eh_proj` / `final_layernorm` copied; vLLM's main model skips
them, and the card drafts with none).
- Lightning layers, every layer with (N + 1) % layer_group_size != 0 (vLLM's is_linear_layer, trailing layers
  included): `query_key_value` [q | k | v], `g_proj`, `g_norm`, `dense`, `query_layernorm` / `key_layernorm`.
- MLA layers, the rest: `q_proj` (or `q_a_proj` / `q_a_layernorm` / `q_b_proj`), `kv_a_proj_with_mqa`,
  `kv_a_layernorm`, `kv_b_proj`, `dense` (vLLM: o_proj). No output gate.

vLLM builds both layer kinds from the one `num_attention_heads` (BailingMoeV25MLAAttention asserts heads % tp; the
lightning layer takes heads // tp, `head_dim` and `group_norm_size`), and the lightning rules are the stricter ones
(whole norm groups that shard, the decay slopes kept): the MLA heads take the lightning count
(`heads_follow_linear`). head_dim is written out: vLLM's LinearAttention falls back to hidden_size // heads.
"""

from __future__ import annotations

from hubpad.plan.adapters.bailing import _SHARED, BailingAdapter
from hubpad.plan.adapters.base import DENSE_MLP, EXPERTS, ROUTERS, L, Role
from hubpad.plan.adapters.deepseek import MlaAdapter
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

_A = L + r"attention\."
# (pattern, plan/lightning.py kind); the layer filter (lightning.layers) keeps them to the lightning layers
_LIGHTNING = [(_A + r"query_key_value\.(weight|bias)$", "qkv"), (_A + r"g_proj\.weight$", "head_rows"),
              (_A + r"g_norm\.weight$", "norm"), (_A + r"dense\.weight$", "out"), (_A + r"dense\.bias$", "hidden")]
_MLA = [(_A + r"(q_b_proj|q_proj)$", Role("q")), (_A + r"kv_b_proj$", Role("q", "kv_b")), (_A + r"dense$", Role("o"))]
_COPY = [r"^model\.word_embeddings$", r"^model\.norm$", r"^lm_head$",
         L + r"(input_layernorm|post_attention_layernorm|enorm|hnorm|eh_proj|final_layernorm)$",
         _A + r"(q_a_proj|kv_a_proj_with_mqa|q_a_layernorm|kv_a_layernorm|query_layernorm|key_layernorm)$"]


class Ling25Adapter(BailingAdapter):
    """MLA widths (q, kv_b, o) with no kv heads; the head count is the lightning layers' (plan/lightning.py)."""

    def head_shape(self, config: dict) -> HeadShape:
        """DeepSeek-V3's MLA widths and checks (MlaAdapter)."""
        return MlaAdapter.head_shape(self, config)

    def serving(self, config: dict) -> dict:
        """--trust-remote-code where the checkpoint ships its config code (auto_map): vLLM 0.32 registers no config
        class for a text-only bailing_hybrid."""
        out = serving(features=("arch:BailingMoeV2_5ForCausalLM",))
        return {**out, "extra_args": ["--trust-remote-code"] if config.get("auto_map") else []}


LING25 = Ling25Adapter(
    name="ling25", model_types=("bailing_hybrid",), architectures=("BailingMoeV2_5ForCausalLM",),
    linear_patterns=_MLA + DENSE_MLP + EXPERTS + _SHARED,
    copy_modules=_COPY + ROUTERS, copy_params=[L + r"mlp\.gate\.(expert_bias|e_score_correction_bias)$"],
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    shared_experts_key="num_shared_experts", linear_attention=_LIGHTNING, linear_attention_family="lightning",
    heads_follow_linear=True,
)
