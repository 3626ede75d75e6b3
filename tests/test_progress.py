"""Progress on long work (issue 32): bytes, rate and time left in `Meter`'s words; a live bar on a terminal, a plain
line every LOG_INTERVAL seconds in a log; and the long reads before a run builds anything (hashing a local
upstream, checking the shards it keeps) say so too."""

from __future__ import annotations

import io
import shutil
import sys

import pytest

from hubpad.app import progress as app_progress
from hubpad.run import progress as run_progress
from hubpad.run.progress import Meter
from hubpad.testing import build_tiny_hy3
from tests.helpers import cli


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(run_progress.time, "monotonic", c)
    return c


def test_meter_words(clock):
    m = Meter("model-00001-of-00002.safetensors", 2_300_000_000)
    clock.now += 2.0
    m.update(820_000_000)
    assert m.line(clock.now) == ("model-00001-of-00002.safetensors [########................]  35.7% 820.0 MB/2.3 GB "
                                 "410.0 MB/s ETA 4s")
    clock.now += 3.6
    m.update(1_480_000_000)
    assert m.line(clock.now, final=True) == "model-00001-of-00002.safetensors: 2.3 GB in 5.6s (410.7 MB/s)"


def test_a_meters_lines_are_read_back_from_a_log(clock):
    """A page that follows a job's log tells its progress lines from the rest (run_progress.line_kind)."""
    m = Meter("model-00001-of-00002.safetensors", 2_300_000_000)
    assert run_progress.line_kind(m.line(clock.now)) == "live"  # no byte yet: ETA ?
    clock.now += 2.0
    m.update(820_000_000)
    assert run_progress.line_kind(m.line(clock.now)) == "live"
    assert run_progress.line_kind(m.line(clock.now, final=True)) == "final"
    for other in ("published alice/x: https://huggingface.co/alice/x", "resuming: 2 shard(s) already staged on "
                  "hubpad-staging", "scratch disk: up to 45.0 GB (--max-disk) under /tmp/hubpad-1", ""):
        assert run_progress.line_kind(other) is None


def _stderr(monkeypatch, tty: bool) -> io.StringIO:
    err = io.StringIO()
    err.isatty = lambda: tty
    monkeypatch.setattr(app_progress.sys, "stderr", err)
    monkeypatch.setattr(sys, "stderr", err)  # hubpad.util.log's lines too
    return err


def test_a_log_gets_a_plain_line_every_interval(monkeypatch, clock):
    err = _stderr(monkeypatch, tty=False)
    p = app_progress.Progress("shard", 100 * 10**6)
    for _ in range(30):  # 30 s at 3 MB/s
        clock.now += 1.0
        p.update(3 * 10**6)
    p.close()
    lines = err.getvalue().splitlines()
    assert len(lines) == 30 // int(app_progress.LOG_INTERVAL) + 1 and "\r" not in err.getvalue()
    assert lines[0] == "shard [#######.................]  30.0% 30.0 MB/100.0 MB 3.0 MB/s ETA 23s"
    assert lines[-1] == "shard: 90.0 MB in 30.0s (3.0 MB/s)"


def test_a_terminal_gets_a_live_bar(monkeypatch, clock):
    err = _stderr(monkeypatch, tty=True)
    p = app_progress.Progress("shard", 10 * 10**6)
    for _ in range(10):
        clock.now += 0.25
        p.update(10**6)
    p.close()
    out = err.getvalue()
    assert out.count("\r\x1b[K") == 11 and out.endswith("shard: 10.0 MB in 2.5s (4.0 MB/s)\n")
    assert out.count("\n") == 1  # one line, redrawn


def test_long_reads_before_building_say_so(tmp_path):
    up, dst = tmp_path / "up", tmp_path / "dst"
    build_tiny_hy3(up)
    assert cli("mirror", up, "--tp", "3", "--to", dst, "--shard-size", "4MB").exit_code == 0
    f = up / "model-00002-of-00002.safetensors"
    data = bytearray(f.read_bytes())
    data[-10] ^= 0xFF
    f.write_bytes(bytes(data))
    r = cli("mirror", up, "--tp", "3", "--to", dst, "--shard-size", "4MB")
    assert r.exit_code == 0, r.output
    said = r.stderr.splitlines()
    size = sum(p.stat().st_size for p in up.iterdir())
    assert any(line.startswith(f"hashing {up}: {size / 1e6:.1f} MB in ") for line in said), said
    assert any(line.startswith("checking model-00001-of-00005.safetensors: ") for line in said), said
    shutil.rmtree(dst)
