"""Render everything a user reads or runs in the derivative: the model card, the sparkrun recipe, the vLLM vocab patch.

Every fact comes from the manifest (`hubpad.json`) or from the upstream card's front matter. Upstream text is data, never
a template: it reaches the sandboxed jinja2 templates only as variables, front matter is a dict dumped by a yaml
SafeDumper (one line per scalar, `<!--` escaped), and any upstream string that lands in the markdown body goes through
the `md`/`code` filters (HTML and markdown escaped, one line), so a hostile card can neither run jinja, break the YAML
block, inject HTML, nor forge the owner-section markers.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml
from jinja2 import FileSystemLoader, StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from hubpad import __version__
from hubpad.errors import HubpadError
from hubpad.formats.mirrors_file import PINNED_RECIPE_KEYS
from hubpad.render.paths import builtin_templates_dir
from hubpad.render.upstream_card import FRONT_MATTER, OWNER_END, OWNER_START, extract_owner_section, parse_card_metadata
from hubpad.util.refs import is_repo_id
from hubpad.util.sizes import human

OWNER_PLACEHOLDER = (
    "*Nothing here yet. The repository owner can write notes between the two `hubpad:owner-section` marker comments "
    "in this README's source; hubpad keeps that text every time it refreshes the card.*"
)

# Generic serving defaults (not model-specific); `manifest["serving"]` overrides each of them.
DEFAULT_CONTAINER = "ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest"  # sparkrun's own vLLM nightly sentinel
DEFAULT_PATCHED_IMAGE = "hubpad-vllm-vocab-patch:latest"
DEFAULT_PORT = 8000
DEFAULT_HOST = "0.0.0.0"
DEFAULT_GPU_MEMORY_UTILIZATION = 0.85
DEFAULT_LIBRARY = "transformers"
DEFAULT_PIPELINE = "text-generation"
# `metadata.quantization` values sparkrun's validator recognises; others are left out of the recipe.
SPARKRUN_QUANTIZATION = {"awq", "gptq", "marlin", "fp8", "nvfp4", "mxfp4", "bitsandbytes", "compressed-tensors", "gguf", "int4", "int8"}

PATCH_DIR = "vllm_patch"
# output path -> template name; README and recipe are always rendered, the patch files only when the vocab needs it.
PATCH_TEMPLATES = {
    f"{PATCH_DIR}/hubpad_vocab_patch.py": "vocab_patch.py.j2",
    f"{PATCH_DIR}/hubpad_vocab_patch.pth": "vocab_patch.pth.j2",
    f"{PATCH_DIR}/pyproject.toml": "vocab_patch.pyproject.toml.j2",
    f"{PATCH_DIR}/Containerfile": "vocab_patch.Containerfile.j2",
}

_SIMPLE_TOKEN = re.compile(r"[A-Za-z0-9][\w.:/-]*")
_CODE_SAFE = re.compile(r"[\w.\-/:@+=,*()\[\] ]+")
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# The same front-matter rule huggingface_hub uses (repocard.REGEX_YAML_BLOCK).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}#|!~])")


@dataclass
class RenderResult:
    """What `render_derivative` produced: {relative path: text}, plus warnings the caller should show the user."""

    files: dict[str, str]
    warnings: list[str] = field(default_factory=list)


def render_derivative(
    manifest: dict,
    *,
    target_repo: str,
    upstream_card: str | None,
    upstream_base_card: str | None = None,
    existing_readme: str | None = None,
    published_commit: str | None = None,
    templates_dir: Path | None = None,
    upstream_files: set[str] | None = None,
) -> RenderResult:
    """Render README.md, `<name>.yaml` (sparkrun recipe) and, when the vocab needs it, `vllm_patch/*`.

    - `upstream_card` / `upstream_base_card`: raw README.md text of the upstream repo and of its first `base_model`
      (None when absent); only their front matter is read, to inherit license/tags and detect license conflicts.
    - `existing_readme`: the derivative's current README, whose owner section is carried over.
    - `published_commit`: the derivative commit holding the weights; the recipe and the serve command pin it.
    - `templates_dir`: files there override the built-in templates of the same name.
    - `upstream_files`: the upstream repo's file list (defaults to the manifest's), used to check a relative license link.

    `manifest["serving"]` keys read (all optional): tool_call_parser (adds --enable-auto-tool-choice unless
    enable_auto_tool_choice is false), reasoning_parser, speculative_config (dict or JSON string), extra_args (list or
    string), trust_remote_code, max_model_len, gpu_memory_utilization, upstream_tp_values, container (base vLLM image),
    patched_image (image name used when the vocab patch is needed).
    """
    warnings: list[str] = []
    ctx = _build_context(
        manifest,
        target_repo=target_repo,
        upstream_card=upstream_card,
        upstream_base_card=upstream_base_card,
        existing_readme=existing_readme,
        published_commit=published_commit,
        upstream_files=upstream_files,
        warnings=warnings,
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
    return RenderResult(files=files, warnings=warnings)


# ---------------------------------------------------------------------------------------------------------------------
# Upstream cards (untrusted)






def _str_or_none(value: Any) -> str | None:
    """A scalar metadata value as a string (YAML may hand us ints or dates); lists and mappings are rejected."""
    if value is None or isinstance(value, (list, dict)):
        return None
    text = str(value).strip()
    return text or None


def _str_list(value: Any) -> list[str]:
    """A metadata field that may be one string or a list, as a list of non-empty strings."""
    items = value if isinstance(value, list) else [value]
    return [s for s in (_str_or_none(v) for v in items) if s]


def _license_of(meta: dict[str, Any]) -> dict[str, str]:
    """The `license`, `license_name`, `license_link` fields that are present, as strings."""
    out = {}
    for key in ("license", "license_name", "license_link"):
        value = _str_or_none(meta.get(key))
        if value:
            out[key] = value
    return out


def _license_label(lic: dict[str, str]) -> str:
    """How a license reads in a sentence: `other` licenses are known by their name."""
    if lic.get("license") == "other" and lic.get("license_name"):
        return f"other ({lic['license_name']})"
    return lic.get("license", "")


def _same_license(a: dict[str, str], b: dict[str, str]) -> bool:
    """Whether two cards declare the same license (for `other`, the license names must match too)."""
    if a.get("license", "").lower() != b.get("license", "").lower():
        return False
    if a.get("license") == "other":
        return a.get("license_name", "").lower() == b.get("license_name", "").lower()
    return True


# ---------------------------------------------------------------------------------------------------------------------
# Context


def _need(mapping: Any, key: str, where: str) -> Any:
    """`mapping[key]`, or a HubpadError naming the missing manifest field."""
    if not isinstance(mapping, dict) or key not in mapping:
        raise HubpadError(f"hubpad.json is missing {where}{key}")
    return mapping[key]




def _simple_token(value: Any, what: str) -> str:
    """A value spliced unquoted into a shell or recipe command (parser names, sizes): one plain token or an error."""
    text = str(value)
    if not _SIMPLE_TOKEN.fullmatch(text):
        raise HubpadError(f"serving.{what} {text!r} is not a plain token; refusing to put it in a command")
    return text


def _no_control(value: str, what: str) -> str:
    """Reject control characters (newlines break the recipe's YAML block and the shell command)."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise HubpadError(f"serving.{what} contains a control character")
    return value


def _serving_flags(serving: dict[str, Any], tp: int) -> list[dict[str, Any]]:
    """The vLLM flags of the serve command, shared by the recipe (as `{key}` placeholders) and the card (as values).

    Each entry: flag, key (the recipe `defaults` key, None for a literal flag), value, quote (wrap in '...' in the recipe).
    """
    flags: list[dict[str, Any]] = []

    def add(flag: str, key: str | None = None, value: Any = None, quote_it: bool = False) -> None:
        flags.append({"flag": flag, "key": key, "value": value, "quote": quote_it})

    add("--tensor-parallel-size", "tensor_parallel", tp)
    tool_parser = serving.get("tool_call_parser")
    if tool_parser:
        if serving.get("enable_auto_tool_choice", True):
            add("--enable-auto-tool-choice")
        add("--tool-call-parser", "tool_call_parser", _simple_token(tool_parser, "tool_call_parser"))
    if serving.get("reasoning_parser"):
        add("--reasoning-parser", "reasoning_parser", _simple_token(serving["reasoning_parser"], "reasoning_parser"))
    spec = serving.get("speculative_config")
    if spec:
        if isinstance(spec, str):
            try:
                spec = json.loads(spec)
            except ValueError as exc:
                raise HubpadError("serving.speculative_config is a string but not JSON") from exc
        if not isinstance(spec, dict):
            raise HubpadError("serving.speculative_config must be a JSON object")
        text = _no_control(json.dumps(spec), "speculative_config")
        if "'" in text:
            raise HubpadError("serving.speculative_config must not contain single quotes (it is quoted with them)")
        add("--speculative-config", "speculative_config", text, quote_it=True)
    if serving.get("trust_remote_code"):
        add("--trust-remote-code")
    if serving.get("max_model_len"):
        add("--max-model-len", "max_model_len", int(serving["max_model_len"]))
    extra = serving.get("extra_args") or []
    if isinstance(extra, str):
        extra = shlex.split(extra)
    extra = [_no_control(str(arg), "extra_args") for arg in extra]
    if any("{" in arg or "}" in arg for arg in extra):
        raise HubpadError("serving.extra_args must not contain braces (sparkrun reads them as placeholders)")
    i = 0
    while i < len(extra):  # one line per option, with its value when the next token is not an option
        words = [extra[i]]
        if extra[i].startswith("-") and i + 1 < len(extra) and not extra[i + 1].startswith("-"):
            words.append(extra[i + 1])
        add(" ".join(shlex.quote(w) for w in words))
        i += len(words)
    return flags


def _format_tags(quant: dict[str, Any]) -> list[str]:
    """Hub tags for the quantization formats: `fp8-block` → `fp8`, `nvfp4` → `nvfp4`, plus the method name."""
    tags = []
    for fmt in _str_list(quant.get("formats")):
        tags.append(re.split(r"[-_]", fmt.lower())[0])
    method = _str_or_none(quant.get("method"))
    if method and method.lower() not in ("none", "null"):
        tags.append(method.lower())
    return tags


def _dedupe(items: list[str]) -> list[str]:
    """Order-preserving de-duplication."""
    seen: set[str] = set()
    return [x for x in items if not (x in seen or seen.add(x))]


def _dim_kind(config_key: str) -> str:
    """Which lossless argument applies to a padded dimension: attention heads, MLP width, or something else."""
    if "head" in config_key:
        return "attention"
    if "intermediate" in config_key:
        return "mlp"
    return "other"




def _resolve_license(
    upstream_meta: dict[str, Any],
    base_meta: dict[str, Any] | None,
    *,
    upstream_repo: str,
    upstream_commit: str | None,
    upstream_is_hub: bool,
    copied: set[str],
    upstream_files: set[str] | None,
    base_name: str | None,
    warnings: list[str],
) -> dict[str, Any]:
    """Inherit the parent's license fields (never default them) and explain anything a user must check."""
    lic = _license_of(upstream_meta)
    notes: list[str] = []
    link = lic.get("license_link")
    if link and not _URL_SCHEME.match(link) and not link.startswith("/"):
        path = link.removeprefix("./")
        if path not in copied and safe_url(path):
            if upstream_files is not None and path not in upstream_files:
                warnings.append(f"upstream license_link {path!r} is not a file of the upstream repo")
            if upstream_is_hub and upstream_commit:
                lic["license_link"] = (
                    f"https://huggingface.co/{upstream_repo}/blob/{quote(upstream_commit, safe='')}/{quote(path, safe='/')}"
                )
            else:
                warnings.append(f"license_link {path!r} is relative but the file was not copied; the link will be broken")
    if "license_link" in lic and not safe_url(lic["license_link"]):
        warnings.append(f"upstream license_link {lic.pop('license_link')!r} is not an https URL or a file path; dropped")
    if "license" not in lic:
        warnings.append(f"upstream {upstream_repo} declares no license; the derivative card says so, check before use")
    base_lic = _license_of(base_meta) if base_meta is not None else {}
    if base_meta is not None and lic.get("license") and base_lic.get("license") and not _same_license(lic, base_lic):
        notes.append("base-differs")
        warnings.append(
            f"license mismatch: upstream {upstream_repo} declares {_license_label(lic)!r} but its base model "
            f"{base_name!r} declares {_license_label(base_lic)!r}"
        )
    return {
        "fields": lic,
        "link": lic.get("license_link", ""),
        "label": _license_label(lic),
        "missing": "license" not in lic,
        "base_label": _license_label(base_lic) if "base-differs" in notes else None,
        "base_name": base_name,
    }


@dataclass
class _Upstream:
    """The upstream as the manifest records it, checked: these values end up in links, YAML and commands."""

    repo: str
    is_hub: bool
    commit: str | None
    revision: str | None
    files: set[str] | None

    @property
    def namespace(self) -> str | None:
        return self.repo.split("/", 1)[0] if self.is_hub and "/" in self.repo else None


@dataclass
class _Cards:
    """What the upstream's and its base model's cards say (untrusted data: front matter only)."""

    meta: dict[str, Any]
    base_meta: dict[str, Any] | None
    base_models: list[dict[str, Any]]

    @property
    def base_name(self) -> str | None:
        return self.base_models[0]["id"] if self.base_models else None


def _build_context(
    manifest: dict,
    *,
    target_repo: str,
    upstream_card: str | None,
    upstream_base_card: str | None,
    existing_readme: str | None,
    published_commit: str | None,
    upstream_files: set[str] | None,
    warnings: list[str],
) -> dict[str, Any]:
    """Everything the templates see, computed here so the templates hold wording and layout only."""
    _check_target(manifest, target_repo, published_commit, warnings)
    upstream = _upstream(manifest, upstream_files)
    tp = int(_need(manifest, "tp", ""))
    if tp < 1:
        raise HubpadError(f"tp must be >= 1, got {tp}")
    files_section = manifest.get("files") or {}
    copied = set(_str_list(files_section.get("copied")))
    cards = _read_cards(upstream, upstream_card, upstream_base_card, warnings)
    license_info = _resolve_license(cards.meta, cards.base_meta, upstream_repo=upstream.repo,
                                    upstream_commit=upstream.commit, upstream_is_hub=upstream.is_hub, copied=copied,
                                    upstream_files=upstream.files, base_name=cards.base_name, warnings=warnings)
    dims = list(_need(manifest, "dims", ""))
    vocab = _vocab(manifest)
    owner = extract_owner_section(existing_readme)
    if existing_readme and owner is None:
        warnings.append("the existing README has no owner section; its text is replaced")
    return {
        **_identity(manifest, target_repo, upstream, published_commit, tp),
        **_padding(manifest, dims, tp, vocab),
        **_recipe(manifest, target_repo, published_commit, tp, bool(vocab.get("patch_needed"))),
        "copied_files": sorted(copied),
        "generated_files": sorted(_str_list(files_section.get("generated"))),
        "base_models": cards.base_models,
        "credits": _dedupe(([upstream.namespace] if upstream.namespace else [])
                           + [b["id"].split("/", 1)[0] for b in cards.base_models if b["valid"]]),
        "license": license_info,
        "library_name": _str_or_none(cards.meta.get("library_name")) or DEFAULT_LIBRARY,
        "pipeline_tag": _str_or_none(cards.meta.get("pipeline_tag")) or DEFAULT_PIPELINE,
        "front_matter": _dump_front_matter(_front_matter(manifest, upstream, cards, license_info, dims, tp, warnings)),
        "shards": [{"name": s["name"], "size": human(int(s.get("size", 0)), 2), "sha256": str(s.get("sha256", ""))[:16]}
                   for s in manifest.get("shards") or []],
        "owner_section": owner if owner is not None else OWNER_PLACEHOLDER,
        "owner_start": OWNER_START,
        "owner_end": OWNER_END,
        "patch_dir": PATCH_DIR,
    }


def _check_target(manifest: dict, target_repo: str, published_commit: str | None, warnings: list[str]) -> None:
    if not is_repo_id(target_repo):
        raise HubpadError(f"target repo {target_repo!r} is not a Hub repo id (namespace/name)")
    # A commit sha, or the immutable tag hubpad puts on the publish commit (the recipe cannot name the sha of
    # the commit it is part of).
    if published_commit is not None and not re.fullmatch(r"[0-9a-f]{7,64}|hubpad-[A-Za-z0-9._-]{1,80}", published_commit):
        raise HubpadError(f"published revision {published_commit!r} is neither a commit sha nor a hubpad tag")
    target = manifest.get("target") or {}
    # A local target is rendered for the Hub id it would be uploaded as: only a Hub target can disagree.
    if target.get("kind", "hub") == "hub" and target.get("repo") and target["repo"] != target_repo:
        warnings.append(f"hubpad.json was made for {target['repo']!r}, the card is rendered for {target_repo!r}")


def _upstream(manifest: dict, upstream_files: set[str] | None) -> _Upstream:
    upstream = _need(manifest, "upstream", "")
    repo = str(_need(upstream, "repo", "upstream."))
    is_hub = upstream.get("kind", "hub") == "hub"
    if is_hub and not is_repo_id(repo, allow_bare=True):
        raise HubpadError(f"upstream repo {repo!r} is not a Hub repo id")
    commit = upstream.get("commit")
    if commit is not None and not re.fullmatch(r"[0-9a-f]{7,64}", str(commit)):
        raise HubpadError(f"upstream commit {commit!r} is not a commit sha")
    if upstream_files is None and isinstance(upstream.get("files"), dict):
        upstream_files = set(upstream["files"])
    return _Upstream(repo, is_hub, commit, upstream.get("revision"), upstream_files)


def _read_cards(upstream: _Upstream, upstream_card: str | None, base_card: str | None,
                warnings: list[str]) -> _Cards:
    meta, problem = parse_card_metadata(upstream_card)
    if upstream_card is None:
        warnings.append(f"upstream {upstream.repo} has no model card; license and tags cannot be inherited")
    if problem:
        warnings.append(f"upstream card: {problem}; its metadata is ignored")
    base_meta = None
    if base_card is not None:
        base_meta, base_problem = parse_card_metadata(base_card)
        if base_problem:
            warnings.append(f"base model card: {base_problem}; its license is not compared")
            base_meta = None
    base_models = [{"id": b, "valid": is_repo_id(b)} for b in _str_list(meta.get("base_model"))]
    return _Cards(meta, base_meta, base_models)


def _vocab(manifest: dict) -> dict:
    vocab = manifest.get("vocab") or {}
    if vocab.get("patch_needed"):
        for key in ("size", "padded_to_64", "patch_pad_to", "patched_size"):
            _need(vocab, key, "vocab.")
    return vocab


def _identity(manifest: dict, target_repo: str, upstream: _Upstream, published_commit: str | None,
              tp: int) -> dict[str, Any]:
    """Who is who: target, upstream, versions, dates."""
    return {
        "hubpad_version": manifest.get("hubpad_version", __version__),
        "renderer_version": __version__,
        "created": manifest.get("created"),
        "target_repo": target_repo,
        "target_name": target_repo.split("/", 1)[1],
        "target_namespace": target_repo.split("/", 1)[0],
        "upstream_repo": upstream.repo,
        "upstream_is_hub": upstream.is_hub,
        "upstream_namespace": upstream.namespace,
        "upstream_revision": upstream.revision,
        "upstream_commit": upstream.commit,
        "published_commit": published_commit,
        "tp": tp,
        "architecture": manifest.get("architecture") or {},
        "quantization": manifest.get("quantization") or {},
    }


def _padding(manifest: dict, dims: list[dict], tp: int, vocab: dict) -> dict[str, Any]:
    """What padding changed: dims, GQA groups, the per-rank table, tensors and the vocab patch."""
    changed = [d for d in dims if d["before"] != d["after"]]
    by_key = {d.get("config_key"): d for d in dims}
    gqa = None
    q, kv = by_key.get("num_attention_heads"), by_key.get("num_key_value_heads")
    if q and kv and kv["before"] and kv["after"] and q["before"] % kv["before"] == 0 and q["after"] % kv["after"] == 0:
        gqa = {"before": q["before"] // kv["before"], "after": q["after"] // kv["after"]}
    tensors = manifest.get("tensors") or {}
    vocab_patch = bool(vocab.get("patch_needed"))
    return {
        "dims": dims,
        "changed_dims": changed,
        "changed_kinds": sorted({_dim_kind(str(d.get("config_key", ""))) for d in changed}),
        "gqa": gqa,
        "rank_table": manifest.get("rank_table") or [],
        "tensors": {"total": tensors.get("total"), "padded": tensors.get("padded"), "copied": tensors.get("copied"),
                    "padded_groups": _padded_groups(tensors.get("padded_groups"))},
        "vocab": vocab,
        "vocab_patch": vocab_patch,
        "vocab_per_rank": (int(vocab["patched_size"]) // tp) if vocab_patch else None,
    }


def _padded_groups(value: Any) -> list[dict[str, Any]]:
    """hubpad.json's padded tensor groups ({pattern, before, after, count}) as the card lists them."""
    groups = []
    for g in value if isinstance(value, list) else []:
        if not isinstance(g, dict) or not _str_or_none(g.get("pattern")):
            continue
        shape = [[int(x) for x in g.get(k) or []] for k in ("before", "after")]
        groups.append({"pattern": _str_or_none(g["pattern"]), "before": shape[0], "after": shape[1],
                       "count": int(g.get("count") or 0)})
    return groups


def _recipe(manifest: dict, target_repo: str, published_commit: str | None, tp: int,
            vocab_patch: bool) -> dict[str, Any]:
    """The serve command's flags, the image and the sparkrun recipe's defaults."""
    serving = manifest.get("serving") or {}
    quant = manifest.get("quantization") or {}
    container = str(serving.get("container") or DEFAULT_CONTAINER)
    image = str(serving.get("patched_image") or DEFAULT_PATCHED_IMAGE) if vocab_patch else container
    for what, value in (("container", container), ("patched_image", image)):
        if not re.fullmatch(r"[\w.:/@-]+", value):
            raise HubpadError(f"serving.{what} {value!r} is not an image reference")
    flags = _serving_flags(serving, tp)
    defaults: dict[str, Any] = {"host": DEFAULT_HOST, "port": DEFAULT_PORT}
    defaults["gpu_memory_utilization"] = float(serving.get("gpu_memory_utilization") or DEFAULT_GPU_MEMORY_UTILIZATION)
    if published_commit is not None:
        defaults["model_revision"] = published_commit
    for flag in flags:
        if flag["key"]:
            defaults[flag["key"]] = flag["value"]
    method = str(quant.get("method")).lower()
    return {
        "recipe_file": f"{target_repo.split('/', 1)[1].lower()}.yaml",
        "container": container,  # the recipe runs the stock image; a vocab patch is installed by its pre_exec hook
        "base_image": container,
        "image": image,  # what the Containerfile builds, for plain `vllm serve` users
        "min_vllm": _min_vllm(serving),
        "flags": flags,
        "recipe_defaults": defaults,
        "recipe_quantization": method if method in SPARKRUN_QUANTIZATION else None,
        "upstream_tp_values": [int(v) for v in serving.get("upstream_tp_values") or []],
        "recipe_overrides": serving.get("recipe") or {},
    }


def _min_vllm(serving: dict) -> dict[str, Any] | None:
    """serving.min_vllm ({version, because}) as the card states it, or None when hubpad.json has none."""
    info = serving.get("min_vllm") or {}
    version = str(info.get("version") or "")
    if not version:
        return None
    if not re.fullmatch(r"\d+(\.\d+){1,3}", version):
        raise HubpadError(f"serving.min_vllm.version {version!r} is not a version number")
    return {"version": version, "because": _str_list(info.get("because"))}


def _front_matter(manifest: dict, upstream: _Upstream, cards: _Cards, license_info: dict, dims: list[dict], tp: int,
                  warnings: list[str]) -> dict[str, Any]:
    """The card's YAML front matter as a dict (dumped by yaml, so upstream strings can never break it)."""
    front: dict[str, Any] = {}
    if upstream.is_hub:
        front["base_model"] = upstream.repo
    elif cards.base_models and all(b["valid"] for b in cards.base_models):
        ids = [b["id"] for b in cards.base_models]
        front["base_model"] = ids if len(ids) > 1 else ids[0]  # a local upstream credits what its card declares
    else:
        warnings.append("the upstream is a local folder whose card names no Hub base model, so the derivative's card "
                        "has no base_model; add `base_model: <org>/<name>` to the upstream README.md's front matter "
                        "to credit it")
    if "base_model" in front:
        front["base_model_relation"] = "quantized"
    front.update(license_info["fields"])
    front["library_name"] = _str_or_none(cards.meta.get("library_name")) or DEFAULT_LIBRARY
    front["pipeline_tag"] = _str_or_none(cards.meta.get("pipeline_tag")) or DEFAULT_PIPELINE
    front["tags"] = _dedupe(_str_list(cards.meta.get("tags")) + [f"tensor-parallel-{tp}", "hubpad", "sparkrun"]
                            + _format_tags(manifest.get("quantization") or {}))
    front["hubpad"] = {
        "upstream": upstream.repo,
        "upstream_revision": upstream.commit,
        "tp": tp,
        "hubpad_version": manifest.get("hubpad_version", __version__),
        "format_version": manifest.get("format_version"),
        "padded": {d["config_key"]: [d["before"], d["after"]] for d in dims if d["before"] != d["after"]},
        "vocab_patch": bool((manifest.get("vocab") or {}).get("patch_needed")),
    }
    return front


# ---------------------------------------------------------------------------------------------------------------------
# YAML and markdown helpers (exposed to the templates as filters)


class _FrontMatterDumper(yaml.SafeDumper):
    """SafeDumper that double-quotes any string with a line break or control character, so every value is one line."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value) or value.strip() != value or "<!--" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_FrontMatterDumper.add_representer(str, _represent_str)


def _hide_comment_openers(text: str) -> str:
    """Spell `<!--` as `<\\x21--` inside the (double-quoted) scalars that hold it: same value, but no marker text in the file."""
    return text.replace("<!--", "<\\x21--")


def _dump_front_matter(data: dict[str, Any]) -> str:
    """YAML for the card's front matter: order kept, one line per scalar, always parseable, no HTML comment openers."""
    return _hide_comment_openers(yaml.dump(data, Dumper=_FrontMatterDumper, sort_keys=False, allow_unicode=True, width=float("inf")))


def yaml_scalar(value: Any) -> str:
    """One YAML flow scalar (for values spliced into the recipe template)."""
    text = yaml.dump(value, Dumper=_FrontMatterDumper, default_flow_style=True, width=float("inf"), allow_unicode=True)
    return _hide_comment_openers(text.removesuffix("\n...\n").removesuffix("\n"))


def md(value: Any) -> str:
    """Untrusted text as inert inline markdown: one line, HTML escaped, markdown specials backslash-escaped."""
    text = " ".join(str(value).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def code(value: Any) -> str:
    """A value in a code span when it is plain (names, patterns); otherwise escaped text, so nothing can break out."""
    text = str(value)
    return f"`{text}`" if _CODE_SAFE.fullmatch(text) else md(text)


def safe_url(value: Any) -> str:
    """A link target that cannot break out of `[text](target)`: plain https URLs and relative paths, else ""."""
    text = str(value)
    if re.fullmatch(r"https?://[\w.~:/?#@!$&*+,;=%-]+", text) or (re.fullmatch(r"[\w./-]+", text) and ".." not in text):
        return text
    return ""


def shell(value: Any) -> str:
    """Shell-quote one argument for the copy-paste commands in the card."""
    return shlex.quote(str(value))


# ---------------------------------------------------------------------------------------------------------------------
# Rendering


def _environment(templates_dir: Path | None) -> SandboxedEnvironment:
    """Sandboxed, strict jinja2 over the override folder (first) and the built-in templates."""
    search = [str(builtin_templates_dir())]
    if templates_dir is not None:
        if not Path(templates_dir).is_dir():
            raise HubpadError(f"templates folder {templates_dir} does not exist")
        search.insert(0, str(templates_dir))
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
