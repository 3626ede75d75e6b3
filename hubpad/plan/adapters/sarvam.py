"""Sarvam-105B (`sarvam_mla`, SarvamMLAForCausalLM): DeepSeek-V3's MLA (deepseek.py) without a q LoRA, a sigmoid
router with a correction bias, one shared expert, a dense first layer.

Read in vLLM 0.32 (sarvam.py) and transformers 5.24 (models/sarvam_mla: SarvamMLAConfig, computed by
DeepseekV3ForCausalLM):

- `SarvamMLAAttention` asserts heads % TP and shards as DeepseekV2MLAAttention: q_proj rows of qk_nope + qk_rope per
  head, kv_b_proj rows of qk_nope + v, o_proj columns of v; kv_a_proj_with_mqa and kv_a_layernorm replicated. Its
  softmax scale ((qk_nope + qk_rope) ** -0.5, times mscale² under deepseek_yarn) reads no head count. 64 heads
  become 66 at TP 3 and 6.
- The MoE block exists only where the config has `num_experts` (the published name; transformers' attribute map
  reads it as n_routed_experts and saves that instead): vLLM checks hasattr, so a config without it builds dense
  MLPs everywhere and stops at load. Routing (sigmoid, the bias zero-meaned on load, groups only where n_group and
  topk_group are stated) reads no head count; the router is copied.
- The shared expert: vLLM builds one MLP of moe_shared_expert_intermediate_size (else moe_intermediate_size) ×
  num_shared_experts, transformers one of moe_intermediate_size × n_shared_experts; hubpad pads exactly one, with
  the routed experts' width (a stated moe_shared_expert_intermediate_size must equal it, and is padded with it).
- The dense first layers use intermediate_size (vLLM's default 16384 where it is missing).
- vLLM does not count sarvam_mla among its DeepSeek-style MLA model types, so it sizes the MLA cache from
  config.json's `head_dim`: published as kv_lora_rank + qk_rope_head_dim (576), which no head count changes. transformers
  saves qk_rope_head_dim there instead; the plan warns when head_dim is anything else (vLLM stops: "Head dimension
  64 is not supported by MLA.", found by the serving tier).
- vLLM registers no config class for sarvam_mla and transformers < 5.20 has none: the published repo's remote config
  (auto_map) is read with --trust-remote-code, which the card passes.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import Adapter
from hubpad.plan.adapters.deepseek import MlaAdapter, mla_adapter
from hubpad.plan.adapters.vllm import serving


class SarvamAdapter(MlaAdapter):
    """No tool-call or reasoning parser of vLLM's is Sarvam's; no MTP layer."""

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        for key in ("num_shared_experts", "n_shared_experts"):
            if config.get(key) not in (None, 0, 1):
                raise ConfigError(f"config.json: {key} {config[key]} is not supported (the shared expert is padded "
                                  f"with the routed experts' width, which needs exactly one shared expert)")
        return Adapter.intermediate_sizes(self, config)

    def missing_vllm_keys(self, config: dict) -> list[str]:
        out = super().missing_vllm_keys(config)
        latent = int(config.get("kv_lora_rank") or 0) + int(config.get("qk_rope_head_dim") or 0)
        if config.get("head_dim") != latent:
            out.append(f"config.json has head_dim {config.get('head_dim')}, not kv_lora_rank + qk_rope_head_dim = "
                       f"{latent}, which vLLM's sarvam model sizes its MLA cache from (it stops at startup)")
        return out

    def serving(self, config: dict) -> dict:
        return {**serving(features=("arch:SarvamMLAForCausalLM",)), "extra_args": ["--trust-remote-code"]}


SARVAM_MLA = mla_adapter(SarvamAdapter, "sarvam_mla", expert_keys=(
    "moe_intermediate_size", "moe_shared_expert_intermediate_size"), vllm_reads={
    "num_experts": "vLLM's sarvam model needs to build its MoE layers (without it every layer is a dense MLP and the "
                   "experts' weights do not load)"})
