"""openPangu Ultra-MoE (`pangu_ultra_moe`, PanguUltraMoEForCausalLM): DeepSeek-V3's MLA (deepseek.py) with sandwich
norms and an MTP layer.

Read in vLLM 0.32 (openpangu.py, openpangu_mtp.py, config/speculative.py); transformers has no class for it:

- `OpenPanguMLAAttention` is vLLM's own class, but it shards as DeepseekV2MLAAttention does (and asserts heads % TP):
  q_b_proj (q_proj without a q LoRA) rows of qk_nope + qk_rope per head, kv_b_proj rows of qk_nope + v, o_proj
  columns of v, the latent projections replicated (fused into one ReplicatedLinear), all through the same
  MultiHeadLatentAttentionWrapper. Its softmax scale is (qk_nope + qk_rope) ** -0.5 and its RoPE a deepseek_yarn
  of factor 1 (plain interleaved RoPE): neither reads the head count. 128 heads become 132 at TP 3 and 6.
- Sandwich norm (config `sandwich_norm`): `pre_mlp_layernorm` and `post_mlp_layernorm` beside input / post-attention
  norms, all over hidden, replicated and copied.
- The MoE: sigmoid grouped top-k over one group with the correction bias (`mlp.gate.e_score_correction_bias`, or
  `mlp.e_score_correction_bias`, which vLLM's loader maps there) when `router_enable_expert_bias`; the shared expert
  one MLP of moe_intermediate_size × n_shared_experts (one published); dense first_k_dense_replace layers, a key
  vLLM reads without a default. Nothing routes by a head count.
- The MTP layer at index num_hidden_layers is an OpenPanguDecoderLayer plus DeepSeek-V3's enorm / hnorm / eh_proj /
  shared_head (vLLM's OpenPanguMTP), padded like the others; `--speculative-config` method `mtp` maps pangu_ultra_moe
  to pangu_ultra_moe_mtp.
- vLLM registers no config class for pangu_ultra_moe and transformers has none: the published repo's
  configuration_openpangu_moe.py (auto_map) is read with --trust-remote-code, which the card passes.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import L, mtp_speculative
from hubpad.plan.adapters.deepseek import MlaAdapter, mla_adapter
from hubpad.plan.adapters.vllm import serving

_SANDWICH = (L + r"(pre_mlp_layernorm|post_mlp_layernorm)$",)


class PanguAdapter(MlaAdapter):
    """No tool-call or reasoning parser of vLLM's is openPangu's; --trust-remote-code for its config class."""

    def serving(self, config: dict) -> dict:
        spec = mtp_speculative(config)
        out = serving(spec=spec, features=("arch:PanguUltraMoEForCausalLM",) + (("spec:mtp",) if spec else ()))
        return {**out, "extra_args": ["--trust-remote-code"]}


PANGU_ULTRA_MOE = mla_adapter(PanguAdapter, "pangu_ultra_moe", more_copies=_SANDWICH, vllm_reads={
    "first_k_dense_replace": "vLLM's openpangu model reads without a default (it stops at load)",
    "sandwich_norm": "vLLM's openpangu model defaults to False and then skips the checkpoint's pre/post-MLP norms"})
