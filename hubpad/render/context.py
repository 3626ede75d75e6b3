"""Everything the templates see, computed from hubpad.json and the upstream cards' front matter, so the templates hold
wording and layout only. Every value that ends up in a link, YAML or a command is checked here first."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from hubpad import __version__
from hubpad.errors import HubpadError
from hubpad.plan import lossless
from hubpad.plan.vllm_route import route_flags
from hubpad.render.license import resolve_license
from hubpad.render.markup import dump_front_matter
from hubpad.render.paths import PATCH_DIR
from hubpad.render.recipe import recipe_context
from hubpad.render.upstream_card import (OWNER_END, OWNER_START, extract_owner_section, parse_card_metadata, str_list,
                                         str_or_none)
from hubpad.util.refs import is_repo_id
from hubpad.util.sizes import human

OWNER_PLACEHOLDER = (
    "*Nothing here yet. The repository owner can write notes between the two `hubpad:owner-section` marker comments "
    "in this README's source; hubpad keeps that text every time it refreshes the card.*"
)
DEFAULT_LIBRARY = "transformers"
DEFAULT_PIPELINE = "text-generation"


def _need(mapping: Any, key: str, where: str) -> Any:
    """`mapping[key]`, or a HubpadError naming the missing manifest field."""
    if not isinstance(mapping, dict) or key not in mapping:
        raise HubpadError(f"hubpad.json is missing {where}{key}")
    return mapping[key]


def _format_tags(quant: dict[str, Any]) -> list[str]:
    """Hub tags for the quantization formats: `fp8-block` → `fp8`, `nvfp4` → `nvfp4`, plus the method name."""
    tags = []
    for fmt in str_list(quant.get("formats")):
        tags.append(re.split(r"[-_]", fmt.lower())[0])
    method = str_or_none(quant.get("method"))
    if method and method.lower() not in ("none", "null"):
        tags.append(method.lower())
    return tags


def _dedupe(items: list[str]) -> list[str]:
    """Order-preserving de-duplication."""
    seen: set[str] = set()
    return [x for x in items if not (x in seen or seen.add(x))]


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

    def named(self, public: bool) -> str:
        """How a card names it: a Hub repo by its id, a local upstream by its path, except in a card meant for
        upload (a Hub target), which names no local path: there only the folder's name."""
        if self.is_hub or not public:
            return self.repo
        return PurePath(self.repo.rstrip("/\\")).name or "upstream"


@dataclass
class _Cards:
    """What the upstream's and its base model's cards say (untrusted data: front matter only)."""

    meta: dict[str, Any]
    base_meta: dict[str, Any] | None
    base_models: list[dict[str, Any]]

    @property
    def base_name(self) -> str | None:
        return self.base_models[0]["id"] if self.base_models else None


def build_context(
    manifest: dict,
    *,
    target_repo: str | None,
    upstream_card: str | None,
    upstream_base_card: str | None,
    existing_readme: str | None,
    published_commit: str | None,
    upstream_files: set[str] | None,
    warnings: list[str],
    target_path: str | None = None,
) -> dict[str, Any]:
    """Everything the templates see, computed here so the templates hold wording and layout only.

    `target_repo`: the Hub repo id the derivative is (or will be) published as; None for a local derivative with no
    such id, whose commands then name `target_path` (its absolute local path)."""
    if target_repo is None:
        target_path = _check_local_target(target_path)
    else:
        _check_target(manifest, target_repo, published_commit, warnings)
    upstream = _upstream(manifest, upstream_files)
    tp = int(_need(manifest, "tp", ""))
    if tp < 1:
        raise HubpadError(f"tp must be >= 1, got {tp}")
    files_section = manifest.get("files") or {}
    copied = set(str_list(files_section.get("copied")))
    cards = _read_cards(upstream, upstream_card, upstream_base_card, warnings)
    license_info = resolve_license(cards.meta, cards.base_meta, upstream_repo=upstream.repo,
                                    upstream_commit=upstream.commit, upstream_is_hub=upstream.is_hub, copied=copied,
                                    upstream_files=upstream.files, base_name=cards.base_name, warnings=warnings)
    dims = list(_need(manifest, "dims", ""))
    vocab = _vocab(manifest)
    owner = extract_owner_section(existing_readme)
    if existing_readme and owner is None:
        warnings.append("the existing README has no owner section; its text is replaced")
    return {
        **_identity(manifest, target_repo, target_path, upstream, published_commit, tp),
        **_padding(manifest, dims, tp, vocab),
        **recipe_context(manifest, target_repo or target_path, published_commit, tp, bool(vocab.get("patch_needed")),
                         target_is_hub=target_repo is not None),
        "copied_files": sorted(copied),
        "generated_files": sorted(str_list(files_section.get("generated"))),
        "base_models": cards.base_models,
        "credits": _dedupe(([upstream.namespace] if upstream.namespace else [])
                           + [b["id"].split("/", 1)[0] for b in cards.base_models if b["valid"]]),
        "license": license_info,
        "library_name": str_or_none(cards.meta.get("library_name")) or DEFAULT_LIBRARY,
        "pipeline_tag": str_or_none(cards.meta.get("pipeline_tag")) or DEFAULT_PIPELINE,
        "front_matter": dump_front_matter(_front_matter(manifest, upstream, cards, license_info, dims, tp, warnings,
                                                        public=target_repo is not None)),
        "shards": [{"name": s["name"], "size": human(int(s.get("size", 0)), 2), "sha256": str(s.get("sha256", ""))[:16]}
                   for s in manifest.get("shards") or []],
        "owner_section": owner if owner is not None else OWNER_PLACEHOLDER,
        "owner_start": OWNER_START,
        "owner_end": OWNER_END,
        "patch_dir": PATCH_DIR,
        "route_flags": [w for w in route_flags((manifest.get("architecture") or {}).get("vllm_route"))
                        if w.startswith("--")],
        "serving_notes": str_list((manifest.get("serving") or {}).get("mtp_unavailable"))
        + str_list((manifest.get("serving") or {}).get("notes")),
        "draft": _draft(manifest, target_repo, published_commit),
    }


_DRAFT_METHODS = ("eagle3", "dspark", "mtp")


def _draft(manifest: dict, target_repo: str, published_commit: str | None) -> dict | None:
    """A draft model's pairing, for its card: the speculative method, the padded target it pairs with (a Hub repo id,
    or None when hubpad was not told it), and the --speculative-config that target is served with."""
    draft = (manifest.get("serving") or {}).get("draft")
    if not draft:
        return None
    method = draft.get("method")
    if method not in _DRAFT_METHODS:
        raise HubpadError(f"serving.draft.method {method!r} is not one of {', '.join(_DRAFT_METHODS)}")
    tokens = draft.get("num_speculative_tokens")
    if type(tokens) is not int or tokens < 1:
        raise HubpadError(f"serving.draft.num_speculative_tokens must be a positive integer, got {tokens!r}")
    target = draft.get("target")
    if target is not None and not isinstance(target, str):
        raise HubpadError(f"serving.draft.target must be a string, got {target!r}")
    spec = {"method": method, "model": target_repo, "num_speculative_tokens": tokens}
    if published_commit:
        spec["revision"] = published_commit
    verifier = draft.get("verifier")  # the target before padding, as the draft's own config names it
    if verifier is not None and not (isinstance(verifier, str) and is_repo_id(verifier)):
        verifier = None  # named only when it is a Hub repo id
    # a Hub repo id is linked; a local path (a local pair) is named as it is
    return {"method": method, "target": target, "target_is_repo": bool(target) and is_repo_id(target),
            "verifier": verifier, "tokens": tokens, "spec_json": json.dumps(spec)}


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


def _check_local_target(target_path: str | None) -> str:
    """A local derivative's path as its card's commands name it: absolute, and plain enough for a shell and YAML."""
    if not target_path or not target_path.startswith("/"):
        raise HubpadError(f"a local derivative's card needs its absolute path, got {target_path!r}")
    if any(ord(ch) < 32 or ch in "{}" for ch in target_path):
        raise HubpadError(f"{target_path!r}: a control character or brace in the path cannot go into the card's commands")
    return target_path


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
    base_models = [{"id": b, "valid": is_repo_id(b)} for b in str_list(meta.get("base_model"))]
    return _Cards(meta, base_meta, base_models)


def _vocab(manifest: dict) -> dict:
    vocab = manifest.get("vocab") or {}
    if vocab.get("patch_needed"):
        for key in ("size", "padded_to_64", "patch_pad_to", "patched_size"):
            _need(vocab, key, "vocab.")
    return vocab


def _identity(manifest: dict, target_repo: str | None, target_path: str | None, upstream: _Upstream,
              published_commit: str | None, tp: int) -> dict[str, Any]:
    """Who is who: target, upstream, versions, dates."""
    ref = target_repo or str(target_path)
    digest = str_or_none((manifest.get("upstream") or {}).get("digest"))
    return {
        "hubpad_version": manifest.get("hubpad_version", __version__),
        "renderer_version": __version__,
        "created": manifest.get("created"),
        "target_repo": ref,  # what the commands name: the Hub repo id, or a local derivative's absolute path
        "target_is_hub": target_repo is not None,
        "target_name": ref.rstrip("/").rsplit("/", 1)[-1],
        "target_namespace": target_repo.split("/", 1)[0] if target_repo else "local",
        "upstream_repo": upstream.named(public=target_repo is not None),
        # what `hubpad mirror` is given to reproduce it: in a card for upload, a local upstream as ./<its folder name>
        "upstream_arg": upstream.repo if upstream.is_hub or target_repo is None
        else f"./{upstream.named(public=True)}",
        "upstream_is_hub": upstream.is_hub,
        "upstream_namespace": upstream.namespace,
        "upstream_revision": upstream.revision,
        "upstream_commit": upstream.commit,
        # What pins a local upstream: the content digest over its files' sha256 (what `hubpad check` compares)
        "upstream_digest": digest if not upstream.is_hub else None,
        "published_commit": published_commit,
        "tp": tp,
        "architecture": manifest.get("architecture") or {},
        "quantization": manifest.get("quantization") or {},
    }


def _padding(manifest: dict, dims: list[dict], tp: int, vocab: dict) -> dict[str, Any]:
    """What padding changed: dims, GQA groups, the per-rank table, tensors and the vocab patch."""
    by_key = {d.get("config_key"): d for d in dims}
    group = None  # query heads per kv head, when padding kept it (whole groups)
    q, kv = by_key.get("num_attention_heads"), by_key.get("num_key_value_heads")
    if q and kv and all(isinstance(d.get(k), int) and d[k] > 0 for d in (q, kv) for k in ("before", "after")):
        if q["before"] % kv["before"] == 0 and q["before"] // kv["before"] * kv["after"] == q["after"]:
            group = q["before"] // kv["before"]
    tensors = manifest.get("tensors") or {}
    vocab_patch = bool(vocab.get("patch_needed"))
    rescaled = [g for g in _padded_groups(tensors.get("padded_groups")) if g["scale"] is not None]
    return {
        "dims": dims,
        "rank_table": manifest.get("rank_table") or [],
        "tensors": {"total": tensors.get("total"), "padded": tensors.get("padded"), "copied": tensors.get("copied"),
                    "padded_groups": _padded_groups(tensors.get("padded_groups"))},
        "rescaled": rescaled,
        # why the outputs do not change: one sentence per mechanism and padded format (plan/lossless.py)
        "lossless": lossless.sentences(manifest.get("lossless"), group=group, rescaled=bool(rescaled)),
        "vocab": vocab,
        "vocab_patch": vocab_patch,
        "vocab_per_rank": (int(vocab["patched_size"]) // tp) if vocab_patch else None,
    }


def _padded_groups(value: Any) -> list[dict[str, Any]]:
    """hubpad.json's padded tensor groups ({pattern, before, after, count}) as the card lists them."""
    groups = []
    for g in value if isinstance(value, list) else []:
        if not isinstance(g, dict) or not str_or_none(g.get("pattern")):
            continue
        shape = [[int(x) for x in g.get(k) or []] for k in ("before", "after")]
        scale = g.get("scale")
        scale = float(scale) if isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0 else None
        root = None if scale is None else f"{'√' if scale >= 1 else '1/√'}{max(scale, 1 / scale) ** 2:.6g}"
        groups.append({"pattern": str_or_none(g["pattern"]), "before": shape[0], "after": shape[1],
                       "count": int(g.get("count") or 0), "scale": scale,
                       "scale_text": None if scale is None else f"{scale:.6f} = {root}"})
    return groups


def _front_matter(manifest: dict, upstream: _Upstream, cards: _Cards, license_info: dict, dims: list[dict], tp: int,
                  warnings: list[str], public: bool) -> dict[str, Any]:
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
    front["library_name"] = str_or_none(cards.meta.get("library_name")) or DEFAULT_LIBRARY
    front["pipeline_tag"] = str_or_none(cards.meta.get("pipeline_tag")) or DEFAULT_PIPELINE
    front["tags"] = _dedupe(str_list(cards.meta.get("tags")) + [f"tensor-parallel-{tp}", "hubpad", "sparkrun"]
                            + _format_tags(manifest.get("quantization") or {}))
    front["hubpad"] = {
        "upstream": upstream.named(public),
        "upstream_revision": upstream.commit or (str_or_none((manifest.get("upstream") or {}).get("digest"))
                                                 if not upstream.is_hub else None) or "local directory",
        "tp": tp,
        "hubpad_version": manifest.get("hubpad_version", __version__),
        "format_version": manifest.get("format_version"),
        "padded": {d["config_key"]: [d["before"], d["after"]] for d in dims if d["before"] != d["after"]},
        "vocab_patch": bool((manifest.get("vocab") or {}).get("patch_needed")),
    }
    return front
