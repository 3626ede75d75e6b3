"""A fused qkv_proj stored pre-sharded (MiMo-V2.5's "Pro format"): padding appends whole zero chunks.

The checkpoint stores one `qkv_proj` per layer as `n` chunks, n = config.json's num_key_value_heads (vLLM's
`_shard_fp8_qkv_proj` and the MiMo-V2 MTP loader read it so, `ckpt_tp`), each chunk [Q_c | K_c | V_c] holding
heads / n query heads and kv / n kv heads of that layer type, FP8 (e4m3) with 128 x 128 block scales
(`weight_scale_inv`) quantized chunk by chunk: ceil(chunk rows / 128) scale rows per chunk, or one continuous grid
of ceil(all rows / 128) rows (vLLM reads either).

Padding in whole kv groups keeps every chunk's shape: heads2 / kv2 = heads / kv, and a layer type's own kv heads
grow with them (MiMo's SWA layers: 2 x num_key_value_heads). The padded heads are then exactly the appended chunks
c = kv .. kv2 - 1 (query head i stays on kv head i // group, in chunk i // (heads / n)), so the derivative is the
upstream's bytes followed by zero rows, and its scales are upstream's followed by 1.0 cells (one whole chunk's
worth per new chunk, or the grid's new rows). vLLM then reads num_key_value_heads = kv2 chunks.

An unquantized fused qkv_proj is refused: vLLM's MiMo-V2 decoder layers read it as one [Q | K | V] block
(QKVParallelLinear's own loader), its MTP layers as num_key_value_heads chunks, so no layout serves both.
"""

from __future__ import annotations

from dataclasses import dataclass

from hubpad.errors import ConfigError
from hubpad.formats.recipe import PadOp
from hubpad.formats.safetensors import TensorInfo
from hubpad.plan.adapters.base import PreshardedQKV
from hubpad.plan.heads import HeadShape
from hubpad.plan.ops import _pad2d
from hubpad.plan.quant import QuantConfig, one_bytes

UNQUANTIZED_REFUSAL = ("an unquantized fused qkv_proj is not supported: vLLM's MiMo-V2 decoder layers read it as one "
                       "[Q | K | V] block and its MTP layers as num_key_value_heads chunks, so no padded layout serves "
                       "both (the FP8 form, read as chunks by both, is padded)")


@dataclass(frozen=True)
class Chunks:
    """A fused qkv_proj's geometry: `n` chunks of `rows` rows each, before and after padding."""

    n: int
    n2: int
    rows: int

    @staticmethod
    def of(spec: PreshardedQKV, hs: HeadShape, heads: int, kv: int, h2: int, kv2: int) -> "Chunks":
        """The chunking of a layer type, checked to keep its shape when padded (whole kv groups)."""
        def rows(h: int, k: int, n: int) -> int:
            q_heads, kv_heads = hs.head_count(spec.q, h), hs.kv_count(spec.k, h, k)
            if q_heads % n or kv_heads % n:
                raise ConfigError(f"config.json: {q_heads} query heads and {kv_heads} kv heads do not split into "
                                  f"num_key_value_heads = {n} chunks of a fused qkv_proj")
            return q_heads // n * hs.widths[spec.q] + kv_heads // n * (hs.widths[spec.k] + hs.widths[spec.v])

        before, after = rows(heads, kv, kv), rows(h2, kv2, kv2)
        if before != after:
            raise ConfigError(f"config.json: padding {heads} / {kv} heads to {h2} / {kv2} changes a fused qkv_proj "
                              f"chunk from {before} to {after} rows; hubpad pads it only by appending whole chunks")
        return Chunks(kv, kv2, before)


def presharded_op(t: TensorInfo, suffix: str, chunks: Chunks, hidden: int,
                  quant: QuantConfig) -> tuple[PadOp, tuple[int, ...]]:
    """The byte recipe and new shape of a fused pre-sharded qkv_proj's `weight` or `weight_scale_inv`."""
    n, n2, rows = chunks.n, chunks.n2, chunks.rows
    if suffix == "weight":
        if t.dtype != "F8_E4M3":
            raise ConfigError(f"tensor {t.name}: {UNQUANTIZED_REFUSAL}")
        _expect(t, (n * rows, hidden))
        return _pad2d(t, 2, (n2 * rows, hidden), b"\x00"), (n2 * rows, hidden)
    if suffix == "weight_scale_inv":
        bn, bk = _block(t, quant)
        cols = -(-hidden // bk)
        per_chunk, grid = n * -(-rows // bn), -(-n * rows // bn)
        if t.shape == (per_chunk, cols):  # tiled chunk by chunk (or a grid that is the same, rows % bn == 0)
            new = (n2 * -(-rows // bn), cols)
        elif t.shape == (grid, cols):  # one continuous grid
            new = (-(-n2 * rows // bn), cols)
        else:
            raise ConfigError(f"tensor {t.name}: shape {list(t.shape)}, expected [{per_chunk}, {cols}] ({n} chunks "
                              f"of {-(-rows // bn)} block rows) or [{grid}, {cols}] (one grid of {bn}-row blocks)")
        return _pad2d(t, 2, new, one_bytes(t.dtype)), new
    raise ConfigError(f"tensor {t.name}: parameter {suffix!r} of a fused pre-sharded qkv_proj is not supported "
                      f"(weight and weight_scale_inv are)")


def _block(t: TensorInfo, quant: QuantConfig) -> tuple[int, int]:
    if quant.method != "fp8" or len(quant.fp8_blocks) != 1:
        raise ConfigError(f"tensor {t.name}: a block scale needs quantization_config.weight_block_size in config.json")
    return quant.fp8_blocks[0]


def _expect(t: TensorInfo, shape: tuple[int, ...]) -> None:
    if t.shape != shape:
        raise ConfigError(f"tensor {t.name}: shape {list(t.shape)}, expected {list(shape)} (num_key_value_heads "
                          f"chunks of [Q | K | V] rows x hidden size)")
