"""What the page shows, as HTML fragments: the advisor's table, a run's place in the queue and its progress, the
result's links and serve commands, and one-sentence messages.

Every value that comes from outside (repo ids, config fields in a refusal's reason, card text) is escaped here.
"""

from __future__ import annotations

import html
import time

from hubpad.app.advice_report import ADVICE_HEADER, advice_notes, advice_rows, advice_title
from hubpad.plan.advisor import Advice

from hubpad_space.runs import Request, Run

VERDICT_CLASS = {"as is": "hp-asis", "pad": "hp-pad", "cannot": "hp-cannot"}
VERDICT_WORDS = {"as is": "works as is", "pad": "needs padding", "cannot": "cannot be done"}

CSS = """
.hp-table { border-collapse: collapse; width: 100%; font-size: 0.9em; }
.hp-table th, .hp-table td { border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
.hp-table td.hp-why { max-width: 40em; }
.hp-asis td.hp-verdict { color: #1a7f37; font-weight: 600; }
.hp-pad td.hp-verdict { color: #9a6700; font-weight: 600; }
.hp-cannot td.hp-verdict { color: #cf222e; font-weight: 600; }
.hp-chosen { background: #fff8c5; }
.hp-error { color: #cf222e; font-weight: 600; }
.hp-info { color: #57606a; }
.hp-progress { white-space: pre; overflow-x: auto; font-size: 0.85em; background: #f6f8fa; padding: 8px; }
.hp-notes { font-size: 0.85em; color: #57606a; }
.hp-done { color: #1a7f37; font-weight: 600; }
.hp-commands pre { white-space: pre; overflow-x: auto; background: #f6f8fa; padding: 8px; font-size: 0.85em; }
"""


def e(text: object) -> str:
    return html.escape(str(text), quote=True)


def message(text: str | None, kind: str = "info") -> str:
    """One sentence: kind "error" (role=alert, red), "info" (grey) or "done" (green)."""
    if not text:
        return ""
    role = ' role="alert"' if kind == "error" else ""
    return f'<p class="hp-{kind}"{role}>{e(text)}</p>'


# ---------------------------------------------------------------------------------------------------- advisor


def advisor_table(advice: Advice, chosen: int | None = None) -> str:
    """The advisor's table as `hubpad plan SRC` prints it (same cells), one row per TP, the chosen TP marked."""
    head = "".join(f"<th>{e(h)}</th>" for h in ADVICE_HEADER)
    body = []
    for row, cells in zip(advice.rows, advice_rows(advice)):
        classes = VERDICT_CLASS[row.verdict] + (" hp-chosen" if row.tp == chosen else "")
        tds = "".join(f'<td class="hp-{_col(i)}">{e(c)}</td>' for i, c in enumerate(cells))
        body.append(f'<tr class="{classes}" data-tp="{row.tp}" data-verdict="{e(row.verdict)}">{tds}</tr>')
    notes = "".join(f"<li>{e(n)}</li>" for n in advice_notes(advice))
    return (f'<div class="hp-advice"><p><strong>{e(advice_title(advice))}</strong></p>'
            f'<p class="hp-info">as is: serves at that TP unchanged · pad: hubpad adds zero heads and neurons '
            f'(exactly the same outputs) so that it does · cannot: no exact padding exists, and why says why.</p>'
            f'<table class="hp-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            f'<details><summary>What the columns mean</summary><ul class="hp-notes">{notes}</ul></details></div>')


def _col(i: int) -> str:
    return ADVICE_HEADER[i].split()[0].replace("/", "-").lower() if i else "tp"


def tp_choices(advice: Advice | None) -> list[tuple[str, int]]:
    """The TP picker's choices: each size with the advisor's verdict in words."""
    if advice is None:
        return []
    return [(f"{r.tp} ({VERDICT_WORDS[r.verdict]})", r.tp) for r in advice.rows]


def preferred_tp(advice: Advice | None) -> int | None:
    """TP 3 when it can be padded (what this page is for: three DGX Sparks), else the smallest size that needs it."""
    if advice is None:
        return None
    pads = [r.tp for r in advice.rows if r.verdict == "pad"]
    return 3 if 3 in pads else (pads[0] if pads else None)


# ---------------------------------------------------------------------------------------------------- a run


def run_view(run: Run, place: int, busy: tuple[bool, int]) -> str:
    """A run as its user sees it: its place in the queue, or its progress in the CLI's words, then its end."""
    req = run.request
    head = f"{e(req.upstream)} → {e(req.target)} at TP {req.tp}"
    if run.state == "waiting" and place == 1 and not busy[0]:
        return (f'<div class="hp-run" data-state="waiting" data-place="1"><p><strong>Starting…</strong></p>'
                f'<p class="hp-info">{head}</p></div>')
    if run.state == "waiting":
        ahead = place - 1 + (1 if busy[0] else 0)
        return (f'<div class="hp-run" data-state="waiting" data-place="{place}"><p><strong>Waiting in the queue: '
                f'you are number {place}</strong> ({ahead} run(s) ahead of yours; this Space pads one model at a '
                f'time).</p><p class="hp-info">{head}. You may close this page: the run continues, and opening the '
                f'page again shows it.</p></div>')
    now = [run.meter.line()] if run.meter is not None else [run.live] if run.live else []
    lines = list(run.finished) + now
    progress = f'<pre class="hp-progress">{e(chr(10).join(lines))}</pre>' if lines else ""
    notes = "".join(f"<li>{e(n)}</li>" for n in run.notes)
    notes = f'<ul class="hp-notes">{notes}</ul>' if notes else ""
    if run.state == "running":
        where = (f'<p class="hp-info">On Hugging Face Jobs in your account: {_job_links(run.jobs)}.</p>'
                 if run.jobs else "")
        return (f'<div class="hp-run" data-state="running"><p><strong>Running: {e(run.phase or "starting")}'
                f'</strong></p><p class="hp-info">{head}. You may close this page: the run continues, and opening '
                f'the page again shows it.</p>{where}{progress}{notes}</div>')
    details = f"<details><summary>What the run did</summary>{progress}{notes}</details>" if progress or notes else ""
    if run.state == "failed":
        return f'<div class="hp-run" data-state="failed">{message(run.error, "error")}{details}</div>'
    return f'<div class="hp-run" data-state="done">{result_view(run.result, req)}{details}</div>'


def result_view(result: dict, req: Request) -> str:
    """The published derivative: links to it and its card, and the card's serve commands, one section per way."""
    took = f" in {result['seconds']:.0f}s" if result.get("seconds") else ""
    if result.get("up_to_date"):
        head = f"{e(req.target)} was already up to date with {e(req.upstream)}: nothing to do."
    elif result.get("jobs"):
        head = (f"Done{took}: {e(req.target)} is published, by {_job_links(result['jobs'])} in your account on "
                f"Hugging Face Jobs.")
    else:
        head = (f"Done{took}: {e(req.target)} is published ({result['built']} shard(s) built, {result['reused']} "
                f"kept).")
    links = [f'<a href="{e(result["url"])}" target="_blank">{e(req.target)}</a>',
             f'<a href="{e(result["card"])}" target="_blank">its model card</a>']
    for way in result.get("commands", []):
        links.append(f'<a href="{e(result["card"])}#{e(way["anchor"])}" target="_blank">serve: {e(way["title"])}</a>')
    if result.get("draft"):
        links.append(f'<a href="{e(result["draft"]["url"])}" target="_blank">the draft {e(result["draft"]["target"])}'
                     f'</a>')
    moved = message(result.get("moved"), "error")
    commands = "".join(f'<h4>{e(w["title"][:1].upper() + w["title"][1:])}</h4>' + "".join(f"<pre>{e(c)}</pre>" for c in w["code"])
                       for w in result.get("commands", []))
    commands = (f'<div class="hp-commands"><p>How to serve it (from its card):</p>{commands}</div>'
                if commands else "")
    return (f'<p class="hp-done">{head}</p>{moved}<p class="hp-links">{" · ".join(links)}</p>{commands}')


def _job_links(jobs: list[dict]) -> str:
    """Each job started, linked to its page on the Hub (its log, its cost)."""
    return ", ".join(f'<a href="{e(j["url"])}" target="_blank">job {e(j["id"])}</a> ({e(j["for"])})' for j in jobs)


def queue_line(busy: tuple[bool, int], queued: bool = False) -> str:
    """How busy the Space is; to a visitor not in the queue (`queued` False), where a run of theirs would be."""
    running, waiting = busy
    if not running:
        return "The Space is free: a run starts at once."
    line = f"The Space is padding a model now; {waiting} run(s) wait after it."
    return line if queued else f"{line} Yours would be number {waiting + 1}."


def remembered(run: Run | None, req: Request) -> dict:
    """What the browser keeps of the visitor's last run (gr.BrowserState): enough to find it again after a restart."""
    return {"run": run.id if run else None, "user": req.user, "upstream": req.upstream, "tp": req.tp,
            "target": req.target, "route": req.route, "at": time.time()}


def form_memory(upstream: str, tp, target: str, user: str | None) -> dict:
    """What the browser keeps of the form (gr.BrowserState), so that signing in (which reloads the page) keeps it."""
    return {"upstream": upstream, "tp": tp, "target": target, "user": user}
