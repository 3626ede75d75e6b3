"""The serving tier's skip policy (tests/serve_fixtures.py, tests/serving.py): under HUBPAD_SERVE_STRICT=1 (.ci/serve,
CI's serve job) a serving row that did not run fails the run, unless the machine is declared unable for the CPU
feature the row needs (HUBPAD_SERVE_CPU_LACKS, checked against /proc/cpuinfo); and every CI run lists its skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import serving

ROOT = Path(__file__).resolve().parents[1]

ROWS = '''
import pytest

pytestmark = pytest.mark.serve


def test_runs():
    pass


def test_skips():
    pytest.skip(REASON)
'''


def _run(tmp_path, reason: str, **env) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text("from tests.serve_fixtures import (pytest_collectreport, "
                                          "pytest_runtest_logreport, pytest_sessionfinish, pytest_terminal_summary)\n")
    (tmp_path / "test_serve_rows.py").write_text(ROWS.replace("REASON", repr(reason)))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    serve: served\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("HUBPAD_SERVE_")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**base, "PYTHONPATH": str(ROOT), **env})


def test_a_skipped_serving_row_fails_a_strict_run(tmp_path):
    plain = _run(tmp_path, "no such op here")
    assert plain.returncode == 0 and "SKIPPED [1]" in plain.stdout and "no such op here" in plain.stdout
    strict = _run(tmp_path, "no such op here", HUBPAD_SERVE_STRICT="1")
    assert strict.returncode == 1, strict.stdout
    assert "serving rows that did not run" in strict.stdout and "test_skips: no such op here" in strict.stdout
    declared = _run(tmp_path, f"no amx: {serving.DECLARED} (HUBPAD_SERVE_CPU_LACKS)", HUBPAD_SERVE_STRICT="1")
    assert declared.returncode == 0, declared.stdout


def test_a_declared_feature_must_really_be_missing(monkeypatch):
    monkeypatch.setattr(serving, "cpu_flags", lambda: {"avx2", "avx512f"})
    monkeypatch.setenv(serving.LACKS_ENV, "amx_tile, avx512_bf16")
    assert serving.declared_lacking() == {"amx_tile", "avx512_bf16"}
    monkeypatch.setenv(serving.LACKS_ENV, "avx512f")
    with pytest.raises(pytest.fail.Exception, match="declares avx512f missing, but /proc/cpuinfo has it"):
        serving.declared_lacking()


def _require(monkeypatch, present: bool, **env):
    monkeypatch.setattr(serving, "_KERNELS", {"amx": {"library": "vllm._C", "present": present}})
    monkeypatch.setattr(serving, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16"})
    for key in (serving.STRICT_ENV, serving.LACKS_ENV):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    serving.require_kernels("amx")


def test_require_kernels_skips_fails_or_skips_as_declared(monkeypatch):
    _require(monkeypatch, True, HUBPAD_SERVE_STRICT="1")  # present: runs
    with pytest.raises(pytest.skip.Exception, match=r"have no amx \(CPU feature amx_tile\)$"):
        _require(monkeypatch, False)
    with pytest.raises(pytest.fail.Exception, match="does not declare it: a row the README's matrix marks as served"):
        _require(monkeypatch, False, HUBPAD_SERVE_STRICT="1")
    with pytest.raises(pytest.skip.Exception, match="declared unable"):
        _require(monkeypatch, False, HUBPAD_SERVE_STRICT="1", HUBPAD_SERVE_CPU_LACKS="amx_tile")


def test_every_ci_run_lists_its_skips():
    for script in (".ci/run", ".ci/serve"):
        runs = [ln for ln in (ROOT / script).read_text().splitlines() if "run_pytest \"$venv\"" in ln]
        assert runs and all(" -rs" in ln.split("run_pytest", 1)[1] for ln in runs), (script, runs)
        assert all("HUBPAD_SERVE_STRICT=1" in ln for ln in runs if "HUBPAD_VLLM_PYTHON" in ln), (script, runs)
    workflow = (ROOT / ".github/workflows/ci.yml").read_text()
    pytest_lines = [ln for ln in workflow.splitlines() if "run: python -m pytest" in ln]
    assert pytest_lines and all("-rs" in ln for ln in pytest_lines), pytest_lines
