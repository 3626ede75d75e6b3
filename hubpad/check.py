"""`hubpad check`: is a derivative up to date with its upstream? Hub API calls only, no tensor bytes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from . import FORMAT_VERSION
from .errors import HubpadError
from .manifest import MANIFEST


def digest_of(file_hashes: dict[str, str]) -> str:
    """One digest over every file's path and sha256: the "commit" of a local upstream directory."""
    h = hashlib.sha256()
    for path in sorted(file_hashes):
        h.update(f"{path}\0{file_hashes[path]}\n".encode())
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def local_digest(path: Path) -> str:
    """digest_of() for a directory as it is now (same file set as LocalSource lists)."""
    from .source import LocalSource

    return digest_of({rel: file_sha256(path / rel) for rel in LocalSource(path).files()})


def _upstream_sha(src: str, revision: str | None) -> str:
    from .cli import is_local

    if is_local(src):
        return local_digest(Path(src).expanduser())
    from .hub import api_for, hub_errors

    with hub_errors(f"upstream {src}@{revision or 'main'}"):
        return api_for().model_info(src, revision=revision or "main").sha


def _recorded(target: str) -> dict | None:
    from .cli import is_local

    if is_local(target):
        p = Path(target).expanduser() / MANIFEST
        return json.loads(p.read_text()) if p.is_file() else None
    from .hub import api_for, read_repo_file

    data = read_repo_file(api_for(), target, MANIFEST)
    return json.loads(data) if data else None


def check_one(src: str, dst: str | None, tp: int, revision: str | None) -> dict:
    """Status of one mirror: "missing", "up-to-date" or "stale", with the shas compared."""
    from .cli import is_local

    if dst is None:
        if is_local(src):
            raise HubpadError("--to is required when SRC is a local directory")
        from .hub import api_for, whoami_name
        from .mirrors_file import derive_target

        dst = derive_target(src, tp, whoami_name(api_for()))
    upstream_sha = _upstream_sha(src, revision)
    manifest = _recorded(dst)
    recorded = None
    if manifest is None:
        status = "missing"
    else:
        up = manifest.get("upstream", {})
        recorded = up.get("commit") or up.get("digest")  # a local upstream has a content digest, not a commit
        same = (recorded == upstream_sha and manifest.get("tp") == tp
                and manifest.get("format_version") == FORMAT_VERSION)
        status = "up-to-date" if same else "stale"
    return {"upstream": src, "target": dst, "tp": tp, "revision": revision, "status": status,
            "changed": status != "up-to-date", "upstream_sha": upstream_sha, "recorded_sha": recorded}


def check_many(config_file: str, only_upstream: str | None = None, target: str | None = None) -> dict:
    """Check every mirror of a mirrors file (optionally only those of one upstream / target)."""
    from .mirrors_file import load_mirrors

    namespace = None
    specs = load_mirrors(config_file)
    if any(s.target is None or s.target_kind == "hub" for s in specs):
        from .hub import api_for, whoami_name

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
