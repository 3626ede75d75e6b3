"""The real sparkrun CLI for tests: a Python >= 3.12 venv with sparkrun pinned, made once and cached.

sparkrun needs Python >= 3.12 and pins its own dependencies, so it never goes into the test environment. On these
machines 3.12 comes from pyenv, whose `python3.12` shim only runs with a version selected
(`PYENV_VERSION=3.12.1 python3.12 -m venv V`); any python3.12/3.13 on PATH that runs is used the same way. The venv
lives in $HUBPAD_SPARKRUN_VENV or ~/.cache/hubpad/sparkrun-<version>; None (tests skip) when no interpreter exists
or the package cannot be installed (no registry).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

SPARKRUN_VERSION = "0.4.2"


def _pyenv_versions() -> list[str]:
    """Installed pyenv versions 3.12+ (newest first), or [] without pyenv."""
    pyenv = shutil.which("pyenv")
    if not pyenv:
        return []
    try:
        out = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for v in out.split():
        parts = v.split(".")
        if len(parts) >= 2 and parts[0] == "3" and parts[1].isdigit() and int(parts[1]) >= 12 and v[0].isdigit():
            found.append(v)
    return sorted(found, key=lambda v: [int(p) if p.isdigit() else 0 for p in v.split(".")], reverse=True)


def _interpreter() -> tuple[list[str], dict[str, str]] | None:
    """A command and environment that run Python >= 3.12."""
    candidates: list[tuple[str, dict[str, str]]] = []
    for version in _pyenv_versions():
        minor = ".".join(version.split(".")[:2])
        candidates.append((f"python{minor}", {"PYENV_VERSION": version}))
    candidates += [("python3.13", {}), ("python3.12", {})]
    for name, extra in candidates:
        exe = shutil.which(name)
        if not exe:
            continue
        env = {**os.environ, **extra}
        try:
            ok = subprocess.run([exe, "-c", "import sys; assert sys.version_info >= (3, 12)"], env=env,
                                capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return [exe], env
    return None


def sparkrun_venv() -> Path | None:
    """The venv's directory with `bin/sparkrun` ready, creating it once; None when that cannot be done here."""
    venv = Path(os.environ.get("HUBPAD_SPARKRUN_VENV")
                or Path.home() / ".cache" / "hubpad" / f"sparkrun-{SPARKRUN_VERSION}")
    marker = venv / ".hubpad-ready"
    if marker.exists() and (venv / "bin" / "sparkrun").exists():
        return venv
    found = _interpreter()
    if found is None:
        return None
    cmd, env = found
    try:
        subprocess.run([*cmd, "-m", "venv", "--clear", str(venv)], env=env, check=True, capture_output=True,
                       timeout=300)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"sparkrun=={SPARKRUN_VERSION}"], check=True,
                       capture_output=True, timeout=900)
    except (OSError, subprocess.SubprocessError):
        return None
    marker.write_text(SPARKRUN_VERSION + "\n")
    return venv


def run_sparkrun(venv: Path, args: list[str], home: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run the sparkrun CLI offline-friendly: its own HOME (registry clones and caches go there), no Hub lookups."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "SPARKRUN_"))}
    env.update(HOME=str(home), HF_HUB_OFFLINE="1", NO_COLOR="1", GIT_TERMINAL_PROMPT="0")
    return subprocess.run([str(venv / "bin" / "sparkrun"), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def validate(venv: Path, recipe: Path, home: Path) -> dict:
    """`sparkrun recipe validate --json RECIPE` as a dict (its registries fail to clone offline: harmless)."""
    result = run_sparkrun(venv, ["recipe", "validate", "--json", str(recipe)], home)
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("{")), None)
    if line is None:
        raise AssertionError(f"sparkrun recipe validate printed no JSON:\n{result.stdout}\n{result.stderr}")
    return json.loads(line)


def python(venv: Path, code: str, *args: str) -> str:
    """Run `code` with the venv's Python (sparkrun importable) and return its stdout."""
    result = subprocess.run([str(venv / "bin" / "python"), "-c", code, *args], capture_output=True, text=True,
                            timeout=120)
    if result.returncode:
        raise AssertionError(result.stderr)
    return result.stdout
