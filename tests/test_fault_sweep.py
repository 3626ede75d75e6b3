"""The seeded random fault sweep (slow: run with `pytest -m slow`; `python -m tests.fault_sweep --runs 30`)."""

import pytest

from tests.fault_sweep import sweep


@pytest.mark.slow
def test_fault_sweep_survives_every_fault():
    survived, runs, _ = sweep(runs=8, seed0=100, verbose=False)
    assert survived == runs
