"""Seeded random fault sweep of a multi-shard Hub mirror against the emulator.

Each run gets one fault at a random point: a dropped connection mid-body, a 503, a 429 with Retry-After,
Range ignored, a slow link, kill -9 of hubpad (then a re-run), or an upstream push mid-run. Every run must
end with a derivative byte-identical to the fault-free result, exactly one publish commit per upstream
commit, no staging branch left behind, and the manifest pinned to the commit the run started from.

    python -m tests.fault_sweep --runs 30        # prints "faults survived: X/N" and the recovery overhead
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from hubpad.testing import build_tiny_hy3
from tests.hub_emulator import HubEmulator  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
UP, TARGET, TOKEN = "RedHatAI/Tiny-Hy3", "alice/Tiny-Hy3-TP3", "hf_sweep_alice_token_0123456789"
SHARD = "4MB"
KINDS = ["drop", "503", "429", "ignore_range", "slow", "kill9", "upstream_push"]
FILES = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


def _env(emu: HubEmulator, home: Path) -> dict:
    env = dict(os.environ)
    env.update(HF_ENDPOINT=emu.endpoint, HF_TOKEN=TOKEN, HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1",
               HF_HOME=str(home), NO_PROXY="127.0.0.1,localhost", HUBPAD_RESUME_BACKOFF="0.05")
    env.pop("HF_HUB_OFFLINE", None)
    return env


def _mirror_cmd() -> list[str]:
    return [sys.executable, "-m", "hubpad.app.cli", "mirror", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD]


def _shards(emu: HubEmulator) -> dict[str, str]:
    return {p: s for p, s in emu.files(TARGET).items() if p.endswith(".safetensors")}


def reference(src: Path, work: Path) -> dict[str, str]:
    """The fault-free result, from a local mirror (identical bytes to a Hub mirror)."""
    out = work / "reference"
    subprocess.run([sys.executable, "-m", "hubpad.app.cli", "mirror", str(src), "--tp", "3", "--to", str(out),
                    "--shard-size", SHARD], check=True, capture_output=True, cwd=ROOT)
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.glob("*.safetensors")}


def one_run(seed: int, src: Path, changed: Path, refs: dict, work: Path) -> tuple[bool, str, float]:
    """One seeded run; returns (survived, description, seconds)."""
    rng = random.Random(seed)
    kind = rng.choice(KINDS)
    home = work / f"home-{seed}"
    home.mkdir()
    with HubEmulator(work / f"store-{seed}") as emu:
        emu.add_user("alice", TOKEN, role="write")
        first = emu.seed(UP, {p.relative_to(src).as_posix(): p for p in src.rglob("*") if p.is_file()})
        env = _env(emu, home)
        f = rng.choice(FILES)
        size = (src / f).stat().st_size
        what = kind
        if kind == "drop":
            at = rng.randrange(1, size)
            emu.faults.drop(f, after=at, origin="cdn")
            what = f"drop {f} after {at} bytes"
        elif kind in ("503", "429"):
            emu.faults.status(int(kind), f, origin="cdn", times=rng.randint(1, 2))
            what = f"{kind} on {f}"
        elif kind == "ignore_range":
            emu.faults.ignore_range(f, origin="cdn")
            what = f"Range ignored on {f}"
        elif kind == "slow":
            rate = rng.choice([2e6, 5e6, 20e6])
            emu.faults.slow(f, rate, origin="cdn")
            what = f"slow {f} at {rate / 1e6:.0f} MB/s"
        start = time.monotonic()
        if kind in ("kill9", "upstream_push"):
            emu.set_throttle(up_bytes_per_s=8e6, down_bytes_per_s=30e6)
            proc = subprocess.Popen(_mirror_cmd(), env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            delay = rng.uniform(0.3, 2.5)
            time.sleep(delay)
            if kind == "kill9":
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                emu.set_throttle(None, None)
                what = f"kill -9 after {delay:.1f}s, then re-run"
                r = subprocess.run(_mirror_cmd(), env=env, cwd=ROOT, capture_output=True, text=True)
            else:
                emu.seed(UP, {FILES[1]: changed / FILES[1]}, message="upstream push mid-run")
                _, err = proc.communicate()
                emu.set_throttle(None, None)
                r = subprocess.CompletedProcess(proc.args, proc.returncode, "", err)
                what = f"upstream push after {delay:.1f}s"
        else:
            r = subprocess.run(_mirror_cmd(), env=env, cwd=ROOT, capture_output=True, text=True)
        seconds = time.monotonic() - start
        problems = []
        pinned = None
        if r.returncode != 0:
            problems.append(f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}")
        else:
            # The run pins whatever commit the upstream had when it started (a push may land before that).
            pinned = json.loads(emu.file_bytes(TARGET, "hubpad.json"))["upstream"]["commit"]
            expected = refs["original"] if pinned == first else refs["changed"]
            if pinned not in (first, emu.head(UP)):
                problems.append("manifest pinned to an unknown commit")
            elif _shards(emu) != expected:
                problems.append("derivative differs from the fault-free result for its pinned commit")
        publishes = [c for c in emu.commits(TARGET) if c.title.startswith("hubpad: pad")] if emu.repo_exists(TARGET) else []
        if not problems and len(publishes) != 1:
            problems.append(f"{len(publishes)} publish commits")
        if not problems and "hubpad-staging" in emu.branches(TARGET):
            problems.append("staging branch left behind")
        if not problems and kind == "upstream_push":  # the next run catches up with at most one more commit
            r2 = subprocess.run(_mirror_cmd(), env=env, cwd=ROOT, capture_output=True, text=True)
            publishes = [c for c in emu.commits(TARGET) if c.title.startswith("hubpad: pad")]
            want = 2 if pinned == first else 1
            if r2.returncode != 0 or _shards(emu) != refs["changed"] or len(publishes) != want:
                problems.append("re-run after the upstream push did not update cleanly")
        return not problems, what + ("" if not problems else f" -> {'; '.join(problems)}"), seconds


def sweep(runs: int, seed0: int = 0, verbose: bool = True) -> tuple[int, int, float]:
    """Run the sweep; returns (survived, runs, mean seconds of a fault run / fault-free run)."""
    with tempfile.TemporaryDirectory(prefix="hubpad-faults-") as tmp:
        work = Path(tmp)
        src = build_tiny_hy3(work / "up")
        changed = work / "changed"
        import shutil

        shutil.copytree(src, changed)
        data = bytearray((changed / FILES[1]).read_bytes())
        data[-10] ^= 0xFF
        (changed / FILES[1]).write_bytes(bytes(data))
        refs = {"original": reference(src, work / "a"), "changed": reference(changed, work / "b")}
        # fault-free baseline time
        (work / "home-base").mkdir()
        with HubEmulator(work / "store-base") as emu:
            emu.add_user("alice", TOKEN, role="write")
            emu.seed(UP, {p.relative_to(src).as_posix(): p for p in src.rglob("*") if p.is_file()})
            t0 = time.monotonic()
            subprocess.run(_mirror_cmd(), env=_env(emu, work / "home-base"), cwd=ROOT, check=True,
                           capture_output=True)
            base = time.monotonic() - t0
        survived, times = 0, []
        for i in range(runs):
            ok, what, seconds = one_run(seed0 + i, src, changed, refs, work)
            survived += ok
            times.append(seconds)
            if verbose:
                print(f"  run {i + 1:3d} seed {seed0 + i:4d}: {'ok  ' if ok else 'FAIL'} {what} ({seconds:.1f}s)")
        overhead = (sum(times) / len(times)) / base if times else 0.0
    return survived, runs, overhead


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    survived, runs, overhead = sweep(args.runs, args.seed)
    print(f"faults survived: {survived}/{runs}")
    print(f"wall-time of a faulted run (incl. recovery) / fault-free run: {overhead:.2f}x")
    sys.exit(0 if survived == runs else 1)


if __name__ == "__main__":
    main()
