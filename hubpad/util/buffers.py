"""Reusable byte buffers: when one is free again, and page-aligned windows of one (what O_DIRECT needs)."""

from __future__ import annotations

import ctypes


def is_idle(buf: bytearray) -> bool:
    """True when no memoryview of `buf` is alive: a bytearray with live views cannot be resized, which is the test
    (no bookkeeping to get wrong, whoever holds the views); it never reallocates."""
    try:
        last = buf.pop()
    except BufferError:
        return False
    buf.append(last)
    return True


def aligned(size: int, align: int) -> tuple[bytearray, int]:
    """A bytearray and the offset in it where `size` bytes start on an `align` boundary of memory."""
    raw = bytearray(size + align)
    address = ctypes.addressof(ctypes.c_char.from_buffer(raw))
    return raw, -address % align
