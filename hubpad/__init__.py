"""hubpad: pad a Hugging Face checkpoint so it serves at a tensor-parallel size its authors never planned for."""

__version__ = "0.1.0"

# Bumped whenever the bytes hubpad writes for the same input and plan could change;
# staged/published shards from another format version are never reused.
FORMAT_VERSION = 1
