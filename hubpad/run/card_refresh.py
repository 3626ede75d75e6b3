"""`hubpad card DST`: re-render the card, recipe and patch files from DST's hubpad.json, touching no shard.

One commit with only the files whose text changed (never a .safetensors), or none at all. DST is read and
written through its publisher, so the card refresh follows the same rules as a mirror run.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from hubpad.errors import HubpadError, NetworkError
from hubpad.formats.manifest import dumps, parse_manifest
from hubpad.formats.names import MANIFEST, built_by_mirror
from hubpad.publish.base import Publisher
from hubpad.publish.hub import HubPublisher
from hubpad.publish.local import LocalPublisher
from hubpad.render.card import render_derivative
from hubpad.run.derivative import base_model_card
from hubpad.source.hub_api import api_for, hub_errors, read_repo_file
from hubpad.util.log import log
from hubpad.util.refs import both_readings, is_local
from hubpad.render.upstream_card import str_or_none


def refresh_card(dst: str, *, upstream: str | None = None, templates_dir: Path | None = None,
                 dry_run: bool = False, repo_id: str | None = None) -> dict:
    """Re-render DST's card files; returns {changed: [paths], removed: [paths], commit, url}. Raises HubpadError (ConflictError
    when DST changed meanwhile; nothing is committed then)."""
    if repo_id is not None and not is_local(dst):
        raise HubpadError("--repo-id applies to a local DST (a Hub DST is its own repo id)")
    target = LocalPublisher(Path(dst).expanduser(), repo_id=repo_id) if is_local(dst) else HubPublisher(api_for(), dst)
    try:
        with hub_errors(f"target {dst}"):
            return _refresh(target, dst, upstream, templates_dir, dry_run)
    except NetworkError as exc:  # DST may have meant a local folder that is not there
        if is_local(dst):
            raise
        raise NetworkError(f"{exc}; {both_readings(dst)}") from None
    finally:
        target.abort()


def _refresh(target: Publisher, dst: str, upstream: str | None, templates_dir: Path | None, dry_run: bool) -> dict:
    raw = target.read_published(MANIFEST)
    if raw is None:
        raise HubpadError(f"{dst}: no {MANIFEST}; `hubpad card` only refreshes derivatives hubpad published")
    manifest = parse_manifest(raw, dst)
    manifest_changed = False
    if isinstance(target, LocalPublisher):  # the repo id it was rendered for, unless a new one is given
        recorded = str_or_none((manifest.get("target") or {}).get("repo_id"))
        target.repo_id = target.repo_id or recorded
        if target.repo_id:
            manifest.setdefault("target", {})["repo_id"] = target.repo_id
        manifest_changed = target.repo_id != recorded  # kept in hubpad.json, so the next refresh renders for it too
    up = manifest.get("upstream", {})
    upstream_card, base_card = _upstream_cards(upstream or up.get("repo"), up.get("commit"))
    existing = target.read_published("README.md")

    def render() -> dict[str, str]:
        result = render_derivative(manifest, target_repo=target.repo_id, upstream_card=upstream_card,
                                   target_path=str(target.local_path) if target.local_path else None,
                                   upstream_base_card=base_card,
                                   existing_readme=existing.decode("utf-8", errors="replace") if existing else None,
                                   published_commit=target.pinned_revision(manifest), templates_dir=templates_dir,
                                   upstream_files=set(up.get("files", {})))
        for warning in result.warnings:
            log(f"warning: {warning}")
        return result.files

    files = render()
    stale = _stale(manifest, files)
    if _list_generated(manifest, files, stale):  # the card lists them: render it again with the list it ships with
        manifest_changed = True
        files = render()
    changed = {path: text for path, text in files.items() if target.read_published(path) != text.encode()}
    if manifest_changed:
        changed[MANIFEST] = dumps(manifest)
    if any(p.endswith(".safetensors") for p in [*changed, *stale]):
        raise HubpadError("internal error: a card refresh must never write a shard")
    removed = [p for p in stale if target.read_published(p) is not None]
    out = {"changed": sorted(changed), "removed": removed, "commit": None, "url": None}
    if (changed or removed) and not dry_run:
        out.update(target.update_files(changed, "hubpad: refresh model card and recipe", removed=removed))
    return out


def _list_generated(manifest: dict, files: dict[str, str], stale: list[str]) -> bool:
    """Make hubpad.json's generated files what the derivative will hold after this refresh; True when that changed."""
    section = manifest.setdefault("files", {})
    listed = [p for p in section.get("generated") or [] if isinstance(p, str)]
    generated = sorted(set(listed) - set(stale) | set(files))
    if generated == sorted(listed):
        return False
    section["generated"] = generated
    return True


def _stale(manifest: dict, files: dict[str, str]) -> list[str]:
    """What an earlier render wrote (hubpad.json's generated files, less those a mirror run builds) that this one
    does not: a recipe named after an earlier repo id, a vocab plugin no longer needed. Only plain relative paths."""
    listed = (manifest.get("files") or {}).get("generated") or []
    stale = []
    for path in listed if isinstance(listed, list) else []:
        parts = PurePosixPath(path).parts if isinstance(path, str) else ()
        if path in files or built_by_mirror(path) or not parts or path.startswith("/") or ".." in parts or "\\" in path:
            continue
        stale.append(path)
    return sorted(stale)


def _upstream_cards(upstream: str | None, commit: str | None) -> tuple[str | None, str | None]:
    """The upstream's README (at the recorded commit) and its base model's, for license and tags."""
    if not upstream:
        return None, None
    if is_local(upstream):
        p = Path(upstream).expanduser() / "README.md"
        return (p.read_text(errors="replace") if p.is_file() else None), None
    api = api_for()
    data = read_repo_file(api, upstream, "README.md", commit)
    card = data.decode("utf-8", errors="replace") if data else None
    return card, base_model_card(api, card)
