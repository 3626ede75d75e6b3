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


def test_vllm_reads_the_muse_glimmer_derivatives_config(tmp_path):
    """What this build can check without the model class: vLLM reads the derivative's config.json through its own
    MuseGlimmerTextConfig, which accepts padded heads that do not divide hidden_size (6 on 40 here; 48 on 6656 in the
    30B), where transformers' strict class would refuse them."""
    import subprocess

    src, dst = tmp_path / "upstream", tmp_path / "tp3"
    muse_glimmer_models.build(src)
    assert cli("mirror", src, "--tp", 3, "--to", dst).exit_code == 0
    code = ("import sys; from vllm.transformers_utils.config import get_config; c = get_config(sys.argv[1], False); "
            "t = c.text_config; print(type(t).__module__, t.num_attention_heads, t.num_key_value_heads, t.hidden_size)")
    out = subprocess.run([serving.vllm_python(), "-c", code, str(dst)], capture_output=True, text=True, timeout=300,
                         env=serving.vllm_env())
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-4:] == ["vllm.transformers_utils.configs.muse_glimmer", "6", "3", "40"], out.stdout
