"""Hub mirror through the emulator over a throttled link (50 MB/s down, 50 MB/s up): traffic, pipelining, disk.

Same run, same link: (1) plain download of the upstream shards (one streaming GET each), (2) plain upload of files
of the output shards' sizes (one commit, huggingface_hub's LFS path), (3) `hubpad mirror UP --tp 3 --to TARGET
--max-disk 2xSHARD --workdir W` as a subprocess (SHARD: the largest output shard, from `hubpad plan`), with its
workdir polled every 20 ms for the real peak disk.

Bars: bytes read from upstream <= 1.01 x the upstream shard bytes; end-to-end time (the whole hubpad process,
interpreter start and publish commit included) <= 1.1 x max(download time, upload time) (issue 13) when --max-disk allows
pipelining; peak disk <= 2 x the output shard size.

    python bench/hub_mirror.py [--dir DIR] [--rate 50e6] [--shard-size 96MB] [--layers 2] [--commit-latency 0]
                               [--serial]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import threading
import time
from pathlib import Path

from _common import (
    bench_dir,
    cached_checkpoint,
    clean_up,
    dir_bytes,
    Emulator,
    finish,
    hubpad,
    hy3_config,
    mb,
    shard_files,
    table,
)

UP, TARGET, SCRATCH = "RedHatAI/Hy3-bench", "alice/Hy3-bench-TP3", "alice/upload-baseline"


def download_all(emu: Emulator, repo: str, files: list[str]) -> float:
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session

    t0 = time.perf_counter()
    for f in files:
        url = hf_hub_url(repo, f, endpoint=emu.hub.endpoint)
        with get_session().stream("GET", url, headers=build_hf_headers(token=emu.env["HF_TOKEN"]),
                                  follow_redirects=True) as r:
            r.raise_for_status()
            for _ in r.iter_bytes(8 * 1024 * 1024):
                pass
    return time.perf_counter() - t0


def upload_all(emu: Emulator, sizes: list[int], tmp: Path) -> float:
    from huggingface_hub import CommitOperationAdd

    tmp.mkdir(parents=True, exist_ok=True)
    block = os.urandom(4 * 1024 * 1024)
    paths = []
    for i, size in enumerate(sizes):
        p = tmp / f"blob-{i:03d}.safetensors"
        with open(p, "wb") as f:
            left = size
            f.write(i.to_bytes(8, "little"))  # distinct content per file: no deduplication
            left -= 8
            while left > 0:
                f.write(block[:min(left, len(block))])
                left -= len(block)
        paths.append(p)
    api = emu.api()
    api.create_repo(SCRATCH, exist_ok=True)
    ops = [CommitOperationAdd(path_in_repo=p.name, path_or_fileobj=str(p)) for p in paths]  # hashed here, untimed
    t0 = time.perf_counter()
    api.create_commit(SCRATCH, ops, commit_message="upload baseline")
    seconds = time.perf_counter() - t0
    shutil.rmtree(tmp)
    return seconds


class DiskPoller:
    def __init__(self, path: Path, every: float = 0.02) -> None:
        self.path, self.every, self.peak, self._stop = path, every, 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.path.exists():
                self.peak = max(self.peak, dir_bytes(self.path))
            time.sleep(self.every)

    def stop(self) -> int:
        self._stop.set()
        self._t.join()
        return self.peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--rate", type=float, default=50e6, help="link throttle, bytes/s, both directions")
    ap.add_argument("--shard-size", default="96MB")
    ap.add_argument("--layers", type=int, default=2,
                    help="Hy3 layers of the upstream (2: 0.87 GB, 12 output shards; 8: 1.77 GB, 24 output shards, "
                         "nearer the real model's 36, so the pipeline's fill is nearer its real share of the run)")
    ap.add_argument("--serial", action="store_true", help="also run with --max-disk of one shard (no pipelining)")
    ap.add_argument("--commit-latency", type=float, default=0.0,
                    help="seconds the emulator holds every commit before making it (the real Hub takes a while to "
                         "commit; 0: none)")
    args = ap.parse_args()
    work, temp = bench_dir(args.dir, "hub")
    from hubpad.util.sizes import parse_size

    shard_size = parse_size(args.shard_size)
    src = cached_checkpoint(work / f"Hy3-hub-{args.layers}", hy3_config(args.layers, 6, vocab=4096), 3)
    files = shard_files(src)
    up_bytes = sum(f.stat().st_size for f in files)
    emu = Emulator(work / "emulator")
    try:
        emu.seed_dir(UP, src)
        emu.hub.set_throttle(args.rate, args.rate)
        if args.commit_latency:
            emu.hub.faults.delay(r"/api/models/.*/commit/", args.commit_latency, times=None, method="POST")
        print(f"upstream: {len(files)} shards, {mb(up_bytes)}; link {args.rate / 1e6:.0f} MB/s down and up", flush=True)
        t_down = download_all(emu, UP, [f.name for f in files])
        print(f"plain download: {t_down:.1f}s", flush=True)
        emu.hub.reset_log()
        # --max-disk is a byte budget: give exactly two (serial: one) of the largest output shards, which the plan says.
        planned = hubpad("plan", UP, "--tp", "3", "--shard-size", str(shard_size), "--json", env=emu.env)
        biggest = max(s["size"] for s in planned.check("hubpad plan").json()["shards"])
        runs = [("pipelined", 2 * biggest)] + ([("serial", biggest)] if args.serial else [])
        results = {}
        t_up = None
        for label, max_disk in runs:
            target = TARGET if label == "pipelined" else TARGET + "-serial"
            wd = work / f"workdir-{label}"
            shutil.rmtree(wd, ignore_errors=True)
            poller = DiskPoller(wd)
            emu.hub.reset_log()
            r = hubpad("mirror", UP, "--tp", "3", "--to", target, "--shard-size", str(shard_size),
                       "--max-disk", str(max_disk), "--workdir", wd, "--json", env=emu.env).check("hubpad mirror")
            peak = poller.stop()
            summary = r.json()
            served = {f.name: emu.hub.bytes_served(UP, f.name) for f in files}
            manifest = json.loads(emu.hub.file_bytes(target, "hubpad.json"))
            out_sizes = [s["size"] for s in manifest["shards"]]
            results[label] = dict(seconds=r.seconds, served=sum(served.values()), peak=peak,
                                  peak_reported=summary["peak_disk"], uploaded=emu.hub.bytes_uploaded(target),
                                  out=sum(out_sizes), n=len(out_sizes), biggest=max(out_sizes), max_disk=max_disk)
            print(f"{label}: {r.seconds:.1f}s", flush=True)
            if t_up is None:
                t_up = upload_all(emu, out_sizes, work / "upload-tmp")
                print(f"plain upload: {t_up:.1f}s", flush=True)
        base = max(t_down, t_up)
        p = results["pipelined"]
        rows = [["plain download (upstream shards)", f"{t_down:.1f}", mb(up_bytes), "-", "-"],
                ["plain upload (output shard sizes)", f"{t_up:.1f}", mb(p["out"]), "-", "-"]]
        for label, x in results.items():
            rows.append([f"**hubpad mirror**, {label}, --max-disk {mb(x['max_disk'])}", f"{x['seconds']:.1f}",
                         f"{mb(x['served'])} down, {mb(x['uploaded'])} up", f"{x['seconds'] / base:.2f}",
                         f"{mb(x['peak'])} ({x['peak'] / x['biggest']:.2f} x shard)"])
        print()
        print(f"{len(files)} upstream shards ({mb(up_bytes)}) -> {p['n']} output shards of <= {mb(p['biggest'])}; "
              f"link {args.rate / 1e6:.0f} MB/s each way; commits held {args.commit_latency:g} s")
        print(table(["run", "seconds", "bytes", "time / max(down, up)", "peak disk"], rows))
        print()
        finish([
            (f"upstream bytes read {p['served']} <= 1.01 x {up_bytes} ({p['served'] / up_bytes:.4f} x)",
             p["served"] <= 1.01 * up_bytes),
            (f"end-to-end {p['seconds']:.1f}s <= 1.1 x max(download {t_down:.1f}s, upload {t_up:.1f}s) "
             f"({p['seconds'] / base:.2f} x)", p["seconds"] <= 1.1 * base),
            (f"peak disk {mb(p['peak'])} <= 2 x shard size {mb(p['biggest'])} (hubpad reports {mb(p['peak_reported'])})",
             p["peak"] <= 2 * p["biggest"] and p["peak_reported"] <= 2 * p["biggest"]),
        ])
    finally:
        emu.stop()
        clean_up(work, temp, args.keep)


if __name__ == "__main__":
    main()
