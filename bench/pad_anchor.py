"""Local padding against an honest anchor: a durable copy plus one hardware-speed SHA-256 pass of the same bytes.

A synthetic Hy3-shaped checkpoint in RedHatAI's layout (FP8-block attention, NVFP4 dense MLP and experts, BF16 MTP
layer), >= 2 GB, most of its bytes untouched expert tensors as in the real model. Every measured command starts
right after a warm-up read of its inputs (the page cache cannot be dropped here) and writes its own output once.
Rounds are interleaved and the best of each command is kept (the machine is shared; single timings are noisy).

- `cp` + `sync`: a copy of the shards, made durable (hubpad fsyncs the shards it publishes locally);
- `openssl dgst -sha256`: one pass at hardware speed (SHA extensions). coreutils' sha256sum does not use them
  on this machine and is not an anchor;
- `hubpad mirror SRC --tp 3 --to DST`: reads and hashes every input byte, pads, writes, hashes every output byte.

Bar: hubpad <= 1.0 x (cp + sync + openssl). Also reported: hubpad / (cp + sync).

    python bench/pad_anchor.py [--dir DIR] [--layers 4 --experts 32] [--rounds 3] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time

from _common import (
    Run,
    bench_dir,
    cached_checkpoint,
    clean_up,
    finish,
    gb,
    hubpad,
    hy3_config,
    shard_files,
    table,
    warm,
)


def timed_shell(script: str) -> Run:
    return Run(["bash", "-c", script]).check(script)


def cpu(r: Run) -> float:
    return r.user + r.sys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="data folder (default: a temp dir under $TMPDIR, removed at the end)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--bar", type=float, default=1.0)
    args = ap.parse_args()
    work, temp = bench_dir(args.dir, "pad-anchor")
    cp_dst, out = work / "cp-copy", work / "Hy3-synthetic-TP3"
    try:
        t0 = time.perf_counter()
        src = cached_checkpoint(work / "Hy3-synthetic", hy3_config(args.layers, args.experts), args.shards)
        files = shard_files(src)
        total = sum(f.stat().st_size for f in files)
        print(f"checkpoint: {len(files)} shards, {gb(total)}, ready in {time.perf_counter() - t0:.1f}s", flush=True)
        if total < 2e9:
            print("warning: the checkpoint is under 2 GB; raise --layers/--experts", file=sys.stderr)
        names = " ".join(f"'{f}'" for f in files)
        t: dict[str, list[Run]] = {k: [] for k in ("cp+sync", "openssl", "hubpad")}
        for _ in range(args.rounds):
            for d in (cp_dst, out):
                shutil.rmtree(d, ignore_errors=True)
            timed_shell("sync")
            cp_dst.mkdir()
            warm(files)
            t["cp+sync"].append(timed_shell(f"cp {names} '{cp_dst}/' && sync '{cp_dst}'/*"))
            shutil.rmtree(cp_dst)
            timed_shell("sync")
            warm(files)
            t["openssl"].append(timed_shell(f"openssl dgst -sha256 {names} > /dev/null"))
            warm(files)
            r = hubpad("mirror", src, "--tp", "3", "--to", out, "--shard-size", str(max(f.stat().st_size for f in files)))
            t["hubpad"].append(r.check("hubpad mirror"))
            print("  round: " + ", ".join(f"{k} {v[-1].seconds:.2f}s ({cpu(v[-1]):.2f}s CPU)" for k, v in t.items()),
                  flush=True)
        best = {k: min(r.seconds for r in v) for k, v in t.items()}
        best_cpu = {k: min(cpu(r) for r in v) for k, v in t.items()}
        anchor, anchor_cpu = best["cp+sync"] + best["openssl"], best_cpu["cp+sync"] + best_cpu["openssl"]
        rows = [[k, f"{v:.2f}", f"{best_cpu[k]:.2f}", f"{total / v / 1e6:.0f}", f"{best['hubpad'] / v:.2f}"]
                for k, v in best.items()]
        rows.insert(2, ["cp + sync + openssl", f"{anchor:.2f}", f"{anchor_cpu:.2f}", f"{total / anchor / 1e6:.0f}",
                        f"{best['hubpad'] / anchor:.2f}"])
        print()
        print(f"{gb(total)} in; best of {args.rounds} interleaved round(s); CPU = user + sys, best of the rounds")
        print(table(["command", "seconds", "CPU s", "MB/s (input)", "hubpad / this"], rows))
        print()
        ratio = best["hubpad"] / anchor
        print(f"hubpad / (cp + sync) = {best['hubpad'] / best['cp+sync']:.2f}; "
              f"CPU: hubpad / (cp + sync + openssl) = {best_cpu['hubpad'] / anchor_cpu:.2f}")
        finish([(f"hubpad <= {args.bar} x (cp + sync + openssl): {ratio:.2f}", ratio <= args.bar)])
    finally:
        clean_up(work, temp, args.keep, cp_dst, out)


if __name__ == "__main__":
    main()
