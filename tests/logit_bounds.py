"""How closely a padded model's logits must match the original's.

float64 is the exactness check: max |Δ| ≤ F64_REL × max |logit|. Zero heads and neurons add exact zeros, and
every case measures max |Δ| = 0.0 in float64.

float32 cannot be held to a fixed relative constant. Padding changes GEMM shapes (e.g. down_proj K=320 → 384),
so CPU BLAS blocks the reduction differently and sums the same products in another order, and how much that
moves the logits depends on the model's size and on the library versions (the old bound, 1e-6 relative, held
with older ones and no longer does). So the float32 noise is measured in each case, on the ORIGINAL model: its
float32 weights are exact in float64, so max |logits_f32 − logits_f64| is the float32 rounding/reduction noise
of that model at that size. The padded model's float32 logits must lie within F32_NOISE_FACTOR × that noise of
the original's. (Given the float64 check, this says the padded model computes no less accurately in float32
than the original does, give or take the factor.)

Quantized models (tests/test_quantized.py) are compared in float32 with compressed-tensors' activation
fake-quantization switched off (same weights, same GEMMs): with it on, float32 rounding sometimes moves an
activation across an FP8/FP4 rounding boundary, a discrete jump that is not reduction noise and that lands on
the original or the padded model by chance (test_fp8_block_partial_last_block: one such jump gives 2.9e-5 =
6.4e-6 relative, against 3.1e-6 of reduction noise), and compressed-tensors' float64 NVFP4 activation
fake-quant is not the same function as its float32 one (the original hy3 model's own f32-vs-f64 difference
with it on is 0.18), so that forward has no noise scale to ground a float32 bound in. Its float64 comparison,
fake-quant included, stays exact.

Measured (2 x86_64 vCPUs; Python 3.11, torch 2.13.0+cpu, transformers 5.24.0, compressed-tensors 0.20.1):

    case                                               max|logit|  f32 noise (orig)  padded-vs-orig f32  ratio
    test_quantized.py (activation fake-quant off):
      hy3_nvfp4_fp8_decompressed_logits                   4.25        3.47e-6            3.10e-6        0.89
      int4_decompressed_logits_model_free[asym-g64]       4.13        3.15e-6            2.62e-6        0.83
      int4_decompressed_logits_model_free[sym-g128]       4.68        2.86e-6            2.86e-6        1.00
      int4_decompressed_logits_from_pretrained[sym]       4.68        3.20e-6            2.86e-6        0.89
      fp8_block_partial_last_block                        4.41        3.21e-6            3.10e-6        0.97
      modelopt_nvfp4_dequantized_weights_and_logits       3.88        3.69e-6            2.86e-6        0.78
    test_fp8_scales.py (activation fake-quant off):
      ct-fp8-tensor-tp3                                     -         2.69e-6            3.81e-6        1.42
      ct-fp8-channel-tp6                                    -         4.03e-6            3.10e-6        0.77
      hf-block-320-tp3 (weight_scale_inv, partial block)    -         2.93e-6            2.62e-6        0.89
    test_models_transformers.py:
      llama                                               0.42        1.06e-7            0              0
      qwen2-biases (TP=2, MLP 60 → 256)                   0.23        7.3e-8             0              0
      qwen3-qknorm-tp6-kv-replicated                      0.31        8.0e-8             0              0
      hy_v3-moe                                           0.09        2.6e-8             0              0
      qwen3_moe                                           0.33        1.1e-7             1.5e-8         0.14
      mixtral                                             0.35        7.6e-8             7.5e-9         0.10
    float64, every case: max |Δ| = 0.0

Noise (orig) and padded-vs-orig are the same size (ratio about 1, at most 1.42 measured) because both are float32 rounding of the same
computation. F32_NOISE_FACTOR = 4 leaves room for other CPUs and BLAS builds, and still fails anything that is
not rounding: a wrong pad moves logits by O(0.1-1), 10^4-10^5 times the noise.
"""

from __future__ import annotations

F64_REL = 1e-12
F32_NOISE_FACTOR = 4


def _scale(ref, what: str, min_scale: float) -> float:
    import torch

    assert torch.isfinite(ref).all(), f"{what}: non-finite logits"
    scale = ref.abs().max().item()
    assert scale > min_scale, f"{what}: logits too small to compare (max |logit| {scale})"
    return scale


def assert_exact_f64(ref64, got64, what: str = "", min_scale: float = 0.0) -> float:
    """Original (`ref64`) vs padded (`got64`) float64 logits: max |Δ| ≤ F64_REL × max |logit|. Returns max |Δ|."""
    import torch

    assert ref64.dtype == got64.dtype == torch.float64 and ref64.shape == got64.shape
    scale = _scale(ref64, what, min_scale)
    assert torch.isfinite(got64).all(), f"{what}: non-finite padded logits"
    delta = (ref64 - got64).abs().max().item()
    assert delta <= F64_REL * scale, f"{what} float64: max |Δ| {delta}, max |logit| {scale}"
    return delta


def assert_f32_within_noise(ref32, got32, ref64, what: str = "") -> float:
    """Original (`ref32`) vs padded (`got32`) float32 logits: max |Δ| ≤ F32_NOISE_FACTOR × the original's own
    float32 noise max |ref32 − ref64| (`ref64`: the original model's float64 logits). Returns max |Δ|."""
    import torch

    assert ref32.dtype == got32.dtype == torch.float32 and ref64.dtype == torch.float64
    assert ref32.shape == got32.shape == ref64.shape
    scale = _scale(ref64, what, 0.0)
    assert torch.isfinite(ref32).all() and torch.isfinite(got32).all(), f"{what}: non-finite float32 logits"
    noise = (ref32.double() - ref64).abs().max().item()
    delta = (ref32 - got32).abs().max().item()
    print(f"logits {what}: max |logit| {scale:.3g}; float32 noise of the original {noise:.3g}, "
          f"padded vs original {delta:.3g} ({delta / scale:.2g} relative)")
    assert delta <= F32_NOISE_FACTOR * noise, (
        f"{what} float32: max |Δ| {delta} exceeds {F32_NOISE_FACTOR} × the original model's own float32 noise "
        f"{noise} (max |logit| {scale})")
    return delta
