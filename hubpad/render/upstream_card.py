"""Reading an upstream model card: its YAML front matter (untrusted values as plain strings), and the owner's own
section of an existing card."""

from __future__ import annotations

import re
from typing import Any

import yaml

FRONT_MATTER = re.compile(r"^(\s*---[\r\n]+)([\S\s]*?)([\r\n]+---(\r\n|\n|$))")
# The owner's own section of a derivative card: kept as written across every refresh.
OWNER_START = "<!-- hubpad:owner-section:start -->"
OWNER_END = "<!-- hubpad:owner-section:end -->"


def parse_card_metadata(card: str | None) -> tuple[dict[str, Any], str | None]:
    """Front matter of a model card as a dict, and a problem description when it could not be read (never raises)."""
    if not card:
        return {}, None
    match = FRONT_MATTER.match(card)
    if not match:
        return {}, None
    try:
        data = yaml.safe_load(match.group(2))
    except yaml.YAMLError as exc:
        return {}, f"front matter is not valid YAML ({type(exc).__name__})"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, "front matter is not a mapping"
    return data, None


def extract_owner_section(readme: str | None) -> str | None:
    """The text between the owner-section markers of an existing README, or None when there is none."""
    if not readme:
        return None
    front = FRONT_MATTER.match(readme)
    if front:  # markers only count in the body
        readme = readme[front.end() :]
    start = readme.find(OWNER_START)
    if start < 0:
        return None
    start += len(OWNER_START)
    end = readme.find(OWNER_END, start)
    if end < 0:
        return None
    # A stray start marker inside the section would make the next render ambiguous; drop marker text, keep the rest.
    return readme[start:end].replace(OWNER_START, "").strip("\r\n")


def str_or_none(value: Any) -> str | None:
    """A scalar metadata value as a string (YAML may hand us ints or dates); lists and mappings are rejected."""
    if value is None or isinstance(value, (list, dict)):
        return None
    text = str(value).strip()
    return text or None


def str_list(value: Any) -> list[str]:
    """A metadata field that may be one string or a list, as a list of non-empty strings."""
    items = value if isinstance(value, list) else [value]
    return [s for s in (str_or_none(v) for v in items) if s]
