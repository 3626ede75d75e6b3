"""Build vLLM's own DeepSeek-V4.1 Engram layer at a TP size and report what its `wkv` becomes: `python vllm_engram.py
JOB.json`, with the serving venv's python (like tests/vllm_runner.py, it imports nothing of hubpad or the tests).

The job gives the layer's dims (hidden_size, hc_mult, engram_max_ngram_size, engram_n_heads, engram_head_dim), the
TP size and whether the model runs sequence parallel. vllm/models/deepseek_v41/common/engram.py's `Engram.__init__`
runs as it is, with three stand-ins that touch nothing `wkv` depends on: the TP world size and rank its
ColumnParallelLinear and parameters read (no process group is started), and the hash-table embedding and its staging
buffers (they ask for a CUDA device). Prints one JSON line: {"per_rank": wkv outputs on a rank} or {"error": "..."}.
"""

from __future__ import annotations

import json
import sys
import traceback
import types


def build(job: dict) -> dict:
    import vllm.model_executor.layers.linear as linear
    import vllm.model_executor.parameter as parameter
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.models.deepseek_v41.common import engram

    tp = job["tp"]
    for module in (linear, parameter):
        module.get_tensor_model_parallel_world_size = lambda: tp
        module.get_tensor_model_parallel_rank = lambda: 0
    engram.Engram._create_embedding = lambda self, layout, index: types.SimpleNamespace()
    engram.Engram._init_staging = lambda self, max_tokens, head_dim: None
    layout = types.SimpleNamespace(max_ngram_size=job["engram_max_ngram_size"], n_heads=job["engram_n_heads"],
                                   head_dim=job["engram_head_dim"])
    config = types.SimpleNamespace(hidden_size=job["hidden_size"], hc_mult=job["hc_mult"], rms_norm_eps=1e-20)
    try:
        with set_current_vllm_config(VllmConfig()):
            layer = engram.Engram(config, None, layout, 0, use_sequence_parallel=job["sequence_parallel"],
                                  prefix="layers.1.engram")
    except AssertionError as exc:
        return {"error": f"AssertionError: {exc}", "trace": traceback.format_exc()[-1500:]}
    return {"per_rank": layer.wkv.output_size_per_partition}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(build(json.load(f))))
