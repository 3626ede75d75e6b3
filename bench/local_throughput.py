"""Local padding throughput: `hubpad mirror SRC --tp 3 --to DST` against `cp` and `sha256sum` of the same files.

A synthetic Hy3-shaped checkpoint in RedHatAI's layout (FP8-block attention, NVFP4 dense MLP and experts, BF16
MTP layer; most bytes untouched expert tensors) with >= 2 GB per upstream shard. Same disk, same run; every
measured command starts right after a warm-up read of its inputs (the page cache cannot be dropped here), and
writes its own output once. hubpad fsyncs each shard it writes, so the cp figure used for the bar is
`cp` + `sync` of the copies (plain `cp`, which leaves dirty pages behind, is reported too).

Bar: hubpad <= 1.25 x max(cp, sha256sum). Also reported: the plain ratio to cp, and the ratio to
`openssl dgst -sha256` (which, unlike this machine's coreutils sha256sum, uses the CPU's SHA extensions).

    python bench/local_throughput.py [--dir DIR] [--layers 10 --experts 32] [--rounds 1] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

from _common import Run, bench_dir, cached_checkpoint, finish, gb, hubpad, hy3_config, shard_files, table, warm


def timed_shell(script: str) -> float:
    r = Run(["bash", "-c", script])
    r.check(script)
    return r.seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="data folder (default: a temp dir under $TMPDIR, removed at the end)")
    ap.add_argument("--layers", type=int, default=10)
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1, help="repeat every measurement; the median is reported")
    ap.add_argument("--keep", action="store_true", help="keep the generated checkpoint for the next run")
    ap.add_argument("--bar", type=float, default=1.25)
    args = ap.parse_args()

    work, temp = bench_dir(args.dir, "throughput")
    try:
        cfg = hy3_config(args.layers, args.experts)
        t0 = time.perf_counter()
        src = cached_checkpoint(work / "Hy3-synthetic", cfg, args.shards)
        files = shard_files(src)
        sizes = [f.stat().st_size for f in files]
        total = sum(sizes)
        print(f"checkpoint: {len(files)} shards, {gb(total)} ({', '.join(gb(s) for s in sizes)}), "
              f"ready in {time.perf_counter() - t0:.1f}s", flush=True)
        if min(sizes) < 2e9:
            print("warning: an upstream shard is under 2 GB; raise --layers/--experts", file=sys.stderr)
        names = " ".join(f"'{f}'" for f in files)
        cp_dst, out = work / "cp-copy", work / "Hy3-synthetic-TP3"
        shard_size = str(max(sizes))
        t = {k: [] for k in ("cp", "cp+sync", "sha256sum", "openssl", "hubpad")}
        for _ in range(args.rounds):
            for d in (cp_dst, out):
                shutil.rmtree(d, ignore_errors=True)
            cp_dst.mkdir()
            warm(files)
            t["cp"].append(timed_shell(f"cp {names} '{cp_dst}/'"))
            sync_s = timed_shell(f"sync '{cp_dst}'/*")
            t["cp+sync"].append(t["cp"][-1] + sync_s)
            shutil.rmtree(cp_dst)
            timed_shell("sync")
            warm(files)
            t["sha256sum"].append(timed_shell(f"sha256sum {names} > /dev/null"))
            warm(files)
            t["openssl"].append(timed_shell(f"openssl dgst -sha256 {names} > /dev/null"))
            warm(files)
            r = hubpad("mirror", src, "--tp", "3", "--to", out, "--shard-size", shard_size).check("hubpad mirror")
            t["hubpad"].append(r.seconds)
            print(f"  round: " + ", ".join(f"{k} {v[-1]:.1f}s" for k, v in t.items()), flush=True)
        med = {k: statistics.median(v) for k, v in t.items()}
        out_total = sum(f.stat().st_size for f in shard_files(out))
        ref = max(med["cp+sync"], med["sha256sum"])
        rows = [
            ["cp (no sync)", f"{med['cp']:.1f}", f"{total / med['cp'] / 1e6:.0f}", f"{med['hubpad'] / med['cp']:.2f}"],
            ["cp + sync", f"{med['cp+sync']:.1f}", f"{total / med['cp+sync'] / 1e6:.0f}",
             f"{med['hubpad'] / med['cp+sync']:.2f}"],
            ["sha256sum", f"{med['sha256sum']:.1f}", f"{total / med['sha256sum'] / 1e6:.0f}",
             f"{med['hubpad'] / med['sha256sum']:.2f}"],
            ["openssl dgst -sha256", f"{med['openssl']:.1f}", f"{total / med['openssl'] / 1e6:.0f}",
             f"{med['hubpad'] / med['openssl']:.2f}"],
            ["**hubpad mirror --tp 3**", f"{med['hubpad']:.1f}", f"{total / med['hubpad'] / 1e6:.0f}", "1.00"],
        ]
        print()
        print(f"{gb(total)} in, {gb(out_total)} out ({len(files)} upstream shards); median of {args.rounds} round(s)")
        print(table(["command", "seconds", "MB/s (input)", "hubpad / this"], rows))
        print()
        ratio = med["hubpad"] / ref
        print(f"hubpad / max(cp+sync, sha256sum) = {ratio:.2f} (bar <= {args.bar}); hubpad / cp = "
              f"{med['hubpad'] / med['cp']:.2f} (cp+sync: {med['hubpad'] / med['cp+sync']:.2f})")
        finish([(f"hubpad <= {args.bar} x max(cp+sync, sha256sum): {ratio:.2f}", ratio <= args.bar)])
    finally:
        shutil.rmtree(work / "cp-copy", ignore_errors=True)
        shutil.rmtree(work / "Hy3-synthetic-TP3", ignore_errors=True)
        if temp and not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
