"""Intern-S2-Mobius in stock vLLM's CPU build: not served here, with the error that stops it.

vLLM 0.32's interns2_mobius.py builds on qwen3_5.py and qwen3_vl.py, which import torchvision, whose registry builds do
not import beside torch 2.13.0+cpu (requirements/serve.txt leaves it out). The derivative (TP 3, served with its
card's flags) stops at that import; tests/test_interns2_mobius.py holds its float64 proof.
"""

from __future__ import annotations

import pytest

from tests import serving
from tests.helpers import cli

pytestmark = pytest.mark.serve

pytest.importorskip("torch")
from tests import interns2_mobius_models as mobius  # noqa: E402  (torch, transformers)
from tests import serve_models  # noqa: E402


def test_interns2_mobius_derivative_stops_at_vllms_torchvision_import(tmp_path):
    src = mobius.build(tmp_path / "upstream")
    mobius.add_remote_config(src)
    serve_models.add_tokenizer(src)
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", 3, "--to", dst)
    assert result.exit_code == 0, result.output
    argv = serving.card_serve_command(dst)
    assert "--trust-remote-code" in argv and "--mm-encoder-tp-mode" in argv
    run = serving.run_vllm([serving.job(dst, 3, trust_remote_code=True, mm_encoder_tp_mode="data")], tmp_path / "run")
    assert run.results and not run.results[0]["ok"], run.log[-3000:]
    assert ("Model architectures ['InternS2MobiusForConditionalGeneration'] failed to be inspected"
            in run.results[0]["error"]), run.results[0]["error"]
    assert "No module named 'torchvision'" in run.log  # why: the class's module stops at that import
