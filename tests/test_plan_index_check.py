"""The index check that runs while headers are read gives the errors of reading everything first, in that order.

The reference is the plain check it replaced: all headers parsed, then every tensor once (the first tensor seen in
two shards), then every tensor where the index says (the first misplaced one), then the first index name no
header holds.
"""

from __future__ import annotations

import json

import pytest

from hubpad.errors import ConfigError, HubpadError
from hubpad.formats.names import INDEX
from hubpad.plan.planner import make_plan
from hubpad.source import LocalSource
from hubpad.source.readers import read_header
from hubpad.testing import TINY_HY3, quant_config, tiny_hy3_tensors, write_checkpoint


def _reference(src) -> str | None:
    """The plain check (before the headers streamed through it): the first error, or None."""
    source = LocalSource(src)
    files = source.files()
    index = json.loads((src / INDEX).read_text())
    weight_map = index["weight_map"]
    try:
        headers = [read_header(source, files[n]) for n in sorted(set(weight_map.values()))]
    except HubpadError as exc:
        return str(exc)
    infos = {}
    for h in headers:
        for t in h.tensors:
            if t.name in infos:
                return f"tensor {t.name!r} appears in both {infos[t.name].file} and {t.file}"
            infos[t.name] = t
    for name, t in infos.items():
        if weight_map.get(name) != t.file:
            return f"{INDEX}: tensor {name!r} is in {t.file} but the index says {weight_map.get(name)!r}"
    missing = set(weight_map) - set(infos)
    return f"{INDEX}: tensor {sorted(missing)[0]!r} is listed but not in any shard header" if missing else None


def _edit_index(src, edit) -> None:
    index = json.loads((src / INDEX).read_text())
    edit(index["weight_map"])
    (src / INDEX).write_text(json.dumps(index, indent=2))


def _shard(i: int) -> str:
    return f"model-{i:05d}-of-00003.safetensors"


def _duplicate(src, name: str, into: int) -> None:
    """Append a second copy of tensor `name` (from its own shard) to shard `into`'s header."""
    from hubpad.formats.safetensors import encode_header

    path = src / _shard(into)
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", None)
    entries = [(k, v["dtype"], tuple(v["shape"]), v["data_offsets"][1] - v["data_offsets"][0]) for k, v in header.items()]
    twin = next(e for e in entries if e[0] == entries[0][0])
    entries.append((name, twin[1], twin[2], twin[3]))
    body = data[8 + n:] + b"\0" * twin[3]
    path.write_bytes(encode_header(entries, meta) + body)


def _rename_in_header(src, shard: int, old: str, new: str) -> None:
    path = src / _shard(shard)
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    body = data[8:8 + n].replace(json.dumps(old).encode(), json.dumps(new).encode())
    assert len(body) == n  # same length names keep every offset
    path.write_bytes(data[:8] + body + data[8 + n:])


def _names(src, shard: int) -> list[str]:
    return [t.name for t in read_header(LocalSource(src), LocalSource(src).files()[_shard(shard)]).tensors]


CASES = {
    "clean": lambda src: None,
    "misplaced in the last shard": lambda src: _edit_index(
        src, lambda wm: wm.__setitem__(_names(src, 3)[-1], _shard(1))),
    "misplaced in two shards (the first wins)": lambda src: (
        _edit_index(src, lambda wm: wm.__setitem__(_names(src, 3)[0], _shard(1))),
        _edit_index(src, lambda wm: wm.__setitem__(_names(src, 2)[5], _shard(3)))),
    "header tensor missing from the index": lambda src: _edit_index(src, lambda wm: wm.pop(_names(src, 2)[3])),
    "index names two tensors no header holds": lambda src: _edit_index(
        src, lambda wm: wm.update({"zz.extra": _shard(1), "model.aa.extra": _shard(2)})),
    "a tensor in two shards": lambda src: _duplicate(src, _names(src, 1)[2], 3),
    "a tensor in two shards after a misplaced one": lambda src: (
        _edit_index(src, lambda wm: wm.__setitem__(_names(src, 1)[0], _shard(2))),
        _duplicate(src, _names(src, 2)[1], 3)),
    "a renamed tensor (misplaced and missing)": lambda src: _rename_in_header(
        src, 2, _names(src, 2)[4], _names(src, 2)[4][:-1] + "Z"),
    "a bad header after a misplaced tensor": lambda src: (
        _edit_index(src, lambda wm: wm.__setitem__(_names(src, 1)[0], _shard(2))),
        (src / _shard(3)).write_bytes(b"\xff" * 8 + (src / _shard(3)).read_bytes()[8:])),
}


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    cfg = dict(TINY_HY3, quantization_config=quant_config(TINY_HY3["num_hidden_layers"]))
    return write_checkpoint(tmp_path_factory.mktemp("idx") / "up", cfg, tiny_hy3_tensors(cfg), n_shards=3,
                            header_only=True)


@pytest.mark.parametrize("case", CASES)
def test_index_errors_are_the_plain_checks(good, tmp_path, case):
    import shutil

    src = tmp_path / "src"
    shutil.copytree(good, src)
    CASES[case](src)
    want = _reference(src)
    if want is None:
        assert case == "clean"
        make_plan(LocalSource(src), 3)
        return
    with pytest.raises(HubpadError) as err:
        make_plan(LocalSource(src), 3)
    assert str(err.value) == want
    if case != "a bad header after a misplaced tensor":
        assert isinstance(err.value, ConfigError)
