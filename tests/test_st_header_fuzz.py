"""Fuzz the safetensors header parser: mutated headers may only ever fail with hubpad's own clear error."""

from __future__ import annotations

import json
import random
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubpad.errors import HubpadError
from hubpad.formats.safetensors import encode_header, header_length, parse_header

BASE_ENTRIES = [("a.weight", "BF16", (4, 8), 64), ("a.weight_scale", "F8_E4M3", (4, 2), 8),
                ("b.bias", "F32", (4,), 16), ("c.scale", "F32", (), 4), ("d.idx", "I64", (2,), 16)]
BASE = encode_header(BASE_ENTRIES, {"format": "pt"})
DATA_LEN = sum(e[3] for e in BASE_ENTRIES)


def parse_file(blob: bytes) -> None:
    """What read_header does with a whole file's bytes: length prefix, bounds, JSON, entries."""
    n = header_length(blob[:8], "f.safetensors", len(blob))
    parse_header(blob[8:8 + n], "f.safetensors", len(blob))


def _check(blob: bytes) -> None:
    try:
        parse_file(blob)
    except HubpadError as exc:
        assert str(exc).startswith("f.safetensors"), str(exc)
        assert "\n" not in str(exc)


def test_valid_header_parses():
    parse_file(BASE + bytes(DATA_LEN))


def _mutate_json(rng: random.Random) -> bytes:
    header = json.loads(BASE[8:])
    name = rng.choice([k for k in header if k != "__metadata__"] + ["__metadata__"])
    junk = rng.choice([None, -1, 2**70, 1.5, "x", [], {}, [1], [1, 2, 3], {"a": 1}, True, "F8_E4M3", [[1]], "\ud800"])
    target = header.get(name)
    if isinstance(target, dict) and target and rng.random() < 0.8:
        key = rng.choice(list(target) + ["extra"])
        target[key] = junk
    elif rng.random() < 0.5:
        header[name] = junk
    else:
        header[f"x{rng.random()}"] = {"dtype": "U8", "shape": [rng.randint(0, 99)],
                                      "data_offsets": [rng.randint(-5, 200), rng.randint(-5, 200)]}
    body = json.dumps(header).encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(body)) + body + bytes(rng.choice([0, DATA_LEN, DATA_LEN + 3]))


def _mutate_bytes(rng: random.Random) -> bytes:
    blob = bytearray(BASE + bytes(DATA_LEN))
    for _ in range(rng.randint(1, 8)):
        op = rng.random()
        if op < 0.5 and blob:
            blob[rng.randrange(len(blob))] = rng.randrange(256)
        elif op < 0.7:
            del blob[rng.randrange(len(blob) + 1):]
        elif op < 0.85:
            blob[:8] = struct.pack("<Q", rng.choice([0, 1, len(blob), 2**63, 100_000_001, rng.randrange(2**64)]))
        else:
            i = rng.randrange(len(blob) + 1)
            blob[i:i] = rng.randbytes(rng.randint(1, 16))
    return bytes(blob)


def test_ten_thousand_seeded_mutations_fail_only_cleanly():
    rng = random.Random(20261129)
    for i in range(12_000):
        _check(_mutate_json(rng) if i % 2 else _mutate_bytes(rng))


@settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_fail_only_cleanly(blob):
    _check(blob)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
                           max_leaves=12)


@settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=5), st.integers(0, 200))
def test_arbitrary_json_headers_fail_only_cleanly(header, data_len):
    body = json.dumps(header).encode()
    _check(struct.pack("<Q", len(body)) + body + bytes(data_len))
