"""Reading a source's small files: JSON, safetensors headers (two range reads at most) and the weight file list (of
the root, or of the folders an adapter names: a Diffusers pipeline's transformer/)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field

from hubpad.errors import HubpadError
from hubpad.formats.names import INDEX, INDEX_SUFFIX, SINGLE, folder_of
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


@dataclass(frozen=True)
class WeightFolder:
    """One folder of weights: "" (the root) or a subfolder; its own index if it has one (whose `metadata` the
    derivative's index keeps), and its safetensors files (paths from the repo's root)."""

    path: str
    index: str | None
    files: tuple[str, ...]
    metadata: dict = field(default_factory=dict, hash=False, compare=False)


def weight_folders(source: Source, folders: tuple[str, ...] = ()) -> tuple[list[WeightFolder], dict | None]:
    """The folders holding the model (the root when `folders` is empty), and the tensor -> file map of their indexes
    (paths from the repo's root; None when no folder has an index). A subfolder's index is its one
    `*.safetensors.index.json`; without one, its `*.safetensors` files are the model's."""
    if not folders:
        names, index = weight_files(source)
        metadata = index.get("metadata") or {}
        return [WeightFolder("", INDEX if index else None, tuple(names), metadata)], index.get("weight_map")
    files = source.files()
    out, weight_map = [], None
    for folder in folders:
        inside = sorted(f for f in files if folder_of(f) == folder)
        indexes = [f for f in inside if f.endswith(INDEX_SUFFIX)]
        if len(indexes) > 1:
            raise HubpadError(f"{source.label}/{folder}: more than one index ({', '.join(indexes)})")
        if not indexes:
            shards = tuple(f for f in inside if f.endswith(".safetensors"))
            if not shards:
                raise HubpadError(f"{source.label}/{folder}: no safetensors file and no index")
            out.append(WeightFolder(folder, None, shards))
            continue
        index = read_json(source, indexes[0])
        listed = index.get("weight_map")
        if not isinstance(listed, dict) or not listed:
            raise HubpadError(f"{source.label}/{indexes[0]}: no weight_map")
        if not isinstance(index.get("metadata") or {}, dict):
            raise HubpadError(f"{source.label}/{indexes[0]}: metadata must be an object")
        names = sorted({f"{folder}/{name}" for name in listed.values()})
        for name in names:
            if name not in files:
                raise HubpadError(f"{source.label}/{indexes[0]}: lists {name!r}, which the repo does not have")
        weight_map = (weight_map or {}) | {tensor: f"{folder}/{name}" for tensor, name in listed.items()}
        out.append(WeightFolder(folder, indexes[0], tuple(names), index.get("metadata") or {}))
    return out, weight_map
