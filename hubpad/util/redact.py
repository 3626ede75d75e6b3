"""Keep tokens out of every message hubpad prints or writes."""

from __future__ import annotations

import os
import re

_TOKEN_RE = re.compile(r"\bhf_[A-Za-z0-9]{8,}\b")
_BEARER_RE = re.compile(r"(?i)(bearer\s+)[^\s'\"]+")


def redact(text: str, *secrets: str | None) -> str:
    """Replace any Hugging Face token (the configured one, `secrets` such as a signed-in user's OAuth token, or
    anything shaped like one) with `***`."""
    for token in (os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN"), *secrets):
        if token and len(token) >= 4:
            text = text.replace(token, "***")
    text = _TOKEN_RE.sub("***", text)
    return _BEARER_RE.sub(r"\1***", text)
