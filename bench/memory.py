"""Peak memory of `hubpad mirror` for 0.5 GB and 4 GB upstream shards, next to the naive way
(safetensors `load_file`, pad with torch, `save_file`) on the same input.

Max RSS is the child's own (GNU time's wait4 on it), so it counts the interpreter, imports and every buffer.
The naive way hashes nothing and leaves its output in dirty pages; the `sync` right after it is shown apart
(hubpad hashes every byte in and out and fsyncs each shard before it counts as written).
Bars: hubpad <= 256 MB at both sizes, and flat: the 4 GB run within 10 % of the 0.5 GB run.

    python bench/memory.py [--dir DIR] [--keep] [--skip-naive]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from _common import (
    bench_dir,
    cached_checkpoint,
    clean_up,
    finish,
    gb,
    hubpad,
    hy3_config,
    mb,
    ROOT,
    Run,
    shard_files,
    table,
    warm,
)

CASES = {"0.5 GB": (2, 6), "4 GB": (15, 34)}  # (layers, experts) giving two upstream shards of about that size


def same_tensors(a: Path, b: Path, names: list[str]) -> bool:
    """The naive result and hubpad's hold byte-identical tensors (checked for `names`)."""
    from safetensors import safe_open

    def index(d: Path) -> dict:
        import json

        return json.loads((d / "model.safetensors.index.json").read_text())["weight_map"]

    ia, ib = index(a), index(b)
    for n in names:
        with safe_open(a / ia[n], "pt") as fa, safe_open(b / ib[n], "pt") as fb:
            x, y = fa.get_tensor(n), fb.get_tensor(n)
            import torch

            if x.shape != y.shape or not torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)):
                print(f"mismatch: {n}", file=sys.stderr)
                return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--skip-naive", action="store_true", help="only measure hubpad")
    ap.add_argument("--limit-mb", type=float, default=256)
    args = ap.parse_args()
    work, temp = bench_dir(args.dir, "memory")
    rows, res = [], {}
    try:
        for label, (layers, experts) in CASES.items():
            src = cached_checkpoint(work / f"Hy3-{label.replace(' ', '')}", hy3_config(layers, experts), 2)
            files = shard_files(src)
            total = sum(f.stat().st_size for f in files)
            shard = max(f.stat().st_size for f in files)
            out = work / "out-hubpad"
            shutil.rmtree(out, ignore_errors=True)
            warm(files)
            r = hubpad("mirror", src, "--tp", "3", "--to", out, "--shard-size", str(shard)).check("hubpad mirror")
            res[label] = r
            row = [label, gb(shard), gb(total), "hubpad mirror", f"{r.seconds:.1f}", mb(r.max_rss)]
            rows.append(row)
            print(" | ".join(row), flush=True)
            if not args.skip_naive:
                naive = work / "out-naive"
                shutil.rmtree(naive, ignore_errors=True)
                warm(files)
                n = Run([sys.executable, ROOT / "bench" / "naive_pad.py", src, naive, "--tp", "3"]).check("naive pad")
                flush = Run(["sync"]).seconds  # hubpad fsyncs what it writes; the naive run leaves dirty pages
                row = [label, gb(shard), gb(total), "load_file + torch pad + save_file",
                       f"{n.seconds:.1f} (+{flush:.1f} sync)", mb(n.max_rss)]
                rows.append(row)
                print(" | ".join(row), flush=True)
                if label == "0.5 GB":  # same tensors either way (padded ones, plus a few copied)
                    from hubpad.plan.planner import make_plan
                    from hubpad.source.local import LocalSource

                    plan = make_plan(LocalSource(src), 3)
                    names = [t.name for t in plan.tensors if t.padded] + [t.name for t in plan.tensors[:5]]
                    if not same_tensors(out, naive, names):
                        raise SystemExit("the naive result and hubpad's differ")
                shutil.rmtree(naive, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
        print()
        print(table(["upstream shard", "shard size", "checkpoint", "method", "seconds", "max RSS"], rows))
        print()
        small, big = res["0.5 GB"].max_rss, res["4 GB"].max_rss
        growth = big / small - 1
        print(f"hubpad max RSS: {mb(small)} (0.5 GB shards) -> {mb(big)} (4 GB shards): {growth:+.1%}")
        finish([(f"hubpad max RSS <= {args.limit_mb:.0f} MB: {mb(max(small, big))}", max(small, big) <= args.limit_mb * 1e6),
                (f"flat: 4 GB run within 10% of the 0.5 GB run: {growth:+.1%}", abs(growth) <= 0.10)])
    finally:
        clean_up(work, temp, args.keep, work / "out-hubpad", work / "out-naive")


if __name__ == "__main__":
    main()
