"""The GQA families with config quirks (issue 33) in stock vLLM's CPU build: the tiny upstream (tests/serve_models.py)
served at TP 1, `hubpad mirror --tp N` padding it, the derivative served at TP N with its vocab plugin and the card's
model flags, and the same greedy tokens (tests/serving.py's bounds), as tests/test_serve_families.py does for the
older families.

Where vLLM's CPU build cannot serve a family at all (the unpadded original stops too), a test expects its message.
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

CASES = [
    pytest.param("exaone4", 3, id="exaone4-tp3"),
    pytest.param("exaone4", 6, id="exaone4-tp6"),
    pytest.param("cohere2", 3, id="cohere2-tp3"),
    pytest.param("cohere", 3, id="cohere-tp3"),  # Command R+'s per-head q/k LayerNorm rows, sharded by heads
    pytest.param("ernie4_5_moe", 3, id="ernie4_5_moe-tp3"),
    pytest.param("exaone_moe", 3, id="exaone_moe-tp3"),
    pytest.param("cohere2_moe", 3, id="cohere2_moe-tp3"),
    pytest.param("afmoe", 3, id="afmoe-tp3"),
    pytest.param("laguna", 3, id="laguna-tp3"),
    pytest.param("laguna", 6, id="laguna-tp6"),
]


@pytest.mark.parametrize("family, tp", CASES)
def test_quirky_family_serves_the_originals_outputs(zoo, family, tp):
    original = zoo.original(family, tp)
    derivative = zoo.derivative(family, tp)
    config = json.loads((derivative / "config.json").read_text())
    upstream = json.loads((zoo.upstream(family) / "config.json").read_text())
    assert config["num_attention_heads"] > upstream["num_attention_heads"] and config["num_attention_heads"] % tp == 0
    assert config["head_dim"] == 32  # written: the classes' hidden_size // heads fallback would read 128 // 6 = 21
    engine = {**zoo.engine(family), **serving.card_engine_args(derivative)}
    run = serving.run_vllm([serving.job(derivative, tp, **engine)], derivative.parent / f"run-tp{tp}",
                           plugins=zoo.plugin(derivative))
    serving.assert_same_outputs(original, run.ok(0), f"{family} TP=1 vs derivative TP={tp}")
