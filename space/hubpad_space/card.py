"""The serve commands of a published derivative, read from its card (the card is where hubpad renders them; the page
shows the same text rather than a second rendering)."""

from __future__ import annotations

import re

_HEADING = re.compile(r"^(#{2,4}) (.+)$")
_FENCE = re.compile(r"^```(\w*)$")

# Card headings (templates/README.md.j2) -> what the page calls each way of serving.
_WAYS = (
    (re.compile(r"^sparkrun \((\d+) nodes\)$"), "sparkrun, on {0} DGX Sparks"),
    (re.compile(r"^vLLM$"), "one machine with the GPUs"),
    (re.compile(r"^On (\d+) machines with one GPU each.*$"), "{0} machines, without sparkrun"),
    (re.compile(r"^A draft model: serve it with its target$"), "with its target"),
)


def serve_commands(card: str) -> list[dict]:
    """[{"title", "anchor", "code": [blocks]}] for each serving section of the card, in the card's order."""
    sections: list[dict] = []
    current, fence, block = None, None, []
    for line in card.splitlines():
        if fence is not None:
            if line.strip() == "```":
                if current is not None and fence in ("bash", "sh", ""):
                    current["code"].append("\n".join(block).strip("\n"))
                fence, block = None, []
            else:
                block.append(line)
            continue
        opening = _FENCE.match(line.strip())
        if opening:
            fence = opening.group(1)
            continue
        heading = _HEADING.match(line)
        if heading:
            current = _section(heading.group(2).strip())
            if current is not None:
                sections.append(current)
    return [s for s in sections if s["code"]]


def _section(title: str) -> dict | None:
    for pattern, name in _WAYS:
        m = pattern.match(title)
        if m:
            return {"title": name.format(*m.groups()), "anchor": _anchor(title), "code": []}
    return None


def _anchor(title: str) -> str:
    """The id the Hub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).strip().replace(" ", "-")
