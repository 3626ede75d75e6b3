"""A.X-K1 (`AXK1` as published, `axk1` in transformers; AXK1ForCausalLM): DeepSeek-V3's MLA and MoE plus one norm.

vLLM 0.32's AXK1.py builds DeepSeek-V3's layers (its MLA attention shards q_b_proj / kv_b_proj rows and o_proj
columns per head and asserts heads % TP; the latent projections are replicated; the MoE block is DeepSeek-V3's
grouped sigmoid router with its correction bias, the shared expert one MLP of moe_intermediate_size x
n_shared_experts), and one more RMSNorm over the hidden size, `post_mlp_layernorm`, on the MoE layers' output (the
published checkpoints store it for every layer; transformers ignores the dense layers' copies). So the rules are
adapters/deepseek.py's MLA rules, with that norm copied. vLLM skips the MTP layer's weights (it has no A.X-K1 drafter),
and reads `topk_method` / `scoring_func` with DeepSeek-V3's own values as defaults, so neither is required.

Serving: the published config.json says model_type `AXK1` and names the hub's configuration file in auto_map;
transformers knows only `axk1`, so a derivative of the published config serves with --trust-remote-code (one saved
by transformers, `axk1`, loads through transformers' own AXK1Config). No parsers: vLLM 0.32 registers none for it.
"""

from __future__ import annotations

import dataclasses

from hubpad.plan.adapters.base import L
from hubpad.plan.adapters.deepseek import MlaAdapter, mla_adapter
from hubpad.plan.adapters.vllm import serving


class Axk1Adapter(MlaAdapter):
    """MLA heads padded as DeepSeek-V3's; no MTP drafter and no parsers in vLLM."""

    def serving(self, config: dict) -> dict:
        remote = config.get("model_type") == "AXK1"
        out = serving(features=("arch:AXK1ForCausalLM",))
        return {**out, "extra_args": ["--trust-remote-code"] if remote else []}


AXK1 = dataclasses.replace(mla_adapter(Axk1Adapter, "axk1", vllm_reads={}, more_copies=(L + r"post_mlp_layernorm$",)),
                           model_types=("AXK1", "axk1"))
