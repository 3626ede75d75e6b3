"""`hubpad plan` at the real scale, against the floor it cannot beat: reading and parsing the same headers.

Checkpoints: header-only sparse shards (real headers, full file sizes, no disk) of tencent/Hy3's real config in two
layouts, 5 shards each:
- "redhat": RedHatAI/Hy3-NVFP4-FP8's layout (FP8-block attention, NVFP4 MLP and experts: four tensors per linear;
  BF16 MTP layer): 184,690 tensors, ~178 GB. The bar case.
- "bf16": tencent's own BF16 layout: ~47k tensors, ~598 GB. The memory-growth reference.

Measured side by side, interleaved, best of N (the machine is shared, so single timings are noisy):
- floor (local): a bare Python process that reads the five headers and `json.loads` each (interpreter start
  included, as for hubpad);
- floor (Hub): the same bare process reading the headers through the emulator with two ranged GETs per file
  (length, then JSON) over urllib;
- `hubpad plan SRC --tp 3`, locally and through the emulator (the whole process);
- reported, not a bar: a process doing only what `hubpad plan` cannot skip (import its modules, parse the index it
  checks the headers against, parse the headers), and the floor's own max RSS on both layouts.

Bars: hubpad / floor <= 1.5 locally and through the emulator (redhat layout); max RSS <= 128 MB (both layouts,
both sources); max RSS of the redhat run within 10 % of the bf16 run (local).

    python bench/plan_real.py [--dir DIR] [--runs 5] [--keep]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import Emulator, Run, bench_dir, cached_checkpoint, clean_up, finish, hubpad, hy3_tensors, mb, table
from plan_speed import header_bytes, seed_sparse

REPO = "tencent/Hy3-real-plan"
LAYOUTS = ("bf16", "redhat")

FLOOR_LOCAL = r"""
import json, struct, sys, glob
for p in sorted(glob.glob(sys.argv[1] + "/*.safetensors")):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
"""

# Not a bar, the evidence for one: what `hubpad plan` cannot skip before it plans anything. It imports its modules
# and must parse the index (to check it against the headers) as well as the headers themselves.
MUST_DO = r"""
import json, struct, sys, glob
import hubpad.app.cli, hubpad.plan.planner, hubpad.source.local
json.loads(open(sys.argv[1] + "/model.safetensors.index.json", "rb").read())
for p in sorted(glob.glob(sys.argv[1] + "/*.safetensors")):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
"""

FLOOR_HUB = r"""
import json, struct, sys, urllib.request
endpoint, repo, token, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def get(name, start, end):
    req = urllib.request.Request(f"{endpoint}/{repo}/resolve/main/{name}",
                                 headers={"Range": f"bytes={start}-{end - 1}", "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req) as r:
        return r.read()
for name in names:
    n = struct.unpack("<Q", get(name, 0, 8))[0]
    h = json.loads(get(name, 8, 8 + n))
"""


def checkpoint(work: Path, layout: str) -> Path:
    try:
        from hubpad.testing import quant_config
    except ImportError:  # the flat layout before the subpackages (to measure a baseline)
        from hubpad.demo import _quant_config as quant_config
    from tests.hy3_real import HY3_CONFIG

    cfg = dict(HY3_CONFIG) if layout == "bf16" else dict(HY3_CONFIG, quantization_config=quant_config(80))
    return cached_checkpoint(work / f"Hy3-{layout}", cfg, 5, layout=layout, header_only=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--bar", type=float, default=1.5)
    ap.add_argument("--rss-mb", type=float, default=128)
    args = ap.parse_args()
    work, temp = bench_dir(args.dir, "plan-real")
    emu = Emulator(work / "emulator", client=False)
    rows, checks, rss = [], [], {}
    try:
        for layout in LAYOUTS:
            src = checkpoint(work, layout)
            heads = header_bytes(src)
            repo = f"{REPO}-{layout}"
            seed_sparse(emu, repo, src)
            n_tensors = len(hy3_tensors(__import__("json").loads((src / "config.json").read_text()), layout))
            t = {k: [] for k in ("floor", "floor_hub", "local", "hub", "must_do")}
            cpu = {k: [] for k in t}  # user + sys of the process (the emulator's own work is not counted)
            m = {k: [] for k in ("local", "hub", "floor")}

            def record(key: str, r: Run) -> Run:
                t[key].append(r.seconds)
                cpu[key].append(r.user + r.sys)
                return r

            for _ in range(args.runs):
                m["floor"].append(record("floor", Run([sys.executable, "-c", FLOOR_LOCAL, src]).check("floor")).max_rss)
                record("must_do", Run([sys.executable, "-c", MUST_DO, src]).check("imports + index + headers"))
                r = record("local", hubpad("plan", src, "--tp", "3").check("hubpad plan (local)"))
                m["local"].append(r.max_rss)
                record("floor_hub", Run([sys.executable, "-c", FLOOR_HUB, emu.hub.endpoint, repo,
                                         emu.env["HF_TOKEN"], *heads]).check("floor (hub)"))
                emu.hub.reset_log()
                r = record("hub", hubpad("plan", repo, "--tp", "3", env=emu.env).check("hubpad plan (hub)"))
                m["hub"].append(r.max_rss)
                served = sum(emu.hub.bytes_served(repo, f) for f in heads)
                if served > sum(heads.values()):
                    checks.append((f"{layout}: read no tensor bytes ({served} > {sum(heads.values())})", False))
            best = {k: min(v) for k, v in t.items()}
            best_cpu = {k: min(v) for k, v in cpu.items()}
            rss[layout] = {k: max(v) for k, v in m.items()}
            ratio_local, ratio_hub = best["local"] / best["floor"], best["hub"] / best["floor_hub"]
            where = f"{layout}: {n_tensors:,} tensors"
            for source, floor, mine in (("local", "floor", "local"), ("Hub emulator", "floor_hub", "hub")):
                rows.append([where, source, f"{best[floor]:.2f}", f"{best[mine]:.2f}", f"{best[mine] / best[floor]:.2f}",
                             f"{best_cpu[floor]:.2f} / {best_cpu[mine]:.2f} = {best_cpu[mine] / best_cpu[floor]:.2f}",
                             mb(rss[layout][mine])])
            rows.append([where, "local: imports + index + headers, no planning", f"{best['floor']:.2f}",
                         f"{best['must_do']:.2f}", f"{best['must_do'] / best['floor']:.2f}",
                         f"{best_cpu['floor']:.2f} / {best_cpu['must_do']:.2f} = "
                         f"{best_cpu['must_do'] / best_cpu['floor']:.2f}", f"(floor: {mb(rss[layout]['floor'])})"])
            print(f"{layout}: " + "; ".join(f"{k} {', '.join(f'{x:.2f}' for x in v)}" for k, v in t.items()),
                  flush=True)
            if layout == "redhat":
                checks.append((f"{layout}: local plan / floor = {ratio_local:.2f} <= {args.bar}", ratio_local <= args.bar))
                checks.append((f"{layout}: Hub plan / floor = {ratio_hub:.2f} <= {args.bar}", ratio_hub <= args.bar))
            for k in ("local", "hub"):
                checks.append((f"{layout} ({k}): max RSS {mb(rss[layout][k])} <= {args.rss_mb:.0f} MB",
                               rss[layout][k] <= args.rss_mb * 1e6))
        growth = rss["redhat"]["local"] / rss["bf16"]["local"] - 1
        checks.append((f"max RSS 47k -> 185k tensors: {growth:+.1%} (<= +10 %)", growth <= 0.10))
        floor_growth = rss["redhat"]["floor"] / rss["bf16"]["floor"] - 1
        notes = [f"the floor's own max RSS 47k -> 185k tensors: {mb(rss['bf16']['floor'])} -> "
                 f"{mb(rss['redhat']['floor'])} ({floor_growth:+.1%}): one whole header in json.loads at a time"]
        print()
        print(f"best of {args.runs} interleaved run(s), whole processes (interpreter start included); the bars are "
              f"on wall time, CPU seconds (user + sys, best of the runs) are the steadier figure on a shared machine")
        print(table(["checkpoint", "source", "floor s", "hubpad plan s", "hubpad / floor", "CPU s: floor / hubpad",
                 "hubpad max RSS"], rows))
        print()
        for note in notes:
            print(f"  note: {note}")
        finish(checks)
    finally:
        emu.stop()
        clean_up(work, temp, args.keep)


if __name__ == "__main__":
    main()
