"""DeepSeek-V4.1 in vLLM's CPU build (0.32.0): it cannot run, original or derivative, and the Engram layer's rule that
decides which mode a TP 3 / 6 derivative serves in, checked in vLLM's own class.

- The stock CPU build stops any V4.1 as it builds the first decoder layer's attention (the V4.1 model imports the
  NVIDIA implementation on every platform but ROCm): `AssertionError: DeepseekV4 attention requires a CUDA device`.
  The test expects that message for the tiny original (tests/dsv41_real.py) at TP 1.
- vLLM's Engram layer (vllm/models/deepseek_v41/common/engram.py) built at V4.1-Flash's dims (tests/vllm_engram.py):
  outside sequence parallel its wkv is column-parallel over hidden_size x (hc_mult + 1) = 25600 outputs and stops at
  TP 3 and 6 with `AssertionError: 25600 is not divisible by 3` (6); in sequence parallel (--enable-expert-parallel
  with DP > 1 or a mega-MoE backend) it is replicated, whole on every rank; at TP 4 it shards, 6400 a rank. This is
  the card's TP note (hubpad/plan/adapters/deepseek_v41.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests import serving

pytestmark = pytest.mark.serve
pytest.importorskip("torch")

CUDA_ONLY = "AssertionError: DeepseekV4 attention requires a CUDA device"


def test_stock_cpu_build_cannot_run_deepseek_v41(tmp_path):
    from tests import dsv41_real
    from tests.serve_models import add_tokenizer

    src = dsv41_real.build_tiny(tmp_path / "upstream")
    add_tokenizer(src)  # its multimodal processor needs one (skip_tokenizer_init is refused)
    run = serving.run_vllm([serving.job(src, 1, [[1, 2, 3, 4]], dtype="bfloat16", skip_tokenizer=False)],
                           tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"], "vLLM's CPU build now builds a DeepSeek-V4.1"
    assert CUDA_ONLY in run.log and "compute_fp8_einsum_recipe" in run.log


@pytest.mark.parametrize("tp, sequence_parallel, expect", [
    (3, False, {"error": "AssertionError: 25600 is not divisible by 3"}),
    (6, False, {"error": "AssertionError: 25600 is not divisible by 6"}),
    (3, True, {"per_rank": 25600}),
    (6, True, {"per_rank": 25600}),
    (4, False, {"per_rank": 6400}),
])
def test_vllm_engram_wkv_shards_only_outside_sequence_parallel(tmp_path, tp, sequence_parallel, expect):
    from tests.dsv41_real import TEXT

    job = tmp_path / "job.json"
    keys = ("hidden_size", "hc_mult", "engram_max_ngram_size", "engram_n_heads", "engram_head_dim")
    job.write_text(json.dumps({**{k: TEXT[k] for k in keys}, "tp": tp, "sequence_parallel": sequence_parallel}))
    done = subprocess.run([serving.vllm_python(), str(Path(__file__).with_name("vllm_engram.py")), str(job)],
                          capture_output=True, text=True, env=serving.vllm_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert {k: v for k, v in report.items() if k != "trace"} == expect, report
    if "error" in expect:  # raised by the Engram's own wkv, vLLM's ColumnParallelLinear
        assert "deepseek_v41/common/engram.py" in report["trace"] and "layers/linear.py" in report["trace"]
