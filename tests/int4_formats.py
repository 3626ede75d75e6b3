"""GPTQ and AWQ int4 checkpoints written from their specs, and their dequantizers, for the tests.

Neither gptqmodel nor autoawq installs here without a CUDA torch, so the tests write both formats with the
packers below (round-to-nearest per group; the on-disk format is what hubpad must get right, not the
calibration), and check the unpacking three ways: the spec (`dequant_gptq`, `dequant_awq`), a reference copied
from the library that defines the format (`gptqmodel_dequantize`), and, for AWQ, a real installed library
(compressed-tensors' `AutoAWQConverter`, then its pack-quantized decompressor).

Formats (reference notes §2c):
  GPTQ  qweight int32 [K/8, N], code of input row k in bits 4*(k%8) of word k//8; qzeros int32 [K/g, N/8], zero
        of column n in bits 4*(n%8); scales fp16 [K/g, N]; g_idx int32 [K]. W[n, k] = s[g_idx[k], n] *
        (q[k, n] - z[g_idx[k], n]). checkpoint_format "gptq" (v1) stores z - 1, "gptq_v2" stores z.
  AWQ   (GEMM) qweight int32 [K, N/8], packed along N: nibble i of word j holds column 8j + ORDER[i];
        qzeros int32 [K/g, N/8] packed the same way; scales fp16 [K/g, N]. W[n, k] = (q - z) * s.
"""

from __future__ import annotations

import copy

import torch

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # autoawq 0.2.9 awq/modules/linear/gemm.py (order_map), packing_utils.AWQ_ORDER


# --------------------------------------------------------------------------------------------------
# Quantizing (round to nearest, per group of input features)


def quantize(w: torch.Tensor, group: int, sym: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W [N, K] → codes q [K, N] in 0..15, zeros z [K/g, N] in 0..15, fp16 scales s [K/g, N], with
    W ≈ s * (q - z). Symmetric: z = 8 (GPTQ's (maxq + 1) / 2)."""
    n, k = w.shape
    g = k if group == -1 else group
    v = w.double().reshape(n, k // g, g)
    if sym:
        amax = v.abs().amax(-1).clamp_min(1e-8)
        scale = (2 * amax / 15).half()
        zero = torch.full_like(scale, 8, dtype=torch.int64)
    else:
        lo, hi = v.amin(-1).clamp_max(0), v.amax(-1).clamp_min(0)
        scale = ((hi - lo).clamp_min(1e-8) / 15).half()
        zero = torch.round(-lo / scale.double()).clamp(1, 15).long()  # z >= 1: v1 stores z - 1 in a nibble
    q = torch.round(v / scale.double()[..., None]) + zero[..., None]
    q = q.clamp(0, 15).long().reshape(n, k)
    return q.T.contiguous(), zero.T.contiguous(), scale.T.contiguous()


def _pack_rows(x: torch.Tensor) -> torch.Tensor:
    """[R, C] nibbles → int32 [R/8, C]: element r in bits 4*(r%8) of word r//8."""
    r, c = x.shape
    words = torch.zeros(r // 8, c, dtype=torch.int64)
    for i in range(8):
        words |= x[i::8].long() << (4 * i)
    return _as_int32(words)


def _pack_cols(x: torch.Tensor, order: list[int]) -> torch.Tensor:
    """[R, C] nibbles → int32 [R, C/8]: nibble i of word j holds column 8j + order[i]."""
    r, c = x.shape
    words = torch.zeros(r, c // 8, dtype=torch.int64)
    for i in range(8):
        words |= x[:, order[i]::8].long() << (4 * i)
    return _as_int32(words)


def _as_int32(words: torch.Tensor) -> torch.Tensor:
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def _unpack(words: torch.Tensor) -> torch.Tensor:
    """int32 words → their 8 nibbles, nibble i (bits 4i..4i+3) on a new last axis."""
    w = words.long() & 0xFFFFFFFF
    return torch.stack([(w >> (4 * i)) & 0xF for i in range(8)], dim=-1)


# --------------------------------------------------------------------------------------------------
# Writing the formats


def gptq_tensors(w: torch.Tensor, group: int, sym: bool, v2: bool, perm: torch.Tensor | None = None) -> dict:
    """One linear layer in GPTQ's layout. `perm`: act-order (desc_act) — input rows are quantized in this
    order, so row k belongs to group position_of(k) // g; rows stay stored in their natural order."""
    n, k = w.shape
    g = k if group == -1 else group
    if perm is None:
        g_idx = torch.arange(k) // g
        q, z, s = quantize(w, group, sym)
    else:
        q_p, z, s = quantize(w[:, perm], group, sym)  # groups over the permuted order
        inv = torch.argsort(perm)
        q = q_p[inv]
        g_idx = inv // g
    stored_z = z if v2 else z - 1  # v1's off-by-one (gptqmodel utils/model.py convert_gptq_v1_to_v2_format_module)
    return {"qweight": _pack_rows(q), "qzeros": _pack_cols(stored_z & 0xF, list(range(8))), "scales": s,
            "g_idx": g_idx.to(torch.int32)}


def awq_tensors(w: torch.Tensor, group: int) -> dict:
    """One linear layer in AutoAWQ's GEMM layout (asymmetric: AutoAWQ's zero_point=True)."""
    q, z, s = quantize(w, group, sym=False)
    return {"qweight": _pack_cols(q, AWQ_ORDER), "qzeros": _pack_cols(z, AWQ_ORDER), "scales": s}


# --------------------------------------------------------------------------------------------------
# Reading them back


def dequant_gptq(t: dict, v2: bool) -> torch.Tensor:
    """The spec: W [N, K] in float64."""
    qweight, qzeros, scales, g_idx = t["qweight"], t["qzeros"], t["scales"], t["g_idx"].long()
    q = _unpack(qweight).permute(0, 2, 1).reshape(-1, qweight.shape[1])  # [K, N]
    z = _unpack(qzeros).reshape(qzeros.shape[0], -1)  # [K/g, N]
    if not v2:
        z = z + 1
    return (scales.double()[g_idx] * (q - z[g_idx]).double()).T.contiguous()


def dequant_awq(t: dict, group: int) -> torch.Tensor:
    """The spec: W [N, K] in float64."""
    inv = torch.argsort(torch.tensor(AWQ_ORDER))
    q = _unpack(t["qweight"])[..., inv].reshape(t["qweight"].shape[0], -1)  # [K, N]
    z = _unpack(t["qzeros"])[..., inv].reshape(t["qzeros"].shape[0], -1)  # [K/g, N]
    s = t["scales"].double()
    k = q.shape[0]
    g = k if group == -1 else group
    return ((q - z.repeat_interleave(g, 0)).double() * s.repeat_interleave(g, 0)).T.contiguous()


def gptqmodel_dequantize(t: dict, v2: bool) -> torch.Tensor:
    """gptqmodel 7.7.0's own dequantization, copied (pure torch; the package needs CUDA torch to install):
    `gptqmodel/utils/model.py` convert_gptq_v1_to_v2_format_module (4 bits: `qzeros += 0b0001...0001`, a
    whole-word add), then `gptqmodel/nn_modules/qlinear/__init__.py` PackableQuantLinear.dequantize_weight
    (bits 4, pack_dtype int32: wf = [0, 4, ..., 28]) and _dequantize_from_codes. Returns W [N, K] in float64."""
    bits, maxq, pack_factor = 4, 15, 8
    qzeros, qweight, scales, g_idx = t["qzeros"].clone(), t["qweight"], t["scales"].double(), t["g_idx"]
    if not v2:
        qzeros = (qzeros.long() + 0b00010001000100010001000100010001).to(torch.int64) & 0xFFFFFFFF
    wf = torch.tensor(list(range(0, 32, bits)), dtype=torch.int32).unsqueeze(0)
    wf_unsqueeze_zero, wf_unsqueeze_neg_one = wf.unsqueeze(0), wf.unsqueeze(-1)
    zeros = torch.bitwise_right_shift(torch.unsqueeze(qzeros.long(), 2).expand(-1, -1, pack_factor),
                                      wf_unsqueeze_zero.long()).double()
    zeros = torch.bitwise_and(zeros.long(), maxq).reshape(qzeros.shape[0], -1)
    zeros = zeros[:, :scales.shape[1]]
    weight = torch.bitwise_and(torch.bitwise_right_shift(torch.unsqueeze(qweight.long(), 1).expand(-1, pack_factor, -1),
                                                         wf_unsqueeze_neg_one.long()), maxq)
    weight = weight.reshape(weight.shape[0] * weight.shape[1], weight.shape[2])
    weights = scales[g_idx.long()] * (weight - zeros[g_idx.long()])
    return weights.T.contiguous()


def compressed_tensors_awq_dequantize(tensors: dict[str, torch.Tensor], group: int) -> dict[str, torch.Tensor]:
    """compressed-tensors' AutoAWQConverter (AWQ GEMM → its pack-quantized layout), then its own
    pack-quantized decompressor: W [N, K] per module, in the scales' dtype (fp16)."""
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.entrypoints.convert.converters import AutoAWQConverter

    converter = AutoAWQConverter(group_size=group)
    scheme = copy.deepcopy(next(iter(converter._build_quant_config().config_groups.values())))
    ct = converter.process(dict(tensors))
    decompressor = BaseCompressor.get_value_from_registry(scheme.format)
    out = {}
    for name in ct:
        module, _, suffix = name.rpartition(".")
        if suffix == "weight_packed":
            local = {k: ct[f"{module}.{k}"] for k in ("weight_packed", "weight_scale", "weight_zero_point",
                                                      "weight_shape")}
            out[module] = decompressor.decompress(local, scheme)["weight"]
    return out
