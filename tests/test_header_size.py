"""A shard's header length is counted without encoding the header: the count must equal the encoded length."""

from __future__ import annotations

import random

import pytest

from hubpad.formats.safetensors import DTYPE_BITS, encode_header_columns, encoded_header_size

NAMES = ["a.weight", "model.layers.0.mlp.experts.17.down_proj.weight_packed", "ünï.cödé", 'q"uote', "back\\slash",
         "tab\there", "__metadata__x", "", "名前.weight", "e\u2028"]


def _columns(rng: random.Random, n: int, repeat_name: bool = False):
    names = [f"{rng.choice(NAMES)}.{i}" for i in range(n)]
    if repeat_name and n > 1:
        names[-1] = names[0]
    dtypes = [rng.choice(sorted(DTYPE_BITS)) for _ in range(n)]
    shapes = [tuple(rng.choice([0, 1, 7, 10, 99, 100, 4096, 10**6]) for _ in range(rng.randint(0, 3))) for _ in range(n)]
    sizes = [rng.choice([0, 1, 9, 10, 11, 999, 10**6, 10**9, 3 * 10**10]) for _ in range(n)]
    return names, dtypes, shapes, sizes


@pytest.mark.parametrize("seed", range(4))
def test_counted_size_equals_encoded_length(seed):
    rng = random.Random(seed)
    for case in range(50):
        columns = _columns(rng, rng.choice([0, 1, 2, 5, 50, 300]), repeat_name=case % 7 == 0)
        metadata = rng.choice([None, {}, {"format": "pt"}, {"format": "pt", "ñ": "\"x\""}])
        assert encoded_header_size(*columns, metadata) == len(encode_header_columns(*columns, metadata)), case
