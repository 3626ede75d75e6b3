"""The derivative's license: inherited from the upstream card's front matter, never defaulted or guessed; a relative
license link is pinned to the upstream commit, and a base model that declares another license is pointed out."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from hubpad.render.markup import safe_url
from hubpad.render.upstream_card import str_or_none

_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _license_of(meta: dict[str, Any]) -> dict[str, str]:
    """The `license`, `license_name`, `license_link` fields that are present, as strings."""
    out = {}
    for key in ("license", "license_name", "license_link"):
        value = str_or_none(meta.get(key))
        if value:
            out[key] = value
    return out


def _license_label(lic: dict[str, str]) -> str:
    """How a license reads in a sentence: `other` licenses are known by their name."""
    if lic.get("license") == "other" and lic.get("license_name"):
        return f"other ({lic['license_name']})"
    return lic.get("license", "")


def _same_license(a: dict[str, str], b: dict[str, str]) -> bool:
    """Whether two cards declare the same license (for `other`, the license names must match too)."""
    if a.get("license", "").lower() != b.get("license", "").lower():
        return False
    if a.get("license") == "other":
        return a.get("license_name", "").lower() == b.get("license_name", "").lower()
    return True


def resolve_license(
    upstream_meta: dict[str, Any],
    base_meta: dict[str, Any] | None,
    *,
    upstream_repo: str,
    upstream_commit: str | None,
    upstream_is_hub: bool,
    copied: set[str],
    upstream_files: set[str] | None,
    base_name: str | None,
    warnings: list[str],
) -> dict[str, Any]:
    """Inherit the parent's license fields (never default them) and explain anything a user must check."""
    lic = _license_of(upstream_meta)
    notes: list[str] = []
    link = lic.get("license_link")
    if link and not _URL_SCHEME.match(link) and not link.startswith("/"):
        path = link.removeprefix("./")
        if path not in copied and safe_url(path):
            if upstream_files is not None and path not in upstream_files:
                warnings.append(f"upstream license_link {path!r} is not a file of the upstream repo")
            if upstream_is_hub and upstream_commit:
                lic["license_link"] = (
                    f"https://huggingface.co/{upstream_repo}/blob/{quote(upstream_commit, safe='')}/{quote(path, safe='/')}"
                )
            else:
                warnings.append(f"license_link {path!r} is relative but the file was not copied; the link will be broken")
    if "license_link" in lic and not safe_url(lic["license_link"]):
        warnings.append(f"upstream license_link {lic.pop('license_link')!r} is not an https URL or a file path; dropped")
    if "license" not in lic:
        warnings.append(f"upstream {upstream_repo} declares no license; the derivative card says so, check before use")
    base_lic = _license_of(base_meta) if base_meta is not None else {}
    if base_meta is not None and lic.get("license") and base_lic.get("license") and not _same_license(lic, base_lic):
        notes.append("base-differs")
        warnings.append(
            f"license mismatch: upstream {upstream_repo} declares {_license_label(lic)!r} but its base model "
            f"{base_name!r} declares {_license_label(base_lic)!r}"
        )
    return {
        "fields": lic,
        "link": lic.get("license_link", ""),
        "label": _license_label(lic),
        "missing": "license" not in lic,
        "base_label": _license_label(base_lic) if "base-differs" in notes else None,
        "base_name": base_name,
    }
