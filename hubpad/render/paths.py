"""Where things live: hubpad's built-in jinja2 templates (in a checkout and in an installed package alike), and the
derivative's vocab-plugin folder."""

from pathlib import Path

PATCH_DIR = "vllm_patch"  # the derivative's folder for the vLLM vocab plugin


def builtin_templates_dir() -> Path:
    """The built-in templates folder: `<checkout>/templates`, or the copy packaged as `hubpad/templates`."""
    package = Path(__file__).resolve().parent.parent  # hubpad/
    for candidate in (package.parent / "templates", package / "templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("hubpad's templates folder is missing from this installation")
