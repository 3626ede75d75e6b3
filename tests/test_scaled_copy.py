"""The scaled copy (formats/floats.py, PadOp.scale): each element × the factor, exactly, rounded to nearest-even in its
dtype; and `hubpad verify`'s check of it (run/verify.py check_scaled), which decides "nearest" on its own."""

from __future__ import annotations

import math
import random
import struct
from fractions import Fraction
from types import SimpleNamespace

import pytest

from hubpad.errors import IntegrityError
from hubpad.formats.floats import decode, encode, scale_elements
from hubpad.run.verify import check_scaled

SIZES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8}


def _values(dtype: str, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        raw = rng.getrandbits(8 * SIZES[dtype]).to_bytes(SIZES[dtype], "little")
        v = decode(dtype, raw)
        if math.isfinite(v) and abs(v) < (3e4 if dtype == "F16" else 1e30):  # room for a factor of 1.5
            out.append(v)
    return out


def _nearest(dtype: str, x: Fraction) -> float:
    """Brute force: the dtype's value nearest to x, ties to the even code (neighbours of a float64 guess)."""
    size = SIZES[dtype]
    near = float(x) if dtype == "F64" else _coarse(dtype, float(x))
    guess = int.from_bytes(encode(dtype, near), "little") & ~(1 << (8 * size - 1))
    best = None
    for code in range(max(0, guess - 3), guess + 4):
        for c in (code, code | (1 << (8 * size - 1))):
            v = decode(dtype, c.to_bytes(size, "little"))
            if not math.isfinite(v):
                continue
            key = (abs(Fraction(v) - x), c % 2)
            if best is None or key < best[0]:
                best = (key, v)
    return best[1]


def _coarse(dtype: str, v: float) -> float:
    """Some value of the dtype near v (truncated), to start the brute-force search from."""
    if dtype == "F32":
        return struct.unpack("<f", struct.pack("<f", v))[0] if abs(v) < 3e38 else 0.0
    if dtype == "BF16":
        return struct.unpack("<f", b"\x00\x00" + struct.pack("<f", v)[2:])[0]
    return float(struct.unpack("<e", struct.pack("<e", v))[0]) if abs(v) < 6e4 else 0.0


@pytest.mark.parametrize("dtype", sorted(SIZES))
@pytest.mark.parametrize("factor", [math.sqrt(54 / 48), 1 / math.sqrt(1.5), 1.5, 0.75])
def test_scaled_elements_are_the_nearest_values_and_verify_accepts_them(dtype, factor):
    values = _values(dtype, 300, seed=len(dtype))
    if dtype != "F64":  # exact midpoints: x * 1.5 and x * 0.75 land on them for many x
        values += [decode(dtype, c.to_bytes(SIZES[dtype], "little")) for c in range(1, 300, 7)]
    data = b"".join(encode(dtype, v) for v in values)
    out = scale_elements(dtype, data, factor)
    size = SIZES[dtype]
    for i, v in enumerate(values):
        got = decode(dtype, out[i * size:(i + 1) * size])
        assert got == _nearest(dtype, Fraction(v) * Fraction(factor)), (v, factor)
    t = SimpleNamespace(name="t", dtype=dtype, src=SimpleNamespace(itemsize=size))
    check_scaled(t, data, out, factor)
    if dtype != "F64":  # one element one code off: verify names it
        bad = bytearray(out)
        bad[0] ^= 1
        with pytest.raises(IntegrityError, match="scaled element"):
            check_scaled(t, data, bytes(bad), factor)
