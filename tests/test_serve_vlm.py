"""Vision-language models in stock vLLM's CPU build: Kimi-K2.5 served at TP=3 with its tower replicated, as the card
says (`--mm-encoder-tp-mode data`), giving the original's tokens on text prompts and on a prompt holding an image;
Qwen3-VL and GLM-4.5V not served here, with the error that stops them.

Kimi-K2.5's language model is MLA, so it is served as DeepSeek-V3 is in this tier (tests/serve_models.py: the
CPU_MLA backend one sequence at a time, the original at TP=2, where it has as many heads per rank as the derivative's
6 heads at TP=3).
"""

from __future__ import annotations

import json

import pytest

from tests import serving
from tests.helpers import cli

pytestmark = pytest.mark.serve

pytest.importorskip("torch")
from tests import serve_models  # noqa: E402  (torch, transformers)

# A 16 x 16 image (4 tokens after Kimi-K2.5's 4-pixel patches merged 2 x 2) where the media token stands.
IMAGE = [[[(7 * x + 13 * y + 29 * c) % 256 for c in range(3)] for x in range(16)] for y in range(16)]
IMAGE_PROMPT = {"ids": [1, 40, serve_models.KIMI_MEDIA_ID, 60, 80, 100], "image": IMAGE, "modality": "vision_chunk"}
MM = dict(skip_tokenizer=False, limit_mm_per_prompt={"vision_chunk": 1}, prompts=serving.PROMPTS + [IMAGE_PROMPT],
          **serve_models._CPU_MLA)


def test_kimi_k25_derivative_serves_the_originals_tokens_with_an_image(tmp_path):
    src = serve_models.build_kimi_k25(tmp_path / "upstream")
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", 3, "--to", dst)
    assert result.exit_code == 0, result.output
    text = json.loads((dst / "config.json").read_text())["text_config"]
    assert text["num_attention_heads"] == 6  # 4 heads padded to 6
    argv = serving.card_serve_command(dst)
    assert serving.card_engine_args(dst) == {"mm_encoder_tp_mode": "data"}
    trust = {"trust_remote_code": True} if "--trust-remote-code" in argv else {}
    original = serving.run_vllm([serving.job(src, 2, **MM)], tmp_path / "run-original-tp2").ok(0)
    served = serving.run_vllm([serving.job(dst, 3, mm_encoder_tp_mode="data", **trust, **MM)], tmp_path / "run-tp3",
                              plugins=serving.install_plugin(dst, tmp_path / "plugin")).ok(0)
    serving.assert_same_outputs(original, served, "kimi_k25 TP=2 vs derivative TP=3 (text and image prompts)")


@pytest.mark.parametrize("family", ["qwen3_vl", "glm4v_moe"])
def test_vlms_whose_modules_import_torchvision_are_not_served_here(tmp_path, family):
    """vLLM's qwen3_vl.py and glm4_1v.py import torchvision, whose registry builds do not import beside torch
    2.13.0+cpu (requirements/serve.txt leaves it out)."""
    from tests import vlm_models

    build = {"qwen3_vl": lambda p: vlm_models.build_qwen3_vl(p, moe=False), "glm4v_moe": vlm_models.build_glm4v}
    src = build[family](tmp_path / "upstream")
    serve_models.add_tokenizer(src)
    run = serving.run_vllm([serving.job(src, 1)], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"]
    assert "No module named 'torchvision'" in run.log
