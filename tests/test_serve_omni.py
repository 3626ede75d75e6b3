"""Issue 33's `omni` families in stock vLLM's CPU build: Muse Glimmer and DiffusionGemma are not served here. vLLM
0.32's muse_glimmer.py imports its processor (vllm/transformers_utils/processors/muse_glimmer.py) and
diffusion_gemma.py imports gemma4_mm.py, whose Gemma 4 processor comes from transformers' image processors: both
import torchvision, whose registry builds do not import beside torch 2.13.0+cpu (requirements/serve.txt leaves it
out). So the registry cannot inspect either class: each derivative, at TP 3, stops on that import before any weight
is read, as its original does. Their exactness rests on the float64 proofs (tests/test_muse_glimmer.py,
tests/test_diffusion_gemma.py)."""

from __future__ import annotations

import json

import pytest

from tests import serving
from tests.helpers import cli

pytestmark = pytest.mark.serve

pytest.importorskip("torch")
from tests import diffusion_gemma_models, muse_glimmer_models, serve_models  # noqa: E402


def _muse_glimmer(path):
    muse_glimmer_models.build_served(path)


def _diffusion_gemma(path):
    diffusion_gemma_models.build(path, intermediate_size=40)
    serve_models.add_tokenizer(path)


@pytest.mark.parametrize("family, build, heads", [("muse_glimmer", _muse_glimmer, 6),
                                                  ("diffusion_gemma", _diffusion_gemma, 12)])
def test_family_is_not_served_by_this_cpu_build(tmp_path, family, build, heads):
    src, dst = tmp_path / "upstream", tmp_path / "tp3"
    build(src)
    result = cli("mirror", src, "--tp", 3, "--to", dst)
    assert result.exit_code == 0, result.output
    assert json.loads((dst / "config.json").read_text())["text_config"]["num_attention_heads"] == heads
    run = serving.run_vllm([serving.job(dst, 3, limit_mm_per_prompt={"image": 0, "video": 0})], tmp_path / "run-tp3")
    assert run.results and not run.results[0]["ok"]
    assert "No module named 'torchvision'" in run.log, run.log[-3000:]
