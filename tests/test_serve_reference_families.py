"""Step-3 (`step3_text`), Ling / Ring 2.0 (`bailing_moe`), Sarvam MoE (`sarvam_moe`) and Param-2 MoE (`param2moe`:
both in Ling's layout) in vLLM's CPU build: families served without a transformers class in vLLM's venv, built from their reference modules
(tests/step3_models.py, tests/bailing_models.py) in BF16 with the serving tier's tokenizer, the original served at
TP 1 and the `hubpad mirror --tp 3` derivative at TP 3 with its vocab plugin, the same greedy tokens
(tests/serving.py's bounds). Seed 6 for all: the references put seed 0's closest greedy steps 1.6e-3 (Step-3) and
4.8e-3 (Ling) from a tie, as vLLM then measured, and seed 6's 7.3e-2 and 4.2e-2.

Step-3 loads through vLLM's own Step3TextConfig; Ling, Sarvam and Param-2 through a stand-in for the hub's remote-code config
(not inclusionAI's, Sarvam's or BharatGen's file: its keys as plain attributes, and the rope_parameters vLLM's BailingAttention
writes into), with --trust-remote-code as the card says. vLLM's loader splits the fused `query_key_value` by the
derivative's head counts: a section padded at the wrong place would change the tokens.
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

torch = pytest.importorskip("torch")

_STANDIN = '''from transformers import PretrainedConfig


class BailingMoeV2Config(PretrainedConfig):
    """A stand-in for the hub's remote-code config (not inclusionAI's file): every key as a plain attribute."""

    model_type = "bailing_moe"

    def __init__(self, rope_theta=10000.0, partial_rotary_factor=1.0, **kwargs):
        self.rope_theta, self.partial_rotary_factor = rope_theta, partial_rotary_factor
        self.rope_parameters = {"rope_type": "default", "rope_theta": rope_theta}
        super().__init__(**kwargs)
'''
SERVE = dict(hidden_size=128, num_attention_heads=4, head_dim=32, vocab_size=512, num_hidden_layers=2,
             max_position_embeddings=256)


def _step3(path):
    from tests import serve_models, step3_models

    step3_models.build(path, seed=6, dtype=torch.bfloat16, **SERVE, intermediate_size=256, share_q_dim=64,
                       moe_intermediate_size=64, moe_num_experts=4, moe_top_k=2, share_expert_dim=64,
                       moe_layers_enum="1", max_position_embedding=256, max_seq_len=256,
                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    serve_models.add_tokenizer(path)
    return path, {}


def _ling(path, model_type: str = "bailing_moe", **over):
    from tests import bailing_models, serve_models

    bailing_models.build(path, seed=6, dtype=torch.bfloat16, **SERVE, num_key_value_heads=2,
                               intermediate_size=256, moe_intermediate_size=64, num_experts=4, embedding_dropout=0.0,
                               auto_map={"AutoConfig": "configuration_bailing_moe_v2.BailingMoeV2Config"},
                               model_type=model_type, **over)
    (path / "configuration_bailing_moe_v2.py").write_text(_STANDIN.replace('"bailing_moe"', repr(model_type)))
    serve_models.add_tokenizer(path)
    return path, {"trust_remote_code": True}


def _sarvam(path):
    """Sarvam MoE: Ling's tensors under model_type sarvam_moe, served by vLLM's SarvamMoEForCausalLM (which
    zero-centres each router's expert_bias as it loads)."""
    return _ling(path, "sarvam_moe", architectures=["SarvamMoEForCausalLM"])


def _param2(path):
    """Param-2 MoE: Ling's tensors under model_type param2moe, served by vLLM's Param2MoEForCausalLM (kv heads 2 -> 3,
    sharded at TP 3), with two shared experts in one MLP of its own width; rope_scaling stated (null) as published:
    vLLM's Param2MoEAttention reads it with no default."""
    return _ling(path, "param2moe", architectures=["Param2MoEForCausalLM"], num_shared_experts=2,
                 moe_shared_expert_intermediate_size=128, rope_scaling=None)


@pytest.mark.parametrize("family", ["step3_text", "bailing_moe", "sarvam_moe", "param2moe"])
def test_reference_family_serves_the_originals_outputs(tmp_path, family):
    from tests.helpers import cli

    src, engine = {"step3_text": _step3, "bailing_moe": _ling, "sarvam_moe": _sarvam,
                    "param2moe": _param2}[family](tmp_path / "upstream")
    original = serving.run_vllm([serving.job(src, 1, **engine)], tmp_path / "run-original").ok(0)
    dst = tmp_path / "tp3"
    result = cli("mirror", src, "--tp", "3", "--to", dst)
    assert result.exit_code == 0, result.output
    assert json.loads((dst / "config.json").read_text())["num_attention_heads"] == 6
    run = serving.run_vllm([serving.job(dst, 3, **engine, **serving.card_engine_args(dst))], tmp_path / "run-tp3",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    serving.assert_same_outputs(original, run.ok(0), f"{family} TP=1 vs derivative TP=3")
