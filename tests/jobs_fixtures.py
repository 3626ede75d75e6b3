"""A Hub emulator whose Jobs run hubpad from this checkout (tests/hub_jobs.py runs a job's command locally).

The job's "image" is a folder of shims first on PATH: `pip` only records what it was asked to install (the job's
pinned hubpad, its locked dependencies), `hubpad` runs this checkout's hubpad with the test venv's Python. Nothing
else of this process's environment reaches a job: in particular not HF_TOKEN, which it gets only as its secret.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = "example/hubpad@" + "0123456789abcdef" * 2 + "01234567"


def _shim(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def jobs_hub(hub, tmp_path, monkeypatch):
    """The `hub` fixture, with Jobs that run this checkout's hubpad, and the job's hubpad pinned to PIN."""
    job_image(hub, tmp_path / "image-bin")
    monkeypatch.setenv("HUBPAD_JOBS_INSTALL", PIN)
    return hub


def job_image(hub, image: Path) -> None:
    """Make `hub`'s jobs run in the "image" of shims in `image` (made here): this checkout's hubpad."""
    image.mkdir()
    _shim(image, "pip", 'echo "pip $*" >> "$HOME/pip.log"\n')
    _shim(image, "hubpad", f'exec "{sys.executable}" -m hubpad.app.cli "$@"\n')
    hub.jobs.image_env = {
        "PATH": os.pathsep.join([str(image), str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "PYTHONPATH": str(ROOT),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "LANG": "C.UTF-8",
    }
