"""What a SRC/DST string names: a local directory or a Hub repo id. Every such rule of hubpad lives here."""

from __future__ import annotations

import re
from pathlib import Path

_NAME_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?"
_REPO_ID_RE = re.compile(rf"(?:(?P<namespace>{_NAME_PART})/)?(?P<name>{_NAME_PART})", re.ASCII)
# A value starting with one of these is a local path, whatever follows (no Hub repo id starts with them).
_LOCAL_PREFIXES = (".", "/", "~", "\\")


def is_local(spec: str, base: str | Path | None = None) -> bool:
    """THE rule for what a SRC/DST/--config value names. A local directory when it starts with `.`, `/`, `~` (or
    `\\`), or when its first path component exists (under `base`, default the current directory); anything else
    is read as a Hub repo id. `./NAME` forces the local reading of a NAME that does not exist yet."""
    if spec.startswith(_LOCAL_PREFIXES):
        return True
    first = Path(spec).parts[:1]
    return bool(first) and ((Path(base) if base is not None else Path()) / first[0]).exists()


def forced_local(spec: str) -> str:
    """How to write `spec` so that it is read as a local path (what error messages suggest)."""
    return spec if spec.startswith(_LOCAL_PREFIXES) else f"./{spec}"


def both_readings(spec: str) -> str:
    """The tail of an error about a value read as a Hub repo id that could also have meant a local path."""
    return (f"'{spec}' was read as a Hub repo id because no local '{Path(spec).parts[0] if Path(spec).parts else spec}' "
            f"exists; for a local directory write {forced_local(spec)}")


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
