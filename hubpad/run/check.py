"""`hubpad check`: is a derivative up to date with its upstream? Hub API calls only, no tensor bytes."""

from __future__ import annotations

from pathlib import Path

from hubpad.errors import HubpadError, NetworkError
from hubpad.formats.manifest import parse_manifest, recorded_upstream, staleness
from hubpad.formats.mirrors_file import DEFAULT_TP, load_mirrors
from hubpad.formats.names import MANIFEST
from hubpad.source.hub_api import api_for, hub_errors, read_repo_file, whoami_name
from hubpad.source.local import local_digest
from hubpad.util.refs import both_readings, derive_target, is_local


def _upstream_sha(src: str, revision: str | None, token: str | None = None) -> str:
    if is_local(src):
        return local_digest(Path(src).expanduser())

    with hub_errors(f"upstream {src}@{revision or 'main'}"):
        return api_for(token).model_info(src, revision=revision or "main").sha


def _recorded(target: str, token: str | None = None) -> dict | None:
    if is_local(target):
        p = Path(target).expanduser() / MANIFEST
        return parse_manifest(p.read_bytes(), target) if p.is_file() else None

    with hub_errors(f"target {target}"):
        data = read_repo_file(api_for(token), target, MANIFEST)
    return parse_manifest(data, target) if data else None


def check_one(src: str, dst: str | None, tp: int | None, revision: str | None, token: str | None = None) -> dict:
    """Status of one mirror: "missing", "up-to-date" or "stale" (with the reason), with the shas compared (`token`:
    whose Hub account asks; default huggingface_hub's usual sources).

    `tp` None: the TP the target's hubpad.json records (DEFAULT_TP for a target that has none, or to derive one)."""
    try:
        return _check_one(src, dst, tp, revision, token)
    except NetworkError as exc:  # a Hub reading that may have meant a local folder: say both
        ambiguous = [r for r in (src, dst) if r and not is_local(r)]
        raise NetworkError(f"{exc}; " + "; ".join(both_readings(r) for r in ambiguous) if ambiguous else str(exc)) \
            from None


def _check_one(src: str, dst: str | None, tp: int | None, revision: str | None, token: str | None) -> dict:

    if dst is None:
        if is_local(src):
            raise HubpadError("--to is required when SRC is a local directory")

        dst = derive_target(src, tp or DEFAULT_TP, whoami_name(api_for(token)))
    upstream_sha = _upstream_sha(src, revision, token)
    manifest = _recorded(dst, token)
    recorded = recorded_upstream(manifest) if manifest else None
    if tp is None:  # the TP the target was built for: a folder of TP 6 is checked at TP 6, not at a default
        tp = manifest.get("tp") if manifest and isinstance(manifest.get("tp"), int) else DEFAULT_TP
    reason = staleness(manifest, tp, upstream_sha) if manifest is not None else None
    status = "missing" if manifest is None else "stale" if reason else "up-to-date"
    return {"upstream": src, "target": dst, "tp": tp, "revision": revision, "status": status,
            "changed": status != "up-to-date", "reason": reason, "upstream_sha": upstream_sha,
            "recorded_sha": recorded}


def check_many(config_file: str, only_upstream: str | None = None, target: str | None = None) -> dict:
    """Check every mirror of a mirrors file (optionally only those of one upstream / target)."""

    namespace = None
    specs = load_mirrors(config_file)
    if any(s.target is None or s.target_kind == "hub" for s in specs):

        namespace = whoami_name(api_for())
        specs = load_mirrors(config_file, namespace=namespace)
    mirrors = []
    for spec in specs:
        resolved = spec.resolved_target(namespace)
        if only_upstream and spec.upstream != only_upstream:
            continue
        if target and resolved.casefold() != target.casefold():
            continue
        m = check_one(spec.upstream, resolved, spec.tp, spec.revision)
        mirrors.append(m)
    return {"mirrors": mirrors, "changed": any(m["changed"] for m in mirrors)}
