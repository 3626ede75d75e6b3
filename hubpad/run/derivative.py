"""The files rendered for a derivative (card, recipe, vLLM patch), with the upstream and base-model cards they quote."""

from __future__ import annotations

from pathlib import Path

from hubpad.errors import HubpadError
from hubpad.plan.model import Plan
from hubpad.publish.base import Publisher
from hubpad.render.card import render_derivative
from hubpad.render.upstream_card import parse_card_metadata
from hubpad.source.hub_api import read_repo_file
from hubpad.util.log import log


def derivative_files(plan: Plan, manifest: dict, publisher: Publisher, templates_dir: Path | None,
                     warn: bool = True) -> dict[str, str]:
    """README.md, recipe and (when needed) the vLLM patch, rendered from the manifest."""
    upstream_card = None
    if "README.md" in plan.files:
        upstream_card = plan.source.read_file("README.md").decode("utf-8", errors="replace")
    base_card = base_model_card(plan.source.api, upstream_card) if plan.source.kind == "hub" else None
    result = render_derivative(manifest, target_repo=publisher.repo_id, upstream_card=upstream_card,
                               target_path=str(publisher.local_path) if publisher.local_path else None,
                               upstream_base_card=base_card, existing_readme=publisher.existing_readme(),
                               published_commit=publisher.published_revision(), templates_dir=templates_dir,
                               upstream_files=set(plan.files))
    for warning in result.warnings if warn else ():
        log(f"warning: {warning}")
    return result.files


def base_model_card(api, upstream_card: str | None) -> str | None:
    """The README of the upstream's first `base_model` (to notice a license that differs), if reachable."""

    meta, _ = parse_card_metadata(upstream_card)
    base = meta.get("base_model")
    if isinstance(base, list):
        base = base[0] if base else None
    if not isinstance(base, str) or base.count("/") != 1:
        return None
    try:
        data = read_repo_file(api, base, "README.md")
    except HubpadError:
        return None
    return data.decode("utf-8", errors="replace") if data else None
