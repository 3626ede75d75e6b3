"""How an output tensor's bytes are made from a stored tensor's: the byte recipe a plan gives every tensor."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PadOp:
    """Byte recipe for one output tensor, seen as `batch` blocks of `rows` rows of `row_bytes` bytes.

    kind "copy": bytes as they are; "pad": each block grows to `new_rows` rows of `new_row_bytes`, new
    cells repeat `fill` (one element); "append": source bytes then `data`; "replace": `data` instead.
    """

    kind: str
    batch: int = 1
    rows: int = 0
    row_bytes: int = 0
    new_rows: int = 0
    new_row_bytes: int = 0
    fill: bytes = b""
    data: bytes = b""


COPY_OP = PadOp("copy")
