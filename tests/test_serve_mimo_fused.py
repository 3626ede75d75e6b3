"""vLLM's own loader reads a padded MiMo-V2.5 fused qkv_proj ("Pro format") as it reads the original's.

vLLM's CPU build cannot run FP8 block layers on a CPU without AMX (docs/serving-tier.md), so the serving tier checks
the step that decides the per-rank weights: `_shard_fp8_qkv_proj` from vLLM's mimo_v2.py (the decoder layers' and the
MTP layers' loader), run in the serving venv on a checkpoint with MiMo-V2.5's attention geometry (64 heads, 4 full kv
heads, 8 SWA kv heads, q/k 192, v 128: chunks of 3392 and 3712 rows, 128 x 128 blocks) and a small hidden size.
vLLM reads num_key_value_heads (6 after padding) as the chunk count. At TP 6 every rank gets one chunk as stored (the
plain path), and ranks 0-3 get byte for byte what the original's ranks get at TP 4; at TP 3 vLLM gathers two chunks
per rank and re-quantizes them (its own step at any TP but the chunk count), and ranks 0-1 get byte for byte what
the original's get at TP 2. The remaining ranks hold only the appended zero chunks.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from safetensors.torch import save_file  # noqa: E402

from tests import mimo_real, serving  # noqa: E402
from tests.helpers import mirror_and_verify  # noqa: E402
from tests.mimo_fused import fused_fp8  # noqa: E402

pytestmark = pytest.mark.serve

GEOMETRY = {**mimo_real.MIMO_V2_FLASH, "hidden_size": 256, "num_hidden_layers": 2, "hybrid_layer_pattern": [0, 1],
            "moe_layer_freq": [0, 1], "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
            "intermediate_size": 256, "vocab_size": 512, "num_nextn_predict_layers": 1, "model_type": "mimo_v2",
            "architectures": ["MiMoV2ForCausalLM"],
            "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128],
                                    "activation_scheme": "dynamic"}}
LAYERS = [["model.layers.0.self_attn.", False], ["model.layers.1.self_attn.", True],
          ["model.mtp.layers.0.self_attn.", True]]


def _checkpoint(path: Path, tiling: str) -> Path:
    """MiMo-V2.5's attention geometry with FP8 fused qkv_proj (random normal weights), the rest BF16."""
    path.mkdir(parents=True)
    g = torch.Generator().manual_seed(3)
    cfg = GEOMETRY
    out = {}
    for name, dtype, shape in mimo_real.tensors(cfg):
        prefix, _, leaf = name.rpartition(".self_attn.")
        if leaf in ("k_proj.weight", "v_proj.weight"):
            continue
        t = torch.randn(shape, generator=g, dtype=torch.float32) * 0.05
        if leaf == "q_proj.weight":
            swa = ".mtp." in name or cfg["hybrid_layer_pattern"][int(prefix.rsplit(".", 1)[1])] == 1
            kv = cfg["swa_num_key_value_heads"] if swa else cfg["num_key_value_heads"]
            n = cfg["num_key_value_heads"]
            rows = cfg["num_attention_heads"] // n * 192 + kv // n * (192 + 128)
            codes, scale = fused_fp8(torch.randn(n * rows, cfg["hidden_size"], generator=g, dtype=torch.float64),
                                     n, tiling, block=128)
            out[prefix + ".self_attn.qkv_proj.weight"], out[prefix + ".self_attn.qkv_proj.weight_scale_inv"] = \
                codes, scale
        else:
            out[name] = t.to(torch.float32 if dtype == "F32" else torch.bfloat16)
    save_file(out, path / "model.safetensors", metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("tiling", ["chunk", "grid"])
def test_vllm_loader_gives_the_padded_fused_qkv_the_originals_rank_weights(tmp_path, tiling):
    src = _checkpoint(tmp_path / "upstream", tiling)
    derivatives = {}
    for tp in (3, 6):
        derivatives[str(tp)] = str(tmp_path / f"tp{tp}")
        mirror_and_verify(src, Path(derivatives[str(tp)]), tp)
    # the original as a one-shard folder with an index, as the script reads it
    (src / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {n: "model.safetensors" for n in _names(src / "model.safetensors")}}))
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"original": str(src), "derivatives": derivatives, "reference_tp": {"3": 2, "6": 4},
                               "layers": LAYERS}))
    done = subprocess.run([serving.vllm_python(), str(Path(__file__).with_name("vllm_qkv_shards.py")), str(job)],
                          capture_output=True, text=True, env=serving.vllm_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(report)
    for prefix, _ in LAYERS:
        assert report[f"tp3 {prefix}"] == ["same", "same", "zero"]
        assert report[f"tp6 {prefix}"] == ["same"] * 4 + ["zero"] * 2


def _names(file: Path) -> list[str]:
    from safetensors import safe_open

    with safe_open(str(file), "pt") as f:
        return list(f.keys())
