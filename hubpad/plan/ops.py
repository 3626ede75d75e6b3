"""Per-tensor byte recipes: how each parameter of a padded linear layer grows, per storage format."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace

from hubpad.errors import ConfigError, HubpadError
from hubpad.formats.floats import SCALABLE
from hubpad.formats.recipe import PadOp
from hubpad.formats.safetensors import TensorInfo
from hubpad.plan.adapters.base import Role
from hubpad.plan.gptq_awq import PACKED_RULES, g_idx_tail
from hubpad.plan.quant import FLOAT_DTYPES, SCALAR_SUFFIXES, ZERO_NIBBLES_INT4, LinearLayout, one_bytes


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


def fused_experts_op(t: TensorInfo, spec, hidden: int, inter: int, inter2: int) -> tuple[PadOp, tuple[int, ...]]:
    """A fused 3-D expert tensor [E, a, b] (adapters/base.py FusedExperts): each of its `parts` along the intermediate
    axis grows from `inter` to `inter2` with zeros at its end; the other axis must be `hidden`. Which axis holds the
    intermediate is read from the shape (transformers saves [E, 2I, H] what the hub ships as [E, H, 2I], and reads
    both); the family's own layout (`spec.axis`) decides when hidden == parts x inter."""
    if t.dtype not in FLOAT_DTYPES or len(t.shape) != 3:
        raise ConfigError(f"tensor {t.name}: fused experts of shape {list(t.shape)} / {t.dtype} are not supported "
                          f"(hubpad pads fused 3-D experts in BF16/FP16/FP32 only)")
    e, a, b = t.shape
    rows, cols = (spec.parts * inter, hidden), (hidden, spec.parts * inter)
    axis = spec.axis if (a, b) == (rows if spec.axis == -2 else cols) else -2 if (a, b) == rows else -1
    if (a, b) not in (rows, cols):
        raise ConfigError(f"tensor {t.name}: shape {list(t.shape)}, expected [{e}, {rows[0]}, {rows[1]}] or "
                          f"[{e}, {cols[0]}, {cols[1]}]: hidden {hidden} and {spec.parts} x the expert intermediate "
                          f"{inter} (config.json)")
    s, zero = t.itemsize, b"\x00" * t.itemsize
    if inter2 == inter:
        return PadOp("copy"), t.shape
    if axis == -2:  # each part's rows grow: blocks of `inter` rows of `hidden` elements
        op = PadOp("pad", e * spec.parts, inter, hidden * s, inter2, hidden * s, zero)
        return op, (e, spec.parts * inter2, hidden)
    # each row holds `parts` runs of `inter` elements, each grows: blocks of `parts` rows of `inter` elements
    op = PadOp("pad", e * hidden, spec.parts, inter * s, spec.parts, inter2 * s, zero)
    return op, (e, hidden, spec.parts * inter2)


# Per layout, the parameters of a linear layer that carry its output's scale: multiplying them by a factor multiplies
# every output row by it (a bias too). FP8 weights keep their bytes; their float scales take the factor.
SCALE_CARRIERS = {"dense": ("weight", "bias"), "fp8-tensor": ("weight_scale", "bias"),
                  "fp8-channel": ("weight_scale", "bias"), "fp8-block": ("weight_scale_inv", "weight_scale", "bias")}


def scaled(t: TensorInfo, op: PadOp, factor: float) -> PadOp:
    """`op` (a copy, or a pad whose rows keep their width) as a scaled copy: each stored element × `factor`, rounded
    to the tensor's dtype; pad cells stay as they are."""
    if t.dtype not in SCALABLE:
        raise ConfigError(f"tensor {t.name}: {t.dtype} elements cannot be rescaled (hubpad rescales "
                          f"{', '.join(sorted(SCALABLE))})")
    if op.kind == "copy":
        rows = math.prod(t.shape[:-1]) if len(t.shape) > 1 else 1
        width = (t.shape[-1] if t.shape else 1) * t.itemsize
        op = PadOp("pad", 1, rows, width, rows, width, b"\x00" * t.itemsize)
    if op.kind != "pad" or op.new_row_bytes != op.row_bytes:
        raise HubpadError(f"tensor {t.name}: internal error, a scaled copy of a {op.kind} op that widens rows")
    return replace(op, scale=factor)


@dataclass(frozen=True)
class Param:
    """One parameter of a padded linear layer: its tensor, the layer's storage layout and its padded features."""

    t: TensorInfo
    layout: LinearLayout
    out2: int
    in2: int

    @property
    def batch(self) -> tuple[int, ...]:
        return self.layout.batch

    @property
    def out1(self) -> int:
        return self.layout.out_features

    @property
    def in1(self) -> int:
        return self.layout.in_features

    def expect(self, shape: tuple[int, ...]) -> None:
        if self.t.shape != shape:
            raise ConfigError(f"tensor {self.t.name}: shape {list(self.t.shape)}, expected {list(shape)} for a "
                              f"{self.layout.name} layer")

    def pad(self, new_tail: tuple[int, ...], fill: bytes) -> Recipe:
        """Grow the trailing dims to `new_tail`, new cells holding `fill` (one element)."""
        t = self.t
        new_shape = (*t.shape[:len(t.shape) - len(new_tail)], *new_tail)
        return _pad2d(t, len(new_tail), new_shape, fill), new_shape

    def copy(self) -> Recipe:
        return PadOp("copy"), self.t.shape

    def append(self, data: bytes, new_shape: tuple[int, ...]) -> Recipe:
        """Upstream bytes, then `data` (a 1-D tensor growing at its end)."""
        return PadOp("append", data=data), new_shape

    @property
    def one(self) -> bytes:
        """1.0 in this (scale) tensor's dtype."""
        return one_bytes(self.t.dtype)

    @property
    def zero(self) -> bytes:
        return b"\x00" * self.t.itemsize


Recipe = tuple[PadOp, tuple]


def tensor_op(t: TensorInfo, suffix: str, layout: LinearLayout, out2: int, in2: int, role: Role) -> Recipe:
    """The byte recipe and new shape of one parameter of a padded linear layer (ConfigError if unknown)."""
    rule = RULES.get(suffix)
    recipe = rule(Param(t, layout, out2, in2)) if rule else None
    if recipe is None:
        raise ConfigError(f"tensor {t.name}: parameter {suffix!r} is not supported for a {layout.name} layer "
                          f"({role.kind})")
    return recipe


def _weight(p: Param) -> Recipe | None:
    """Weights grow by zero codes: 0 in every float format, 0x8 nibbles in offset-8 int4."""
    b, out1, in1, out2, in2 = p.batch, p.out1, p.in1, p.out2, p.in2
    if p.layout.name in ("dense", "fp8-tensor", "fp8-channel", "fp8-block"):
        p.expect((*b, out1, in1))
        return p.pad((out2, in2), p.zero)
    if p.layout.name in ("nvfp4", "nvfp4-modelopt", "mxfp4"):  # two e2m1 codes a byte; code 0 is +0
        p.expect((*b, out1, in1 // 2))
        return p.pad((out2, in2 // 2), p.zero)
    if p.layout.name == "int4":
        p.expect((*b, out1, in1 // 8))
        return p.pad((out2, in2 // 8), ZERO_NIBBLES_INT4)
    return None


def _scale(p: Param) -> Recipe | None:
    """New scale cells hold 1.0: finite and positive, so the zero codes they scale stay exactly 0."""
    b, out1, in1, out2, in2, lay = p.batch, p.out1, p.in1, p.out2, p.in2, p.layout
    one = one_bytes(p.t.dtype)
    if lay.name == "fp8-tensor":
        return p.copy()
    if lay.name == "fp8-channel":
        return p.pad((out2,) if p.t.shape[len(b):] == (out1,) else (out2, 1), one)
    if lay.name == "fp8-block":
        bn, bk = lay.block
        p.expect((*b, -(-out1 // bn), -(-in1 // bk)))
        return p.pad((-(-out2 // bn), -(-in2 // bk)), one)
    if lay.name in ("nvfp4", "nvfp4-modelopt", "mxfp4"):
        g = lay.group or 16
        p.expect((*b, out1, in1 // g))
        return p.pad((out2, in2 // g), one)
    if lay.name == "int4":
        if lay.group is None:
            return p.pad((out2, 1), one)
        p.expect((*b, out1, in1 // lay.group))
        return p.pad((out2, in2 // lay.group), one)
    return None


def _bias(p: Param) -> Recipe:
    p.expect((*p.batch, p.out1))
    return p.pad((p.out2,), p.zero)


def _scalar(p: Param) -> Recipe:
    """Global and per-tensor scales are untouched (one value, or one per expert)."""
    if math.prod(p.t.shape) not in (1, math.prod(p.batch) or 1):
        raise ConfigError(f"tensor {p.t.name}: expected a single value, got shape {list(p.t.shape)}")
    return p.copy()


def _int4_weight_shape(p: Param) -> Recipe | None:
    """compressed-tensors records the unpacked shape: it is rewritten to the padded one."""
    t = p.t
    if p.layout.name != "int4":
        return None
    if t.dtype not in ("I64", "I32") or t.shape != (2,):
        raise ConfigError(f"tensor {t.name}: weight_shape must be a 2-element integer tensor")
    if (p.out1, p.in1) == (p.out2, p.in2):
        return p.copy()
    return PadOp("replace", data=struct.pack("<2q" if t.dtype == "I64" else "<2i", p.out2, p.in2)), t.shape


def _int4_zero_point(p: Param) -> Recipe | None:
    """Asymmetric int4: new zero points are 8 (the offset), so new codes 0x8 dequantize to 0."""
    t, lay, out1, out2 = p.t, p.layout, p.out1, p.out2
    if lay.name != "int4":
        return None
    c1, c2 = (1, 1) if lay.group is None else (p.in1 // lay.group, p.in2 // lay.group)
    if t.dtype == "I32":  # packed 8 per word along the output dim
        p.expect((-(-out1 // 8), c1))
        if out1 % 8 and out2 != out1:
            # The last word's unused nibbles hold 0x0 (zero point -8), not 0x8: rows appended there would
            # dequantize to 8, not 0, and fixing them means rewriting upstream bytes. Refuse rather than guess.
            raise ConfigError(f"tensor {t.name}: asymmetric int4 zero points are packed 8 rows per word and "
                              f"{out1} rows is not a multiple of 8; padding it cannot be made exactly zero")
        return p.pad((-(-out2 // 8), c2), ZERO_NIBBLES_INT4)
    p.expect((out1, c1))
    return p.pad((out2, c2), p.zero)


def _int4_g_idx(p: Param) -> Recipe | None:
    """Act-order group index: new input columns point at the group their position falls in."""
    t, lay = p.t, p.layout
    if lay.name != "int4" or not lay.group:
        return None
    p.expect((p.in1,))
    if p.in2 == p.in1:
        return p.copy()
    return p.append(g_idx_tail(t, lay.group, p.in1, p.in2), (p.in2,))


# Parameter suffix -> its rule. A rule answers None when the suffix does not belong to the layer's format.
RULES: dict[str, Callable[[Param], Recipe | None]] = {
    "weight": _weight, "weight_packed": _weight,
    "weight_scale": _scale, "weight_scale_inv": _scale, "scale": _scale,
    "bias": _bias,
    **{suffix: _scalar for suffix in SCALAR_SUFFIXES},
    "weight_shape": _int4_weight_shape,
    "weight_zero_point": _int4_zero_point,
    "weight_g_idx": _int4_g_idx,
    **PACKED_RULES,  # GPTQ / AWQ: qweight, qzeros, scales, g_idx
}
