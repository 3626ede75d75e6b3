"""The Qwen2 line with padded heads, in stock vLLM: served through its Llama class as the card says, and what happens
without the card's `--hf-overrides`.

vLLM's Qwen2ForCausalLM computes head_dim = hidden_size // heads and ignores config.head_dim, and its weight loader
narrows a larger checkpoint tensor to the size it expects without an error. So without the flag the outcome depends on
whether an attention kernel takes the wrong head_dim: 448 // 21 = 21 is a size none takes (vLLM stops at startup),
768 // 12 = 64 is one they take (the model loads and gives wrong tokens, silently). The derivative's served rows
(test_serve_families.py qwen2-tp3 / qwen2-tp6, test_serve_http.py qwen2) pass the card's flag.
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

ROUTE = {"architectures": ["LlamaForCausalLM"], "qkv_bias": True}


def test_card_keeps_qwen2_and_serves_through_llama(zoo):
    derivative = zoo.derivative("qwen2", 3)
    config = json.loads((derivative / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("qwen2", ["Qwen2ForCausalLM"])
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (21, 3, 32)
    assert serving.card_engine_args(derivative) == {"hf_overrides": ROUTE}
    assert json.loads((derivative / "hubpad.json").read_text())["serving"]["min_vllm"]["version"] == "0.19.0"


def test_without_the_flag_a_head_dim_no_kernel_takes_stops_at_startup(zoo):
    derivative = zoo.derivative("qwen2", 3)
    run = serving.run_vllm([serving.job(derivative, 3)], derivative.parent / "run-tp3-no-route",
                           plugins=zoo.plugin(derivative))
    assert run.results and not run.results[0]["ok"], "vLLM's Qwen2 class served head_dim 21"
    assert "Unsupported CPU attention configuration: head_dim=21" in run.log


def test_without_the_flag_a_head_dim_a_kernel_takes_gives_wrong_tokens(zoo):
    """The case the card warns about: nothing fails, and the tokens are wrong. With the card's flag they are right."""
    derivative = zoo.derivative("qwen2-quiet", 3)
    config = json.loads((derivative / "config.json").read_text())
    assert config["hidden_size"] // config["num_attention_heads"] == 64 != config["head_dim"] == 96
    card = serving.card_engine_args(derivative)
    assert card == {"hf_overrides": ROUTE}
    run = serving.run_vllm([serving.job(derivative, 3), serving.job(derivative, 3, **card)],
                           derivative.parent / "run-tp3-with-and-without-route", plugins=zoo.plugin(derivative))
    original = zoo.original("qwen2-quiet")
    with pytest.raises(AssertionError, match="greedy tokens differ"):
        serving.compare(original, run.ok(0))
    serving.assert_same_outputs(original, run.ok(1), "qwen2 TP=1 vs derivative TP=3 with the card's --hf-overrides")
