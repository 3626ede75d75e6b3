"""Untrusted text made safe for where it lands: markdown body, code spans, links, shell words, YAML scalars.

Upstream card text and metadata are data, never markup: every upstream string that reaches a template goes through
one of these (the templates use them as filters), and the front matter is a dict dumped by a yaml SafeDumper, one
line per scalar and with `<!--` escaped, so a hostile card can neither break the YAML block, inject HTML, nor
forge the owner-section markers.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml

_CODE_SAFE = re.compile(r"[\w.\-/:@+=,*()\[\] ]+")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}#|!~])")


class _FrontMatterDumper(yaml.SafeDumper):
    """SafeDumper that double-quotes any string with a line break or control character, so every value is one line."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value) or value.strip() != value or "<!--" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_FrontMatterDumper.add_representer(str, _represent_str)


def _hide_comment_openers(text: str) -> str:
    """Spell `<!--` as `<\\x21--` inside the (double-quoted) scalars that hold it: same value, but no marker text in the file."""
    return text.replace("<!--", "<\\x21--")


def dump_front_matter(data: dict[str, Any]) -> str:
    """YAML for the card's front matter: order kept, one line per scalar, always parseable, no HTML comment openers."""
    return _hide_comment_openers(yaml.dump(data, Dumper=_FrontMatterDumper, sort_keys=False, allow_unicode=True, width=float("inf")))


def yaml_scalar(value: Any) -> str:
    """One YAML flow scalar (for values spliced into the recipe template)."""
    text = yaml.dump(value, Dumper=_FrontMatterDumper, default_flow_style=True, width=float("inf"), allow_unicode=True)
    return _hide_comment_openers(text.removesuffix("\n...\n").removesuffix("\n"))


def md(value: Any) -> str:
    """Untrusted text as inert inline markdown: one line, HTML escaped, markdown specials backslash-escaped."""
    text = " ".join(str(value).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def code(value: Any) -> str:
    """A value in a code span when it is plain (names, patterns); otherwise escaped text, so nothing can break out."""
    text = str(value)
    return f"`{text}`" if _CODE_SAFE.fullmatch(text) else md(text)


def safe_url(value: Any) -> str:
    """A link target that cannot break out of `[text](target)`: plain https URLs and relative paths, else ""."""
    text = str(value)
    if re.fullmatch(r"https?://[\w.~:/?#@!$&*+,;=%-]+", text) or (re.fullmatch(r"[\w./-]+", text) and ".." not in text):
        return text
    return ""


def shell(value: Any) -> str:
    """Shell-quote one argument for the copy-paste commands in the card."""
    return shlex.quote(str(value))
