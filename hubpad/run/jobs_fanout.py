"""The fan-out on Hugging Face Jobs: K stage jobs (`hubpad mirror --part i/K`), then one publish job.

One local command plans the mirror (headers only: a bad upstream fails here, before anything is billed), pins the
upstream commit so every part plans the same shards, starts the K parts at once and follows them, then starts the
publish job. Jobs run a failed part again by themselves (`attempts`); each attempt resumes from the shards already
staged. A part that fails every attempt stops the fan-out before the publish: the staged shards stay, and the same
command run again stages only what is missing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from hubpad.plan.planner import make_plan
from hubpad.plan.shards import split_parts
from hubpad.run.hf_jobs import Command, JobFailed, Launcher, follow, outcome_problems, run, stop_jobs, submit
from hubpad.source import open_source
from hubpad.util.log import log
from hubpad.util.sizes import human

DEFAULT_PART_ATTEMPTS = 3


def fan_out(launcher: Launcher, mirror: Command, *, src: str, revision: str | None, tp: int, shard_size: int,
            k: int, echo: Callable[[str], None] = log):
    """Run `mirror` (its argv: "mirror", SRC, options without --revision/--part) as K parts, then publish."""
    commit, parts = _plan_parts(src, revision, tp, shard_size, k)
    echo(f"fan-out: {src}@{commit[:12]} in {len(parts)} part(s): " + ", ".join(
        f"{p['part']}: {len(p['shards'])} shard(s) {human(p['bytes'])}" for p in parts))
    pinned = mirror.with_args("--revision", commit)
    jobs = []
    try:
        for p in parts:
            part = pinned.with_args("--part", f"{p['part']}/{k}", name=f"{mirror.name}-part-{p['part']}-of-{k}")
            job = submit(launcher, part)
            echo(f"started part {p['part']}/{k}: job {job.id} ({job.url})")
            jobs.append((p["part"], job))
        failed = _follow_all(launcher, jobs, k, echo)
    except KeyboardInterrupt:
        stop_jobs(launcher, [job.id for _, job in jobs], echo)
        raise
    if failed:
        raise JobFailed(failed + ["no publish: the staged shards are kept; run the same command again to stage what "
                                  "is missing and publish"])
    publish = Command(("publish", *pinned.argv[1:]), mirror.config_text, f"{mirror.name}-publish", mirror.labels)
    return run(launcher, publish, echo=echo)


def _plan_parts(src: str, revision: str | None, tp: int, shard_size: int, k: int) -> tuple[str, list[dict]]:
    """The upstream's commit and the parts every stage job will plan from it (the same split_parts)."""
    plan = make_plan(open_source(src, revision), tp, shard_size)
    return plan.source.commit, split_parts(plan, k)


def _follow_all(launcher: Launcher, jobs: list, k: int, echo: Callable[[str], None]) -> list[str]:
    """Follow every part's log at once (lines prefixed `[part i/K]`); the problems of those that did not complete."""
    problems: dict[int, list[str]] = {}
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            echo(line)

    def watch(i: int, job) -> None:
        try:
            followed = follow(launcher, job, say, prefix=f"[part {i}/{k}] ")
            found = outcome_problems(launcher, followed)
        except Exception as exc:  # noqa: BLE001 - reported with the part, like a failed job
            found = [str(exc)]
        if found:
            problems[i] = [f"part {i}/{k} (job {job.id}): {line}" for line in found]

    threads = [threading.Thread(target=watch, args=(i, job), daemon=True) for i, job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)  # short joins: Ctrl-C reaches this thread
    return [line for i in sorted(problems) for line in problems[i]]
