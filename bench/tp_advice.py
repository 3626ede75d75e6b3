"""The README's TP-advisor table: `hubpad plan SRC` (no --tp) on header-only sparse copies of real public models.

Each checkpoint is built from the model's real config.json values (tests/real_models.py, tests/hy3_real.py) with
BF16 tensors of the real shapes over sparse holes, so it costs no disk; the rows are hubpad's own advisor output.

    python bench/tp_advice.py [--dir DIR]    # prints the markdown to paste under "Which TP sizes work" in README.md
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import ROOT  # noqa: F401  (puts the repository root on sys.path)

from hubpad.app.advice_report import cost_cells, dims_cell
from hubpad.plan.advisor import advise
from hubpad.source.local import LocalSource
from hubpad.testing import tiny_hy3_tensors, write_checkpoint
from tests.real_models import REAL_MODELS, header_only_tensors


def build(base: Path, repo: str, cfg: dict) -> Path:
    path = base / repo.split("/")[1]
    if not (path / "config.json").exists():
        tensors = tiny_hy3_tensors(cfg, "bf16") if cfg["model_type"] == "hy_v3" else header_only_tensors(cfg)
        write_checkpoint(path, cfg, tensors, n_shards=5, header_only=True)
    return path


def markdown(repo: str, path: Path) -> str:
    advice = advise(LocalSource(path))
    out = [f"**{repo}** ({advice.architecture}, BF16)", "",
           "| TP | verdict | padded dims | extra disk | extra KV / token | attn FLOPs | MLP FLOPs |",
           "|---:|---|---|---:|---:|---:|---:|"]
    for r in advice.rows:
        verdict = r.verdict + (" + vocab patch" if r.vocab_patch and r.verdict != "cannot" else "")
        if r.verdict == "cannot":
            verdict += f": {r.why[0].split(' (')[0]}"
        out.append(f"| {r.tp} | {verdict} | {dims_cell(r)} | " + " | ".join(cost_cells(r)) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="where to build the sparse checkpoints (default: a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.dir or tmp)
        print("\n\n".join(markdown(repo, build(base, repo, cfg)) for repo, cfg in REAL_MODELS.items()))


if __name__ == "__main__":
    main()
