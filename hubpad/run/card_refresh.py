"""`hubpad card DST`: re-render the card, recipe and patch files from DST's hubpad.json, touching no shard.

One commit with only the files whose text changed (never a .safetensors), or none at all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hubpad.errors import ConflictError, HubpadError
from hubpad.formats.names import MANIFEST
from hubpad.publish.hub import release_tag
from hubpad.render.card import render_derivative
from hubpad.run.derivative import base_model_card
from hubpad.source.hub_api import api_for, hub_errors, read_repo_file
from hubpad.util.log import log
from hubpad.util.refs import is_local


def refresh_card(dst: str, *, upstream: str | None = None, templates_dir: Path | None = None,
                 dry_run: bool = False) -> dict:

    target = _LocalTarget(dst) if is_local(dst) else _HubTarget(dst)
    raw = target.read(MANIFEST)
    if raw is None:
        raise HubpadError(f"{dst}: no {MANIFEST}; `hubpad card` only refreshes derivatives hubpad published")
    manifest = json.loads(raw)
    up = manifest.get("upstream", {})
    upstream = upstream or up.get("repo")
    upstream_card, base_card = _upstream_cards(upstream, up.get("commit"))
    existing = target.read("README.md")
    result = render_derivative(manifest, target_repo=target.repo_id, upstream_card=upstream_card,
                               upstream_base_card=base_card,
                               existing_readme=existing.decode("utf-8", errors="replace") if existing else None,
                               published_commit=target.published_revision(manifest), templates_dir=templates_dir,
                               upstream_files=set(up.get("files", {})))
    for warning in result.warnings:
        log(f"warning: {warning}")
    changed = {path: text for path, text in result.files.items()
               if target.read(path) != text.encode()}
    if any(p.endswith(".safetensors") for p in changed):
        raise HubpadError("internal error: a card refresh must never write a shard")
    out = {"changed": sorted(changed), "commit": None, "url": None}
    if changed and not dry_run:
        out.update(target.write(changed))
    return out


def _upstream_cards(upstream: str | None, commit: str | None) -> tuple[str | None, str | None]:
    if not upstream:
        return None, None
    if is_local(upstream):
        p = Path(upstream).expanduser() / "README.md"
        return (p.read_text(errors="replace") if p.is_file() else None), None

    api = api_for()
    data = read_repo_file(api, upstream, "README.md", commit)
    card = data.decode("utf-8", errors="replace") if data else None
    return card, base_model_card(api, card)


class _LocalTarget:
    def __init__(self, dst: str) -> None:
        self.root = Path(dst).expanduser()
        self.repo_id = f"local/{self.root.name}"

    def read(self, path: str) -> bytes | None:
        p = self.root / path
        return p.read_bytes() if p.is_file() else None

    def published_revision(self, manifest: dict) -> str | None:
        return None

    def write(self, files: dict[str, str]) -> dict:
        for path, text in files.items():
            p = self.root / path
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_name(f".{p.name}.hubpad-tmp")
            tmp.write_text(text)
            os.replace(tmp, p)
        return {"url": str(self.root)}


class _HubTarget:
    def __init__(self, repo_id: str) -> None:
        self.api, self.repo_id = api_for(), repo_id
        with hub_errors(f"target {repo_id}"):
            self.head = self.api.model_info(repo_id).sha

    def read(self, path: str) -> bytes | None:
        return read_repo_file(self.api, self.repo_id, path, self.head)

    def published_revision(self, manifest: dict) -> str | None:
        tag = release_tag(manifest.get("upstream", {}).get("commit"), manifest.get("tp", 0))
        with hub_errors(f"target {self.repo_id}: refs"):
            tags = {t.name for t in self.api.list_repo_refs(self.repo_id).tags}
        return tag if tag in tags else self.head

    def write(self, files: dict[str, str]) -> dict:
        from huggingface_hub import CommitOperationAdd

        ops = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=t.encode()) for p, t in sorted(files.items())]
        try:
            # An upload failure (vllm_patch/*.pth go through Xet/LFS) is one line too; nothing is committed.
            with hub_errors(f"target {self.repo_id}: card commit"):
                info = self.api.create_commit(self.repo_id, ops, parent_commit=self.head,
                                              commit_message="hubpad: refresh model card and recipe")
        except ConflictError:
            raise ConflictError(f"{self.repo_id} changed during the card refresh; nothing committed, re-run") from None
        return {"commit": info.oid, "url": info.commit_url}
