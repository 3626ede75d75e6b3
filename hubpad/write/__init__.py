"""Writing: stream planned tensors into output shards (hashing as they are written) and build the manifest."""

from .manifest import build_manifest, config_json, shard_entry
from .pad import build_shard
from .writer import ShardWriter

__all__ = ["ShardWriter", "build_manifest", "build_shard", "config_json", "shard_entry"]
