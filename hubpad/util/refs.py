"""What a SRC/DST string names: a local directory or a Hub repo id. Every such rule of hubpad lives here."""

from __future__ import annotations

import re
from pathlib import Path

_NAME_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?"
_REPO_ID_RE = re.compile(rf"(?:(?P<namespace>{_NAME_PART})/)?(?P<name>{_NAME_PART})", re.ASCII)
_LOCAL_PREFIXES = ("/", "./", "../", "~", ".\\", "..\\")


def is_local(spec: str) -> bool:
    """A local directory: `.`/`..`, a path starting with / ./ ../ or ~, or a path that exists."""
    return spec in (".", "..") or spec.startswith(_LOCAL_PREFIXES) or Path(spec).exists()


def validate_repo_id(repo_id: str, *, allow_bare: bool = False) -> None:
    """The Hub's repo id rules (as huggingface_hub's validate_repo_id); ValueError naming the broken rule."""
    match = _REPO_ID_RE.fullmatch(repo_id)
    if match is None:
        raise ValueError("use namespace/name with letters, digits, '-', '_' or '.', not starting or ending with '-' or '.'")
    if match.group("namespace") is None and not allow_bare:
        raise ValueError("expected namespace/name")
    if len(match.group("name")) > 96:
        raise ValueError("the name is longer than 96 characters")
    if "--" in repo_id or ".." in repo_id:
        raise ValueError("'--' and '..' are not allowed")
    if repo_id.endswith(".git"):
        raise ValueError("it cannot end with '.git'")


def is_repo_id(value: str, *, allow_bare: bool = False) -> bool:
    """validate_repo_id as a yes/no answer."""
    try:
        validate_repo_id(value, allow_bare=allow_bare)
    except ValueError:
        return False
    return True


def derive_target(upstream: str, tp: int, namespace: str | None = None) -> str:
    """The default target for `upstream` at `tp`: `<namespace>/<name>-TP<tp>`, or `<name>-TP<tp>` without one."""
    base = Path(upstream.rstrip("/\\")).name if is_local(upstream) else upstream.rsplit("/", 1)[-1]
    name = f"{base}-TP{tp}"
    return f"{namespace}/{name}" if namespace else name


def same_ref(a: str, b: str) -> bool:
    """Two specs name the same thing: the same resolved directory, or the same repo id (case-insensitive)."""
    if is_local(a) or is_local(b):
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    return a.casefold() == b.casefold()
