"""Render everything a user reads or runs in the derivative: the model card, the sparkrun recipe, the vLLM vocab patch.

The steps: build the templates' context (render/context.py, from hubpad.json and the upstream cards' front matter),
render each template in a sandboxed, strict jinja2 environment whose filters keep upstream text inert
(render/markup.py), merge the mirrors file's recipe overrides (render/recipe.py), and refuse outputs that do not
parse. Upstream text is data, never a template: it reaches the templates only as variables.
"""

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jinja2 import FileSystemLoader, StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from hubpad.errors import HubpadError
from hubpad.render.context import OWNER_PLACEHOLDER, build_context
from hubpad.render.markup import code, md, safe_url, shell, yaml_scalar
from hubpad.render.paths import PATCH_DIR, builtin_templates_dir
from hubpad.render.recipe import DEFAULT_CONTAINER, apply_recipe_overrides
from hubpad.render.upstream_card import FRONT_MATTER, OWNER_END, OWNER_START, extract_owner_section

__all__ = ["DEFAULT_CONTAINER", "OWNER_PLACEHOLDER", "PATCH_DIR", "PATCH_TEMPLATES", "RenderResult",
           "extract_owner_section", "render_derivative"]

# output path -> template name; README and recipe are always rendered, the patch files only when the vocab needs it.
PATCH_TEMPLATES = {
    f"{PATCH_DIR}/hubpad_vocab_patch.py": "vocab_patch.py.j2",
    f"{PATCH_DIR}/hubpad_vocab_patch.pth": "vocab_patch.pth.j2",
    f"{PATCH_DIR}/pyproject.toml": "vocab_patch.pyproject.toml.j2",
    f"{PATCH_DIR}/Containerfile": "vocab_patch.Containerfile.j2",
}


@dataclass
class RenderResult:
    """What `render_derivative` produced: {relative path: text}, plus warnings the caller should show the user."""

    files: dict[str, str]
    warnings: list[str] = field(default_factory=list)


def render_derivative(
    manifest: dict,
    *,
    target_repo: str | None,
    upstream_card: str | None,
    upstream_base_card: str | None = None,
    existing_readme: str | None = None,
    published_commit: str | None = None,
    templates_dir: Path | None = None,
    upstream_files: set[str] | None = None,
    target_path: str | None = None,
) -> RenderResult:
    """Render README.md, `<name>.yaml` (sparkrun recipe) and, when the vocab needs it, `vllm_patch/*`.

    - `upstream_card` / `upstream_base_card`: raw README.md text of the upstream repo and of its first `base_model`
      (None when absent); only their front matter is read, to inherit license/tags and detect license conflicts.
    - `existing_readme`: the derivative's current README, whose owner section is carried over.
    - `published_commit`: the derivative commit holding the weights; the recipe and the serve command pin it.
    - `templates_dir`: files there override the built-in templates of the same name.
    - `target_repo` None: a local derivative no Hub repo id was given for; its commands name `target_path`.
    - `upstream_files`: the upstream repo's file list (defaults to the manifest's), used to check a relative license link.

    `manifest["serving"]` keys read (all optional): tool_call_parser (adds --enable-auto-tool-choice unless
    enable_auto_tool_choice is false), reasoning_parser, speculative_config (dict or JSON string), extra_args (list or
    string), trust_remote_code, max_model_len, gpu_memory_utilization, upstream_tp_values, container (base vLLM image),
    patched_image (image name used when the vocab patch is needed).
    """
    warnings: list[str] = []
    ctx = build_context(
        manifest,
        target_repo=target_repo,
        upstream_card=upstream_card,
        upstream_base_card=upstream_base_card,
        existing_readme=existing_readme,
        published_commit=published_commit,
        upstream_files=upstream_files,
        warnings=warnings,
        target_path=target_path,
    )
    env = _environment(templates_dir)
    files = {
        "README.md": _render(env, "README.md.j2", ctx),
        ctx["recipe_file"]: apply_recipe_overrides(_render(env, "recipe.yaml.j2", ctx), ctx["recipe_overrides"]),
    }
    if ctx["vocab_patch"]:
        for path, template in PATCH_TEMPLATES.items():
            files[path] = _render(env, template, ctx)
    _check_outputs(files, ctx)
    if target_repo is not None:  # meant for upload: no file may name a local path
        upstream = manifest.get("upstream") or {}
        _check_no_local_paths(files, [target_path, upstream.get("repo") if upstream.get("kind") == "local" else None])
    return RenderResult(files=files, warnings=warnings)


def _check_no_local_paths(files: dict[str, str], paths: list[str | None]) -> None:
    for path in filter(None, paths):
        for name, text in files.items():
            if str(path) in text:
                raise HubpadError(f"internal error: the rendered {name}, meant for upload, names the local path {path}")


def _environment(templates_dir: Path | None) -> SandboxedEnvironment:
    """Sandboxed, strict jinja2 over the override folder (first) and the built-in templates."""
    if templates_dir is not None and not Path(templates_dir).is_dir():
        raise HubpadError(f"templates folder {templates_dir} does not exist")
    return _cached_environment(None if templates_dir is None else str(Path(templates_dir).resolve()))


@functools.lru_cache(maxsize=8)
def _cached_environment(templates_dir: str | None) -> SandboxedEnvironment:
    """One environment per override folder and process, so each template is compiled once, not at every render
    (a mirror renders the card twice). jinja2 still reloads a template whose file changed (auto_reload)."""
    search = [str(builtin_templates_dir())]
    if templates_dir is not None:
        search.insert(0, templates_dir)
    env = SandboxedEnvironment(
        loader=FileSystemLoader(search),
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update({"md": md, "code": code, "shell": shell, "yaml_scalar": yaml_scalar, "safe_url": safe_url})
    return env


def _render(env: SandboxedEnvironment, name: str, ctx: dict[str, Any]) -> str:
    """Render one template; template mistakes surface as one-line HubpadErrors."""
    try:
        return env.get_template(name).render(ctx)
    except TemplateError as exc:
        raise HubpadError(f"template {name}: {exc}") from exc


def _check_outputs(files: dict[str, str], ctx: dict[str, Any]) -> None:
    """Refuse to publish a card whose front matter or recipe does not parse, or whose owner markers are ambiguous."""
    readme = files["README.md"]
    match = FRONT_MATTER.match(readme)
    if not match:
        raise HubpadError("rendered README.md has no front matter")
    try:
        meta = yaml.safe_load(match.group(2))
        yaml.safe_load(files[ctx["recipe_file"]])
    except yaml.YAMLError as exc:
        raise HubpadError(f"rendered card or recipe is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise HubpadError("rendered README.md front matter is not a mapping")
    if readme.count(OWNER_START) != 1 or readme.count(OWNER_END) != 1:
        raise HubpadError("rendered README.md must contain exactly one owner section")
