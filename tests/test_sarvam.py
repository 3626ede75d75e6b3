"""Sarvam MoE (`sarvam_moe`, SarvamMoEForCausalLM): Ling's layout and vLLM class (adapters/sarvam_moe.py), proven in float64
with transformers' own class for it (AutoModelForCausalLM: Glm4MoeForCausalLM through conversion_mapping's
`sarvam_moe`, which reads the published names) and with the reference written after vLLM's bailing_moe.py
(tests/bailing_models.py), original against the `hubpad mirror` + `hubpad verify` derivative at TP 3 and 6.

Tiny geometry: 4 heads / 2 kv of 8 -> 6 / 3 (TP 3 and 6); q/k norms, a dense first layer, two MoE layers (6
experts, sigmoid routing with an expert bias, one shared expert).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests import bailing_models  # noqa: E402
from tests.helpers import assert_same_logits, mirror_and_verify  # noqa: E402

SARVAM = dict(architectures=["SarvamMoEForCausalLM"], model_type="sarvam_moe", partial_rotary_factor=1.0)


def _transformers_logits(path, ids):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64,
                                                              experts_implementation="eager").eval()
    with torch.no_grad():
        return model(input_ids=ids[None]).logits[0]


@pytest.mark.parametrize("tp", [3, 6])
def test_sarvam_moe_pads_exactly(tmp_path, tp):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    bailing_models.build(src, **SARVAM)
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (6, 3, 8)
    ids = torch.randint(0, 128, (12,), generator=torch.Generator().manual_seed(1))
    assert_same_logits(bailing_models.logits(src, ids), bailing_models.logits(dst, ids), f"vLLM reference tp{tp}")
    assert_same_logits(_transformers_logits(src, ids), _transformers_logits(dst, ids), f"transformers tp{tp}")


def test_sarvam_card_serves_with_remote_code():
    """vLLM 0.32 registers no config class for sarvam_moe (nor does its CPU build's transformers 5.19)."""
    from hubpad.plan.adapters import adapter_for
    from hubpad.plan.adapters.vllm import min_vllm
    from tests import moe_stream_real

    cfg = moe_stream_real.SARVAM_30B
    out = adapter_for(cfg).serving(cfg)
    assert out["extra_args"] == ["--trust-remote-code"]
    assert min_vllm(out["vllm_features"])["version"] == "0.18.0"
