"""Hybrid linear attention in stock vLLM's CPU build: Qwen3-Next served at TP=3 and TP=6 with the original's tokens;
Qwen3.5 not served here, with the error that stops it.

vLLM 0.32's CPU Gated DeltaNet path takes only bfloat16 activations (gdn_attention.py asserts it), and in bfloat16 its
tokens depend on how the work is split: with the three prompts batched, which prompts share a step depends on
timing, and under CPU load the derivative took another branch than in a quiet run. So Qwen3-Next is served one
sequence at a time (max_num_seqs=1: deterministic). Then the original at TP=1 and the derivative at TP=3 and TP=6
give the same tokens, logprobs within the bfloat16 bound of tests/serving.py (measured 0.14). bfloat16 leaves the
fixture one fragile step: prompt 2, step 3 leads its runner-up by 0.13, within bfloat16 noise, and the unpadded
original at TP=2 takes the other branch there.
"""

from __future__ import annotations

import pytest

from tests import serving

pytestmark = pytest.mark.serve

ENGINE = dict(dtype="bfloat16", max_num_seqs=1)

pytest.importorskip("torch")
from tests import gdn_models  # noqa: E402  (torch, transformers)


@pytest.fixture(scope="module")
def qwen3_next(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3-next")
    src = gdn_models.build("qwen3_next", root / "upstream")
    original = serving.run_vllm([serving.job(src, 1, **ENGINE)], root / "run-original").ok(0)
    return root, src, original


@pytest.mark.parametrize("tp", [3, 6])
def test_qwen3_next_derivative_serves_the_originals_tokens(qwen3_next, tp):
    from tests.helpers import cli

    root, src, original = qwen3_next
    dst = root / f"tp{tp}"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    serving.assert_heads_padded(src, dst, tp, ("num_key_value_heads", "linear_num_key_heads",
                                               "linear_num_value_heads"))
    run = serving.run_vllm([serving.job(dst, tp, **ENGINE)], root / f"run-tp{tp}",
                           plugins=serving.install_plugin(dst, root / f"tp{tp}-plugin"))
    serving.assert_same_outputs(original, run.ok(0), f"qwen3_next TP=1 vs derivative TP={tp}", "bfloat16")


def test_qwen3_5_is_not_served_by_this_cpu_build(tmp_path):
    """vLLM's qwen3_5.py builds on qwen3_vl.py, which imports torchvision even for the text-only classes, and the
    registry's torchvision builds do not import beside torch 2.13.0+cpu (requirements/serve.txt leaves them out)."""
    src = gdn_models.build("qwen3_5_text", tmp_path / "upstream")
    run = serving.run_vllm([serving.job(src, 1, dtype="bfloat16")], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"]
    assert "No module named 'torchvision'" in run.log
