"""File names hubpad reads and writes, and which upstream files it leaves out."""

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
MANIFEST = "hubpad.json"  # the provenance manifest of every derivative
# Files hubpad writes itself in the derivative; never copied from upstream.
GENERATED = {"config.json", INDEX, MANIFEST, "README.md"}
# The generated files a mirror run builds from the plan; a card refresh (`hubpad card`) renders the others (card,
# recipe, vocab plugin) and may rename or drop them.
BUILT = ("config.json", INDEX, MANIFEST)
# Other weight files (consolidated / original / GGUF / pickles) are not padded, so they are left out.
SKIPPED_PATTERNS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.gguf", "*.h5", "*.msgpack", "*.onnx", "original/*",
                    "*.safetensors", ".gitattributes")
