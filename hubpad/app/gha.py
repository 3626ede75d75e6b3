"""GitHub Actions integration (stdlib only): step outputs, job summary, log groups, annotations, masking.

Every function is safe to call anywhere: outside Actions the workflow commands are not printed (a `mask()`
outside Actions would print the secret itself) and the file commands return False when their file is unset.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TextIO

# Output names end up in `steps.<id>.outputs.<name>` expressions; keep them to what those can spell.
_OUTPUT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*", re.ASCII)


def in_github_actions() -> bool:
    """True when running inside a GitHub Actions job (the runner sets GITHUB_ACTIONS=true)."""
    return os.environ.get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """Escape the message part of a workflow command (`%`, CR, LF), as @actions/core does."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command property value (`title=...`): the data escapes plus `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def output_value(value: object) -> str:
    """The string a step output holds for `value`: bools as true/false, None as "", dicts/lists as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, separators=(",", ":"), sort_keys=False)
    return str(value)


def format_outputs(outputs: Mapping[str, object]) -> str:
    """The text `set_outputs` appends: one `name<<DELIMITER` block per output, multi-line safe.

    Each block gets a fresh random delimiter that occurs in neither the name nor the value.
    """
    chunks: list[str] = []
    for name, raw in outputs.items():
        if not isinstance(name, str) or not _OUTPUT_NAME_RE.fullmatch(name):
            raise ValueError(f"invalid step output name {name!r} (use letters, digits, '_' and '-')")
        value = output_value(raw)
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        while delimiter in value:  # pragma: no cover - 128 random bits; kept for the guarantee
            delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        chunks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    return "".join(chunks)


def set_outputs(outputs: Mapping[str, object]) -> bool:
    """Append step outputs to `$GITHUB_OUTPUT`; returns False (and writes nothing) when it is unset."""
    text = format_outputs(outputs)  # validate names even when not in Actions
    path = os.environ.get("GITHUB_OUTPUT")
    if not path:
        return False
    with open(path, "a", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
    return True


def append_summary(markdown: str) -> bool:
    """Append markdown to the job summary (`$GITHUB_STEP_SUMMARY`); returns False when it is unset."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    with open(path, "a", encoding="utf-8", newline="\n") as fh:
        fh.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return True


def _command(line: str, stream: TextIO | None = None) -> bool:
    """Print one workflow command line to stdout (the runner reads commands there) when inside Actions."""
    if not in_github_actions():
        return False
    out = stream if stream is not None else sys.stdout
    out.write(line + "\n")
    out.flush()
    return True


@contextmanager
def group(title: str) -> Iterator[None]:
    """Fold the enclosed log lines under `title` (`::group::`/`::endgroup::`), only inside Actions."""
    sys.stderr.flush()
    opened = _command(f"::group::{escape_data(title)}")
    try:
        yield
    finally:
        if opened:
            sys.stderr.flush()
            _command("::endgroup::")


def _annotation(kind: str, message: str, title: str | None) -> bool:
    props = f" title={escape_property(title)}" if title else ""
    return _command(f"::{kind}{props}::{escape_data(message)}")


def error(message: str, *, title: str | None = None) -> bool:
    """Emit an `::error::` annotation (inside Actions only); returns whether it was printed."""
    return _annotation("error", message, title)


def warning(message: str, *, title: str | None = None) -> bool:
    """Emit a `::warning::` annotation (inside Actions only); returns whether it was printed."""
    return _annotation("warning", message, title)


def notice(message: str, *, title: str | None = None) -> bool:
    """Emit a `::notice::` annotation (inside Actions only); returns whether it was printed."""
    return _annotation("notice", message, title)


def mask(value: str) -> bool:
    """Ask the runner to hide `value` in all later log lines (`::add-mask::`), inside Actions only.

    Multi-line values are masked line by line, since the runner matches masks within single lines.
    """
    if not value or not in_github_actions():
        return False
    lines = [value, *value.splitlines()] if "\n" in value or "\r" in value else [value]
    for line in lines:
        if line.strip():
            _command(f"::add-mask::{escape_data(line)}")
    return True
