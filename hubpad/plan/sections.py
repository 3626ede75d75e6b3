"""A linear layer whose output rows are consecutive sections, each sharded on its own and padded at its own end: a
fused [q | k | v] projection (Ling / Ring's `attention.query_key_value`, which vLLM's QKVParallelLinear loads whole
and splits by the config's head counts before sharding each part), or a fused [gate | up] MLP projection (PLaMo 3's
`mlp.gate_up_proj`, which vLLM's MergedColumnParallelLinear splits in two halves of the intermediate size).

Each section's recipe is the one the format's rules give a layer of that section's rows (plan/ops.py `tensor_op`), so
every storage format whose parameters hold rows along their first axis pads the same way: weights, biases, per-row
and block scales. A parameter whose rows do not split at the section boundaries (an FP8 block straddling q and k) is
refused: no zero fill could keep it exact.
"""

from __future__ import annotations

import dataclasses

from hubpad.errors import ConfigError
from hubpad.formats.recipe import PadOp
from hubpad.formats.safetensors import TensorInfo
from hubpad.plan.adapters.base import Role
from hubpad.plan.heads import HeadShape
from hubpad.plan.ops import tensor_op
from hubpad.plan.quant import LinearLayout

# Layouts whose every per-row parameter holds the rows on its first axis (GPTQ / AWQ pack them along columns).
_NOT_ROWS = ("weight_shape", "weight_g_idx")
_ROW_FIRST = ("dense", "fp8-tensor", "fp8-channel", "fp8-block", "nvfp4", "nvfp4-modelopt", "int4")


def qkv_rows(hs: HeadShape, heads: int, kv: int) -> list[int]:
    """The rows of a fused [q | k | v] layer's sections for `heads` attention heads and `kv` kv heads."""
    return [heads * hs.widths["q"], kv * hs.widths["kv"], kv * hs.widths["kv"]]


def sections_op(t: TensorInfo, suffix: str, layout: LinearLayout, rows: list[int], rows2: list[int], in2: int,
                role: Role) -> tuple[PadOp, tuple[int, ...]]:
    """The byte recipe and new shape of one parameter of a fused layer whose output sections grow from `rows` to
    `rows2` (each at its end) and whose input grows to `in2`."""
    out1 = layout.out_features
    if layout.batch or layout.name not in _ROW_FIRST:
        raise ConfigError(f"tensor {t.name}: a fused layer ({role.kind}) in {layout.name} storage is not one hubpad pads "
                          f"(its rows must lie along the first axis of every parameter)")
    if suffix in _NOT_ROWS or _prod(t.shape) <= 1:  # one value, a shape record, a column index: not per row
        return tensor_op(t, suffix, layout, sum(rows2), in2, role)
    parts, new_rows, tail = [], 0, t.shape[1:]
    for r, r2 in zip(rows, rows2):
        if t.shape[0] * r % out1:
            raise ConfigError(f"tensor {t.name}: its {t.shape[0]} rows do not split at the fused sections of "
                              f"{rows} rows (a quantization block straddles two of them); it cannot be padded exactly")
        sub = dataclasses.replace(t, shape=(t.shape[0] * r // out1, *t.shape[1:]))
        op, shape = tensor_op(sub, suffix, dataclasses.replace(layout, out_features=r), r2, in2, role)
        row_bytes = sub.itemsize * _prod(sub.shape[1:])
        if op.kind == "copy":
            op = PadOp("pad", 1, sub.shape[0], row_bytes, sub.shape[0], row_bytes, b"\x00" * sub.itemsize)
        if op.kind != "pad" or op.batch != 1:
            raise ConfigError(f"internal error: tensor {t.name}: a {op.kind} section recipe in a fused layer")
        parts.append(op)
        new_rows, tail = new_rows + shape[0], shape[1:]
    return PadOp("sections", parts=tuple(parts)), (new_rows, *tail)


def _prod(dims: tuple[int, ...]) -> int:
    out = 1
    for d in dims:
        out *= d
    return out
