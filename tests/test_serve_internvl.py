"""The InternViT family in stock vLLM's CPU build: not served here, with the error that stops it.

vLLM 0.32's InternVL-Chat, NVLM-D and Skywork-R1V modules import vllm/transformers_utils/processors/internvl.py,
and its InternS1 module (which also serves InternVL in transformers' layout) transformers' GOT-OCR2 image processor:
both import torchvision, whose registry builds do not import beside torch 2.13.0+cpu (requirements/serve.txt leaves
it out). Each derivative (TP 3) stops at that import; tests/test_internvl.py holds their float64 proofs.
"""

from __future__ import annotations

import pytest

from tests import serving
from tests.helpers import cli

pytestmark = pytest.mark.serve

pytest.importorskip("torch")
from tests import serve_models  # noqa: E402  (torch, transformers)
from tests.internvl_models import QWEN2, add_remote_config, build_internvl, chat_checkpoint  # noqa: E402


def test_internvl_derivatives_stop_at_vllms_torchvision_import(tmp_path):
    hf = build_internvl(tmp_path / "hf", QWEN2)
    chat = chat_checkpoint(hf, tmp_path / "chat")
    add_remote_config(chat)
    for src in (hf, chat):
        serve_models.add_tokenizer(src)
        dst = tmp_path / f"{src.name}-tp3"
        result = cli("mirror", src, "--tp", 3, "--to", dst)
        assert result.exit_code == 0, result.output
        argv = serving.card_serve_command(dst)
        overrides = {"hf_overrides": {"text_config": {"architectures": ["LlamaForCausalLM"], "qkv_bias": True}}}
        data = {"mm_encoder_tp_mode": "data"} if "--mm-encoder-tp-mode" in argv else {}
        run = serving.run_vllm([serving.job(dst, 3, trust_remote_code=True, **overrides, **data)],
                               tmp_path / f"run-{src.name}")  # a failing job stops its run: one run each
        assert run.results and not run.results[0]["ok"], run.log[-3000:]
        arch = "InternVLForConditionalGeneration" if src is hf else "InternVLChatModel"
        assert f"Model architectures ['{arch}'] failed to be inspected" in run.results[0]["error"]
        assert "No module named 'torchvision'" in run.log  # why: the class's module stops at that import
