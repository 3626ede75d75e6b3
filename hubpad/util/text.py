"""`short`: repr() for one-line error messages, bounded (a hostile header or config value may be megabytes long)."""

from __future__ import annotations

import reprlib


class _Repr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:  # str() of a 4300+ digit int raises; a shape's product can get there
            return f"<{x.bit_length()}-bit integer>"
        return super().repr_int(x, level)


_REPR = _Repr()
_REPR.maxstring = _REPR.maxother = 200
_REPR.maxlong = 40


def short(value: object) -> str:
    """repr() of `value`, cut to a couple of hundred characters."""
    return _REPR.repr(value)
