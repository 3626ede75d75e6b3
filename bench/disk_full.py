"""Issue 32's full disk at its scale, many times in a row: a ~1.1 GB BF16 checkpoint padded by a real `hubpad mirror
--tp 3` process onto a small tmpfs that another writer fills while hubpad writes.

The tmpfs has room for the whole derivative when hubpad checks it (a disk that is too small is refused before the
first byte, so the run must start); once hubpad has put F bytes on it, hubpad is stopped, a second writer takes
all that is left (fallocate), and hubpad goes on until one of its writes fails with ENOSPC. F moves evenly over the
run's output from run to run (the first buffers, the middle of a shard, its end), so the failure meets the staging
buffers in every state. Before the fix of issue 32, 6 of 9 such runs hung.

Each run must exit 1 within --timeout seconds with one `error:` line that names a path on the disk and ENOSPC, no
traceback, and leave nothing on the disk but the filler. `--hub`: the same for the Hub path's work directory (the
upstream in the Hub emulator, `--workdir` on the tmpfs, `--shard-size 200MB` so shards are uploaded and deleted
while the next are written), and nothing is published. Needs root (or passwordless sudo) to mount the tmpfs.

    python bench/disk_full.py [--runs 20] [--gb 1.1] [--hub] [--dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from _common import Emulator, bench_dir, bf16_checkpoint, clean_up, finish, gb, hubpad, mb, shard_files, table

UP, TARGET, HUB_SHARD = "meta-bench/Llama-bf16", "alice/Llama-bf16-TP3", 200 * 10**6


class Filler:
    """Polls the disk; once `used` has grown by `at` bytes, stops hubpad (SIGSTOP: filling takes longer than hubpad
    needs to write the rest), takes every free byte left with one fallocate'd file, and lets hubpad go on."""

    def __init__(self, disk: Path, at: int) -> None:
        self.disk, self.at, self.filled_at = disk, at, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        base = shutil.disk_usage(self.disk).used
        while not self._stop.is_set():
            usage = shutil.disk_usage(self.disk)
            if usage.used - base >= self.at:
                stopped = signal_hubpad(self.disk, signal.SIGSTOP)
                fd = os.open(self.disk / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    take(fd)
                finally:
                    os.close(fd)
                    for pid in stopped:
                        os.kill(pid, signal.SIGCONT)
                self.filled_at = usage.used - base
                return
            time.sleep(0.001)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def signal_hubpad(disk: Path, sig: int) -> list[int]:
    """Send `sig` to the hubpad process writing to `disk` (and the `time` that wraps it); their pids."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and b"hubpad.app.cli" in argv and any(str(disk).encode() in a for a in argv):
            try:
                os.kill(int(proc.name), sig)
                pids.append(int(proc.name))
            except ProcessLookupError:
                pass
    return pids


def take(fd: int) -> None:
    """Allocate every free byte to `fd`: 64 MiB extents, then smaller ones (hubpad writes meanwhile) down to a page."""
    pos, step = 0, 64 * 1024 * 1024
    while step >= 4096:
        try:
            os.posix_fallocate(fd, pos, step)
            pos += step
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            step //= 2


def mount(where: Path, size: int) -> None:
    where.mkdir(parents=True, exist_ok=True)
    root = [] if os.geteuid() == 0 else ["sudo", "-n"]
    subprocess.run([*root, "mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "hubpad-bench", str(where)],
                   check=True)


def umount(where: Path) -> None:
    root = [] if os.geteuid() == 0 else ["sudo", "-n"]
    subprocess.run([*root, "umount", "-l", str(where)], check=False)


def one_run(cmd: list, env: dict | None, disk: Path, at: int, timeout: float, hub: bool) -> dict:
    """One hubpad run with the disk filled at `at` bytes: what happened, and what is wrong with it (`problems`)."""
    filler = Filler(disk, at)
    try:
        r = hubpad(*cmd, env=env, timeout=timeout)
    finally:
        filler.stop()
    problems = []
    if r.seconds >= timeout:
        problems.append(f"hung: killed after {timeout:.0f} s")
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    if r.rc != 1:
        problems.append(f"exit code {r.rc}")
    if len(errors) != 1 or r.stderr.splitlines()[-1:] != errors:
        problems.append(f"{len(errors)} error line(s), not one and last")
    elif not (errors[0].startswith(f"error: {disk}/") and "No space left on device (ENOSPC)" in errors[0]):
        problems.append(f"the error line: {errors[0]}")
    if "Traceback" in r.stdout + r.stderr:
        problems.append("a traceback")
    left = sorted(p.relative_to(disk).as_posix() for p in disk.rglob("*")
                  if p.name != "filler" and not (hub and p.is_dir()))  # --workdir is the user's: its files must go
    if left:
        problems.append(f"left on the disk: {left[:4]}")
    if filler.filled_at is None:
        problems.append("the disk was never filled (the run ended first)")
    return {"seconds": r.seconds, "filled_at": filler.filled_at, "problems": problems,
            "error": errors[-1] if errors else r.stderr[-300:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="data folder (default: a temp dir under $TMPDIR, removed at the end)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--gb", type=float, default=1.1)
    ap.add_argument("--hub", action="store_true", help="the Hub path's work directory on the full disk")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds after which a run counts as hung")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work, temp = bench_dir(args.dir, "disk-full")
    src = bf16_checkpoint(work / "Llama-bf16-synthetic", args.gb)
    total = sum(f.stat().st_size for f in shard_files(src))
    disk = work / "small-disk"
    emu = Emulator(work / "emulator", client=False) if args.hub else None
    try:
        if emu:
            emu.seed_dir(UP, src)
            cmd = ["mirror", UP, "--tp", "3", "--to", TARGET, "--shard-size", str(HUB_SHARD), "--workdir",
                   disk / "work"]
            span = int(1.5 * HUB_SHARD)  # the work directory holds one or two shards at a time
        else:
            cmd = ["mirror", src, "--tp", "3", "--to", disk / "out"]
            span = int(total * 1.05)  # the padded derivative is a few % larger than its upstream
        print(f"checkpoint: {gb(total)}; {args.runs} runs, the disk filled after {mb(span / args.runs / 2)} .. "
              f"{mb(span * (1 - 1 / args.runs / 2))} of hubpad's writes; {'Hub work directory' if emu else 'local DST'}",
              flush=True)
        results = []
        for i in range(args.runs):
            at = int(span * (i + 0.5) / args.runs)
            mount(disk, int(1.25 * total))
            try:
                res = one_run(cmd, emu.env if emu else None, disk, at, args.timeout, emu is not None)
            finally:
                umount(disk)
            if emu and emu.hub.repo_exists(TARGET):
                if any(c.title.startswith("hubpad: pad") for c in emu.hub.commits(TARGET)):
                    res["problems"].append("published")
                emu.hub.store.delete_repo("model", TARGET)
            results.append(res)
            verdict = "ok" if not res["problems"] else "FAIL: " + "; ".join(res["problems"])
            filled = mb(res["filled_at"]) if res["filled_at"] is not None else "-"
            print(f"  run {i + 1}: filled at {filled}, exit after {res['seconds']:.2f} s: {verdict}", flush=True)
        ok = [r for r in results if not r["problems"]]
        secs = sorted(r["seconds"] for r in results)
        print()
        print(table(["runs", "passed", "fastest s", "median s", "slowest s", "load average"],
                    [[len(results), len(ok), f"{secs[0]:.2f}", f"{secs[len(secs) // 2]:.2f}", f"{secs[-1]:.2f}",
                      f"{os.getloadavg()[0]:.1f}"]]))
        print(f"an error line: {results[-1]['error']}")
        finish([(f"every run ended in one ENOSPC line, nothing left: {len(ok)}/{len(results)}",
                 len(ok) == len(results))])
    finally:
        if emu:
            emu.stop()
        clean_up(work, temp, args.keep)


if __name__ == "__main__":
    main()
