"""Byte sizes written for people: `parse_size("5GB")`, `format_size(5_000_000_000)` (round-trips through
parse_size, for config files) and `human(5e9)` ("5.0 GB", for logs, reports and the card)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# Decimal units are powers of 1000, binary units powers of 1024 (as in `df -H` / `df -h`).
_UNITS: dict[str, int] = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}
_SPELLING = {"B": "B", "KB": "KB", "MB": "MB", "GB": "GB", "TB": "TB", "KIB": "KiB", "MIB": "MiB", "GIB": "GiB", "TIB": "TiB"}
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*", re.ASCII)
_UNIT_HELP = "B, KB, MB, GB, TB (x1000) or KiB, MiB, GiB, TiB (x1024)"


def parse_size(text: str | int) -> int:
    """Bytes in a size like "5GB", "1.5 GiB", "750MB" or "1000" (plain bytes); ValueError on anything else.

    Units are case-insensitive. A plain int is taken as bytes. Fractions of a byte are rounded down.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size must not be negative: {text}")
        return text
    if not isinstance(text, str):
        raise ValueError(f"not a size: {text!r} (expected a string like '5GB')")
    match = _SIZE_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a size: {text!r} (expected a number and a unit: {_UNIT_HELP})")
    number, unit = match.groups()
    unit = unit.upper() or "B"
    if unit not in _UNITS:
        hint = " (did you mean GB or GiB?)" if unit in {"K", "M", "G", "T"} or unit.endswith("I") else ""
        raise ValueError(f"unknown size unit {match.group(2)!r} in {text!r}{hint}; use {_UNIT_HELP}")
    try:
        value = Decimal(number)
    except InvalidOperation:  # pragma: no cover - the regex already guarantees a decimal number
        raise ValueError(f"not a size: {text!r}") from None
    return int(value * _UNITS[unit])


# The smallest shard size or disk budget hubpad takes (1 MB): anything below is a slip (`--shard-size 5` is five
# bytes, hence thousands of shards), not a plan. Tests that need tinier shards call the planner directly.
SIZE_FLOOR = 1000**2


def parse_size_floor(text: str | int, what: str) -> int:
    """parse_size for a shard size or disk budget (`what`, e.g. "--shard-size"): at least SIZE_FLOOR. A value
    below it without a unit is taken for a forgotten unit and asks for one; with a unit it is refused as absurd."""
    n = parse_size(text)
    if n >= SIZE_FLOOR:
        return n
    match = None if isinstance(text, int) else _SIZE_RE.fullmatch(text)
    if match is None or not match.group(2):
        raise ValueError(f"{str(text).strip()!r} is {n} bytes (a size without a unit is in bytes), below the 1MB "
                         f"floor for {what}; write the unit, e.g. {str(text).strip()}GB")
    raise ValueError(f"{text.strip()!r} is below the 1MB floor for {what} (shards that small would be thousands of "
                     f"files); use MB or GB")


def format_size(n: int, *, binary: bool = False) -> str:
    """A short human form of `n` bytes: 5000000000 -> "5GB", 1536 -> "1.54KB" (or "1.5KiB" with binary=True).

    At most two decimals, trailing zeros dropped; `parse_size(format_size(n))` is within 0.5% of n.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"format_size needs a non-negative int, got {n!r}")
    units = ("KIB", "MIB", "GIB", "TIB") if binary else ("KB", "MB", "GB", "TB")
    unit = "B"
    for candidate in units:
        if n >= _UNITS[candidate]:
            unit = candidate
    if unit == "B":
        return f"{n}B"
    value = (Decimal(n) / _UNITS[unit]).quantize(Decimal("0.01"))
    text = format(value, "f").rstrip("0").rstrip(".")
    return f"{text}{_SPELLING[unit]}"


def human(n: float, digits: int = 1) -> str:
    """`n` bytes in B/KB/MB/GB/TB with `digits` decimals, for logs, reports and the card."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.{digits}f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.{digits}f} TB"  # pragma: no cover - the loop returns at TB
