"""The serving tier's shared fixture: tiny upstreams, their derivatives and the original's vLLM run, each made once.

Every serving test compares a derivative served at its padded TP with the original served at TP=1 in stock vLLM.
Building the upstream and serving the original are the same for every test of a family, so a session-wide `Zoo`
does each once (an engine start costs 20-50 s here).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import serving
from tests.helpers import cli


class Zoo:
    """Upstreams, derivatives and runs of the originals, made on first use and kept for the session."""

    def __init__(self, root: Path):
        self.root = root
        self._upstreams: dict[str, Path] = {}
        self._derivatives: dict[tuple[str, int], Path] = {}
        self._originals: dict[tuple[str, int], dict] = {}
        self._plugins: dict[Path, Path] = {}

    def upstream(self, family: str) -> Path:
        from tests import serve_models  # torch and transformers: imported only when a serving test runs

        if family not in self._upstreams:
            self._upstreams[family] = serve_models.build(family, self.root / family / "upstream")
        return self._upstreams[family]

    def derivative(self, family: str, tp: int) -> Path:
        """`hubpad mirror UPSTREAM --tp N --to DIR`, as a user runs it."""
        key = (family, tp)
        if key not in self._derivatives:
            dst = self.root / family / f"tp{tp}"
            result = cli("mirror", self.upstream(family), "--tp", tp, "--to", dst)
            assert result.exit_code == 0, result.output
            self._derivatives[key] = dst
        return self._derivatives[key]

    def original(self, family: str, tp: int = 3) -> dict:
        """The original served by stock vLLM (no plugin) at the TP it is compared at with the derivative at `tp`: 1,
        or where vLLM's own outputs depend on the TP size, the one Family.reference_tp names (MLA)."""
        ref = self.reference_tp(family, tp)
        if (family, ref) not in self._originals:
            run = serving.run_vllm([serving.job(self.upstream(family), ref, **self.engine(family))],
                                   self.root / family / f"run-original-tp{ref}")
            self._originals[family, ref] = run.ok(0)
        return self._originals[family, ref]

    @staticmethod
    def reference_tp(family: str, tp: int = 3) -> int:
        from tests import serve_models

        return serve_models.FAMILIES[family.partition("+")[0]].reference_tp.get(tp, 1)

    def plugin(self, derivative: Path) -> Path | None:
        """The derivative's vocab plugin pip-installed into a folder of its own, or None when it ships none."""
        if not (derivative / "vllm_patch").is_dir():
            return None
        if derivative not in self._plugins:
            folder = derivative.parent / f"{derivative.name}-plugin"
            self._plugins[derivative] = serving.install_plugin(derivative, folder)
        return self._plugins[derivative]

    @staticmethod
    def engine(family: str) -> dict:
        """The engine arguments the CPU backend needs for the family (`<family>+mtp`: its drafting variant)."""
        from tests import serve_models

        return dict(serve_models.FAMILIES[family.partition("+")[0]].engine)


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> Zoo:
    serving.vllm_python()  # fail at once, with the reason, when the serving venv is missing
    return Zoo(tmp_path_factory.mktemp("serve"))


# ---------------------------------------------------------------------------------------------------------------------
# A strict run (HUBPAD_SERVE_STRICT=1: .ci/serve, CI's serve job) fails when a serving test skipped, unless the skip
# is one the machine is declared unable for (serving.require_kernels, HUBPAD_SERVE_CPU_LACKS): a row of the README's
# matrix that did not run must not read as a passed one.

_SERVE_SKIPS: list[tuple[str, str]] = []


def _reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_runtest_logreport(report):
    if report.skipped and "serve" in report.keywords and not hasattr(report, "wasxfail"):
        _SERVE_SKIPS.append((report.nodeid, _reason(report)))


def pytest_collectreport(report):
    if report.skipped and Path(str(report.nodeid)).name.startswith("test_serve"):  # a whole module skipped
        _SERVE_SKIPS.append((report.nodeid, _reason(report)))


def undeclared_skips() -> list[tuple[str, str]]:
    return [(node, reason) for node, reason in _SERVE_SKIPS if serving.DECLARED not in reason]


def pytest_terminal_summary(terminalreporter):
    if os.environ.get(serving.STRICT_ENV) == "1" and undeclared_skips():
        terminalreporter.section("serving rows that did not run (HUBPAD_SERVE_STRICT=1: the run fails)", red=True)
        for node, reason in undeclared_skips():
            terminalreporter.line(f"{node}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get(serving.STRICT_ENV) == "1" and undeclared_skips() and session.exitstatus == 0:
        session.exitstatus = 1
