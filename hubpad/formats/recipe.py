"""How an output tensor's bytes are made from a stored tensor's: the byte recipe a plan gives every tensor."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PadOp:
    """Byte recipe for one output tensor, seen as `batch` blocks of `rows` rows of `row_bytes` bytes.

    kind "copy": bytes as they are; "pad": each block grows to `new_rows` rows of `new_row_bytes`, new
    cells repeat `fill` (one element); "append": source bytes then `data`; "replace": `data` instead;
    "sections": the tensor's bytes are consecutive sections, each made by its own "pad" op in `parts` (a
    fused projection whose sections grow by different amounts, such as a GDN layer's [q | k | v] rows).

    `scale` (a "pad" op whose rows keep their width): a scaled copy. Every source element is multiplied by it,
    the product correctly rounded to the tensor's dtype (formats/floats.py); the fill is written as it is. Used where
    padding must rescale what it pads (MiniMax-M2's q/k norm over all heads, plan/ops.py `scaled`).
    """

    kind: str
    batch: int = 1
    rows: int = 0
    row_bytes: int = 0
    new_rows: int = 0
    new_row_bytes: int = 0
    fill: bytes = b""
    data: bytes = b""
    parts: tuple["PadOp", ...] = ()
    scale: float | None = None

    @property
    def in_bytes(self) -> int:
        """Source bytes a "pad" (or "sections") op reads."""
        if self.kind == "sections":
            return sum(p.in_bytes for p in self.parts)
        return self.batch * self.rows * self.row_bytes

    @property
    def out_bytes(self) -> int:
        """Bytes a "pad" (or "sections") op writes."""
        if self.kind == "sections":
            return sum(p.out_bytes for p in self.parts)
        return self.batch * self.new_rows * self.new_row_bytes


COPY_OP = PadOp("copy")
