"""What Xet's chunk deduplication saves when hubpad publishes a padded derivative.

1. Build a Hy3-shaped upstream (RedHatAI's layout: FP8-block attention, NVFP4 MLP/experts, BF16 MTP layer) and
   upload it through the real hf_xet to the Hub emulator's Xet store (a `local://` directory, as the emulator's
   xet-write-token route hands it out).
2. `hubpad mirror UP --tp 3` as a subprocess with Xet on: it pads and uploads the output shards through hf_xet.
3. Uploaded bytes = growth of the store's xorbs + shards (what hf_xet actually wrote after chunk dedup against
   everything already stored), divided by the output bytes (the shards' sizes in hubpad.json).
4. Control: the same output shards uploaded to an EMPTY Xet store (no upstream to dedup against): what dedup and
   compression find inside the output alone.

Copied tensors and row-padded ones (q/k/v rows, gate/up rows: the upstream bytes stay contiguous, new rows are
appended) should dedup against the upstream; column-padded ones (o_proj, down_proj: every row grows) should not.
The table also shows how the output bytes split between those kinds, from the plan, for this checkpoint and for
Hy3-NVFP4-FP8 at full size (80 layers + MTP, 192 experts: planned from a header-only sparse copy, ~2 s), and
estimates the full-size ratio as its column-padded share times the upload ratio measured here for such bytes.

    python bench/xet_dedup.py [--layers 2] [--experts 6] [--shards 5] [--no-full-size] [--dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path

from _common import Emulator, bench_dir, cached_checkpoint, hubpad, hy3_config, mb, shard_files, table

UP, TARGET, SHARD = "RedHatAI/Hy3-xet", "alice/Hy3-xet-TP3", "256MB"


def byte_kinds(src: Path, tp: int, shard_size: str) -> dict[str, int]:
    """Output bytes by how they are made: copied, row-padded (upstream bytes stay contiguous), column-padded
    (every row grows), other (appended/replaced), and headers."""
    from hubpad.plan.planner import make_plan
    from hubpad.source import LocalSource
    from hubpad.util.sizes import parse_size

    plan = make_plan(LocalSource(src), tp, parse_size(shard_size))
    kinds = {"copied": 0, "row-padded": 0, "column-padded": 0, "other": 0, "headers": 0}
    for shard in plan.shards:
        kinds["headers"] += len(shard.header)
        for t in shard.tensors:
            op = t.op
            if op.kind == "copy":
                kinds["copied"] += t.nbytes
            elif op.kind == "pad" and op.new_row_bytes > op.row_bytes:
                kinds["column-padded"] += t.nbytes
            elif op.kind == "pad":
                kinds["row-padded"] += t.nbytes
            else:
                kinds["other"] += t.nbytes
    return kinds


def full_size_kinds(work: Path) -> dict[str, int]:
    """byte_kinds() of Hy3-NVFP4-FP8 at full size, planned from a header-only (sparse) checkpoint."""
    from hubpad.testing import quant_config
    from tests.hy3_real import HY3_CONFIG

    cfg = dict(HY3_CONFIG, quantization_config=quant_config(HY3_CONFIG["num_hidden_layers"]))
    src = cached_checkpoint(work / "Hy3-full-headers", cfg, 5, header_only=True)
    return byte_kinds(src, 3, "5GB")


def upload_upstream(emu: Emulator, src: Path) -> float:
    """The upstream's files in one commit, through huggingface_hub and the real hf_xet (this process)."""
    from huggingface_hub import CommitOperationAdd, HfApi

    owner, token = UP.split("/")[0], "hf_bench_upstream_owner_token_0123456789"
    emu.hub.add_user(owner, token, role="write")
    api = HfApi(endpoint=emu.hub.endpoint, token=token)
    api.create_repo(UP)
    ops = [CommitOperationAdd(path_in_repo=p.relative_to(src).as_posix(), path_or_fileobj=str(p))
           for p in sorted(src.rglob("*")) if p.is_file()]
    t0 = time.perf_counter()
    api.create_commit(UP, ops, commit_message="upload")
    return time.perf_counter() - t0


def fresh_store_bytes(paths: list[Path], root: Path) -> int:
    """Upload files with hf_xet into an empty local:// store; bytes it then holds (xorbs + shards)."""
    from tests.hub_emulator import XetStorage

    store = XetStorage(root)
    for p in paths:
        with open(p, "rb") as f:
            store.put(p, hashlib.file_digest(f, "sha256").hexdigest())
    return store.stored_bytes()["total"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--experts", type=int, default=6)
    ap.add_argument("--shards", type=int, default=5)
    ap.add_argument("--no-full-size", action="store_true", help="skip the full-size Hy3 composition")
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work, temp = bench_dir(args.dir, "xet")
    # Fresh random bytes in every tensor: like real weights, no tensor repeats another (the other benchmarks'
    # reused byte pool would hand Xet duplicate chunks that real checkpoints do not have).
    src = cached_checkpoint(work / "Hy3-xet", hy3_config(args.layers, args.experts, vocab=4096), args.shards,
                            unique=True)
    up_bytes = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    emu_root = work / "emulator"
    shutil.rmtree(emu_root, ignore_errors=True)
    emu = Emulator(emu_root, xet=True)
    try:
        store = emu.hub.xet
        t_up = upload_upstream(emu, src)
        stored_up = store.stored_bytes()
        emu.release_xet()  # hubpad (a subprocess) must own hf_xet's local store now
        r = hubpad("mirror", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD, "--json", env=emu.env)
        summary = r.check("hubpad mirror").json()
        stored_all = store.stored_bytes()
        manifest = json.loads(emu.hub.file_bytes(TARGET, "hubpad.json"))
        out_bytes = sum(s["size"] for s in manifest["shards"])
        uploaded = stored_all["total"] - stored_up["total"]
        lfs_puts = emu.hub.bytes_uploaded(TARGET)
        # Control: the output shards alone, into an empty store.
        outputs = [emu.hub.file_path(TARGET, s["name"]) for s in manifest["shards"]]
        with tempfile.TemporaryDirectory(prefix="hubpad-xet-control-", dir=work) as ctl:
            control = fresh_store_bytes(outputs, Path(ctl))
        kinds = byte_kinds(src, 3, SHARD)
    finally:
        emu.stop()
    total_kinds = sum(kinds.values())
    print()
    print(f"upstream: {args.layers} layers, {args.experts} experts, {len(shard_files(src))} shards, {mb(up_bytes)} "
          f"(uploaded through hf_xet in {t_up:.1f} s: store holds {mb(stored_up['total'])}); "
          f"output: {len(manifest['shards'])} shards, {mb(out_bytes)}; hubpad mirror {r.seconds:.1f} s")
    print(table(["what", "bytes", "÷ output bytes"], [
        ["output shards (hubpad.json)", mb(out_bytes), "1.000"],
        ["uploaded through Xet: store growth (xorbs + shards)", mb(uploaded), f"{uploaded / out_bytes:.3f}"],
        ["  of which xorbs (chunk data)", mb(stored_all["xorbs"] - stored_up["xorbs"]),
         f"{(stored_all['xorbs'] - stored_up['xorbs']) / out_bytes:.3f}"],
        ["  of which shards (metadata)", mb(stored_all["shards"] - stored_up["shards"]),
         f"{(stored_all['shards'] - stored_up['shards']) / out_bytes:.3f}"],
        ["control: same shards into an empty store", mb(control), f"{control / out_bytes:.3f}"],
        ["LFS PUT bytes (none expected with Xet)", mb(lfs_puts), f"{lfs_puts / out_bytes:.3f}"],
        ["hubpad's own bytes_uploaded (shard sizes, before dedup)", mb(summary["bytes_uploaded"]),
         f"{summary['bytes_uploaded'] / out_bytes:.3f}"],
    ]))
    full = None if args.no_full_size else full_size_kinds(work)
    print()
    print("output bytes by how they are made (plan):")
    headers = ["kind", "this checkpoint", "share"] + (["Hy3-NVFP4-FP8 full size", "share"] if full else [])
    rows = []
    for k, v in kinds.items():
        row = [k, mb(v), f"{v / total_kinds:.1%}"]
        if full:
            row += [f"{full[k] / 1e9:.2f} GB", f"{full[k] / sum(full.values()):.1%}"]
        rows.append(row)
    print(table(headers, rows))
    if full and kinds["column-padded"]:
        per_col = uploaded / kinds["column-padded"]  # upload per column-padded byte (the rest deduplicated)
        share = full["column-padded"] / sum(full.values())
        print(f"\nmeasured here: uploaded = {per_col:.2f} x the column-padded bytes (all else deduplicated); at full "
              f"size that estimates uploaded / output = {share:.1%} x {per_col:.2f} = {share * per_col:.3f}")
    if temp and not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
