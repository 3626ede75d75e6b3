"""File names hubpad reads and writes, and which upstream files it leaves out."""

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
INDEX_SUFFIX = ".safetensors.index.json"  # a folder's own index: `<stem>.safetensors.index.json`
MANIFEST = "hubpad.json"  # the provenance manifest of every derivative
# Files hubpad writes itself in the derivative; never copied from upstream.
GENERATED = {"config.json", INDEX, MANIFEST, "README.md"}
# The generated files a mirror run builds from the plan; a card refresh (`hubpad card`) renders the others (card,
# recipe, vocab plugin) and may rename or drop them.
BUILT = ("config.json", INDEX, MANIFEST)
# Other weight files (consolidated / original / GGUF / pickles) are not padded, so they are left out.
SKIPPED_PATTERNS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.gguf", "*.h5", "*.msgpack", "*.onnx", "original/*",
                    "*.safetensors", ".gitattributes")


def folder_of(path: str) -> str:
    """The folder a repo path sits in ("" for the root)."""
    return path.rpartition("/")[0]


def shard_stem(folder_index: str | None) -> str:
    """The stem a folder's shards are named after: its index's (`<stem>.safetensors.index.json`), else `model`."""
    if folder_index:
        return folder_index.rpartition("/")[2][:-len(INDEX_SUFFIX)]
    return "model"


def built_by_mirror(path: str) -> bool:
    """A generated file a mirror run builds (BUILT, or a weight folder's config.json or index: plan/folders.py), which a
    card refresh must leave alone: it renders no config or index."""
    return path in BUILT or path.endswith("/config.json") or path.endswith(INDEX_SUFFIX)
