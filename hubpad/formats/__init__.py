"""On-disk formats hubpad reads and writes: safetensors headers, file names, hubpad.json, the mirrors file."""

from .manifest import Manifest, dumps, is_fresh
from .names import INDEX, MANIFEST, SINGLE
from .safetensors import SafetensorsHeader, TensorInfo, encode_header, parse_header

__all__ = ["INDEX", "MANIFEST", "SINGLE", "Manifest", "SafetensorsHeader", "TensorInfo", "dumps", "encode_header",
           "is_fresh", "parse_header"]
