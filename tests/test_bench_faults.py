"""bench/faults.py as a (slow) test: one run of every fault kind at a seeded random request, each checked against
the fault-free result, its release tag and its publish-commit count (`pytest -m slow tests/test_bench_faults.py`;
the full sweep is `python bench/faults.py -n 30`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "faults.py"


def _faults_module():
    spec = importlib.util.spec_from_file_location("hubpad_bench_faults", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_fault_kind_is_survived(tmp_path):
    faults = _faults_module()
    results, _ = faults.sweep(len(faults.KINDS), seed=3, work=tmp_path, verbose=False)
    failed = [f"{r.kind}: {r.detail}: {r.why}" for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert {r.kind for r in results} == set(faults.KINDS)
    assert all(r.fired for r in results), [r.detail for r in results if not r.fired]
