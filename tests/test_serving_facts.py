"""Each family's vLLM serving facts (the adapters' serving()) and the minimum vLLM version they add up to.

The parser names and first releases were read in vLLM's released wheels (see hubpad/plan/adapters/vllm.py)."""

from __future__ import annotations

import pytest

from hubpad.plan.adapters import adapter_for
from hubpad.plan.adapters.vllm import FIRST_RELEASE, min_vllm
from tests.hy3_real import HY3_CONFIG
from tests.real_models import LLAMA33_70B, QWEN3_235B_A22B, QWEN25_72B

MIXTRAL = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8}


@pytest.mark.parametrize("config, tool, reasoning, version", [
    (LLAMA33_70B, "llama3_json", None, "0.6.3"),
    (dict(LLAMA33_70B, rope_scaling=None), None, None, None),  # Llama 2 / 3.0 templates have no JSON tool calls
    (QWEN25_72B, "hermes", None, "0.6.0"),
    (QWEN3_235B_A22B, "hermes", "qwen3", "0.9.0"),
    (dict(QWEN3_235B_A22B, model_type="qwen3", architectures=["Qwen3ForCausalLM"]), "hermes", "qwen3", "0.9.0"),
    (dict(MIXTRAL, head_dim=128), "mistral", None, "0.6.0"),
    (dict(MIXTRAL, num_attention_heads=36, num_key_value_heads=9, head_dim=128), "mistral", None, "0.8.0"),
    (dict(MIXTRAL, model_type="mistral", architectures=["MistralForCausalLM"]), "mistral", None, "0.6.0"),
    (HY3_CONFIG, "hy_v3", "hy_v3", "0.20.0"),
])
def test_family_flags_and_minimum_vllm(config, tool, reasoning, version):
    s = adapter_for(config).serving(config)
    assert (s["tool_call_parser"], s["reasoning_parser"]) == (tool, reasoning)
    assert min_vllm(s["vllm_features"])["version"] == version
    assert all(f in FIRST_RELEASE for f in s["vllm_features"])


def test_hy3_mtp_and_plan_features():
    s = adapter_for(HY3_CONFIG).serving(HY3_CONFIG)
    assert s["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert min_vllm(s["vllm_features"] + ["plugin:vocab-patch"])["version"] == "0.20.0"
    llama = min_vllm(adapter_for(LLAMA33_70B).serving(LLAMA33_70B)["vllm_features"] + ["plugin:vocab-patch"])
    assert llama == {"version": "0.19.0", "because": [FIRST_RELEASE["plugin:vocab-patch"][1]]}
    assert min_vllm(["flag:moe-backend-marlin"])["version"] == "0.17.0"
    assert min_vllm([]) == {"version": None, "because": []}
