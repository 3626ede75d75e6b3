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
