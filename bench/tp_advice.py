"""The TP-advisor tables of docs/advisor.md: `hubpad plan SRC` (no --tp) on header-only sparse copies of real public models.

Each checkpoint is built from the model's real config.json values (tests/real_models.py, tests/hy3_real.py,
tests/mla_real.py, tests/gpt_oss_real.py, tests/qwen35_real.py) with tensors of the real shapes and dtypes (BF16; FP8 for DeepSeek-V3 and
Kimi-K2; MXFP4 experts for gpt-oss) over sparse holes, so it costs no disk; the rows are hubpad's own advisor output.

    python bench/tp_advice.py [--dir DIR]    # prints the markdown to paste under "Which TP sizes work" in docs/advisor.md
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _common import ROOT  # noqa: F401  (puts the repository root on sys.path)

from hubpad.app.advice_report import cost_cells, dims_cell, verdict_cell
from hubpad.plan.advisor import advise
from hubpad.source.local import LocalSource
from hubpad.testing import tiny_hy3_tensors, write_checkpoint
from tests.gpt_oss_real import GPT_OSS_SIZES, gpt_oss_real
from tests.mla_real import DEEPSEEK_V3_CONFIG, KIMI_K2_CONFIG, mla_tensors
from tests.qwen35_real import REAL_GDN_MODELS
from tests.real_models import REAL_MODELS, header_only_tensors


def checkpoints() -> dict[str, tuple[dict, list]]:
    """name on the Hub -> (config, tensor list), in docs/advisor.md's order."""
    out = {repo: (cfg, tiny_hy3_tensors(cfg, "bf16") if cfg["model_type"] == "hy_v3" else header_only_tensors(cfg))
           for repo, cfg in REAL_MODELS.items()}
    out["moonshotai/Kimi-K2-Instruct"] = (KIMI_K2_CONFIG, mla_tensors(KIMI_K2_CONFIG))
    out["deepseek-ai/DeepSeek-V3"] = (DEEPSEEK_V3_CONFIG, mla_tensors(DEEPSEEK_V3_CONFIG))
    out["openai/gpt-oss-120b"] = gpt_oss_real(*GPT_OSS_SIZES["openai/gpt-oss-120b"])
    for repo in ("Qwen/Qwen3.5-397B-A17B", "Qwen/Qwen3.5-122B-A10B", "Qwen/Qwen3.5-27B",
                 "Qwen/Qwen3-Next-80B-A3B-Instruct"):  # hybrid linear attention (tests/qwen35_real.py)
        cfg, tensors = REAL_GDN_MODELS[repo]
        out[repo] = (cfg, tensors(cfg))
    return out


def build(base: Path, repo: str, cfg: dict, tensors: list) -> Path:
    path = base / repo.split("/")[1]
    if not (path / "config.json").exists():
        write_checkpoint(path, cfg, tensors, n_shards=5, header_only=True)
    return path


def markdown(repo: str, path: Path) -> str:
    advice = advise(LocalSource(path))
    quant = (json.loads((path / "config.json").read_text()).get("quantization_config") or {}).get("quant_method")
    formats = ", ".join(advice.formats) + (f"; quantization {quant}" if quant and quant not in advice.formats else "")
    out = [f"**{repo}** ({advice.architecture}, {formats})", "",
           "| TP | verdict | padded dims | extra disk | extra KV / token | attn FLOPs | MLP FLOPs |",
           "|---:|---|---|---:|---:|---:|---:|"]
    for r in advice.rows:
        verdict = verdict_cell(r) + (f": {r.why[0].split(' (')[0]}" if r.verdict == "cannot" else "")
        out.append(f"| {r.tp} | {verdict} | {dims_cell(r)} | " + " | ".join(cost_cells(r)) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="where to build the sparse checkpoints (default: a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.dir or tmp)
        print("\n\n".join(markdown(repo, build(base, repo, cfg, tensors))
                          for repo, (cfg, tensors) in checkpoints().items()))


if __name__ == "__main__":
    main()
