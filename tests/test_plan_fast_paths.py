"""The planner's fast paths give exactly the answers (and errors) of the plain ones they shortcut."""

from __future__ import annotations

import json
import random
import struct

import pytest

from hubpad.errors import HubpadError
from hubpad.formats.safetensors import _encode_header_dict, _tensor_entry, encode_header, parse_header
from hubpad.plan.adapters import ADAPTERS
from hubpad.plan.adapters.base import literal_tails
from hubpad.testing import tiny_hy3_tensors
from tests.hy3_real import HY3_CONFIG


def _plain_parse(body: bytes, size: int) -> list[tuple]:
    """Every entry through `_tensor_entry`, sorted as parse_header sorts: the reference."""
    raw = json.loads(body.decode("utf-8"))
    raw.pop("__metadata__", None)
    n = len(body)
    infos = [_tensor_entry(k, v, "f", size - 8 - n, 8 + n) for k, v in raw.items()]
    infos.sort(key=lambda t: (t.start, t.end))
    return [(t.name, t.dtype, t.shape, t.start, t.end) for t in infos]


def _outcome(fn):
    try:
        return fn()
    except HubpadError as exc:
        return str(exc)


def _header(entries: dict) -> tuple[bytes, int]:
    body = json.dumps(entries, separators=(",", ":")).encode()
    end = max([v["data_offsets"][1] for v in entries.values() if isinstance(v, dict)
               and isinstance(v.get("data_offsets"), list) and len(v["data_offsets"]) == 2
               and all(type(x) is int for x in v["data_offsets"])] or [0])
    return body, 8 + len(body) + end


CASES = {
    "repeated shapes": {f"t{i}": {"dtype": "BF16", "shape": [4, 2], "data_offsets": [16 * i, 16 * i + 16]}
                        for i in range(6)},
    "float in a shape after the int one": {"a": {"dtype": "BF16", "shape": [4, 2], "data_offsets": [0, 16]},
                                           "b": {"dtype": "BF16", "shape": [4.0, 2], "data_offsets": [16, 32]}},
    "bool in a shape after the int one": {"a": {"dtype": "U8", "shape": [1, 2], "data_offsets": [0, 2]},
                                          "b": {"dtype": "U8", "shape": [True, 2], "data_offsets": [2, 4]}},
    "bad size after a good twin": {"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                                   "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, 5]}},
    "offsets not ints after a good twin": {"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                                           "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, "4"]}},
    "shape a string": {"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                       "b": {"dtype": "U8", "shape": "2", "data_offsets": [2, 4]}},
    "shape a dict": {"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                     "b": {"dtype": "U8", "shape": {"2": 1}, "data_offsets": [2, 4]}},
    "nested shape": {"a": {"dtype": "U8", "shape": [[2]], "data_offsets": [0, 2]}},
    "entry not an object": {"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "b": [1]},
    "overlap": {"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}},
    "zero-size ties": {"a": {"dtype": "U8", "shape": [0], "data_offsets": [2, 2]},
                       "b": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                       "c": {"dtype": "U8", "shape": [0], "data_offsets": [2, 2]}},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_header_fast_path_matches_plain_checks(case):
    body, size = _header(CASES[case])
    fast = _outcome(lambda: [(t.name, t.dtype, t.shape, t.start, t.end)
                             for t in parse_header(body, "f", size).tensors])
    plain = _outcome(lambda: _plain_parse(body, size))
    if isinstance(plain, list):  # the plain reference skips the overlap check: do it here
        ends = [e for *_, e in plain]
        if any(s < e for (*_, s, _), e in zip(plain[1:], ends)):
            assert "overlap" in fast
            return
    assert fast == plain


def test_header_fast_path_on_a_real_hy3_layout_shares_shapes():
    tensors = tiny_hy3_tensors(dict(HY3_CONFIG, num_hidden_layers=2, num_experts=8), "redhat")
    header = encode_header([(n, d, s, _nbytes(d, s)) for n, d, s in tensors], {"format": "pt"})
    body = header[8:]
    size = len(header) + sum(_nbytes(d, s) for _, d, s in tensors)
    parsed = parse_header(body, "f", size).tensors
    assert [(t.name, t.dtype, t.shape, t.start, t.end) for t in parsed] == _plain_parse(body, size)
    assert len({id(t.shape) for t in parsed}) == len({(t.dtype, t.shape) for t in parsed})  # one tuple each


def _nbytes(dtype: str, shape) -> int:
    from hubpad.formats.safetensors import DTYPE_BITS

    n = DTYPE_BITS[dtype]
    for d in shape:
        n *= d
    return n // 8


@pytest.mark.parametrize("entries", [
    [("a", "BF16", (2, 3), 12), ("b.ü", "F32", (), 4), ('q"\\\n', "U8", (0,), 0)],
    [("a", "U8", (2,), 2), ("a", "U8", (3,), 3)],  # a repeated name collapses, as in a dict
    [("__metadata__", "U8", (1,), 1), ("b", "U8", (1,), 1)],
])
@pytest.mark.parametrize("metadata", [None, {}, {"format": "pt", "ünï": "x"}])
def test_encode_header_is_the_dict_encoding(entries, metadata):
    assert encode_header(entries, metadata) == _encode_header_dict(entries, metadata)
    length = struct.unpack("<Q", encode_header(entries, metadata)[:8])[0]
    assert (8 + length) % 8 == 0


def test_literal_tails():
    assert literal_tails([r"^a\.(b|c\.d)$", r"^x\.y_[zw]$"]) == {"b", "d", "y_z", "y_w"}
    for pattern in (r"^a\.\w+$", r"^a\.b", r"(?i)^a\.b$", r"^a\.b.$", r"^ab$", r"^a\.(b|.)$"):
        assert literal_tails([r"^a\.b$", pattern]) is None, pattern


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
def test_copy_param_prefilter_gives_the_regex_answer(adapter):
    names = [n for n, _, _ in tiny_hy3_tensors(dict(HY3_CONFIG, num_hidden_layers=2, num_experts=4), "redhat")]
    names += ["model.layers.3.mlp.expert_bias", "model.layers.3.mlp.expert_bias\n", "model.layers.3.mlp.gate."
              "e_score_correction_bias", "model.rotary_emb.inv_freq", "inv_freq", "expert_bias", "x.inv_freq",
              "model.layers.1.self_attn.rotary_emb.inv_freq", "model.layers.1.mlp.e_score_correction_bias.weight"]
    rng = random.Random(0)
    for _ in range(300):  # names cut or glued at random points
        a, b = rng.choice(names), rng.choice(names)
        names.append(a[:rng.randrange(len(a) + 1)] + b[rng.randrange(len(b) + 1):])
    for name in names:
        assert adapter.is_copy_param(name) == any(p.search(name) for p in adapter._copy_params), name
