"""Step-3.5 (`step3p5`) in vLLM's CPU build (0.32.0): a tiny Step3p5ForCausalLM (tests/step3p7_models.py: the
served Step-3.7 fixture's language model, the published Step-3.5 names and config form) padded by `hubpad mirror
--tp 3` and served by vLLM's own Step3p5ForCausalLM at TP 3 with its vocab plugin (full layers 4 -> 6 heads, sliding
6 -> 9, kv 2 -> 3, experts and MLPs widened), against the original at TP 1.
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

pytest.importorskip("torch")


def test_step3p5_serves_the_originals_outputs_at_tp3(tmp_path):
    from tests.helpers import cli
    from tests.step3p7_models import build_served, text_only

    src = text_only(build_served(tmp_path / "step3p7"), tmp_path / "upstream")
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", "3", "--to", dst)
    assert result.exit_code == 0, result.output
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_attention_groups"],
            cfg["attention_other_setting"]["num_attention_heads"]) == (6, 3, 9)
    original = serving.run_vllm([serving.job(src, 1)], tmp_path / "run-original").ok(0)
    run = serving.run_vllm([serving.job(dst, 3)], tmp_path / "run-tp3",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    delta = serving.assert_same_outputs(original, run.ok(0), "step3p5 TP=1 vs derivative TP=3")
    print(f"max |Δ logprob| = {delta}")
