"""Float elements as safetensors stores them (little-endian BF16, F16, F32, F64): decode one, and scale a run of
them by a factor, each product correctly rounded (the exact product, rounded to the nearest value of the dtype,
ties to even) — the bytes of a "scaled copy" (recipe.py PadOp.scale).

The product is exact (`fractions.Fraction`), so no double rounding can move an element one step off: the factor is
the float64 given, each element its stored value. BF16 and F16 go through a 65,536-entry table per factor (a few
tens of nanoseconds per element); F32 and F64 element by element (meant for small tensors, such as FP8 block
scales).
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from fractions import Fraction
from functools import lru_cache

# dtype -> (significand bits incl. the implicit one, smallest normal exponent, largest finite value's exponent)
_FORMATS = {"BF16": (8, -126, 127), "F16": (11, -14, 15), "F32": (24, -126, 127), "F64": (53, -1022, 1023)}
SCALABLE = frozenset(_FORMATS)
_CODE = {"BF16": "H", "F16": "H", "F32": "I", "F64": "Q"}


def decode(dtype: str, raw: bytes) -> float:
    """One element's value."""
    if dtype == "BF16":
        return struct.unpack("<f", b"\x00\x00" + raw)[0]
    return struct.unpack({"F16": "<e", "F32": "<f", "F64": "<d"}[dtype], raw)[0]


def encode(dtype: str, value: float) -> bytes:
    """A value that the dtype represents exactly, as its bytes."""
    if dtype == "BF16":
        raw = struct.pack("<f", value)
        if raw[:2] != b"\x00\x00":
            raise ValueError(f"{value!r} is not a BF16 value")
        return raw[2:]
    return struct.pack({"F16": "<e", "F32": "<f", "F64": "<d"}[dtype], value)


def round_to(dtype: str, x: Fraction) -> float:
    """The dtype's value nearest to `x` (ties to even); ValueError when it overflows the dtype."""
    if x == 0:
        return 0.0
    p, emin, emax = _FORMATS[dtype]
    sign, a = (-1, -x) if x < 0 else (1, x)
    e = a.numerator.bit_length() - a.denominator.bit_length()  # 2^e <= a < 2^(e+2)
    if Fraction(2) ** e > a:
        e -= 1
    if Fraction(2) ** (e + 1) <= a:
        e += 1
    quantum = Fraction(2) ** (max(e, emin) - p + 1)  # the spacing of the dtype's values around a (subnormals too)
    m = round(a / quantum)  # Fraction.__round__: half to even
    value = m * quantum
    if value >= Fraction(2) ** (emax + 1):
        raise ValueError(f"{float(x)!r} overflows {dtype}")
    return sign * float(value)


def scaled_value(dtype: str, value: float, factor: float) -> float:
    """`value` × `factor`, exactly, rounded to the dtype."""
    if not math.isfinite(value):
        raise ValueError(f"cannot scale a non-finite element ({value!r})")
    product = value * factor  # IEEE: the exact product rounded once to float64
    if dtype == "F64":
        if not math.isfinite(product):
            raise ValueError(f"{value!r} x {factor!r} overflows F64")
        return product
    if is_plain(dtype, product):
        # Rounding the float64 product again is exact unless it landed on a midpoint of the dtype: a midpoint
        # strictly between the exact product and the float64 one would be a float64 nearer to the exact product.
        bits, _, emax = _FORMATS[dtype]
        m, e = math.frexp(product)
        v = math.ldexp(round(m * 2 ** bits), e - bits)  # m * 2^bits is exact; round(): half to even
        if abs(v) >= 2.0 ** (emax + 1):
            raise ValueError(f"{value!r} x {factor!r} overflows {dtype}")
        return v
    return round_to(dtype, Fraction(value) * Fraction(factor))


def is_plain(dtype: str, x: float) -> bool:
    """True when `x` (a finite float64, not a midpoint) rounds to the dtype as the exact value it was rounded from
    would: it is in the dtype's normal range and not halfway between two of its values."""
    bits, emin, _ = _FORMATS[dtype]
    if x == 0:
        return True
    if not math.isfinite(x):
        return False
    m, e = math.frexp(abs(x))  # abs(x) = m * 2^e, 0.5 <= m < 1
    return e - 1 > emin and ((m * 2 ** bits).is_integer() or not (m * 2 ** (bits + 1)).is_integer())


@lru_cache(maxsize=8)
def _table(dtype: str, factor: float) -> tuple[array, frozenset[int]]:
    """Every 16-bit code's scaled code, and the codes that have none (non-finite, or overflowing once scaled)."""
    out, bad = array("H", bytes(2 * 65536)), set()
    for code in range(65536):
        try:
            out[code] = int.from_bytes(encode(dtype, scaled_value(dtype, decode(dtype, code.to_bytes(2, "little")),
                                                                  factor)), "little")
        except ValueError:
            bad.add(code)
    return out, frozenset(bad)


def scale_elements(dtype: str, data: bytes, factor: float) -> bytes:
    """Every element of `data` (a whole number of `dtype` elements) × `factor`, correctly rounded."""
    if dtype not in _FORMATS:
        raise ValueError(f"cannot scale {dtype} elements")
    codes = array(_CODE[dtype])
    codes.frombytes(data)
    if sys.byteorder == "big":
        codes.byteswap()
    if dtype in ("BF16", "F16"):
        table, bad = _table(dtype, factor)
        if not bad.isdisjoint(codes):
            raise ValueError(f"cannot scale a {dtype} element by {factor!r}: non-finite, or overflows once scaled")
        out = array("H", map(table.__getitem__, codes))
    else:
        size = codes.itemsize
        out = array(_CODE[dtype], (int.from_bytes(encode(dtype, scaled_value(dtype, decode(dtype, c.to_bytes(
            size, "little")), factor)), "little") for c in codes))
    if sys.byteorder == "big":
        out.byteswap()
    return out.tobytes()
