"""A checkpoint whose weights sit in folders of their own (a Diffusers pipeline's `transformer/`, `vision_encoder/`,
named by the adapter's `weight_folders`): each folder's output shards, its index and its config.json.

A folder's shards stay in it. One with an index is cut at the shard size and named after its index's stem
(`<stem>-00001-of-0000N.safetensors`), its index written again; one without keeps its files, each with its own
tensors (a reader that lists `*.safetensors` finds the same files). A folder whose tensors grow gets the padded dims
in its own config.json where that states them at its top level (diffusers' `num_attention_heads`, ...); every other
file of the folder is copied as it is.
"""

from __future__ import annotations

from hubpad.formats.names import folder_of, shard_stem
from hubpad.plan.model import Dim, ShardPlan, TensorPlan
from hubpad.plan.shards import cut_shards
from hubpad.source.base import Source
from hubpad.source.readers import WeightFolder, read_json


def cut_folder_shards(tensors: list[TensorPlan], folders: list[WeightFolder], shard_size: int,
                      metadata: dict[str, str]) -> list[ShardPlan]:
    """The output shards, folder by folder in the adapter's order, each folder's tensors in upstream order."""
    shards: list[ShardPlan] = []
    for folder in folders:
        mine = [t for t in tensors if folder_of(t.src.file) == folder.path]
        if folder.index is None:
            for name in folder.files:
                shards += cut_shards([t for t in mine if t.src.file == name], float("inf"), metadata,
                                     lambda k, n, name=name: name)
        else:
            stem = f"{folder.path}/{shard_stem(folder.index)}"
            shards += cut_shards(mine, shard_size, metadata, lambda k, n: f"{stem}-{k:05d}-of-{n:05d}.safetensors")
    return shards


def folder_indexes(folders: list[WeightFolder], shards: list[ShardPlan]) -> dict[str, dict]:
    """{index path: its JSON} of each folder that had an index: upstream's metadata, the new total_size, and each
    tensor's shard named relative to the folder."""
    out = {}
    for folder in folders:
        if folder.index is None:
            continue
        mine = [s for s in shards if folder_of(s.name) == folder.path]
        weight_map = {t.name: s.name[len(folder.path) + 1:] for s in mine for t in s.tensors}
        metadata = {k: v for k, v in folder.metadata.items() if k != "total_size"}
        metadata["total_size"] = sum(t.nbytes for s in mine for t in s.tensors)
        out[folder.index] = {"metadata": metadata, "weight_map": dict(sorted(weight_map.items()))}
    return out


def folder_configs(source: Source, folders: list[WeightFolder], dims: list[Dim],
                   tensors: list[TensorPlan]) -> dict[str, dict]:
    """{path: padded config} of each folder whose tensors grow and whose config.json states a padded dim at its top
    level (a dim's plain config keys; the value it has upstream must be the dim's own)."""
    files, out = source.files(), {}
    grown = {folder_of(t.src.file) for t in tensors if t.padded}
    for folder in folders:
        path = f"{folder.path}/config.json"
        if folder.path not in grown or path not in files:
            continue
        before = read_json(source, path)
        after = dict(before)
        for d in dims:
            for key in d.config_keys:
                if "." not in key and key in before and before[key] == d.before:
                    after[key] = d.after
        if after != before:
            out[path] = after
    return out
