"""A run that was killed (SIGKILL, power loss) leaves scratch behind: the next run sees that its process is gone,
says so, and removes it; a killed local run resumes from the finished, hash-checked shards it left (issue 32).

Each kill is a real SIGKILL of a real hubpad process, sent by the process itself at a chosen point (after its
first finished-shard record, or between the two renames that swap a new build in), so the point is exact.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hubpad.testing import build_tiny_hy3
from hubpad.util.run_lock import RunLock
from tests.helpers import ROOT, cli
from tests.test_local_incremental import F2, SHARD, _mirror, _shards, pristine  # noqa: F401 (pristine: a fixture)
from tests.test_newcomer import scratch as tmpdir_of_runs  # noqa: F401 (a fixture: the temp dir of hubpad's scratch)

# Runs hubpad's CLI, after patching one function to SIGKILL the process at the point a test names.
KILLER = """
import os, signal, sys
point = sys.argv[1]
if point == "record":  # right after the first finished shard's record is written
    from hubpad.publish.local import LocalPublisher
    real = LocalPublisher.record_shard
    def record(self, entry):
        real(self, entry)
        os.kill(os.getpid(), signal.SIGKILL)
    LocalPublisher.record_shard = record
elif point == "swap":  # between the two renames: DST moved aside, the new build not yet in its place
    real_rename = os.rename
    def rename(a, b, *k, **kw):
        real_rename(a, b, *k, **kw)
        if ".hubpad-old-" in os.fspath(b):
            os.kill(os.getpid(), signal.SIGKILL)
    os.rename = rename
elif point == "stage":  # a Hub run, once its first shard is built
    from hubpad.publish.hub import HubPublisher
    def put_shard(self, entry, path):
        os.kill(os.getpid(), signal.SIGKILL)
    HubPublisher.put_shard = put_shard
from hubpad.app.cli import main
main(sys.argv[2:], prog_name="hubpad")
"""


def _killed(point: str, *args, env: dict | None = None) -> tuple[int, str]:
    """Run `hubpad ARGS`, killed with SIGKILL at `point`; returns the dead process's pid and what it said."""
    full = dict(os.environ, PYTHONPATH=str(ROOT))
    full.update(env or {})
    proc = subprocess.Popen([sys.executable, "-c", KILLER, point, *map(str, args)], cwd=ROOT, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, err)
    return proc.pid, err


@pytest.fixture(scope="module")
def reference(pristine, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "ref"
    _mirror(pristine, out)
    return _shards(out)


def _beside(dst: Path) -> list[str]:
    return sorted(p.name for p in dst.parent.iterdir())


def test_a_killed_local_run_resumes_from_its_finished_shards(pristine, reference, tmp_path):
    dst = tmp_path / "dst"
    pid, _ = _killed("record", "mirror", pristine, "--tp", "3", "--to", dst, "--shard-size", SHARD)
    scratch = tmp_path / f".dst.hubpad-tmp-{pid}"
    records = sorted(p.name.removesuffix(".json") for p in (scratch / ".hubpad-staged").glob("*.json"))
    assert records and _beside(dst) == sorted([scratch.name, ".dst.hubpad-lock"])

    summary, said = _mirror(pristine, dst)
    assert f"removed {scratch.name}, left by a run that stopped (process {pid} is gone); its {len(records)} " \
           f"finished shard(s) are reused where their inputs match and their bytes check" in said
    assert summary["shards_reused"] == records
    assert len(summary["shards_built"]) == len(reference) - len(records)
    assert _shards(dst) == reference and _beside(dst) == ["dst"]
    assert not any(p.name.startswith(".hubpad-") for p in dst.iterdir())  # no record or leftover published
    assert cli("verify", pristine, dst).exit_code == 0


def test_a_dry_run_beside_a_killed_run_touches_nothing_and_counts_what_it_left(pristine, tmp_path):
    """A dry run reads what the run would take over (the killed run's finished shards) without taking the lock or
    removing anything: its verdict and disk figure are the run's, and the run after it still resumes."""
    import json

    dst = tmp_path / "dst"
    _killed("record", "mirror", pristine, "--tp", "3", "--to", dst, "--shard-size", SHARD)
    before = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    r = cli("mirror", pristine, "--tp", "3", "--to", dst, "--shard-size", SHARD, "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    verdict = json.loads(r.stdout)
    assert verdict["would_publish"] is True and verdict["disk"]["stops"] is None
    assert sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before
    said = cli("mirror", pristine, "--tp", "3", "--to", dst, "--shard-size", SHARD, "--dry-run").stdout.splitlines()
    assert said[-1] == verdict["disk"]["said"] and said[-2].startswith("dry run: would publish")
    summary, logged = _mirror(pristine, dst)
    assert summary["shards_reused"]  # resumed after all
    run_figure = next(line for line in logged.splitlines() if line.startswith("disk: "))
    assert run_figure.split(",")[0] == verdict["disk"]["said"].split(",")[0]  # the need: the killed run's shards reused


def test_a_shard_the_killed_run_left_that_changed_is_built_again(pristine, reference, tmp_path):
    dst = tmp_path / "dst"
    pid, _ = _killed("record", "mirror", pristine, "--tp", "3", "--to", dst, "--shard-size", SHARD)
    scratch = tmp_path / f".dst.hubpad-tmp-{pid}"
    name = next((scratch / ".hubpad-staged").glob("*.json")).name.removesuffix(".json")
    data = bytearray((scratch / name).read_bytes())
    data[-1] ^= 0xFF
    (scratch / name).write_bytes(bytes(data))
    summary, said = _mirror(pristine, dst)
    assert f"warning: {name}, left by an interrupted run, does not match its record; building it again" in said
    assert name in summary["shards_built"] and _shards(dst) == reference and _beside(dst) == ["dst"]


def test_a_changed_upstream_reuses_nothing_the_killed_run_left(pristine, tmp_path):
    up, dst = tmp_path / "up", tmp_path / "out" / "dst"
    shutil.copytree(pristine, up)
    _killed("record", "mirror", up, "--tp", "3", "--to", dst, "--shard-size", SHARD)
    for f in up.glob("*.safetensors"):  # every upstream file changes: no record matches any more
        data = bytearray(f.read_bytes())
        data[-10] ^= 0xFF
        f.write_bytes(bytes(data))
    summary, _ = _mirror(up, dst)
    assert summary["shards_reused"] == [] and _beside(dst) == ["dst"]
    assert cli("verify", up, dst).exit_code == 0


def test_interrupted_force_updates_do_not_pile_up(pristine, reference, tmp_path):
    """Killed again and again (into a folder hubpad did not make: --force): each run removes what the one before
    left and carries its finished shards on, so there is never more than one build folder, and nothing is lost."""
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "mine.txt").write_text("not hubpad's\n")
    args = ("mirror", pristine, "--tp", "3", "--to", dst, "--shard-size", SHARD, "--force")
    pids = []
    for _ in range(3):
        pid, said = _killed("record", *args)
        if pids:
            assert f"removed .dst.hubpad-tmp-{pids[-1]}, left by a run that stopped (process {pids[-1]} is gone)" \
                   in said
        pids.append(pid)
        assert [n for n in _beside(dst) if ".hubpad-tmp-" in n] == [f".dst.hubpad-tmp-{pid}"]
    summary, said = _mirror(pristine, dst, "--force")
    assert f"removed .dst.hubpad-tmp-{pids[-1]}, left by a run that stopped" in said
    assert len(summary["shards_reused"]) >= 3  # each killed run added at least one finished shard
    assert _shards(dst) == reference and (dst / "mine.txt").read_text() == "not hubpad's\n"
    assert _beside(dst) == ["dst"]


def test_killed_while_swapping_in_the_new_build_puts_the_old_derivative_back(pristine, tmp_path):
    up, dst = tmp_path / "up", tmp_path / "out" / "dst"
    shutil.copytree(pristine, up)
    _mirror(up, dst)
    (dst / "mine.txt").write_text("not hubpad's\n")
    f = up / F2
    data = bytearray(f.read_bytes())
    data[-10] ^= 0xFF
    f.write_bytes(bytes(data))
    pid, _ = _killed("swap", "mirror", up, "--tp", "3", "--to", dst, "--shard-size", SHARD)
    assert not dst.exists() and (dst.parent / f".dst.hubpad-old-{pid}").is_dir()
    assert (dst.parent / f".dst.hubpad-tmp-{pid}" / "mine.txt").is_file()  # carried into the new build
    summary, said = _mirror(up, dst)
    assert f"restored {dst} from .dst.hubpad-old-{pid}: a run stopped while swapping in its new build (process " \
           f"{pid} is gone)" in said
    assert summary["shards_reused"] and summary["shards_built"]  # the old derivative's unchanged shards
    assert (dst / "mine.txt").read_text() == "not hubpad's\n" and _beside(dst) == ["dst"]
    assert cli("verify", up, dst).exit_code == 0


def test_a_running_runs_scratch_is_left_alone(pristine, tmp_path):
    dst = tmp_path / "dst"
    busy = tmp_path / ".dst.hubpad-tmp-1"
    busy.mkdir()
    lock = RunLock(tmp_path / ".dst.hubpad-lock")
    assert lock.acquire()  # a run in progress holds it
    try:
        r = cli("mirror", pristine, "--tp", "3", "--to", dst, "--shard-size", SHARD)
        assert r.exit_code == 1 and "another hubpad run is publishing into it" in r.output
        assert busy.is_dir() and not dst.exists()
    finally:
        lock.release()


def test_a_killed_hub_runs_scratch_folder_is_removed_by_the_next(hub, tmpdir_of_runs, tmp_path):
    from tests.test_hub_mirror import UP, _hubpad_commits, _seed_dir

    _seed_dir(hub, UP, build_tiny_hy3(tmp_path / "up"))
    pid, _ = _killed("stage", "mirror", UP, "--tp", "3", "--shard-size", "4MB", env={"TMPDIR": str(tmpdir_of_runs)})
    (left,) = tmpdir_of_runs.glob("hubpad-*")
    assert any(left.glob("*.safetensors"))
    busy, foreign = tmpdir_of_runs / "hubpad-busy", tmpdir_of_runs / "hubpad-not-ours"
    busy.mkdir()
    foreign.mkdir()
    lock = RunLock(busy / ".hubpad-lock")
    assert lock.acquire()  # another run, alive
    try:
        r = cli("mirror", UP, "--tp", "3", "--shard-size", "4MB")
    finally:
        lock.release()
    assert r.exit_code == 0, r.output
    assert f"removed {left}, the scratch of a run that stopped (process {pid} is gone)" in r.stderr
    assert not left.exists() and busy.is_dir() and foreign.is_dir() and len(_hubpad_commits(hub)) == 1
    assert sorted(p.name for p in tmpdir_of_runs.iterdir()) == ["hubpad-busy", "hubpad-not-ours"]
