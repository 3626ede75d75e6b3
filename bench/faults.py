"""Fault sweep: N seeded random runs of a multi-shard Hub mirror against the emulator, one fault per run at a random
point, each checked against the fault-free result.

Fault kinds: a connection dropped mid-body, 503, 429 with Retry-After, Range ignored, a slow response (download or
upload), kill -9 of hubpad then a re-run, a concurrent upstream push mid-run, and a corrupted body byte (then a
re-run). The random point is a request index drawn from a fault-free run's request log: the fault is armed when
that many requests have started and hits the next request like the one at that index (same method, origin and
path up to commit ids and upload ids); kill -9 and the push happen when that request starts.

Every run must end with (a) the published shards, config and index byte-identical to the fault-free result for
the upstream commit the run pinned, with the recipe's release tag on them and no staging branch left, (b) exactly
one `hubpad: pad` publish commit on main per upstream commit, and (c) nothing published from unverified bytes: a run that saw a corrupted byte publishes nothing and the re-run
publishes the fault-free bytes. Transient faults (drop, 503, 429, Range ignored, slow) must be survived by ONE
hubpad run; kill -9 and corrupt get one re-run; the push gets one more run, which must update to the new commit.

    python bench/faults.py [-n 30] [--seed 1] [--dir DIR] [--kinds drop,503,...]

Prints one line per run, a table per fault kind, "faults survived: X/N" and the wall-time overhead of recovery
(time of all hubpad runs of the sweep over what the same runs take without faults). Exit code 1 unless all survive.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import HUBPAD, ROOT, Emulator, bench_dir, clean_up, table, write_checkpoint  # noqa: E402

UP, TARGET, SHARD = "RedHatAI/Tiny-Hy3-faults", "alice/Tiny-Hy3-faults-TP3", "4MB"
KINDS = ["drop", "503", "429", "ignore_range", "slow", "kill9", "push", "corrupt"]
TIMEOUT = 180


def _tiny_config() -> tuple[dict, list]:
    from hubpad.testing import TINY_HY3, quant_config, tiny_hy3_tensors

    cfg = dict(TINY_HY3, num_experts=12, num_hidden_layers=3)
    cfg["quantization_config"] = quant_config(cfg["num_hidden_layers"])
    return cfg, tiny_hy3_tensors(cfg)


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _pattern(path: str) -> str:
    """A regex for a logged path, general over commit shas (40 hex) and upload ids (32+ hex)."""
    return "^" + re.sub(r"[0-9a-f]{32,64}", "[0-9a-f]+", re.escape(path)) + "$"


@dataclass
class Result:
    i: int
    kind: str
    detail: str
    ok: bool = False
    why: str = ""
    runs: list = field(default_factory=list)  # (exit code, seconds) per hubpad invocation
    fired: bool = False

    @property
    def seconds(self) -> float:
        return sum(s for _, s in self.runs)


class Sweep:
    def __init__(self, work: Path, *, verbose: bool = True) -> None:
        self.work, self.verbose = work, verbose
        self.emu = Emulator(work / "emulator", client=False)
        self.hub = self.emu.hub
        for server in (self.hub._api, self.hub._cdn):  # a killed client resets its connections: not news here
            server.handle_error = lambda request, client_address: None
        self.env = dict(self.emu.env, HUBPAD_RESUME_BACKOFF="0.05")
        cfg, tensors = _tiny_config()
        extra = {"README.md": "---\nlicense: apache-2.0\n---\n# Tiny Hy3 (fault sweep)\n"}
        self.v1 = write_checkpoint(work / "up-v1", cfg, tensors, 3, seed=1, extra_files=extra)
        self.v2 = work / "up-v2"  # the concurrent push: tensor bytes of shard 2 change
        shutil.rmtree(self.v2, ignore_errors=True)
        shutil.copytree(self.v1, self.v2)
        f2 = self.v2 / "model-00002-of-00003.safetensors"
        data = bytearray(f2.read_bytes())
        for k in range(len(data) - 5000, len(data) - 4000):
            data[k] ^= 0x11
        f2.write_bytes(bytes(data))
        self.ref = {"v1": self._reference(self.v1), "v2": self._reference(self.v2)}
        self._hook = None
        log = self.hub.log
        original_begin = log.begin

        def begin(entry):
            original_begin(entry)
            hook = self._hook
            if hook is not None:
                hook(len(log._entries), entry)

        log.begin = begin

    def close(self) -> None:
        self.emu.stop()

    # ---------------------------------------------------------------------------------------------------- helpers

    def _reference(self, src: Path) -> dict:
        out = self.work / f"ref-{src.name}"
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([*HUBPAD, "mirror", src, "--tp", "3", "--to", out, "--shard-size", SHARD], cwd=ROOT,
                       check=True, capture_output=True)
        ref = {p.name: _sha(p) for p in out.glob("*.safetensors")}
        for name in ("config.json", "model.safetensors.index.json"):
            ref[name] = _sha(out / name)
        shutil.rmtree(out)
        return ref

    def _reset(self) -> str:
        for repo in (UP, TARGET):
            if self.hub.repo_exists(repo):
                self.hub.store.delete_repo("model", repo)
        self.hub.faults.clear()
        self.hub.set_throttle(None, None)
        commit = self.emu.seed_dir(UP, self.v1)
        self.hub.reset_log()
        return commit

    def _mirror(self, on_start=None) -> tuple[int, float, str]:
        t0 = time.perf_counter()
        proc = subprocess.Popen([*HUBPAD, "mirror", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD],
                                cwd=ROOT, env={**os.environ, **self.env}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        if on_start:
            on_start(proc)
        try:
            out, _ = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            out += "\n[timed out]"
        return proc.returncode, time.perf_counter() - t0, out

    def _state(self, version: str, commit: str, publishes: int) -> str:
        """'' when main holds the fault-free result of `version` published by exactly `publishes` commits."""
        if not self.hub.repo_exists(TARGET):
            return "no target repo"
        files = self.hub.files(TARGET)
        ref = self.ref[version]
        got = {p: sha for p, sha in files.items() if p.endswith(".safetensors") or p in ref}
        if got != ref:
            bad = sorted(k for k in set(got) | set(ref) if got.get(k) != ref.get(k))
            return f"{version}: files differ from the fault-free result: {bad[:4]}"
        n = sum(1 for c in self.hub.commits(TARGET) if c.title.startswith("hubpad: pad"))
        if n != publishes:
            return f"{n} publish commits on main, expected {publishes}"
        manifest = json.loads(self.hub.file_bytes(TARGET, "hubpad.json"))
        if manifest["upstream"]["commit"] != commit:
            return "hubpad.json records another upstream commit"
        tag = f"hubpad-tp3-{commit[:12]}"  # what the recipe pins: it must exist, on the published weights
        tags = self.hub.repo(TARGET).tags
        if tag not in tags:
            return f"the recipe's tag {tag} does not exist"
        if {p: s for p, s in self.hub.files(TARGET, tags[tag]).items() if p.endswith(".safetensors")} != \
                {p: s for p, s in ref.items() if p.endswith(".safetensors")}:
            return f"tag {tag} does not point at the published shards"
        if "hubpad-staging" in self.hub.branches(TARGET):
            return "the staging branch was left behind"
        return ""

    def _publishes(self) -> int:
        if not self.hub.repo_exists(TARGET):
            return 0
        return sum(1 for c in self.hub.commits(TARGET) if c.title.startswith("hubpad: pad"))

    # ---------------------------------------------------------------------------------------------------- runs

    def baseline(self, runs: int = 3) -> float:
        times = []
        for _ in range(runs):
            c1 = self._reset()
            rc, secs, out = self._mirror()
            if rc != 0 or self._state("v1", c1, 1):
                raise SystemExit(f"the fault-free run failed: {self._state('v1', c1, 1)}\n{out[-3000:]}")
            times.append(secs)
            self.log = [e for e in self.hub.requests]
        self.base = statistics.median(times)
        return self.base

    def run(self, i: int, kind: str, rng: random.Random) -> Result:
        c1 = self._reset()
        log = self.log
        bodies = [k for k, e in enumerate(log) if e.kind == "cdn" and e.method == "GET" and e.bytes_sent > 0]
        uploads = [k for k, e in enumerate(log) if e.kind in ("lfs-upload", "lfs-part") and e.bytes_received > 0]
        if kind in ("drop", "corrupt", "ignore_range"):
            k = rng.choice(bodies)
        elif kind == "slow":
            k = rng.choice(bodies + uploads)
        else:
            k = rng.randrange(1, len(log))
        target = log[k]
        regex = _pattern(target.path)
        body = max(target.bytes_sent, target.bytes_received, 1)
        fault_args: dict = {}
        if kind == "drop":
            fault_args = dict(kind="drop", after=rng.randrange(body))
            detail = f"drop after {fault_args['after']} B of {target.path.rsplit('/', 1)[-1]}"
        elif kind == "corrupt":
            fault_args = dict(kind="corrupt", at=rng.randrange(body))
            detail = f"corrupt byte {fault_args['at']} of {target.path.rsplit('/', 1)[-1]}"
        elif kind == "ignore_range":
            fault_args = dict(kind="ignore_range")
            detail = f"Range ignored on {target.path.rsplit('/', 1)[-1]}"
        elif kind == "slow":
            rate = rng.choice([2e6, 5e6, 10e6])
            fault_args = dict(kind="slow", bytes_per_s=rate)
            detail = f"{target.method} {target.kind} at {rate / 1e6:.0f} MB/s"
        elif kind in ("503", "429"):
            fault_args = dict(kind="status", code=int(kind), retry_after=1 if kind == "429" else None)
            detail = f"{kind} on {target.method} {target.kind or target.path}"
        elif kind == "kill9":
            detail = f"kill -9 at request {k}/{len(log)} ({target.method} {target.kind})"
        else:
            detail = f"upstream push at request {k}/{len(log)} ({target.method} {target.kind})"
        res = Result(i, kind, detail)
        proc_box: dict = {}
        armed = threading.Event()

        def hook(count, entry):
            if count < k or armed.is_set():
                return
            armed.set()
            if kind == "kill9":
                p = proc_box.get("proc")
                if p is not None and p.poll() is None:
                    os.kill(p.pid, signal.SIGKILL)
                    res.fired = True
            elif kind == "push":
                def push():
                    proc_box["c2"] = self.hub.seed(UP, {"model-00002-of-00003.safetensors":
                                                        self.v2 / "model-00002-of-00003.safetensors"},
                                                   message="concurrent push")
                    res.fired = True
                threading.Thread(target=push, daemon=True).start()
            else:
                args = dict(fault_args)
                fk = args.pop("kind")
                if fk == "status":
                    proc_box["fault"] = self.hub.faults.status(args["code"], regex, method=target.method,
                                                               origin=target.origin, retry_after=args["retry_after"])
                else:
                    proc_box["fault"] = self.hub.faults.add(fk, regex, method=target.method, origin=target.origin,
                                                            **args)

        self._hook = hook
        try:
            rc, secs, out = self._mirror(on_start=lambda p: proc_box.__setitem__("proc", p))
        finally:
            self._hook = None
        res.runs.append((rc, secs))
        if "fault" in proc_box:
            res.fired = proc_box["fault"].fired > 0
        self.hub.faults.clear()
        if kind in ("drop", "503", "429", "ignore_range", "slow"):
            res.why = f"hubpad exited {rc}: {out.strip().splitlines()[-1] if out.strip() else ''}" if rc else \
                self._state("v1", c1, 1)
        elif kind == "kill9":
            rc2, secs2, out2 = self._mirror()
            res.runs.append((rc2, secs2))
            res.why = f"re-run exited {rc2}: {out2.strip().splitlines()[-1]}" if rc2 else self._state("v1", c1, 1)
        elif kind == "corrupt":
            if rc == 0:  # the byte hit something no output is made from (a header window's tensor bytes)
                res.why = self._state("v1", c1, 1)
            elif self._publishes():
                res.why = "the failed run published a commit"
            else:
                rc2, secs2, out2 = self._mirror() if rc != 0 else (0, 0.0, "")
                if rc != 0:
                    res.runs.append((rc2, secs2))
                res.why = (f"re-run exited {rc2}: {out2.strip().splitlines()[-1]}" if rc2
                           else self._state("v1", c1, 1))
        else:  # push: the pinned commit first, then a re-run updates
            deadline = time.time() + 10
            while "c2" not in proc_box and res.fired is False and time.time() < deadline and armed.is_set():
                time.sleep(0.01)
            if rc != 0:
                res.why = f"hubpad exited {rc}: {out.strip().splitlines()[-1]}"
            else:
                res.why = self._state("v1", c1, 1)
                if not res.why:
                    c2 = proc_box.get("c2")
                    rc2, secs2, out2 = self._mirror()
                    res.runs.append((rc2, secs2))
                    if rc2:
                        res.why = f"update run exited {rc2}: {out2.strip().splitlines()[-1]}"
                    elif c2:
                        res.why = self._state("v2", c2, 2)
                    else:
                        res.why = self._state("v1", c1, 1)
        res.ok = not res.why
        return res


def sweep(n: int, seed: int, work: Path, kinds: list[str] | None = None,
          verbose: bool = True) -> tuple[list[Result], float]:
    """Run the sweep; returns the results and the fault-free run's seconds."""
    kinds = kinds or KINDS
    s = Sweep(work, verbose=verbose)
    try:
        base = s.baseline()
        if verbose:
            print(f"fault-free run: {base:.2f}s, {len(s.log)} requests; references for 2 upstream commits ready",
                  flush=True)
        rng = random.Random(seed)
        plan = [kinds[i % len(kinds)] for i in range(n)]  # every kind about equally often, in random order
        rng.shuffle(plan)
        results = []
        for i, kind in enumerate(plan, 1):
            r = s.run(i, kind, random.Random(f"{seed}-{i}"))
            results.append(r)
            if verbose:
                runs = " + ".join(f"{secs:.1f}s" + (f" (exit {rc})" if rc else "") for rc, secs in r.runs)
                print(f"{i:3d} {'ok  ' if r.ok else 'FAIL'} {kind:12s} {r.detail:60s} {runs}"
                      + ("" if r.fired else " [fault did not fire]") + (f"\n      {r.why}" if r.why else ""),
                      flush=True)
        return results, base
    finally:
        s.close()


def report(results: list[Result], base: float) -> tuple[int, float]:
    rows = []
    for kind in KINDS:
        rs = [r for r in results if r.kind == kind]
        if not rs:
            continue
        rows.append([kind, len(rs), sum(r.ok for r in rs), sum(r.fired for r in rs),
                     f"{statistics.mean(r.seconds for r in rs):.1f}"])
    survived = sum(r.ok for r in results)
    # Work a fault-free sweep would do: one run each, two for a push (its update run is not recovery).
    expected = base * sum(2 if r.kind == "push" else 1 for r in results)
    total = sum(r.seconds for r in results)
    overhead = total / expected - 1
    print()
    print(table(["fault", "runs", "survived", "fault fired", "mean seconds (all hubpad runs)"], rows))
    print()
    print(f"faults survived: {survived}/{len(results)}")
    print(f"recovery overhead: {total:.1f}s of hubpad runs vs {expected:.1f}s fault-free ({overhead:+.0%}); "
          f"fault-free run {base:.2f}s")
    return survived, overhead


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--kinds", default=",".join(KINDS))
    args = ap.parse_args()
    work, temp = bench_dir(args.dir, "faults")
    try:
        results, base = sweep(args.n, args.seed, work, args.kinds.split(","))
        survived, _ = report(results, base)
        sys.exit(0 if survived == len(results) else 1)
    finally:
        clean_up(work, temp, args.keep)


if __name__ == "__main__":
    main()
