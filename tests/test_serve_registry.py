"""The serving tier for issue 33's registry table: the snapshot of vLLM's registry equals the installed vLLM's, and
stock vLLM (its CPU build) serves the registry families hubpad pads with adapters of their own (Gemma 2,
Phi-3.5-MoE, Apertus, Nemotron, GLM-4-0414) at the padded TP with the original's outputs (tests/test_serve_families.py's way).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests import serving
from tests.helpers import ROOT

pytestmark = pytest.mark.serve

SNAPSHOT = ROOT / "tests" / "vllm_registry.txt"


@pytest.mark.gate
def test_registry_snapshot_is_the_installed_vllms():
    """When the lock moves, a new or renamed architecture fails here until tests/vllm_registry.txt is regenerated, and
    then tests/test_registry_table.py fails until docs/families.md has a row for it."""
    out = subprocess.run([serving.vllm_python(), str(ROOT / "tests" / "vllm_registry_dump.py")], capture_output=True,
                         text=True, timeout=600, env=serving.vllm_env())
    assert out.returncode == 0, out.stderr[-3000:]
    have, want = SNAPSHOT.read_text().splitlines(), out.stdout.splitlines()
    added, gone = sorted(set(want) - set(have)), sorted(set(have) - set(want))
    assert have == want, (f"tests/vllm_registry.txt is not the installed vLLM's registry (new: {added}; gone: {gone}); "
                          f"regenerate it: $HUBPAD_VLLM_PYTHON tests/vllm_registry_dump.py > tests/vllm_registry.txt, "
                          f"then give every new architecture its row in docs/families.md")


@pytest.mark.parametrize("family, tp", [("gemma2", 3), ("phimoe", 3), ("apertus", 3), ("nemotron", 3),
                                        ("nemotron", 6), ("glm4", 3)])
def test_registry_family_derivative_serves_the_originals_outputs(zoo, family, tp):
    derivative = zoo.derivative(family, tp)
    config = json.loads((derivative / "config.json").read_text())
    upstream = json.loads((zoo.upstream(family) / "config.json").read_text())
    assert config["num_attention_heads"] > upstream["num_attention_heads"] and config["num_attention_heads"] % tp == 0
    original = zoo.original(family, tp)
    engine = {**zoo.engine(family), **serving.card_engine_args(derivative)}
    run = serving.run_vllm([serving.job(derivative, tp, **engine)], derivative.parent / f"run-tp{tp}",
                           plugins=zoo.plugin(derivative))
    serving.assert_same_outputs(original, run.ok(0), f"{family} TP=1 vs derivative TP={tp}")
