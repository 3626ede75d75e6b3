"""GLM-4.7-Flash (`glm4_moe_lite`, Glm4MoeLiteForCausalLM): DeepSeek-V3's MLA (deepseek.py) with GLM-4.5's MoE block.

Read in transformers 5.24 (models/glm4_moe_lite) and vLLM 0.32 (glm4_moe_lite.py, glm4_moe_lite_mtp.py):

- Attention is vLLM's DeepseekV2MLAAttention (`Glm4MoeLiteMLAAttention` subclasses it), so the heads pad by
  DeepSeek-V3's rule: q_b_proj rows (qk_nope + qk_rope = 256 per head), kv_b_proj rows (qk_nope + v = 448) and
  o_proj columns (v = 256) per head, the latent projections replicated. GLM-4.7-Flash's 20 heads become 21 at TP 3
  and 24 at TP 6 (BF16); block FP8 would need an even count per rank (kv_b's 448 rows per head).
- The MoE block is vLLM's Glm4MoE: sigmoid routing with `e_score_correction_bias` always (it reads no topk_method or
  scoring_func, so DeepSeek-V3's router keys are not asked for; it reads first_k_dense_replace without a default,
  which a config saved by transformers lacks: the plan warns), a shared expert of moe_intermediate_size ×
  n_shared_experts (one published), dense first layers of intermediate_size: all as deepseek.py pads them.
- The MTP layer at index num_hidden_layers is a Glm4MoeLiteDecoderLayer plus DeepSeek-V3's enorm / hnorm / eh_proj /
  shared_head (vLLM's Glm4MoeLiteMTP), padded like the others; vLLM drafts with it as method `mtp`
  (speculative.py maps Glm4MoeLiteForCausalLM to Glm4MoeLiteMTPModel).
"""

from __future__ import annotations

from hubpad.plan.adapters.deepseek import MlaAdapter, mla_adapter


class GlmLiteAdapter(MlaAdapter):
    """GLM-4.7's tool-call format (parser glm47) and GLM's reasoning parser (glm45), as for GLM-5."""

    tool_call_parser = "glm47"
    reasoning_parser = "glm45"
    vllm_features = ("arch:Glm4MoeLiteForCausalLM",)
    mtp_features = ("spec:glm4_moe_lite_mtp", "spec:mtp")


GLM4_MOE_LITE = mla_adapter(GlmLiteAdapter, "glm4_moe_lite", vllm_reads={
    "first_k_dense_replace": "vLLM's glm4_moe_lite model reads without a default (it stops at load; transformers' "
                             "Glm4MoeLiteConfig keeps mlp_layer_types instead)"})
