"""The way a user would pad a checkpoint by hand: safetensors `load_file`, pad every tensor with torch, `save_file`.

Used by bench/memory.py as the baseline (run as a child process so its time and max RSS are its own). The new
shapes and fill values come from hubpad's plan, so both produce the same tensors; only the I/O strategy
differs (whole shard in memory vs streamed).

    python bench/naive_pad.py SRC DST --tp 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def pad_tensor(t, plan_t):
    import torch

    op = plan_t.op
    if op.kind == "copy":
        return t
    raw = t.contiguous().view(-1).view(torch.uint8) if t.dim() else t.reshape(1).view(torch.uint8)
    if op.kind == "pad":
        fill = torch.frombuffer(bytearray(op.fill), dtype=torch.uint8)
        out = fill.repeat(op.batch * op.new_rows * op.new_row_bytes // len(op.fill))
        out = out.reshape(op.batch, op.new_rows, op.new_row_bytes)
        out[:, :op.rows, :op.row_bytes] = raw.reshape(op.batch, op.rows, op.row_bytes)
    elif op.kind == "append":
        out = torch.cat([raw, torch.frombuffer(bytearray(op.data), dtype=torch.uint8)])
    else:  # replace
        out = torch.frombuffer(bytearray(op.data), dtype=torch.uint8)
    return out.reshape(-1).view(t.dtype).reshape(plan_t.shape)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--tp", type=int, default=3)
    args = ap.parse_args()
    from safetensors.torch import load_file, save_file

    from hubpad.formats.names import INDEX
    from hubpad.plan.planner import make_plan
    from hubpad.source.local import LocalSource

    src, dst = Path(args.src), Path(args.dst)
    plan = make_plan(LocalSource(src), args.tp)
    by_name = {t.name: t for t in plan.tensors}
    dst.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for name in plan.weight_files:
        tensors = load_file(src / name)  # the whole shard in memory
        out = {k: pad_tensor(v, by_name[k]) for k, v in tensors.items()}
        del tensors
        save_file(out, dst / name, metadata={"format": "pt"})
        weight_map.update({k: name for k in out})
        del out
    (dst / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=2))
    (dst / "config.json").write_text(json.dumps(plan.new_config, indent=2))
    for f in plan.copied_files:
        shutil.copyfile(src / f, dst / f)


if __name__ == "__main__":
    main()
