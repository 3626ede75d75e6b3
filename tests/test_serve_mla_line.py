"""K2-Horizon and Dots3 Note in vLLM's CPU build (0.32): what it serves, and the message where it cannot.

K2-Horizon's plain layout (K2-Horizon-375B-A23B's: grouped-query attention, dense then MoE layers) serves: a tiny
original at TP 1 against its derivative at TP 3 and 6, with the card's flags (--trust-remote-code: the checkpoint
names its config class in auto_map, as the published repos do), the same greedy tokens. Its published sigmoid routing
does not run on the CPU build (vLLM's CPU router takes softmax only for a router without groups, as MiniMax-M2's row
found), so the served fixture routes with softmax, in the original and the derivative alike; the sigmoid original's
own failure is expected here. The MoVA layout and Dots3 Note stop on the original already, each with vLLM's own
message, recorded here; their derivatives rest on the float64 proofs (tests/test_k2_horizon.py,
tests/test_dots3_note.py).
"""

from __future__ import annotations

import json

import pytest

from tests import serving

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests import k2_horizon_models as k2  # noqa: E402
from tests import serve_models  # noqa: E402
from tests.helpers import cli  # noqa: E402

pytestmark = pytest.mark.serve

# head_dim 64 with RoPE on 32 of it (vLLM's CPU attention takes 64), the 512-word tokenizer vocab, 8 experts of 64
K2_SERVE = dict(vocab_size=serve_models.VOCAB, hidden_size=128, head_dim=64, rope_head_dim=32, intermediate_size=256,
                moe_intermediate_size=64, num_experts=8, max_position_embeddings=256, router_score_func="softmax")
K2_ENGINE = {"trust_remote_code": True}


def _k2_upstream(path, seed: int = 0, **overrides):
    k2.write(path, k2.config(**{**K2_SERVE, **overrides}), seed=seed, dtype=torch.bfloat16)
    k2.add_remote_config(path)
    serve_models.add_tokenizer(path)
    return path


@pytest.fixture(scope="module")
def k2_original(tmp_path_factory):
    root = tmp_path_factory.mktemp("k2-horizon")
    src = _k2_upstream(root / "upstream")
    return src, serving.run_vllm([serving.job(src, 1, **K2_ENGINE)], root / "run-original").ok(0)


@pytest.mark.parametrize("tp", [3, 6])
def test_k2_horizon_derivative_serves_the_originals_outputs(k2_original, tmp_path, tp):
    src, original = k2_original
    dst = tmp_path / f"tp{tp}"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    config = json.loads((dst / "config.json").read_text())
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (6, 3)
    assert "--trust-remote-code" in serving.card_serve_command(dst)
    run = serving.run_vllm([serving.job(dst, tp, **K2_ENGINE, **serving.card_engine_args(dst))], tmp_path / "run",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    serving.assert_same_outputs(original, run.ok(0), f"k2_horizon TP=1 vs derivative TP={tp}")


# model variant -> what vLLM's CPU build says on the unpadded original (TP 1). MoVA: the value experts run only in a
# Triton kernel (fused_mova_impl), and before it the CPU build has already packed each expert's weight away
# (dispatch_cpu_unquantized_gemm leaves an empty one), so stacking them gives 2 dims where the kernel reads 3.
NOT_SERVED = {
    "sigmoid routing": ({"router_score_func": "sigmoid"}, ['assert self.scoring_func == "softmax"']),
    "MoVA": (k2.MOVA, ["in fused_mova_impl",
                       "IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 2)"]),
}


@pytest.mark.parametrize("variant", sorted(NOT_SERVED))
def test_k2_horizon_originals_the_cpu_build_cannot_run(tmp_path, variant):
    overrides, messages = NOT_SERVED[variant]
    src = _k2_upstream(tmp_path / "upstream", **overrides)
    run = serving.run_vllm([serving.job(src, 1, **K2_ENGINE)], tmp_path / "run")
    assert not (run.results and run.results[0]["ok"]), f"vLLM's CPU build now serves K2-Horizon with {variant}"
    for message in messages:
        assert message in run.log, _errors(run.log)


def _errors(log: str) -> str:
    """The log's error lines (for a failing assertion's message)."""
    return "\n".join(line for line in log.splitlines() if "Error" in line or "error" in line)[-4000:]


# vLLM's Dots3 Note module imports the CUDA sparse-MLA backend (flashattn_mla_sparse) when it is loaded, so the CPU
# build cannot even inspect the architecture: the original and any derivative stop here, before a weight is read.
DOTS3_MESSAGES = ["ImportError: vllm.vllm_flash_attn requires the CUDA flash attention extensions "
                  "(_vllm_fa2_C or _vllm_fa3_C).",
                  "Model architectures ['Dots3NoteForCausalLM'] failed to be inspected"]


def test_dots3_note_original_the_cpu_build_cannot_run(tmp_path):
    from tests import dots3_models

    _, src = dots3_models.build(tmp_path / "upstream", dtype=torch.float32)
    serve_models.add_tokenizer(src, ("<|imgpad|>",))  # vLLM's Dots3NoteForCausalLM looks it up in added_tokens.json
    (src / "added_tokens.json").write_text(json.dumps({"<|imgpad|>": 5 + len(serve_models.PARSER_TOKENS)}))
    run = serving.run_vllm([serving.job(src, 1, limit_mm_per_prompt={"image": 0, "audio": 0, "video": 0})],
                           tmp_path / "run")
    assert not (run.results and run.results[0]["ok"]), "vLLM's CPU build now serves Dots3 Note: serve its derivative"
    for message in DOTS3_MESSAGES:
        assert message in run.log, _errors(run.log)
