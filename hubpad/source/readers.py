"""Reading a source's small files: JSON, safetensors headers (two range reads at most) and the weight file list."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict

from hubpad.errors import HubpadError
from hubpad.formats.names import INDEX, SINGLE
from hubpad.formats.safetensors import SafetensorsHeader, header_length, parse_header
from hubpad.source.base import FileEntry, Source


def read_json(source: Source, path: str) -> dict:
    try:
        data = json.loads(source.read_file(path))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HubpadError(f"{source.label}/{path}: not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise HubpadError(f"{source.label}/{path}: expected a JSON object")
    return data


def read_header(source: Source, entry: FileEntry) -> SafetensorsHeader:
    """Read and validate one shard's header with at most two small range reads."""
    first = source.read_range(entry.path, 0, min(entry.size, 100_000))  # as get_safetensors_metadata does
    n = header_length(first, entry.path, entry.size)
    if 8 + n > len(first):
        first += source.read_range(entry.path, len(first), 8 + n)
    header = parse_header(first[8:8 + n], entry.path, entry.size)
    # The plan is made from these bytes, read apart from the file's checked stream: their digest lets the mirror
    # check them against the bytes that stream delivers (VerifiedReader's `header`).
    return dataclasses.replace(header, digest=hashlib.sha256(first[:8 + n]).hexdigest())


def weight_files(source: Source) -> tuple[list[str], dict]:
    """The safetensors files holding the model, from the index (or the single-file layout)."""
    files = source.files()
    if INDEX in files:
        index = read_json(source, INDEX)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise HubpadError(f"{source.label}/{INDEX}: no weight_map")
        if not isinstance(index.get("metadata") or {}, dict):
            raise HubpadError(f"{source.label}/{INDEX}: metadata must be an object")
        names = list(OrderedDict.fromkeys(sorted(set(weight_map.values()))))
        for name in names:
            if name not in files:
                raise HubpadError(f"{source.label}/{INDEX}: lists {name!r}, which the repo does not have")
        return names, index
    if SINGLE in files:
        return [SINGLE], {}
    raise HubpadError(f"{source.label}: no {INDEX} or {SINGLE}")
