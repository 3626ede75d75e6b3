"""EXAONE 4.5 in stock vLLM's CPU build: not served here, with the error that stops it. vLLM's exaone4_5.py imports
qwen2_5_vl.py / qwen2_vl.py, whose image processor imports torchvision, which the registry's builds do not ship beside
torch 2.13.0+cpu (requirements/serve.txt leaves it out; Qwen3-VL and GLM-4.5V stop alike, tests/test_serve_vlm.py).
The derivative is what is run, at TP 3 with the card's `--mm-encoder-tp-mode data`."""

from __future__ import annotations

import pytest

from tests import serving
from tests.helpers import cli

pytestmark = pytest.mark.serve

pytest.importorskip("torch")
from tests import serve_models  # noqa: E402  (torch, transformers)


def test_exaone4_5_derivative_stops_at_vllms_torchvision_import(tmp_path):
    from tests.vlm_models import build_exaone4_5

    src = build_exaone4_5(tmp_path / "upstream")
    serve_models.add_tokenizer(src)
    dst = tmp_path / "tp3"
    assert cli("mirror", src, "--tp", 3, "--to", dst).exit_code == 0
    assert serving.card_engine_args(dst) == {"mm_encoder_tp_mode": "data"}
    run = serving.run_vllm([serving.job(dst, 3, mm_encoder_tp_mode="data")], tmp_path / "run-tp3",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    assert run.results and not run.results[0]["ok"]
    assert "No module named 'torchvision'" in run.log
