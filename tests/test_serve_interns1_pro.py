"""Intern-S1-Pro in stock vLLM's CPU build: not served here, with the error that stops it.

vLLM 0.32's interns1_pro.py imports qwen3_vl.py, whose image processing imports torchvision, whose registry builds do
not import beside torch 2.13.0+cpu (requirements/serve.txt leaves it out; Qwen3-VL and Intern-S2-Preview stop alike).
The derivative (TP 3) is run as its card says: --mm-encoder-tp-mode data, --trust-remote-code (vLLM has no config
class for interns1_pro; a stand-in config class is the checkpoint's own here). tests/test_interns1_pro.py holds the
float64 proof.
"""

from __future__ import annotations

import json

import pytest

from tests import serving
from tests.helpers import cli

pytestmark = pytest.mark.serve

pytest.importorskip("torch")
from tests import interns1_pro_models, serve_models  # noqa: E402  (torch, transformers)

REMOTE_CONFIG = '''from transformers import PretrainedConfig


class InternS1ProConfig(PretrainedConfig):
    model_type = "interns1_pro"

    def __init__(self, text_config=None, vision_config=None, **kwargs):
        super().__init__(**kwargs)
        self.text_config = PretrainedConfig(**(text_config or {}))
        self.vision_config = PretrainedConfig(**(vision_config or {}))
'''


def test_interns1_pro_derivative_stops_at_vllms_torchvision_import(tmp_path):
    src = interns1_pro_models.build(tmp_path / "upstream")
    (src / "configuration_interns1_pro.py").write_text(REMOTE_CONFIG)
    config = json.loads((src / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_interns1_pro.InternS1ProConfig"}
    (src / "config.json").write_text(json.dumps(config, indent=2))
    serve_models.add_tokenizer(src)
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", 3, "--to", dst)
    assert result.exit_code == 0, result.output
    argv = serving.card_serve_command(dst)
    assert "--mm-encoder-tp-mode" in argv and "--trust-remote-code" in argv
    run = serving.run_vllm([serving.job(dst, 3, trust_remote_code=True, mm_encoder_tp_mode="data")],
                           tmp_path / "run-tp3", plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    assert run.results and not run.results[0]["ok"], run.log[-3000:]
    assert "Model architectures ['InternS1ProForConditionalGeneration'] failed to be inspected" in \
        run.results[0]["error"], run.results[0]["error"]
    assert "No module named 'torchvision'" in run.log  # why: the class's module stops at that import
