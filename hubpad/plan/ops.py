"""Per-tensor byte recipes: how each parameter of a padded linear layer grows, per storage format."""

from __future__ import annotations

import math
import struct

from hubpad.errors import HubpadError
from hubpad.formats.safetensors import TensorInfo
from hubpad.plan.adapters.base import Role
from hubpad.plan.model import PadOp
from hubpad.plan.quant import SCALAR_SUFFIXES, ZERO_NIBBLES_INT4, LinearLayout, one_bytes


def _pad2d(t: TensorInfo, tail_ndim: int, new_shape: tuple[int, ...], fill: bytes) -> PadOp:
    """Pad the last `tail_ndim` (1 or 2) dims of `t` to `new_shape`; the leading dims are repeated blocks."""
    s = t.itemsize
    if tail_ndim == 1:
        batch, rows, cols = math.prod(t.shape[:-1]), t.shape[-1], 1
        new_rows, new_cols = new_shape[-1], 1
    else:
        batch, (rows, cols) = math.prod(t.shape[:-2]), t.shape[-2:]
        new_rows, new_cols = new_shape[-2:]
    if (rows, cols) == (new_rows, new_cols):
        return PadOp("copy")
    if new_rows < rows or new_cols < cols:
        raise HubpadError(f"tensor {t.name}: internal error, padding would shrink {list(t.shape)}")
    if len(fill) != s:
        raise HubpadError(f"tensor {t.name}: internal error, fill of {len(fill)} bytes for {t.dtype}")
    return PadOp("pad", batch, rows, cols * s, new_rows, new_cols * s, fill)


def tensor_op(t: TensorInfo, suffix: str, layout: LinearLayout, out2: int, in2: int, role: Role) -> tuple[PadOp, tuple]:
    """The byte recipe and new shape of one parameter of a padded linear layer."""
    b = layout.batch
    nb = len(b)
    out1, in1 = layout.out_features, layout.in_features

    def expect(shape: tuple[int, ...]) -> None:
        if t.shape != shape:
            raise HubpadError(f"tensor {t.name}: shape {list(t.shape)}, expected {list(shape)} for a {layout.name} layer")

    def pad(new_tail: tuple[int, ...], fill: bytes) -> tuple[PadOp, tuple]:
        new_shape = (*t.shape[:len(t.shape) - len(new_tail)], *new_tail)
        return _pad2d(t, len(new_tail), new_shape, fill), new_shape

    zero = b"\x00" * t.itemsize
    if suffix in ("weight", "weight_packed"):
        if layout.name in ("dense", "fp8-tensor", "fp8-channel", "fp8-block"):
            expect((*b, out1, in1))
            return pad((out2, in2), zero)
        if layout.name in ("nvfp4", "nvfp4-modelopt"):
            expect((*b, out1, in1 // 2))
            return pad((out2, in2 // 2), zero)
        if layout.name == "int4":
            expect((*b, out1, in1 // 8))
            return pad((out2, in2 // 8), ZERO_NIBBLES_INT4)
    if suffix in ("weight_scale", "weight_scale_inv"):
        one = one_bytes(t.dtype)
        if layout.name == "fp8-tensor":
            return PadOp("copy"), t.shape
        if layout.name == "fp8-channel":
            return pad((out2,) if t.shape[nb:] == (out1,) else (out2, 1), one)
        if layout.name == "fp8-block":
            bn, bk = layout.block
            expect((*b, -(-out1 // bn), -(-in1 // bk)))
            return pad((-(-out2 // bn), -(-in2 // bk)), one)
        if layout.name in ("nvfp4", "nvfp4-modelopt"):
            expect((*b, out1, in1 // 16))
            return pad((out2, in2 // 16), one)
        if layout.name == "int4":
            if layout.group is None:
                return pad((out2, 1), one)
            expect((*b, out1, in1 // layout.group))
            return pad((out2, in2 // layout.group), one)
    if suffix == "bias":
        expect((*b, out1))
        return pad((out2,), zero)
    if suffix in SCALAR_SUFFIXES:
        if math.prod(t.shape) not in (1, math.prod(b) or 1):
            raise HubpadError(f"tensor {t.name}: expected a single value, got shape {list(t.shape)}")
        return PadOp("copy"), t.shape
    if suffix == "weight_shape" and layout.name == "int4":
        if t.dtype not in ("I64", "I32") or t.shape != (2,):
            raise HubpadError(f"tensor {t.name}: weight_shape must be a 2-element integer tensor")
        fmt = "<2q" if t.dtype == "I64" else "<2i"
        if (out1, in1) == (out2, in2):
            return PadOp("copy"), t.shape
        return PadOp("replace", data=struct.pack(fmt, out2, in2)), t.shape
    if suffix == "weight_zero_point" and layout.name == "int4":
        c1, c2 = (1, 1) if layout.group is None else (in1 // layout.group, in2 // layout.group)
        if t.dtype == "I32":  # packed 8 per word along the output dim
            expect((-(-out1 // 8), c1))
            if out1 % 8 and out2 != out1:
                # The last word's unused nibbles hold 0x0 (zero point -8), not 0x8: rows appended there would
                # dequantize to 8, not 0, and fixing them means rewriting upstream bytes. Refuse rather than guess.
                raise HubpadError(f"tensor {t.name}: asymmetric int4 zero points are packed 8 rows per word and "
                                  f"{out1} rows is not a multiple of 8; padding it cannot be made exactly zero")
            return pad((-(-out2 // 8), c2), ZERO_NIBBLES_INT4)
        expect((out1, c1))
        return pad((out2, c2), zero)
    if suffix == "weight_g_idx" and layout.name == "int4" and layout.group:
        expect((in1,))
        if in2 == in1:
            return PadOp("copy"), t.shape
        fmt = {"I32": "<i", "I64": "<q"}.get(t.dtype)
        if fmt is None:
            raise HubpadError(f"tensor {t.name}: g_idx dtype {t.dtype} is not supported")
        tail = b"".join(struct.pack(fmt, c // layout.group) for c in range(in1, in2))
        return PadOp("append", data=tail), (in2,)
    raise HubpadError(f"tensor {t.name}: parameter {suffix!r} is not supported for a {layout.name} layer ({role.kind})")
