"""The sparkrun recipe's context (stock image, defaults, quantization tag, the serve command's flags) and the mirrors
file's `recipe:` overrides merged into the rendered recipe."""

from __future__ import annotations

import re
from typing import Any

import yaml

from hubpad.errors import HubpadError
from hubpad.formats.mirrors_file import PINNED_RECIPE_KEYS
from hubpad.render.serve_command import min_vllm_info, serving_flags

# Generic serving defaults (not model-specific); `manifest["serving"]` overrides each of them.
DEFAULT_CONTAINER = "ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest"  # sparkrun's own vLLM nightly sentinel
DEFAULT_PATCHED_IMAGE = "hubpad-vllm-vocab-patch:latest"
DEFAULT_PORT = 8000
DEFAULT_HOST = "0.0.0.0"
DEFAULT_GPU_MEMORY_UTILIZATION = 0.85
# `metadata.quantization` values sparkrun's validator recognises; others are left out of the recipe.
SPARKRUN_QUANTIZATION = {"awq", "gptq", "marlin", "fp8", "nvfp4", "mxfp4", "bitsandbytes", "compressed-tensors", "gguf",
                         "int4", "int8"}


def recipe_context(manifest: dict, target_repo: str, published_commit: str | None, tp: int,
                   vocab_patch: bool, target_is_hub: bool = True) -> dict[str, Any]:
    """The serve command's flags, the image, the sparkrun recipe's defaults, and how `sparkrun run` names it."""
    serving = manifest.get("serving") or {}
    quant = manifest.get("quantization") or {}
    container = str(serving.get("container") or DEFAULT_CONTAINER)
    image = str(serving.get("patched_image") or DEFAULT_PATCHED_IMAGE) if vocab_patch else container
    for what, value in (("container", container), ("patched_image", image)):
        if not re.fullmatch(r"[\w.:/@-]+", value):
            raise HubpadError(f"serving.{what} {value!r} is not an image reference")
    flags = serving_flags(serving, tp)
    defaults: dict[str, Any] = {"host": DEFAULT_HOST, "port": DEFAULT_PORT}
    defaults["gpu_memory_utilization"] = float(serving.get("gpu_memory_utilization") or DEFAULT_GPU_MEMORY_UTILIZATION)
    if published_commit is not None:
        defaults["model_revision"] = published_commit
    for flag in flags:
        if flag["key"]:
            defaults[flag["key"]] = flag["value"]
    method = str(quant.get("method")).lower()
    recipe_file = f"{target_repo.rstrip('/').rsplit('/', 1)[-1].lower()}.yaml"
    return {
        "recipe_file": recipe_file,
        # `sparkrun run` names the recipe by its URL (a Hub repo) or its path; its pre_exec hook (the vocab plugin)
        # runs only with --trust. The card and the recipe's own header say the same command.
        "recipe_location": f"https://huggingface.co/{target_repo}/resolve/main/{recipe_file}" if target_is_hub
        else f"{target_repo}/{recipe_file}",
        "sparkrun_trust": vocab_patch,
        "container": container,  # the recipe runs the stock image; a vocab patch is installed by its pre_exec hook
        "base_image": container,
        "image": image,  # what the Containerfile builds, for plain `vllm serve` users
        "docker_image": image,  # the card's `docker run` lines: the recipe's image, or the one with the vocab plugin
        "min_vllm": min_vllm_info(serving),
        "flags": flags,
        "recipe_defaults": defaults,
        "recipe_quantization": method if method in SPARKRUN_QUANTIZATION else None,
        "upstream_tp_values": [int(v) for v in serving.get("upstream_tp_values") or []],
        "recipe_overrides": serving.get("recipe") or {},
    }


def apply_recipe_overrides(text: str, overrides: dict[str, Any]) -> str:
    """The rendered recipe with the mirrors file's `recipe:` overrides merged in (mappings key by key).

    The template's comment header is kept; the body is dumped again by yaml, so any value stays valid YAML.
    """
    if not overrides:
        return text
    if not isinstance(overrides, dict):
        raise HubpadError("serving.recipe (the mirrors file's recipe:) must be a mapping")
    for key in PINNED_RECIPE_KEYS:
        if key in overrides:
            raise HubpadError(f"recipe.{key} cannot be overridden: hubpad pins it to the derivative it publishes")
    try:
        recipe = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise HubpadError(f"rendered recipe is not valid YAML: {exc}") from exc
    header = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
    body = yaml.dump(_merged(recipe, overrides), Dumper=_RecipeDumper, sort_keys=False, allow_unicode=True,
                     width=float("inf"))
    return header + body


def _merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


class _RecipeDumper(yaml.SafeDumper):
    """Multi-line strings (the serve command) as `|` blocks, as a person writes a recipe."""


_RecipeDumper.add_representer(
    str, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v, style="|" if "\n" in v else None))
