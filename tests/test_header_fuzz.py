"""Fuzz hubpad.formats.safetensors (header_length + parse_header) with mutations of a realistic Hy3-layout header.

Complements test_st_header_fuzz.py (a small synthetic header): here the base header has the real tensor names,
dtypes (FP8, NVFP4-packed U8, BF16, F32) and sizes of a Hy3 shard, and the mutations target the JSON text:
numbers past every integer limit (2^64, 4300+ digits, which json.loads rejects with a bare ValueError), NaN and
Infinity literals, duplicate keys, deep nesting, swapped or shifted offsets, wrong dtypes, truncations, byte flips
and a lying length prefix. 12,000 seeded text mutations plus 1,000 hypothesis cases.

The oracle: parsing either raises HubpadError (one line, naming the file, bounded length) or returns a header
whose every tensor lies inside the data section, has exactly dtype x shape bytes and overlaps no other tensor.
Any other exception is a crash.
"""

from __future__ import annotations

import json
import math
import random
import re
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubpad.errors import HubpadError
from hubpad.formats.safetensors import DTYPE_BITS, encode_header, header_length, parse_header
from hubpad.testing import TINY_HY3, nbytes, tiny_hy3_tensors

FILE = "model-00001-of-00002.safetensors"
_TENSORS = tiny_hy3_tensors(dict(TINY_HY3, num_experts=2, num_hidden_layers=2))
ENTRIES = [(n, d, s, nbytes(d, s)) for n, d, s in _TENSORS][:32]
BASE = encode_header(ENTRIES, {"format": "pt"})
BODY = BASE[8:].decode()
DATA_LEN = sum(e[3] for e in ENTRIES)
NUMBER = re.compile(r"(?<![\w.])-?\d+")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')

HUGE = ["18446744073709551616", "9" * 19, "1" + "0" * 300, "1" + "0" * 4299, "1" + "0" * 4301, "7" * 10_000,
        "-1", "-0", "0", "1e400", "-1e400", "1.0", "1e3", "NaN", "Infinity", "-Infinity", "0x10", "01", "true", "null"]
JUNK_STRINGS = ['"F8_E4M3FN"', '"bf16"', '""', '"\\ud800"', '"\\u0000"', '"F8_E8M0"', '"I64"', '"BOOL"', '"ñ"',
                '"' + "x" * 5000 + '"']
JUNK_VALUES = ["[]", "{}", "[[1]]", "[1,2,3]", '{"a":1}', "[" * 50 + "]" * 50, "[" * 5000 + "]" * 5000,
               '{"a":' * 3000 + "1" + "}" * 3000, '"x"', "null", "[-1]", "[0,0,0]", '["0","1"]', "[1.5,2]",
               '{"dtype":"U8","shape":[1],"data_offsets":[0,1]}']


def check(blob: bytes, file_size: int) -> None:
    """The oracle (see module docstring), on a file of `file_size` bytes starting with `blob` (zeros after it),
    read the way plan.read_header reads it: the length prefix, then exactly the bytes it announces."""
    file = (blob + bytes(max(0, min(file_size, 1 << 24) - len(blob))))[:file_size]
    try:
        n = header_length(file[:8], FILE, file_size)
        header = parse_header(file[8:8 + n], FILE, file_size)
    except HubpadError as exc:
        msg = str(exc)
        assert msg.startswith(FILE + ":"), msg[:200]
        assert "\n" not in msg and len(msg) < 2_000, msg[:200]
        return
    data_start = 8 + n
    assert header.data_start == data_start
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in header.metadata.items())
    previous_end = data_start
    for t in header.tensors:  # sorted by offset, inside the data section, exact sizes, no overlap
        assert t.dtype in DTYPE_BITS
        assert data_start <= t.start <= t.end <= file_size
        assert (t.end - t.start) * 8 == math.prod(t.shape) * DTYPE_BITS[t.dtype]
        assert t.start >= previous_end or t.start == t.end == previous_end
        previous_end = max(previous_end, t.end)


def _blob(body: str | bytes, prefix_delta: int = 0) -> bytes:
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    return struct.pack("<Q", max(0, len(raw) + prefix_delta)) + raw


def _replace_random(pattern: re.Pattern, body: str, rng: random.Random, options: list[str]) -> str:
    spans = [m.span() for m in pattern.finditer(body)]
    if not spans:
        return body
    a, b = rng.choice(spans)
    return body[:a] + rng.choice(options) + body[b:]


def mutate(rng: random.Random) -> tuple[bytes, int]:
    body = BODY
    size = 8 + len(BASE) - 8 + DATA_LEN
    prefix_delta = 0
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(10)
        if op == 0:  # a number becomes something no safetensors writer produces
            body = _replace_random(NUMBER, body, rng, HUGE)
        elif op == 1:  # a string (name, dtype, metadata) becomes junk
            body = _replace_random(STRING, body, rng, JUNK_STRINGS)
        elif op == 2:  # a value (entry, shape, offsets list) becomes nested junk
            spans = [m.span() for m in re.finditer(r"\[[^\[\]]*\]|\{\"dtype\"[^{}]*\}", body)]
            if spans:
                a, b = rng.choice(spans)
                body = body[:a] + rng.choice(JUNK_VALUES) + body[b:]
        elif op == 3:  # a duplicate key (json keeps the last) pointing somewhere else
            name, dtype, shape, nb = rng.choice(ENTRIES)
            start = rng.choice([0, 1, DATA_LEN - nb, DATA_LEN, rng.randrange(DATA_LEN + 1)])
            dup = json.dumps({"dtype": dtype, "shape": list(shape), "data_offsets": [start, start + nb]})
            body = body.rstrip()[:-1] + f',"{name}":{dup}}}'
        elif op == 4:  # shift one tensor's offsets (overlap or gap)
            delta = rng.choice([-1, 1, -16, 16, DATA_LEN])
            spans = [m for m in re.finditer(r'"data_offsets":\[(\d{1,12}),(\d{1,12})\]', body)]
            if spans:
                m = rng.choice(spans)
                a, b = int(m.group(1)) + delta, int(m.group(2)) + delta
                body = body[:m.start()] + f'"data_offsets":[{a},{b}]' + body[m.end():]
        elif op == 5:  # truncate the JSON
            body = body[:rng.randrange(len(body) + 1)]
        elif op == 6:  # flip bytes (may break UTF-8)
            raw = bytearray(body.encode("utf-8", "surrogatepass"))
            for _ in range(rng.randint(1, 4)):
                if raw:
                    raw[rng.randrange(len(raw))] ^= rng.choice([0x01, 0x20, 0x80, 0xFF])
            body = raw.decode("utf-8", "surrogateescape")
        elif op == 7:  # the length prefix lies
            prefix_delta = rng.choice([-1, 1, -8, 8, 10**6, -len(body), 100_000_000, 2**40])
        elif op == 8:  # the file is shorter or longer than the data section
            size += rng.choice([-1, 1, -DATA_LEN, DATA_LEN, -(size - 4)])
        else:  # trailing junk inside the header (safetensors pads with spaces; anything else is invalid)
            body += rng.choice([" " * 7, "\x00", "}", ",", "\ufeff", " // comment"])
    raw = body.encode("utf-8", "surrogateescape")
    return _blob(raw, prefix_delta), max(size, 0)


def test_base_header_parses_and_satisfies_the_oracle():
    header = parse_header(BASE[8:], FILE, len(BASE) + DATA_LEN)
    assert len(header.tensors) == len(ENTRIES)
    check(BASE, len(BASE) + DATA_LEN)


def test_shape_product_too_large_to_print_is_a_clean_error():
    # 10^4000 x 10^4000 elements: the size check's message once formatted an 8000-digit int (str() raises)
    body = BODY.replace("[512,", "[" + "1" + "0" * 4000 + "," + "1" + "0" * 4000 + ",", 1)
    check(_blob(body), len(BASE) + DATA_LEN)


def test_huge_integer_literals_are_a_clean_error():
    body = BODY.replace('"data_offsets":[0,', '"data_offsets":[' + "1" + "0" * 5000 + ",", 1)
    check(_blob(body), len(BASE) + DATA_LEN)
    try:
        parse_header(body.encode(), FILE, len(BASE) + DATA_LEN)
    except HubpadError as exc:
        assert "not valid JSON" in str(exc)
    else:
        raise AssertionError("a 5001-digit offset was accepted")


def test_twelve_thousand_seeded_text_mutations():
    rng = random.Random(5)
    for _ in range(12_000):
        blob, size = mutate(rng)
        check(blob, size)


@settings(max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_hypothesis_structured_mutations(data):
    header = json.loads(BODY)
    names = [n for n in header if n != "__metadata__"]
    values = st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                       st.none(), st.booleans(), st.lists(st.integers(min_value=-3, max_value=2**70), max_size=4),
                       st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
    for _ in range(data.draw(st.integers(1, 4))):
        name = data.draw(st.sampled_from(names + ["__metadata__", "new"]))
        field = data.draw(st.sampled_from(["dtype", "shape", "data_offsets", "extra", None]))
        value = data.draw(values)
        if field is None or not isinstance(header.get(name), dict):
            header[name] = value
        else:
            header[name][field] = value
    body = json.dumps(header, allow_nan=True)
    size = len(BASE) + DATA_LEN + data.draw(st.integers(-DATA_LEN, 64))
    check(_blob(body), max(size, 0))
