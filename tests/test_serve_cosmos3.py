"""Cosmos3 (`cosmos3_omni`) in stock vLLM's CPU build: not served here. vLLM 0.32's cosmos3.py is Qwen3-VL's class,
whose module imports its processor stack, which imports torchvision; torchvision's registry builds do not import
beside torch 2.13.0+cpu (requirements/serve.txt leaves it out), so the derivative at TP 3 stops on that import before
any weight is read, as every Qwen3-VL row does here. What this build can check, it does: vLLM reads the derivative's
root config.json (Cosmos3OmniConfig, the padded reasoner dims in text_config) as it is. The exactness rests on the
float64 proofs (tests/test_cosmos3.py)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests import serving
from tests.helpers import cli

pytestmark = pytest.mark.serve

pytest.importorskip("torch")
from tests import cosmos3_models  # noqa: E402


@pytest.fixture(scope="module")
def derivative(tmp_path_factory):
    root = tmp_path_factory.mktemp("cosmos3-serve")
    cosmos3_models.build(root / "upstream")
    result = cli("mirror", root / "upstream", "--tp", 3, "--to", root / "tp3")
    assert result.exit_code == 0, result.output
    return root / "tp3"


def test_cosmos3_is_not_served_by_this_cpu_build(derivative, tmp_path):
    assert json.loads((derivative / "config.json").read_text())["text_config"]["num_attention_heads"] == 6
    run = serving.run_vllm([serving.job(derivative, 3, limit_mm_per_prompt={"image": 0, "video": 0})],
                           tmp_path / "run-tp3")
    assert run.results and not run.results[0]["ok"]
    assert "No module named 'torchvision'" in run.log, run.log[-3000:]


def test_vllm_reads_the_cosmos3_derivatives_config(derivative):
    """vLLM's get_config reads the root config.json through transformers' Cosmos3OmniConfig: the padded heads (6 on a
    hidden size of 128, which they do not divide) and kv heads come through as written."""
    code = ("import sys; from vllm.transformers_utils.config import get_config; c = get_config(sys.argv[1], False); "
            "t = c.text_config; print(type(c).__name__, t.num_attention_heads, t.num_key_value_heads, "
            "t.intermediate_size)")
    out = subprocess.run([serving.vllm_python(), "-c", code, str(derivative)], capture_output=True, text=True,
                         timeout=300, env=serving.vllm_env())
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-4:] == ["Cosmos3OmniConfig", "6", "3", "384"], out.stdout
