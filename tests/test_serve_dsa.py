"""The sparse-attention MLA line in vLLM's CPU build: DeepSeek-V3.2, GLM-5, Hy4 and LongCat-Flash originals stop
before serving.

Not hubpad's doing: the unpadded tiny original (tests/test_dsa.py, tests/test_hy4.py: the published tensor names)
already stops at TP=1, with vLLM 0.32's own message, recorded here. The float64 proofs in transformers and the
rank-by-rank replay of vLLM's sparse MLA (tests/test_dsa.py) are what these families' derivatives rest on; when a
vLLM CPU build runs one of them, this test fails and the family joins tests/test_serve_families.py.
"""

from __future__ import annotations

import pytest

from tests import serving

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402

from tests.test_dsa import build_dsa  # noqa: E402
from tests.test_hy4 import build_hy4  # noqa: E402
from tests.test_longcat import build_longcat  # noqa: E402

pytestmark = pytest.mark.serve

PROMPTS = [[1, 17, 93, 105, 31, 7], [9, 70, 133, 77]]  # token ids of the tiny models' 160-word vocab
# model_type: vLLM's message for the original at TP=1 (float32)
# (vllm/platforms/cpu.py refuses sparse MLA; Hy4's attention.py then refuses to fall back to dense attention)
NOT_SERVED = {
    "deepseek_v32": "NotImplementedError: Sparse Attention is not supported on CPU.",
    "glm_moe_dsa": "NotImplementedError: Sparse Attention is not supported on CPU.",
    "hy_v4": "RuntimeError: HYV4 sparse attention was requested, but no valid sparse MLA backend is available for "
             "current runtime/config. Refusing to fall back to dense attention.",
}


def _float32(path):
    """The tiny float64 checkpoint as float32 (vLLM's CPU build computes in float32 at most)."""
    for f in path.glob("*.safetensors"):
        save_file({k: v.float() for k, v in load_file(f).items()}, f, metadata={"format": "pt"})
    return path


@pytest.mark.parametrize("model_type", sorted(NOT_SERVED))
def test_dsa_originals_the_cpu_build_cannot_run(tmp_path, model_type):
    _, src = build_hy4(tmp_path) if model_type == "hy_v4" else build_dsa(tmp_path, model_type)
    job = serving.job(_float32(src), 1, prompts=PROMPTS, max_model_len=64)
    run = serving.run_vllm([job], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"], f"vLLM's CPU build now serves {model_type}: serve it"
    assert NOT_SERVED[model_type] in run.log


# LongCat-Flash is plain MLA (no indexer), built as DeepSeek-V3 is served in tests/serve_models.py (float32,
# CPU_MLA with the one latent size it compiles, 512 + 64; one sequence at a time; TP 2, the original's TP with as many
# heads per rank as the TP 3 derivative). vLLM's CPU build stops in the router of its zero-computation experts
# (fused_moe/router/zero_expert_router.py -> fused_topk_bias -> vllm_topk_softmax, a CUDA-only op), on the original.
_LONGCAT_SERVE = dict(hidden_size=128, ffn_hidden_size=256, expert_ffn_hidden_size=64, num_attention_heads=4,
                      q_lora_rank=96, kv_lora_rank=512, qk_rope_head_dim=64, head_dim=64, qk_nope_head_dim=64,
                      v_head_dim=64, vocab_size=512, max_position_embeddings=128)
_CPU_MLA = {"attention_backend": "CPU_MLA", "max_num_seqs": 1}
LONGCAT_MESSAGE = "AttributeError: '_OpNamespace' '_moe_C' object has no attribute 'topk_softmax'"


def test_longcat_original_the_cpu_build_cannot_run(tmp_path):
    _, src = build_longcat(tmp_path, published=True, **_LONGCAT_SERVE)
    run = serving.run_vllm([serving.job(_float32(src), 2, **_CPU_MLA)], tmp_path / "run-original-tp2")
    assert run.results and not run.results[0]["ok"], (
        "vLLM's CPU build now serves LongCat-Flash: serve the TP 3 derivative against this original")
    assert LONGCAT_MESSAGE in run.log
