"""Sarvam MoE (`sarvam_moe`, SarvamMoEForCausalLM: sarvamai/sarvam-30b): Ling / Ring's layout and vLLM class.

vLLM 0.32's SarvamMoEForCausalLM is BailingMoeForCausalLM with one change at load time: each router's
`mlp.gate.expert_bias` is shifted to zero mean (it only chooses experts, so the choice is unchanged). The tensors are
Ling's (a fused `attention.query_key_value`, `attention.dense`, `query_layernorm` / `key_layernorm`, routed experts
per expert, one shared expert of moe_intermediate_size x num_shared_experts), so every rule is adapters/bailing.py's:
whole GQA groups appended to each section of the fused tensor, head_dim written (vLLM's BailingAttention falls back
to hidden_size // heads; transformers' SarvamMoEConfig defaults it to 64), experts and MLPs padded with zeros, the
routers and their biases copied (the expert count does not change).

transformers (5.20 on) reads the same names into its Glm4Moe classes (conversion_mapping's `sarvam_moe`: the fused
rows split [q | k | v] by the config's head counts); vLLM 0.32 registers no config class for `sarvam_moe` and its CPU
build's transformers (5.19) has none, so the card serves it with --trust-remote-code (the hub's configuration file).
"""

from __future__ import annotations

import dataclasses

from hubpad.plan.adapters.bailing import BAILING_MOE

SARVAM_MOE = dataclasses.replace(BAILING_MOE, name="sarvam_moe", model_types=("sarvam_moe",))
