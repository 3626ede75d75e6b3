"""Stock vLLM (its CPU build) serves each family's derivative at the padded TP with the original's outputs.

For every family hubpad pads and vLLM's CPU backend runs: a tiny upstream (tests/serve_models.py) is served at
TP=1 (MLA, whose outputs in vLLM's CPU build depend on the heads per rank: at the TP with as many heads per rank as
the derivative has, Family.reference_tp), `hubpad mirror --tp N` pads it, the derivative is served at TP=N with its
own vocab plugin pip-installed and the card's model flags (as its card says), and the greedy tokens must be
identical with every logprob within float32 noise (tests/serving.py: LOGPROB_BOUND, and the margin that makes equal
tokens meaningful).
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

# (family, padded TP): TP=3 for every family, and TP=6 for Llama, Qwen2, the MLA pair's DeepSeek-V3 and a MoE
# (Qwen3-MoE).
CASES = [
    pytest.param("llama", 3, marks=pytest.mark.gate, id="llama-tp3"),
    pytest.param("llama", 6, id="llama-tp6"),
    pytest.param("qwen2", 3, id="qwen2-tp3"),  # served through vLLM's Llama class: the card's --hf-overrides
    pytest.param("qwen2", 6, id="qwen2-tp6"),
    pytest.param("qwen2_moe", 3, id="qwen2_moe-tp3"),  # vLLM's Transformers backend: the card's --model-impl
    pytest.param("qwen3", 3, id="qwen3-tp3"),
    pytest.param("qwen3_moe", 3, id="qwen3_moe-tp3"),
    pytest.param("qwen3_moe", 6, id="qwen3_moe-tp6"),
    pytest.param("mixtral", 3, id="mixtral-tp3"),
    pytest.param("hy_v3", 3, marks=pytest.mark.gate, id="hy_v3-tp3"),
    pytest.param("glm4_moe", 3, id="glm4_moe-tp3"),
    pytest.param("gemma3_text", 3, id="gemma3_text-tp3"),
    pytest.param("gemma4_text", 3, id="gemma4_text-tp3"),
    pytest.param("gemma4_text", 6, id="gemma4_text-tp6"),
    pytest.param("gemma4_moe", 3, id="gemma4_moe-tp3"),
    pytest.param("gemma4_moe", 6, id="gemma4_moe-tp6"),
    pytest.param("deepseek_v3", 3, id="deepseek_v3-tp3"),
    pytest.param("deepseek_v3", 6, id="deepseek_v3-tp6"),
    pytest.param("kimi_k2", 3, id="kimi_k2-tp3"),
]


@pytest.mark.parametrize("family, tp", CASES)
def test_derivative_serves_the_originals_outputs(zoo, family, tp):
    original = zoo.original(family, tp)
    derivative = zoo.derivative(family, tp)
    config = json.loads((derivative / "config.json").read_text())
    upstream = json.loads((zoo.upstream(family) / "config.json").read_text())
    assert config["num_attention_heads"] > upstream["num_attention_heads"]  # heads really were padded
    assert config["num_attention_heads"] % tp == 0
    engine = {**zoo.engine(family), **serving.card_engine_args(derivative)}  # as the card's command serves it
    run = serving.run_vllm([serving.job(derivative, tp, **engine)], derivative.parent / f"run-tp{tp}",
                           plugins=zoo.plugin(derivative))
    served = run.ok(0)
    serving.assert_same_outputs(original, served, f"{family} TP={zoo.reference_tp(family, tp)} vs derivative TP={tp}")


# MiMo-V2-Flash in vLLM's CPU build (0.32): with q/k heads wider than v/o heads (192 / 128 as published) MiMoV2Attention
# picks the TRITON_ATTN_DIFFKV backend, whose KV-cache write calls triton, which the CPU build does not have: the
# unpadded original already stops with this message. With equal widths the model takes the CPU attention backend.
MIMO_DIFFKV_MESSAGE = "module 'triton' has no attribute 'next_power_of_2'"
_MIMO_SERVE = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=1, intermediate_size=256,
                   moe_intermediate_size=64, vocab_size=512, n_routed_experts=8)


def _mimo_upstream(path, v_head_dim):
    import torch

    from tests import serve_models
    from tests.mimo_models import build_mimo

    build_mimo(path, dtype=torch.bfloat16, mtp=False, head_dim=64, v_head_dim=v_head_dim, **_MIMO_SERVE)
    serve_models.add_tokenizer(path)
    return path


def test_mimo_v2_flash_with_narrower_v_heads_stops_in_the_cpu_build(tmp_path):
    """Not hubpad's doing: the unpadded original stops, with vLLM's own message (docs/families/mimo-gemma-step.md)."""
    src = _mimo_upstream(tmp_path / "upstream", v_head_dim=32)
    run = serving.run_vllm([serving.job(src, 1)], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"], "vLLM's CPU build now serves MiMo-V2 with v_head_dim != head_dim"
    assert MIMO_DIFFKV_MESSAGE in run.log


@pytest.mark.parametrize("tp", [3, 6])
def test_mimo_v2_flash_with_equal_head_widths_serves_the_originals_outputs(tmp_path, tp):
    """Full and SWA layers (1 / 2 kv heads, sinks on SWA layers) padded to 12 / 3 / 6 heads, served as the card says."""
    from tests.helpers import cli

    src = _mimo_upstream(tmp_path / "upstream", v_head_dim=64)
    original = serving.run_vllm([serving.job(src, 1)], tmp_path / "run-original").ok(0)
    dst = tmp_path / f"tp{tp}"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    config = json.loads((dst / "config.json").read_text())
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["swa_num_attention_heads"],
            config["swa_num_key_value_heads"]) == (12, 3, 12, 6)
    engine = serving.card_engine_args(dst)
    run = serving.run_vllm([serving.job(dst, tp, **engine)], tmp_path / f"run-tp{tp}",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    serving.assert_same_outputs(original, run.ok(0), f"mimo_v2_flash TP=1 vs derivative TP={tp}")
