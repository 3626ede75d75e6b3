"""Ling 3 (`bailing_hybrid` with architectures BailingMoeV3ForCausalLM; transformers' BailingHybridForCausalLM):
Kimi Delta Attention layers (plan/kda.py) and gated MLA layers in groups of `layer_group_size` (the last of each
group, and any trailing layers, MLA), a dense first MLP (`first_k_dense_replace`) and Ling's MoE (adapters/bailing.py:
per-expert experts, a router `mlp.gate` with `expert_bias`, one shared expert of its own width).

Published names (transformers writes them back from its own, and vLLM 0.32's bailing_moe_v3.py reads them):
`model.word_embeddings`, `model.layers.N.attention.*`, `model.norm`, `lm_head`.
- KDA layers: `q_proj` / `k_proj` / `v_proj` / `f_proj` / `g_proj` [H d, hidden], `b_proj` [H, hidden], `q/k/v_conv1d`
  [H d, 1, K], `dt_bias` [H d], `A_log` [H], `o_norm` [d] (copied), `dense` [hidden, H d] (vLLM: o_proj).
- MLA layers: `q_proj` (or `q_a_proj` / `q_a_layernorm` / `q_b_proj`), `kv_a_proj_with_mqa`, `kv_a_layernorm`,
  `kv_b_proj`, `dense`, and the output gate `g_proj`: one row per head (`gated_attention_proj_granularity_type`
  head_wise) or v_head_dim rows (element_wise), a ColumnParallelLinear in vLLM.

vLLM builds both layer kinds from the one `num_attention_heads` (BailingMoeV3MLAAttention asserts heads % tp;
BailingMoeV3KimiDeltaAttention takes heads // tp and `head_dim`, `short_conv_kernel_size`): the MLA heads and the KDA
heads are one count, padded together to the fewest heads divisible by TP (Ling-3.0-flash: 32 -> 33 at TP 3, 36 at TP 6;
a head is no group of anything here: KDA's o_norm is per head_dim, and MLA has no kv heads), each layer kind by its own
per-head rule. MTP layers (`model.layers.N`, N >= num_hidden_layers: vLLM's main model skips them) are not drafted on
the card.
"""

from __future__ import annotations

import dataclasses

from hubpad.errors import ConfigError
from hubpad.plan.adapters.bailing import _SHARED, BailingAdapter
from hubpad.plan.adapters.base import DENSE_MLP, EXPERTS, ROUTERS, L, Role
from hubpad.plan.adapters.deepseek import MlaAdapter
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

_A = L + r"attention\."
# (pattern, plan/kda.py kind); the layer filter (kda.layers) keeps them to the KDA layers
_KDA = [(_A + r"(q_proj|k_proj|v_proj|f_proj|g_proj)\.weight$", "head_rows"), (_A + r"b_proj\.weight$", "beta"),
        (_A + r"[qkv]_conv1d\.weight$", "conv"), (_A + r"dt_bias$", "dt_bias"), (_A + r"A_log$", "heads"),
        (_A + r"dense\.weight$", "out")]
_MLA = [(_A + r"(q_b_proj|q_proj)$", Role("q")), (_A + r"kv_b_proj$", Role("q", "kv_b")),
        (_A + r"g_proj$", Role("q", "g")), (_A + r"dense$", Role("o"))]
_COPY = [r"^model\.word_embeddings$", r"^model\.norm$", r"^lm_head$",
         L + r"(input_layernorm|post_attention_layernorm|enorm|hnorm|eh_proj|final_layernorm)$",
         _A + r"(q_a_proj|kv_a_proj_with_mqa|q_a_layernorm|kv_a_layernorm|o_norm)$"]


class Ling3Adapter(BailingAdapter):
    """MLA widths (q, kv_b, o, the gate g) with no kv heads; one head count shared with the KDA layers."""

    def head_shape(self, config: dict) -> HeadShape:
        """DeepSeek-V3's MLA widths and checks (MlaAdapter), and the output gate g: one row per head (head_wise) or
        v_head_dim rows (element_wise)."""
        mla = MlaAdapter.head_shape(self, config)
        gate = {"element_wise": mla.widths["o"]}.get(config.get("gated_attention_proj_granularity_type"), 1)
        return dataclasses.replace(mla, widths={**mla.widths, "g": gate},
                                   labels={**mla.labels, "o": "dense columns", "g": "g_proj rows (MLA gate)"},
                                   gates=frozenset({"g"}) if gate == 1 else frozenset())

    def padded_config(self, upstream: dict, config: dict, heads: int, kv: int) -> dict:
        """The MLA and KDA layers read one num_attention_heads: both padded counts must be that one."""
        kda = {k: config[k] for k in ("num_attention_heads", "linear_num_heads") if k in config}
        if any(v != heads for v in kda.values()):
            raise ConfigError(f"internal error: MLA heads padded to {heads}, KDA heads to {kda}; vLLM builds both "
                              f"from num_attention_heads")
        return config

    def serving(self, config: dict) -> dict:
        """--trust-remote-code where the checkpoint ships its config code (auto_map): vLLM 0.32 registers no config
        class for a text-only bailing_hybrid, and transformers before BailingHybrid cannot read it."""
        out = serving(features=("arch:BailingMoeV3ForCausalLM",))
        return {**out, "extra_args": ["--trust-remote-code"] if config.get("auto_map") else []}


LING3 = Ling3Adapter(
    name="ling3", model_types=("bailing_hybrid",), architectures=("BailingMoeV3ForCausalLM",),
    linear_patterns=_MLA + DENSE_MLP + EXPERTS + _SHARED,
    copy_modules=_COPY + ROUTERS, copy_params=[L + r"mlp\.gate\.(expert_bias|e_score_correction_bias)$"],
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    shared_experts_key="num_shared_experts", linear_attention=_KDA, linear_attention_family="kda",
)
