"""How a run ended, whichever route it took: the published derivative's links, its card's serve commands and
whether the upstream moved meanwhile; or the one sentence for a failure."""

from __future__ import annotations

from hubpad.errors import HubpadError
from hubpad.formats.names import MANIFEST
from hubpad.run.check import check_one
from hubpad.source.hub_api import api_for, read_repo_file

from hubpad_space.card import serve_commands
from hubpad_space.explain import explain, upstream_moved
from hubpad_space.runs import Run
from hubpad_space.settings import Settings


def result(run: Run, settings: Settings, pinned: str, told: dict) -> dict:
    """Links to the derivative and its card, the card's serve commands, and whether the upstream moved meanwhile
    (since the commit `pinned` the run read); `told`: what the run says of itself (a Summary's counts, or its jobs)."""
    req = run.request
    hub = settings.hub_url()
    api = api_for(run.token or False)
    card = read_repo_file(api, req.target, "README.md") or b""
    out = {"target": req.target, "url": f"{hub}/{req.target}", "card": f"{hub}/{req.target}/blob/main/README.md",
           "manifest": f"{hub}/{req.target}/blob/main/{MANIFEST}", **told,
           "commands": serve_commands(card.decode("utf-8", "replace"))}
    if req.draft_target:
        out["draft"] = {"target": req.draft_target, "url": f"{hub}/{req.draft_target}"}
    now = check_one(req.upstream, req.target, req.tp, None, token=run.token or False)
    if now["status"] == "stale":  # published from the commit the run pinned, and the upstream has moved since
        out["moved"] = upstream_moved(req, pinned, now["upstream_sha"], published=True)
    return out


def after_failure(run: Run, exc: HubpadError) -> str:
    """One sentence for a failed run; a run that failed while its upstream moved says that instead."""
    req = run.request
    if run.upstream_commit:
        try:
            head = check_one(req.upstream, req.target, req.tp, None, token=run.token or False)["upstream_sha"]
        except HubpadError:
            head = None
        if head and head != run.upstream_commit:
            return upstream_moved(req, run.upstream_commit, head, published=False)
    return explain(exc, req, token=run.token)
