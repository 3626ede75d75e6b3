"""Stock vLLM (its CPU build) serves each family's derivative at the padded TP with the original's outputs.

For every family hubpad pads and vLLM's CPU backend runs: a tiny upstream (tests/serve_models.py) is served at
TP=1 (MLA, whose outputs in vLLM's CPU build depend on the heads per rank: at the TP with as many heads per rank as
the derivative has, Family.reference_tp), `hubpad mirror --tp N` pads it, the derivative is served at TP=N with its
own vocab plugin pip-installed and the card's model flags (as its card says), and the greedy tokens must be
identical with every logprob within float32 noise (tests/serving.py: LOGPROB_BOUND, and the margin that makes equal
tokens meaningful).
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

# (family, padded TP): TP=3 for every family, and TP=6 for Llama, Qwen2, the MLA pair's DeepSeek-V3 and a MoE
# (Qwen3-MoE).
CASES = [
    pytest.param("llama", 3, marks=pytest.mark.gate, id="llama-tp3"),
    pytest.param("llama", 6, id="llama-tp6"),
    pytest.param("qwen2", 3, id="qwen2-tp3"),  # served through vLLM's Llama class: the card's --hf-overrides
    pytest.param("qwen2", 6, id="qwen2-tp6"),
    pytest.param("qwen2_moe", 3, id="qwen2_moe-tp3"),  # vLLM's Transformers backend: the card's --model-impl
    pytest.param("qwen3", 3, id="qwen3-tp3"),
    pytest.param("qwen3_moe", 3, id="qwen3_moe-tp3"),
    pytest.param("qwen3_moe", 6, id="qwen3_moe-tp6"),
    pytest.param("mixtral", 3, id="mixtral-tp3"),
    pytest.param("hy_v3", 3, marks=pytest.mark.gate, id="hy_v3-tp3"),
    pytest.param("glm4_moe", 3, id="glm4_moe-tp3"),
    pytest.param("gemma3_text", 3, id="gemma3_text-tp3"),
    pytest.param("gemma4_text", 3, id="gemma4_text-tp3"),
    pytest.param("gemma4_text", 6, id="gemma4_text-tp6"),
    pytest.param("gemma4_moe", 3, id="gemma4_moe-tp3"),
    pytest.param("gemma4_moe", 6, id="gemma4_moe-tp6"),
    pytest.param("deepseek_v3", 3, id="deepseek_v3-tp3"),
    pytest.param("deepseek_v3", 6, id="deepseek_v3-tp6"),
    pytest.param("kimi_k2", 3, id="kimi_k2-tp3"),
    pytest.param("axk1", 3, id="axk1-tp3"),  # A.X-K1: DeepSeek-V3's MLA plus post_mlp_layernorm (issue 33)
    pytest.param("glm4_moe_lite", 3, id="glm4_moe_lite-tp3"),
    pytest.param("glm4_moe_lite", 6, id="glm4_moe_lite-tp6"),
    pytest.param("deepseek_v2", 3, id="deepseek_v2-tp3"),  # through the card's --hf-overrides (a config class)
    pytest.param("minimax_m2", 3, id="minimax_m2-tp3"),  # q/k rescaled (float32 checkpoint, softmax routing)
    # the GQA families with config quirks (issue 33, docs/families/gqa-quirks.md): head_dim written where the classes
    # would take hidden // heads (ERNIE, Cohere), Command R+'s per-head q/k LayerNorm rows, Laguna's per-layer heads
    # (its MLPs dense: the CPU router refuses its MoE, test_laguna_moe_sigmoid_routing_stops_in_the_cpu_router)
    pytest.param("ernie4_5_moe", 3, id="ernie4_5_moe-tp3"),
    pytest.param("exaone4", 3, id="exaone4-tp3"),
    pytest.param("exaone4", 6, id="exaone4-tp6"),
    pytest.param("exaone_moe", 3, id="exaone_moe-tp3"),
    pytest.param("cohere2", 3, id="cohere2-tp3"),
    pytest.param("cohere", 3, id="cohere-tp3"),
    pytest.param("cohere2_moe", 3, id="cohere2_moe-tp3"),
    pytest.param("afmoe", 3, id="afmoe-tp3"),
    pytest.param("laguna", 3, id="laguna-tp3"),
    pytest.param("laguna", 6, id="laguna-tp6"),
]


@pytest.mark.parametrize("family, tp", CASES)
def test_derivative_serves_the_originals_outputs(zoo, family, tp):
    original = zoo.original(family, tp)
    derivative = zoo.derivative(family, tp)
    config = json.loads((derivative / "config.json").read_text())
    upstream = json.loads((zoo.upstream(family) / "config.json").read_text())
    assert config["num_attention_heads"] > upstream["num_attention_heads"]  # heads really were padded
    assert config["num_attention_heads"] % tp == 0
    engine = {**zoo.engine(family), **serving.card_engine_args(derivative)}  # as the card's command serves it
    run = serving.run_vllm([serving.job(derivative, tp, **engine)], derivative.parent / f"run-tp{tp}",
                           plugins=zoo.plugin(derivative))
    served = run.ok(0)
    serving.assert_same_outputs(original, served, f"{family} TP={zoo.reference_tp(family, tp)} vs derivative TP={tp}")


# MiMo-V2-Flash in vLLM's CPU build (0.32): with q/k heads wider than v/o heads (192 / 128 as published) MiMoV2Attention
# picks the TRITON_ATTN_DIFFKV backend, whose KV-cache write calls triton, which the CPU build does not have: the
# unpadded original already stops with this message. With equal widths the model takes the CPU attention backend.
MIMO_DIFFKV_MESSAGE = "module 'triton' has no attribute 'next_power_of_2'"
_MIMO_SERVE = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=1, intermediate_size=256,
                   moe_intermediate_size=64, vocab_size=512, n_routed_experts=8)


def _mimo_upstream(path, v_head_dim):
    import torch

    from tests import serve_models
    from tests.mimo_models import build_mimo

    build_mimo(path, dtype=torch.bfloat16, mtp=False, head_dim=64, v_head_dim=v_head_dim, **_MIMO_SERVE)
    serve_models.add_tokenizer(path)
    return path


def test_mimo_v2_flash_with_narrower_v_heads_stops_in_the_cpu_build(tmp_path):
    """Not hubpad's doing: the unpadded original stops, with vLLM's own message (docs/families/mimo-gemma-step.md)."""
    src = _mimo_upstream(tmp_path / "upstream", v_head_dim=32)
    run = serving.run_vllm([serving.job(src, 1)], tmp_path / "run-original")
    assert run.results and not run.results[0]["ok"], "vLLM's CPU build now serves MiMo-V2 with v_head_dim != head_dim"
    assert MIMO_DIFFKV_MESSAGE in run.log


@pytest.mark.parametrize("tp", [3, 6])
def test_mimo_v2_flash_with_equal_head_widths_serves_the_originals_outputs(tmp_path, tp):
    """Full and SWA layers (1 / 2 kv heads, sinks on SWA layers) padded to 12 / 3 / 6 heads, served as the card says."""
    from tests.helpers import cli

    src = _mimo_upstream(tmp_path / "upstream", v_head_dim=64)
    original = serving.run_vllm([serving.job(src, 1)], tmp_path / "run-original").ok(0)
    dst = tmp_path / f"tp{tp}"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    config = json.loads((dst / "config.json").read_text())
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["swa_num_attention_heads"],
            config["swa_num_key_value_heads"]) == (12, 3, 12, 6)
    engine = serving.card_engine_args(dst)
    run = serving.run_vllm([serving.job(dst, tp, **engine)], tmp_path / f"run-tp{tp}",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    serving.assert_same_outputs(original, run.ok(0), f"mimo_v2_flash TP=1 vs derivative TP={tp}")


def test_minimax_m2_published_sigmoid_routing_stops_in_the_cpu_router(zoo, tmp_path):
    """MiniMax-M2 as published routes with sigmoid + e_score_correction_bias; vLLM's CPU router (cpu_router.py
    CPURouter._compute_routing) runs softmax top-k only for a router without groups or a custom routing function:
    `assert self.scoring_func == "softmax"`. So the CPU build cannot serve the published routing, padded or not."""
    import shutil

    upstream = tmp_path / "sigmoid"
    shutil.copytree(zoo.upstream("minimax_m2"), upstream)
    config = json.loads((upstream / "config.json").read_text())
    (upstream / "config.json").write_text(json.dumps({**config, "scoring_func": "sigmoid", "use_routing_bias": True}))
    run = serving.run_vllm([serving.job(upstream, 1)], tmp_path / "run")
    assert not (run.results and run.results[0]["ok"])
    assert 'assert self.scoring_func == "softmax"' in run.log and "AssertionError" in run.log


def test_laguna_moe_sigmoid_routing_stops_in_the_cpu_router(zoo, tmp_path):
    """Laguna's MoE block (laguna.py LagunaMoE) routes with `scoring_func="sigmoid"` hard-coded, whatever config.json
    says, and vLLM's CPU router takes softmax only there (`assert self.scoring_func == "softmax"`): the unpadded original
    stops. The serving tier serves Laguna with dense MLPs instead ("laguna" above: its per-layer heads padded), and the
    MoE padding is proven in float64 (tests/test_gqa_families.py)."""
    run = serving.run_vllm([serving.job(zoo.upstream("laguna-moe"), 1)], tmp_path / "run")
    assert not (run.results and run.results[0]["ok"])
    assert 'assert self.scoring_func == "softmax"' in run.log and "AssertionError" in run.log


def test_minimax_m3_has_no_path_in_vllms_cpu_build(tmp_path):
    """vLLM's MiniMax-M3 classes (vllm/models/minimax_m3: nvidia/ on every platform but ROCm) cannot run on its CPU
    build. Here the engine stops first at the model inspection: nvidia/model.py imports common/mm_preprocess.py, whose
    processor (transformers_utils/processors/minimax_m3.py) imports torchvision, which the serving venv leaves out
    (requirements/serve.txt; as for Qwen3-VL, test_serve_vlm.py). Behind it, the CPU build lacks what the M3 classes
    call on every forward: the custom op fused_minimax_m3_qknorm_rope_kv_insert and flashinfer (their Gemma RMSNorm),
    checked by importing them in the serving venv. The tiny M3 of tests/test_minimax_m3.py, saved in BF16 with a
    tokenizer (head_dim 64)."""
    import subprocess

    import torch
    import transformers

    from tests import serve_models
    from tests.test_minimax_m3 import PUBLISHED_TEXT, TEXT, VISION

    text = dict(TEXT, vocab_size=serve_models.VOCAB, num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                index_n_heads=2, index_head_dim=64, hidden_size=128, rotary_dim=32)
    cfg = transformers.CONFIG_MAPPING["minimax_m3_vl"](text_config=text, vision_config=VISION, projector_hidden_size=64)
    model = transformers.AutoModelForImageTextToText.from_config(cfg)
    upstream = tmp_path / "m3"
    model.to(torch.bfloat16).save_pretrained(upstream)
    serve_models.add_tokenizer(upstream)
    config = json.loads((upstream / "config.json").read_text())
    published = dict(PUBLISHED_TEXT, sparse_attention_config=dict(PUBLISHED_TEXT["sparse_attention_config"],
                                                                  sparse_index_dim=64, sparse_num_index_heads=2))
    config["text_config"].update(published, rope_theta=5000000.0, partial_rotary_factor=0.5)
    (upstream / "config.json").write_text(json.dumps(config, indent=2))
    run = serving.run_vllm([serving.job(upstream, 1)], tmp_path / "run")
    assert not (run.results and run.results[0]["ok"])
    assert "Model architectures ['MiniMaxM3SparseForConditionalGeneration'] failed to be inspected" in run.log
    assert "No module named 'torchvision'" in run.log

    probe = ("import torch, vllm._custom_ops\n"
             "try:\n    torch.ops._C.fused_minimax_m3_qknorm_rope_kv_insert\nexcept AttributeError as e:\n    print(e)\n"
             "try:\n    import flashinfer\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([serving.vllm_python(), "-c", probe], capture_output=True, text=True, timeout=600,
                         env=serving.vllm_env()).stdout
    assert "'_OpNamespace' '_C' object has no attribute 'fused_minimax_m3_qknorm_rope_kv_insert'" in out
    assert "No module named 'flashinfer'" in out


def test_deepseek_v2_derivative_without_the_cards_route_stops(zoo):
    """The card's --hf-overrides is what makes a padded DeepSeek-V2 load: without it vLLM reads config.json with
    transformers' DeepseekV2Config, which refuses 6 heads on hidden 128 before a weight is read (adapters/deepseek_v2.py:
    the message the card quotes)."""
    derivative = zoo.derivative("deepseek_v2", 3)
    run = serving.run_vllm([serving.job(derivative, 3, **zoo.engine("deepseek_v2"))], derivative.parent / "run-no-route",
                           plugins=zoo.plugin(derivative))
    assert not (run.results and run.results[0]["ok"]), "vLLM now loads a padded DeepSeek-V2 without the route"
    assert "The hidden size (128) is not a multiple of the number of attention heads (6)." in run.log
