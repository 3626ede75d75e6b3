"""Shared helpers for the test suite: run the CLI in-process or as a real subprocess, read a checkpoint folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from hubpad.app.cli import main

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict | None = None):
    """Run `hubpad ARGS` in-process; returns click's Result (exit_code, stdout, stderr)."""
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def folder_tensors(path: Path) -> dict:
    """Every tensor of every *.safetensors file in a checkpoint folder, by name (torch tensors)."""
    from safetensors.torch import load_file

    return {k: v for f in sorted(Path(path).glob("*.safetensors")) for k, v in load_file(f).items()}


def assert_same_logits(before, after, label: str, rel: float = 1e-12) -> float:
    """float64 logits of an original and its derivative equal to `rel` of the largest logit; prints and returns the
    max |Δ| (0.0, or the last bit of a float64 product whose width padding changed)."""
    delta = (before - after).abs().max().item()
    print(f"{label}: max |Δ| = {delta}")
    assert delta <= rel * before.abs().max().item(), f"{label}: max |Δ| = {delta}"
    return delta


def mirror_and_verify(src, dst, tp, *extra: str):
    """`hubpad mirror SRC --tp N --to DST` then `hubpad verify SRC DST`, each required to pass; the verify result."""
    result = cli("mirror", src, "--tp", tp, "--to", dst, *extra)
    assert result.exit_code == 0, result.output
    report = cli("verify", src, dst)
    assert report.exit_code == 0, report.output
    return report


def planned_dims(src, tp) -> dict:
    """`hubpad plan SRC --tp N --json`, required to pass with every per-rank rule met: config key -> padded value, for
    the dims it changes."""
    result = cli("plan", src, "--tp", tp, "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    return {d["config_key"]: d["after"] for d in plan["dims"] if d["after"] != d["before"]}


def header_only_layouts(root: Path, models: dict):
    """A getter: model name -> the header-only copy of its published layout (models: name -> (config.json values,
    the function listing its tensors)), written under `root` in four shards on first use."""
    from hubpad.testing import write_checkpoint

    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            config, tensors = models[name]
            made[name] = write_checkpoint(root / name.replace("/", "__").replace(" ", "_"), config, tensors(config),
                                          n_shards=4, header_only=True)
        return made[name]
    return get


def cli_subprocess(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `python -m hubpad.app.cli ARGS` as a separate process (for exit codes, tracebacks, kill -9)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "hubpad.app.cli", *map(str, args)], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=ROOT)


def tool_missing(reason: str) -> None:
    """Skip a test (or, called at import, its whole module) whose outside tool is not here, naming it (every CI run
    lists skips: -rs); on GitHub Actions, where each of these tools is installed or installable, fail instead, so a
    missing tool never reads as a pass."""
    import pytest

    if os.environ.get("GITHUB_ACTIONS") == "true":
        pytest.fail(f"{reason}; GitHub's runners have it, so this run fails rather than skip", pytrace=False)
    pytest.skip(reason, allow_module_level=True)
