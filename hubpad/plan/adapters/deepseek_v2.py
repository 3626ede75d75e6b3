"""DeepSeek-V2 / V2-Lite / V2.5 (`deepseek_v2`, DeepseekV2ForCausalLM): DeepSeek-V3's MLA rule (deepseek.py), two
shared experts, and a vLLM route for the padded config.

Read in transformers 5.24 (models/deepseek_v2) and vLLM 0.32 (deepseek_v2.py, transformers_utils/config.py):

- Heads pad as DeepSeek-V3's (the same DeepseekV2MLAAttention); V2-Lite has no q LoRA, so its `q_proj` rows are
  the per-head q rows. The router (topk_method greedy / group_limited_greedy, softmax scoring, no correction bias)
  reads no head count and is copied.
- The shared expert is ONE MLP of moe_intermediate_size × n_shared_experts (2 in every published V2) in both
  engines, padded at its end; vLLM derives that width from the padded config, so it grows to n_shared_experts × the
  routed experts' padded width (base.py `shared_experts_key`), which keeps it exact (a zero channel adds nothing).
- **The config class.** vLLM reads a deepseek_v2 config.json with transformers' DeepseekV2Config (no vLLM config class
  of its own), whose validate_architecture rejects hidden_size % num_attention_heads != 0. DeepSeek-V2's hidden size
  5120 = 2^10 x 5 has no divisor that 3 divides, so no padded head count at TP 3 or 6 passes it (V2-Lite: 2048 =
  2^11). The route: `--hf-overrides '{"model_type": "deepseek_v32"}'`. vLLM takes an overridden model_type before its
  own config registry (HFConfigParser), where deepseek_v32 maps to transformers' DeepseekV3Config, and registers that
  class for the checkpoint's own model_type too (vLLM 0.20.0 on), so AutoConfig reads config.json as DeepseekV3Config,
  which has no such check and keeps every key V2's class reads (compared key by key: only mlp_bias, unread, and
  DeepseekV3Config's defaults num_nextn_predict_layers / rope_interleave, which vLLM's DeepseekV2ForCausalLM does not
  use here, differ). The architecture stays DeepseekV2ForCausalLM; config.json keeps model_type deepseek_v2.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import (COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, MTP_MODULES, ROUTERS, SHARED,
                                       Adapter, VllmRoute)
from hubpad.plan.adapters.deepseek import MLA_HEADS, MLA_LATENT, MlaAdapter
from hubpad.plan.adapters.vllm import serving

_ROUTE = VllmRoute(
    why="vLLM reads a deepseek_v2 config.json with transformers' DeepseekV2Config, which rejects hidden_size {hidden} "
        "% {heads} attention heads != 0 (no padded head count divides DeepSeek-V2's hidden size at TP 3 or 6)",
    route="vLLM loads the config with transformers' DeepseekV3Config instead, named by --hf-overrides: vLLM looks an "
          "overridden model_type up in its own config registry (deepseek_v32 -> DeepseekV3Config) and registers that "
          "class for the checkpoint's deepseek_v2 too; it has no hidden-size check and holds the same keys, and the "
          "model is still DeepseekV2ForCausalLM (config.json's architectures), DeepSeek-V2's router included. "
          "config.json keeps model_type deepseek_v2; transformers' own DeepseekV2Config refuses it as well, so "
          "transformers does not load this derivative",
    without="Without it vLLM stops at startup, before loading a weight: \"The hidden size ({hidden}) is not a multiple "
            "of the number of attention heads ({heads}).\"",
    hf_overrides={"model_type": "deepseek_v32"},
    features=("flag:hf-overrides", "config:model_type-registry"),
)


class DeepseekV2Adapter(MlaAdapter):
    """No tool-call or reasoning parser of vLLM's is DeepSeek-V2's; no MTP layer."""

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        return Adapter.intermediate_sizes(self, config)  # any n_shared_experts: the shared MLP is a tied group

    def serving(self, config: dict) -> dict:
        return {**serving(features=("arch:DeepseekV2ForCausalLM",)), "extra_args": []}


DEEPSEEK_V2 = DeepseekV2Adapter(
    name="deepseek_v2", model_types=("deepseek_v2",),
    linear_patterns=MLA_HEADS + DENSE_MLP + EXPERTS + SHARED,
    copy_modules=COPY_MODULES + ROUTERS + MLA_LATENT + MTP_MODULES, copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    shared_experts_key="n_shared_experts", vllm_config_rejects_uneven_heads=True, vllm_route=_ROUTE,
)
