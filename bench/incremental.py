"""Incremental and card-only runs against the Hub emulator: what moves when one upstream shard of five changes,
when nothing changed, and for `hubpad card`.

1. `hubpad mirror` of a 5-shard upstream (first publish, for reference).
2. Tensor bytes (not the header) of upstream shard 3 change upstream; `hubpad mirror` again. Bar (issue 13 bar 5):
   it downloads the changed file once, whole (its sha256 is new: only a full read verifies it), and of the unchanged
   files feeding the output shards that contain bytes of shard 3 only the 64 MiB blocks those shards need (each
   checked against the block sha256s the first run recorded in hubpad.json), plus header windows; every weight
   file carries block hashes in both manifests; it uploads only those output shards. (Before bar 5 the bar was
   "the files feeding them, whole, x 1.01".)
3. `hubpad mirror` with nothing changed. Bar: no tensor bytes down, nothing up.
4. `hubpad card TARGET --templates T` with a template edit (so a card commit really happens). Bar: zero shard bytes
   in either direction, and the commit touches no .safetensors file.

    python bench/incremental.py [--dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import shutil

from _common import (
    ROOT,
    Emulator,
    bench_dir,
    cached_checkpoint,
    clean_up,
    finish,
    hubpad,
    hy3_config,
    mb,
    shard_files,
    table,
)

UP, TARGET, SHARD = "RedHatAI/Hy3-incr", "alice/Hy3-incr-TP3", "64MB"
HEADER_WINDOW = 100_000  # hubpad reads at most this much of a file to find its header (when the header is small)


def traffic(emu: Emulator, files: list[str]) -> tuple[dict[str, int], int]:
    down = {f: emu.hub.bytes_served(UP, f) for f in files}
    down.update({f"target:{p}": emu.hub.bytes_served(TARGET, p) for p in emu.hub.files(TARGET)
                 if p.endswith(".safetensors")})
    return down, emu.hub.bytes_uploaded(TARGET)


def needed_block_bytes(manifest: dict, affected: set[str], changed: str, size: dict[str, int]) -> int:
    """Bytes of the recorded blocks of the unchanged upstream files that the rebuilt output shards read."""
    blocks: dict[str, set[int]] = {}
    block = {f: (e.get("blocks") or {}).get("size", size.get(f, 1)) for f, e in manifest["upstream"]["files"].items()}
    for s in manifest["shards"]:
        for x in s["sources"] if s["name"] in affected else ():
            if x["file"] != changed:  # no record: one block, the whole file
                b = block[x["file"]]
                blocks.setdefault(x["file"], set()).update(k for lo, hi in x["ranges"]
                                                           for k in range(lo // b, (hi - 1) // b + 1))
    return sum(min(block[f], size[f] - k * block[f]) for f, ks in blocks.items() for k in ks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work, temp = bench_dir(args.dir, "incremental")
    src = work / "Hy3-incr"
    if src.exists():
        shutil.rmtree(src)
    marker = work / ".Hy3-incr.stamp"
    marker.unlink(missing_ok=True)
    cached_checkpoint(src, hy3_config(2, 6, vocab=4096), 5)
    files = [f.name for f in shard_files(src)]
    size = {f: (src / f).stat().st_size for f in files}
    emu = Emulator(work / "emulator")
    rows, checks = [], []
    try:
        emu.seed_dir(UP, src)
        emu.hub.reset_log()
        r = hubpad("mirror", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD, "--json", env=emu.env)
        first = r.check("first mirror").json()
        down, up = traffic(emu, files)
        rows.append(["first publish", f"{r.seconds:.1f}", f"{len(first['shards_built'])}/{len(first['shards_built'])}",
                     mb(sum(down.values())), mb(up)])
        manifest = json.loads(emu.hub.file_bytes(TARGET, "hubpad.json"))
        records = {f: manifest["upstream"]["files"][f].get("blocks") for f in files}
        sizes = {s["name"]: s["size"] for s in manifest["shards"]}
        sources = {s["name"]: {x["file"] for x in s["sources"]} for s in manifest["shards"]}

        # 2. one upstream shard changes (tensor bytes in its middle)
        changed = files[2]
        p = src / changed
        data = bytearray(p.read_bytes())
        for k in range(len(data) // 2, len(data) // 2 + 4096):
            data[k] ^= 0x5A
        p.write_bytes(bytes(data))
        del data
        emu.hub.seed(UP, {changed: p}, message="update shard 3")
        emu.hub.reset_log()
        r = hubpad("mirror", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD, "--json", env=emu.env)
        s2 = r.check("incremental mirror").json()
        down, up = traffic(emu, files)
        affected = {n for n, src_files in sources.items() if changed in src_files}
        needed = set().union(*(sources[n] for n in affected))
        block_bytes = needed_block_bytes(manifest, affected, changed, size)
        allowed_down = (size[changed] + block_bytes) * 1.01 + HEADER_WINDOW * len(files)
        new_manifest = json.loads(emu.hub.file_bytes(TARGET, "hubpad.json"))
        allowed_up = sum(sizes[n] for n in affected) + 10_000
        got_down = sum(down.values())
        rows.append([f"{changed} changed", f"{r.seconds:.1f}", f"{len(s2['shards_built'])}/{len(sizes)}",
                     f"{mb(got_down)} (files feeding them: {mb(sum(size[f] for f in needed))}; "
                     f"{changed} + needed blocks of the others: {mb(size[changed] + block_bytes)})",
                     f"{mb(up)} (those shards: {mb(sum(sizes[n] for n in affected))})"])
        checks += [
            (f"rebuilt exactly the output shards holding bytes of {changed}: {sorted(s2['shards_built'])}",
             set(s2["shards_built"]) == affected),
            (f"downloaded {mb(got_down)} <= ({changed} + the needed blocks of the unchanged files feeding them) "
             f"x 1.01 + header windows ({mb(allowed_down)})", got_down <= allowed_down),
            ("every upstream weight file has block hashes in hubpad.json, after the first run and the incremental one",
             all(records.values()) and all(new_manifest["upstream"]["files"][f].get("blocks") for f in files)),
            (f"uploaded {mb(up)} <= the rebuilt shards ({mb(allowed_up)})", up <= allowed_up),
        ]

        # 3. nothing changed
        emu.hub.reset_log()
        r = hubpad("mirror", UP, "--tp", "3", "--to", TARGET, "--shard-size", SHARD, "--json", env=emu.env)
        s3 = r.check("up-to-date mirror").json()
        down, up = traffic(emu, files)
        rows.append(["nothing changed", f"{r.seconds:.1f}", f"0/{len(sizes)}", mb(sum(down.values())), mb(up)])
        checks += [(f"nothing changed: up to date, {sum(down.values())} B down (header windows at most), {up} B up",
                    s3["up_to_date"] and sum(down.values()) <= HEADER_WINDOW * len(files) and up == 0)]

        # 4. card only (a template edit makes a real card commit)
        tdir = work / "templates"
        shutil.rmtree(tdir, ignore_errors=True)
        shutil.copytree(ROOT / "templates", tdir)
        readme = tdir / "README.md.j2"
        readme.write_text(readme.read_text() + "\n<!-- bench: card-only refresh -->\n")
        head = emu.hub.head(TARGET)
        emu.hub.reset_log()
        r = hubpad("card", TARGET, "--templates", tdir, env=emu.env).check("hubpad card")
        down, up = traffic(emu, files)
        before, after = emu.hub.files(TARGET, head), emu.hub.files(TARGET)
        touched = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        rows.append(["`hubpad card` (template edit)", f"{r.seconds:.1f}", "0 (card only)", mb(sum(down.values())),
                     f"{mb(up)}; commit touches {', '.join(touched) or 'nothing'}"])
        checks += [(f"card: 0 shard bytes down ({sum(down.values())}), 0 up ({up}), no shard in the commit",
                    sum(down.values()) == 0 and up == 0 and not any(t.endswith(".safetensors") for t in touched)
                    and emu.hub.head(TARGET) != head)]
        print()
        print(f"upstream: 5 shards, {mb(sum(size.values()))}; output shards of <= {SHARD}: {len(sizes)}")
        print(table(["run", "seconds", "shards built", "bytes down (shards)", "bytes up (LFS)"], rows))
        print()
        finish(checks)
    finally:
        emu.stop()
        clean_up(work, temp, args.keep)


if __name__ == "__main__":
    main()
