"""Run the composite action's steps for real (bash, GITHUB_* files) against the Hub emulator, in each mode."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT
from tests.test_hub_mirror import SHARD, TARGET, UP, upstream  # noqa: F401

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
EXPR = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


@pytest.fixture(scope="module")
def action_python(tmp_path_factory):
    """Run the action's install step for real: the runtime lock and "$GITHUB_ACTION_PATH" into a fresh, empty venv.

    Empty as setup-python's is: a venv that saw the machine's site-packages would make the step's `pip check`
    judge whatever else that Python holds."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    step = next(s for s in ACTION["runs"]["steps"] if "pip install" in s.get("run", ""))
    env = _step_env(step, {}, python)
    env.update(GITHUB_ACTION_PATH=str(ROOT), PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "installed hubpad" in r.stdout
    return python


def _evaluate(value: str, inputs: dict, python: Path) -> str:
    def sub(m):
        expr = m.group(1)
        if expr.startswith("inputs."):
            name = expr[len("inputs."):]
            return str(inputs.get(name, ACTION["inputs"][name].get("default", "")))
        if expr == "steps.setup-python.outputs.python-path":
            return str(python)
        raise AssertionError(f"unexpected expression in action.yml: {expr}")

    return EXPR.sub(sub, str(value))


def _step_env(step: dict, inputs: dict, python: Path) -> dict:
    env = dict(os.environ)
    for key, value in (step.get("env") or {}).items():
        env[key] = _evaluate(value, inputs, python)
    return env


def _parse_output_file(text: str) -> dict:
    out, lines, i = {}, text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line:
            name, delim = line.split("<<", 1)
            i += 1
            value = []
            while lines[i] != delim:
                value.append(lines[i])
                i += 1
            out[name] = "\n".join(value)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        i += 1
    return out


def run_action(inputs: dict, python: Path, tmp_path: Path) -> tuple[dict, str, str]:
    """Execute the action's hubpad step; returns (action outputs, stdout, step summary)."""
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "hubpad")
    output, summary = tmp_path / "github_output", tmp_path / "step_summary"
    output.write_text("")
    summary.write_text("")
    env = _step_env(step, inputs, python)
    env.update(GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary),
               GITHUB_ACTION_PATH=str(ROOT), RUNNER_TEMP=str(tmp_path / "runner-temp"),
               PATH=f"{python.parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "runner-temp").mkdir(exist_ok=True)
    r = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    step_outputs = _parse_output_file(output.read_text())
    outputs = {}
    for name, spec in ACTION["outputs"].items():
        m = EXPR.search(spec["value"])
        outputs[name] = step_outputs.get(m.group(1).rsplit(".", 1)[1], "")
    return outputs, r.stdout + r.stderr, summary.read_text()


def test_action_check_mirror_card_modes(hub, upstream, action_python, tmp_path):  # noqa: F811
    token = hub.token
    common = {"upstream": UP, "target": TARGET, "tp": "3", "shard-size": SHARD, "hf-token": token}
    out, log, _ = run_action({**common, "mode": "check"}, action_python, tmp_path)
    assert out["changed"] == "true" and out["upstream-sha"] == hub.head(UP)

    out, log, summary = run_action({**common, "mode": "mirror"}, action_python, tmp_path)
    assert out["changed"] == "true"
    assert out["target-commit"] == hub.head(TARGET) and out["upstream-sha"] == hub.head(UP)
    assert TARGET in out["target-url"] and "hubpad" in summary
    # The only place the token may appear is GitHub's own ::add-mask:: command, which the runner swallows.
    assert all(token not in line for line in log.splitlines() if not line.startswith("::add-mask::"))
    assert installed_hubpad_ran(log)

    out, log, summary = run_action({**common, "mode": "mirror"}, action_python, tmp_path)
    assert out["changed"] == "false" and out["target-commit"] == ""
    assert "Up to date" in summary

    out, _, _ = run_action({**common, "mode": "check"}, action_python, tmp_path)
    assert out["changed"] == "false"

    out, _, _ = run_action({"mode": "card", "target": TARGET, "hf-token": token}, action_python, tmp_path)
    assert out["changed"] == "false"


def installed_hubpad_ran(log: str) -> bool:
    return "hubpad mirror" in log


def test_action_check_with_mirrors_file_gives_a_matrix(hub, upstream, action_python, tmp_path):  # noqa: F811
    cfg = tmp_path / "hubpad.yaml"
    cfg.write_text(f"defaults:\n  tp: 3\n  shard_size: {SHARD}\nmirrors:\n  - upstream: {UP}\n")
    out, _, _ = run_action({"mode": "check", "config": str(cfg), "hf-token": hub.token}, action_python, tmp_path)
    assert out["changed"] == "true"
    import json

    matrix = json.loads(out["matrix"])
    assert matrix["include"][0]["target"] == TARGET and matrix["include"][0]["changed"] is True


def test_action_fanout_plan_parts_publish(hub, upstream, action_python, tmp_path):  # noqa: F811
    common = {"upstream": UP, "target": TARGET, "tp": "3", "shard-size": SHARD, "hf-token": hub.token}
    out, _, _ = run_action({**common, "mode": "plan", "parts": "2"}, action_python, tmp_path)
    assert int(out["shard-count"]) == 5 and int(out["total-bytes"]) > 0
    for i in (1, 2):
        out, _, _ = run_action({**common, "mode": "mirror", "part": f"{i}/2"}, action_python, tmp_path)
        assert out["target-commit"] == ""
    out, _, _ = run_action({**common, "mode": "publish"}, action_python, tmp_path)
    assert out["changed"] == "true" and out["target-commit"] == hub.head(TARGET)


def test_action_rejects_bad_mode(action_python, tmp_path):
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "hubpad")
    env = _step_env(step, {"mode": "$(rm -rf /)"}, action_python)
    env.update(GITHUB_OUTPUT=str(tmp_path / "o"), RUNNER_TEMP=str(tmp_path))
    r = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True)
    assert r.returncode == 1 and "::error" in r.stdout and "must be one of" in r.stdout
