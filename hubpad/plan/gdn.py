"""Gated DeltaNet (GDN) linear attention, as Qwen3.5 and Qwen3-Next ship it: the head counts, and each tensor's recipe.

A GDN layer has nk key heads (q and k, hk wide) and nv = r * nk value heads (v, z, b, a, hv wide): value head j reads
key head j // r (transformers' repeat_interleave, vLLM's `i_hv // (HV // H)` in its kernels). vLLM splits every
section of the layer contiguously over TP ranks (q, k, v and z rows, b and a rows, conv1d's q/k/v channels, A_log and
dt_bias, out_proj's columns), so appending whole key heads with their r value heads at the END of each section keeps
that mapping on every rank: rank i holds key heads [i nk'/tp, ...) and value heads [i nv'/tp, ...), r per key head.

A padded head is inert: its q, k and v rows and conv1d channels are zero, so its (L2-normalised) query and key and
its value are zero, the recurrent state stays zero whatever beta and the decay are, and so does its output; the gated
RMSNorm of zero is zero, z's zero rows gate nothing, and out_proj's zero columns add nothing. Its A_log and dt_bias
entries are 0.0 (any finite value works).

Layouts (from the checkpoint's names, checked against config.json):
- Qwen3.5: in_proj_qkv [q (nk hk) | k (nk hk) | v (nv hv)] rows, in_proj_z [nv hv], in_proj_b / in_proj_a [nv] rows;
  each section grows at its end ("sections").
- Qwen3-Next: in_proj_qkvz rows grouped per key head, [q_g | k_g | v (r heads) | z (r heads)] for g = 0..nk-1, and
  in_proj_ba [b (r) | a (r)] per key head: whole zero groups are appended at the end.
- Both: conv1d.weight [2 nk hk + nv hv, 1, K] in [q | k | v] sections, A_log and dt_bias [nv], norm.weight [hv]
  (shared by every head: copied), out_proj [H, nv hv].
Weights in BF16/FP16/FP32, or FP8 with 128 x 128 block scales (`weight_scale_inv`, Qwen's FP8 releases) on
in_proj_qkv / in_proj_z / out_proj, whose sections must then be whole blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from hubpad.errors import ConfigError
from hubpad.formats.recipe import COPY_OP, PadOp
from hubpad.formats.safetensors import TensorInfo
from hubpad.plan.quant import FLOAT_DTYPES, QuantConfig, one_bytes

KEYS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
        "linear_conv_kernel_dim")


@dataclass(frozen=True)
class Geometry:
    """A GDN layer's heads and widths."""

    nk: int  # key heads
    nv: int  # value heads
    hk: int
    hv: int
    kernel: int

    @staticmethod
    def read(config: dict) -> "Geometry":
        bad = [k for k in KEYS if not isinstance(config.get(k), int) or config[k] <= 0]
        if bad:
            raise ConfigError(f"config.json: {bad[0]} missing or not a positive integer (needed for its Gated "
                              f"DeltaNet layers)")
        g = Geometry(*(config[k] for k in KEYS))
        if g.nv % g.nk:
            raise ConfigError(f"config.json: linear_num_value_heads {g.nv} is not a multiple of linear_num_key_heads "
                              f"{g.nk}")
        return g

    @property
    def ratio(self) -> int:
        return self.nv // self.nk

    def with_heads(self, nk: int) -> "Geometry":
        return Geometry(nk, nk * self.ratio, self.hk, self.hv, self.kernel)

    def sections(self) -> list[int]:
        """Rows of in_proj_qkv and channels of conv1d: [q, k, v]."""
        return [self.nk * self.hk, self.nk * self.hk, self.nv * self.hv]

    def dims(self, after: "Geometry") -> list[tuple[str, tuple[str, ...], int, int]]:
        """The plan's dims for these heads: (name, config keys, before, after)."""
        return [("linear key heads", ("linear_num_key_heads",), self.nk, after.nk),
                ("linear value heads", ("linear_num_value_heads",), self.nv, after.nv)]

    def rank_dims(self) -> list[tuple[str, int, int]]:
        """The per-rank table's rows: (name, heads, rows per head)."""
        return [("linear key heads", self.nk, self.hk), ("linear value heads", self.nv, self.hv)]

    def shard_problems(self, tp: int, row_align: int) -> list[str]:
        """Why these GDN heads cannot serve at `tp` (empty: they can). vLLM asserts nv % tp and every section % tp,
        and its per-rank views need nk % tp; `row_align` is what every rank's rows of each section must be a multiple
        of (FP8 blocks: 128)."""
        why = [f"{heads} {name} % tp {tp} != 0" for name, heads, _ in self.rank_dims() if heads % tp]
        if not why and row_align > 1:
            for label, rows in (("q/k rows", self.nk * self.hk), ("v/z rows", self.nv * self.hv)):
                if (rows // tp) % row_align:
                    why.append(f"linear attention {label} per rank {rows // tp} % {row_align} != 0")
        return why

    def rank_rows(self, tp: int, align: int) -> list[dict]:
        """The per-rank table's rows for these heads (vLLM: every head count % tp)."""
        rows = []
        for dim, total, per in self.rank_dims():
            ok = total % tp == 0 and (total // tp * per) % align == 0
            rule = f"{total} % {tp} == 0" + (f", {total // tp} x {per} rows % {align} == 0" if align > 1 else "")
            rows.append({"dim": dim, "total": total, "per_rank": total // tp if total % tp == 0 else None, "ok": ok,
                         "rule": rule, "required": True})
        return rows

    def padded_for(self, tp: int, row_align: int) -> "Geometry":
        """The fewest key heads (each with its r value heads) that shard at `tp` (a family with rules over the upstream
        count, as lightning attention's slopes, chooses its own)."""
        for nk in range(self.nk, self.nk + 8 * tp * max(1, row_align) + 1):
            g2 = self.with_heads(nk)
            if not problems(g2, tp, row_align):
                return g2
        raise ConfigError(f"no valid linear-attention head padding exists for tp={tp} "
                          f"({'; '.join(problems(self, tp, row_align))})")

    def tensor_op(self, t: TensorInfo, kind: str, after: "Geometry", hidden: int,
                  quant: QuantConfig) -> tuple[PadOp, tuple[int, ...]]:
        """The byte recipe and new shape of one of this layer type's tensors (`kind`: the adapter's pattern kind)."""
        return gdn_op(t, kind, self, after, hidden, quant)

    def group_rows(self, kind: str) -> int:
        """Rows per key head of Qwen3-Next's grouped projections."""
        return 2 * self.hk + 2 * self.ratio * self.hv if kind == "qkvz" else 2 * self.ratio


def problems(g: Geometry, tp: int, row_align: int) -> list[str]:
    """Why the linear-attention heads of `g` cannot serve at `tp` (empty: they can): the geometry's own rules
    (Geometry.shard_problems; a Mamba2 or KDA geometry has its own)."""
    return g.shard_problems(tp, row_align)


def choose(g: Geometry, tp: int, row_align: int) -> Geometry:
    """The padded geometry for `tp`: the geometry's own choice (Geometry.padded_for)."""
    return g.padded_for(tp, row_align)


def row_align(tensors: dict[str, tuple[TensorInfo, str]], quant: QuantConfig) -> int:
    """What every rank's rows of a GDN section must be a multiple of: the FP8 block when any projection is FP8."""
    fp8 = any(t.dtype.startswith("F8") for t, _ in tensors.values())
    if not fp8:
        return 1
    return quant.fp8_blocks[0][0] if quant.fp8_blocks else 128


def gdn_op(t: TensorInfo, kind: str, g: Geometry, g2: Geometry, hidden: int,
           quant: QuantConfig) -> tuple[PadOp, tuple[int, ...]]:
    """The byte recipe and new shape of one GDN tensor; a ConfigError when its shape or format is not the one
    config.json implies."""
    suffix = t.name.rsplit(".", 1)[-1]
    if kind == "heads":  # A_log, dt_bias: one value per value head
        _expect(t, (g.nv,))
        return append_op(t, g2.nv - g.nv), (g2.nv,)
    if kind == "conv":
        _expect(t, (sum(g.sections()), 1, g.kernel))
        return sections_op(t, g.sections(), g2.sections(), g.kernel), (sum(g2.sections()), 1, g.kernel)
    rows, rows2, cols, cols2, cuts, cuts2 = _projection(kind, g, g2, hidden)
    block = _block(t, suffix, quant)
    if suffix == "weight" and t.dtype in FLOAT_DTYPES | {"F8_E4M3", "F8_E5M2"}:
        if t.dtype.startswith("F8") and block is None:
            raise ConfigError(f"tensor {t.name}: FP8 without weight_scale_inv blocks; hubpad pads Gated DeltaNet "
                              f"layers in BF16/FP16/FP32 or FP8 with 128x128 block scales only")
        _expect(t, (rows, cols))
        return _grow(t, cuts, cuts2, cols, cols2, b"\x00" * t.itemsize), (rows2, cols2)
    if suffix == "weight_scale_inv" and block is not None:
        bn, bk = block
        if any(c % bn for c in cuts + cuts2) or cols % bk or cols2 % bk:
            raise ConfigError(f"tensor {t.name}: FP8 blocks of {bn}x{bk} straddle the sections of a Gated DeltaNet "
                              f"projection; it cannot be padded exactly")
        _expect(t, (rows // bn, cols // bk))
        return (_grow(t, [c // bn for c in cuts], [c // bn for c in cuts2], cols // bk, cols2 // bk, one_bytes(t.dtype)),
                (rows2 // bn, cols2 // bk))
    raise ConfigError(f"tensor {t.name}: a {t.dtype} {suffix!r} of a Gated DeltaNet layer is not a format hubpad pads "
                      f"(BF16/FP16/FP32, or FP8 with block scales)")


def _projection(kind: str, g: Geometry, g2: Geometry, hidden: int):
    """(rows, rows after, columns, columns after, row sections, row sections after) of a GDN projection."""
    if kind == "qkv":
        return sum(g.sections()), sum(g2.sections()), hidden, hidden, g.sections(), g2.sections()
    if kind in ("z", "b"):  # z: nv hv rows; b and a: nv rows
        width = g.hv if kind == "z" else 1
        return g.nv * width, g2.nv * width, hidden, hidden, [g.nv * width], [g2.nv * width]
    if kind in ("qkvz", "ba"):  # whole groups appended
        per = g.group_rows(kind)
        return g.nk * per, g2.nk * per, hidden, hidden, [g.nk * per], [g2.nk * per]
    if kind == "out":
        return hidden, hidden, g.nv * g.hv, g2.nv * g.hv, [hidden], [hidden]
    raise ConfigError(f"internal error: unknown Gated DeltaNet tensor kind {kind!r}")


def _block(t: TensorInfo, suffix: str, quant: QuantConfig) -> tuple[int, int] | None:
    if suffix != "weight_scale_inv" and not t.dtype.startswith("F8"):
        return None
    return quant.fp8_blocks[0] if quant.fp8_blocks else (128, 128)


def _expect(t: TensorInfo, shape: tuple[int, ...]) -> None:
    if t.shape != shape:
        raise ConfigError(f"tensor {t.name}: shape {list(t.shape)}, expected {list(shape)} for the Gated DeltaNet "
                          f"layer config.json describes")


def append_op(t: TensorInfo, n: int) -> PadOp:
    return PadOp("pad", 1, t.shape[0], t.itemsize, t.shape[0] + n, t.itemsize, b"\x00" * t.itemsize) if n else COPY_OP


def sections_op(t: TensorInfo, rows: list[int], rows2: list[int], width: int) -> PadOp:
    """Rows of `width` elements in consecutive sections, each growing at its end."""
    rb = width * t.itemsize
    if rows == rows2:
        return COPY_OP
    return PadOp("sections", parts=tuple(PadOp("pad", 1, r, rb, r2, rb, b"\x00" * t.itemsize)
                                        for r, r2 in zip(rows, rows2)))


def _grow(t: TensorInfo, cuts: list[int], cuts2: list[int], cols: int, cols2: int, fill: bytes) -> PadOp:
    """A 2-D tensor whose rows grow per section and whose columns grow at their end (one or the other here)."""
    s = t.itemsize
    if cols != cols2:
        assert cuts == cuts2
        return PadOp("pad", 1, cuts[0], cols * s, cuts[0], cols2 * s, fill)
    if cuts == cuts2:
        return COPY_OP
    if len(cuts) == 1:
        return PadOp("pad", 1, cuts[0], cols * s, cuts2[0], cols * s, fill)
    return PadOp("sections", parts=tuple(PadOp("pad", 1, r, cols * s, r2, cols * s, fill)
                                        for r, r2 in zip(cuts, cuts2)))
