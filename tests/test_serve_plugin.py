"""The vocab plugin, proven both ways in stock vLLM: without it the derivative stops exactly as its card predicts;
with it installed, a TP that needs no patch serves unchanged (and the plugin says in vLLM's log that it is there)."""

from __future__ import annotations

import re

import pytest

from tests import serving

pytestmark = pytest.mark.serve


@pytest.mark.gate
def test_without_its_plugin_stock_vllm_stops_as_the_card_says(zoo):
    derivative = zoo.derivative("llama", 3)
    card = (derivative / "README.md").read_text()
    predicted = re.search(r"stops at startup with\s+`(AssertionError: \d+ is not divisible by \d+)`", card)
    assert predicted, "the card does not predict the failure"
    assert predicted.group(1) == "AssertionError: 512 is not divisible by 3"
    run = serving.run_vllm([serving.job(derivative, 3)], derivative.parent / "run-tp3-without-plugin")
    assert run.results and not run.results[0]["ok"], "stock vLLM served a derivative that needs the plugin"
    assert predicted.group(1) in run.log


@pytest.mark.gate
def test_with_the_plugin_the_padded_vocab_is_announced(zoo):
    """The plugin logs through vLLM's logger: loaded, and the vocabulary it padded (512 -> a multiple of 192)."""
    derivative = zoo.derivative("llama", 3)
    run = serving.run_vllm([serving.job(derivative, 3, max_tokens=2, prompts=serving.PROMPTS[:1])],
                           derivative.parent / "run-tp3-plugin-log", plugins=zoo.plugin(derivative))
    run.ok(0)
    assert "hubpad vocab patch: loaded" in run.log
    assert re.search(r"hubpad vocab patch: \S+ vocab 512 padded to a multiple of 192 \(was 64\) for TP=3", run.log)


def test_with_the_plugin_a_tp_that_needs_no_patch_is_unchanged(zoo):
    """512 splits over 2 ranks: at TP=2 the plugin is loaded in every process and changes nothing."""
    derivative = zoo.derivative("llama", 3)
    run = serving.run_vllm([serving.job(zoo.upstream("llama"), 2)], derivative.parent / "run-upstream-tp2-plugin",
                           plugins=zoo.plugin(derivative))
    served = run.ok(0)
    assert "hubpad vocab patch: loaded" in run.log
    assert "padded to a multiple of" not in run.log
    serving.assert_same_outputs(zoo.original("llama"), served, "llama TP=1 vs upstream TP=2 with the plugin")
