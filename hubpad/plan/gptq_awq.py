"""GPTQ and AWQ int4 checkpoints (`qweight`/`qzeros`/`scales`[/`g_idx`]): their config, layout and exact zero.

On disk (K = in features, N = out features, g = group size; reference notes §2c):
  GPTQ  qweight int32 [K/8, N] (row k in bits 4·(k%8) of word k//8), qzeros int32 [K/g, N/8] (column n in
        bits 4·(n%8)), scales fp16 [K/g, N], optional g_idx int32 [K] (act-order: the group of each row).
        W = s[g_idx[k], n] · (q − z); checkpoint_format "gptq" (v1) stores z − 1, "gptq_v2" stores z.
  AWQ   (GEMM) qweight int32 [K, N/8] and qzeros [K/g, N/8], packed along N in the interleaved order
        [0, 2, 4, 6, 1, 3, 5, 7]; scales [K/g, N]. W = (q − z) · s.

Exact zero: every padded code is 8 and every padded zero point is 8 (stored 7 in GPTQ v1), so q − z = 0 whatever
the scale; a word of eight equal nibbles reads the same in either nibble order. New rows (input features)
always start whole new groups (K % g == 0), so their scale rows are new (1.0) and their zero points are ours;
new g_idx entries point at those new groups. Symmetric GPTQ kernels that ignore qzeros and subtract 8 (vLLM's
uint4b8) read code 8 as 0 too.

vLLM's kernels (gptq_marlin / awq_marlin, read in vLLM 0.20 and 0.33): every rank's N % 64, K % 128 and K % g;
the exllama / AWQ paths need K per rank % g and N per rank % 8 (pack factor). Act-order row-parallel layers
repeat the scales on every rank (marlin_repeat_scales_on_all_ranks); the per-rank rule above still holds.
(vLLM 0.33 serves symmetric GPTQ without act-order only; a derivative serves wherever its upstream does.)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hubpad.errors import ConfigError
from hubpad.formats.safetensors import TensorInfo

PACKED_SUFFIXES = ("qweight", "qzeros", "scales", "g_idx")
LAYOUTS = ("gptq", "gptq_v2", "awq")
CODE_WORD = b"\x88\x88\x88\x88"  # eight codes 8 (= the zero point: dequantizes to 0)
_ZERO_WORD = {"gptq": b"\x77\x77\x77\x77", "gptq_v2": CODE_WORD, "awq": CODE_WORD}  # zero point 8 as stored


@dataclass(frozen=True)
class PackedConfig:
    """What config.json says about a GPTQ / AWQ checkpoint (4-bit only)."""

    layout: str  # gptq (v1 zeros) | gptq_v2 | awq
    group_size: int  # -1: one group over all input features
    desc_act: bool = False


def read_packed_config(qc: dict) -> PackedConfig:
    """Validate a GPTQ / AWQ quantization_config; anything hubpad cannot pad exactly is an error here."""
    method = qc.get("quant_method")
    bits = qc.get("bits", qc.get("w_bit"))
    if bits != 4:
        raise ConfigError(f"config.json: {method} with bits={bits!r} is not supported (4-bit only)")
    group = qc.get("group_size", qc.get("q_group_size"))
    if not isinstance(group, int) or (group != -1 and (group < 8 or group % 8)):
        raise ConfigError(f"config.json: {method} group_size {group!r} is not -1 or a multiple of 8")
    if method == "awq":
        version = str(qc.get("version", "gemm")).lower()
        if version != "gemm":
            raise ConfigError(f"config.json: AWQ version {version!r} is not supported (GEMM only)")
        if qc.get("zero_point", True) is not True:
            raise ConfigError("config.json: AWQ without zero points is not supported")
        return PackedConfig("awq", group)
    fmt = qc.get("checkpoint_format") or qc.get("format") or "gptq"
    if fmt not in ("gptq", "gptq_v2"):
        raise ConfigError(f"config.json: GPTQ checkpoint_format {fmt!r} is not supported (gptq or gptq_v2)")
    if qc.get("dynamic"):
        raise ConfigError("config.json: GPTQ per-module `dynamic` overrides are not supported")
    return PackedConfig(fmt, group, bool(qc.get("desc_act")))


def detect_packed(module: str, params: dict[str, TensorInfo], cfg: PackedConfig) -> tuple[int, int, int | None]:
    """(out_features, in_features, group or None) of one GPTQ / AWQ linear layer, every shape checked."""
    unknown = set(params) - {*PACKED_SUFFIXES, "bias"}
    missing = {"qweight", "qzeros", "scales"} - set(params)
    if unknown or missing:
        what = f"unknown parameter {sorted(unknown)[0]}" if unknown else f"no {sorted(missing)[0]}"
        raise ConfigError(f"tensor {module}: {cfg.layout} layer with {what}")
    for suffix, dtype in (("qweight", "I32"), ("qzeros", "I32")):
        if params[suffix].dtype != dtype or len(params[suffix].shape) != 2:
            raise ConfigError(f"tensor {module}.{suffix}: {params[suffix].dtype}{list(params[suffix].shape)}, "
                              f"expected a 2-D {dtype} tensor for {cfg.layout}")
    qw, scales = params["qweight"].shape, params["scales"].shape
    if cfg.layout == "awq":
        in_f, out_f = qw[0], scales[-1]
        packed_out = qw[1]
    else:
        in_f, out_f = qw[0] * 8, qw[1]
        packed_out = params["qzeros"].shape[1]
    if out_f % 8 or packed_out * 8 != out_f:
        raise ConfigError(f"tensor {module}: {out_f} output features is not 8 per packed word of {cfg.layout}")
    group = None if cfg.group_size == -1 else cfg.group_size
    if group and in_f % group:
        raise ConfigError(f"tensor {module}: {in_f} input features is not a multiple of group_size {group}")
    groups = in_f // group if group else 1
    for suffix, want in (("scales", (groups, out_f)), ("qzeros", (groups, out_f // 8))):
        if params[suffix].shape != want:
            raise ConfigError(f"tensor {module}.{suffix}: shape {list(params[suffix].shape)}, expected {list(want)}")
    if "g_idx" in params and (cfg.layout == "awq" or params["g_idx"].shape != (in_f,)):
        raise ConfigError(f"tensor {module}.g_idx: shape {list(params['g_idx'].shape)}, expected [{in_f}]")
    return out_f, in_f, group


def _groups(p) -> tuple[int, int]:
    """Scale / zero-point rows before and after; appended input features must start whole new groups."""
    lay = p.layout
    if p.in2 != p.in1 and lay.group is None:
        raise ConfigError(f"tensor {p.t.name}: {lay.name} with group_size -1 has one zero point per output column for "
                          f"all input features, so appended input features cannot be made exactly zero")
    return (p.in1 // lay.group, p.in2 // lay.group) if lay.group else (1, 1)


def _qweight(p):
    """New codes are 8: AWQ packs along N ([K, N/8]), GPTQ along K ([K/8, N])."""
    if p.layout.name not in LAYOUTS:
        return None
    _groups(p)
    return p.pad((p.in2, p.out2 // 8) if p.layout.name == "awq" else (p.in2 // 8, p.out2), CODE_WORD)


def _qzeros(p):
    """New zero points are 8 (stored 7 by GPTQ v1), equal to the new codes."""
    if p.layout.name not in LAYOUTS:
        return None
    return p.pad((_groups(p)[1], p.out2 // 8), _ZERO_WORD[p.layout.name])


def _scales(p):
    """New scale cells hold 1.0 (finite; q - z = 0 makes the value irrelevant to the product)."""
    if p.layout.name not in LAYOUTS:
        return None
    return p.pad((_groups(p)[1], p.out2), p.one)


def _g_idx(p):
    """Act-order group of each input feature: appended features point at the new groups."""
    if p.layout.name not in LAYOUTS:
        return None
    _groups(p)
    if p.in2 == p.in1:
        return p.copy()
    return p.append(g_idx_tail(p.t, p.layout.group, p.in1, p.in2), (p.in2,))


# Parameter suffix -> rule, for plan/ops.py's table (a rule answers None for a layer of another format). The rules
# take plan/ops.py's Param (pad / copy / append / one), which this module does not import: quant.py imports it.
PACKED_RULES = {"qweight": _qweight, "qzeros": _qzeros, "scales": _scales, "g_idx": _g_idx}


def g_idx_tail(t: TensorInfo, group: int, i1: int, i2: int) -> bytes:
    """g_idx entries of appended input features i1..i2-1: k // group. With i1 % group == 0 these are new groups
    only, whose scales are new finite cells and whose zero points equal the new codes."""
    fmt = {"I32": "<i", "I64": "<q"}.get(t.dtype)
    if fmt is None:
        raise ConfigError(f"tensor {t.name}: g_idx dtype {t.dtype} is not supported")
    return b"".join(struct.pack(fmt, k // group) for k in range(i1, i2))


def packed_zero_fill(layout: str, suffix: str) -> bytes | None:
    """The word every padded cell of a code / zero-point tensor must hold (None: not a code tensor)."""
    return {"qweight": CODE_WORD, "qzeros": _ZERO_WORD.get(layout)}.get(suffix)
