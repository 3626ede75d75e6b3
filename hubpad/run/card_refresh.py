"""`hubpad card DST`: re-render the card, recipe and patch files from DST's hubpad.json, touching no shard.

One commit with only the files whose text changed (never a .safetensors), or none at all. DST is read and
written through its publisher, so the card refresh follows the same rules as a mirror run.
"""

from __future__ import annotations

from pathlib import Path

from hubpad.errors import HubpadError, NetworkError
from hubpad.formats.manifest import dumps, parse_manifest
from hubpad.formats.names import MANIFEST
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
    """Re-render DST's card files; returns {changed: [paths], commit, url}. Raises HubpadError (ConflictError
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
    new_id = False
    if isinstance(target, LocalPublisher):  # the repo id it was rendered for, unless a new one is given
        recorded = str_or_none((manifest.get("target") or {}).get("repo_id"))
        target.repo_id = target.repo_id or recorded
        if target.repo_id:
            manifest.setdefault("target", {})["repo_id"] = target.repo_id
        new_id = target.repo_id != recorded  # kept in hubpad.json, so the next refresh renders for it too
    up = manifest.get("upstream", {})
    upstream_card, base_card = _upstream_cards(upstream or up.get("repo"), up.get("commit"))
    existing = target.read_published("README.md")
    result = render_derivative(manifest, target_repo=target.repo_id, upstream_card=upstream_card,
                               target_path=str(target.local_path) if target.local_path else None,
                               upstream_base_card=base_card,
                               existing_readme=existing.decode("utf-8", errors="replace") if existing else None,
                               published_commit=target.pinned_revision(manifest), templates_dir=templates_dir,
                               upstream_files=set(up.get("files", {})))
    for warning in result.warnings:
        log(f"warning: {warning}")
    changed = {path: text for path, text in result.files.items() if target.read_published(path) != text.encode()}
    if new_id:
        changed[MANIFEST] = dumps(manifest)
    if any(p.endswith(".safetensors") for p in changed):
        raise HubpadError("internal error: a card refresh must never write a shard")
    out = {"changed": sorted(changed), "commit": None, "url": None}
    if changed and not dry_run:
        out.update(target.update_files(changed, "hubpad: refresh model card and recipe"))
    return out


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
