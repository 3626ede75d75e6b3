"""Run by the serving venv's python: vLLM's own `_shard_fp8_qkv_proj` (mimo_v2.py, also the MTP loader's) on every
fused qkv_proj of an original and of its derivatives, and report which per-rank results are byte-identical.

argv: a JSON file {"original": DIR, "derivatives": {"3": DIR, ...}, "reference_tp": {"3": 2, "6": 4}, "layers":
[[PREFIX, SWA], ...]}. Prints one JSON object: per derivative TP and layer, for each rank whether its (weight, scale)
equal the original's at reference_tp (real ranks) or its weight is all zero (padded ranks), and whether vLLM took
the plain-chunk path (tp == num_key_value_heads with chunk-tiled scales) or re-quantized.
"""

import json
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from vllm.model_executor.models.mimo_v2 import _shard_fp8_qkv_proj


def load(folder: Path, name: str) -> torch.Tensor:
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    with safe_open(str(folder / index[name]), "pt") as f:
        return f.get_tensor(name)


def shards(folder: Path, prefix: str, swa: bool, tp: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    cfg = json.loads((folder / "config.json").read_text())
    w, s = load(folder, prefix + "qkv_proj.weight"), load(folder, prefix + "qkv_proj.weight_scale_inv")
    heads = cfg["swa_num_attention_heads"] if swa else cfg["num_attention_heads"]
    kv = cfg["swa_num_key_value_heads"] if swa else cfg["num_key_value_heads"]
    hd = cfg["swa_head_dim"] if swa else cfg["head_dim"]
    vd = cfg["swa_v_head_dim"] if swa else cfg["v_head_dim"]
    return [_shard_fp8_qkv_proj(w, s, num_heads=heads, num_kv_heads=kv, head_dim=hd, v_head_dim=vd, tp_rank=r,
                                tp_size=tp, ckpt_tp=cfg["num_key_value_heads"]) for r in range(tp)]


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    original = Path(job["original"])
    report = {}
    for tp, folder in job["derivatives"].items():
        ref_tp = job["reference_tp"][tp]
        for prefix, swa in job["layers"]:
            ref = shards(original, prefix, swa, ref_tp)
            got = shards(Path(folder), prefix, swa, int(tp))
            ranks = []
            for r, (w, s) in enumerate(got):
                if r < ref_tp:
                    same = torch.equal(w.view(torch.uint8), ref[r][0].view(torch.uint8)) and torch.equal(s, ref[r][1])
                    ranks.append("same" if same else "differs")
                else:
                    ranks.append("zero" if not w.view(torch.uint8).any() else "nonzero")
            report[f"tp{tp} {prefix}"] = ranks
    print(json.dumps(report))


if __name__ == "__main__":
    main()
