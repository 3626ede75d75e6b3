"""A.X-K1 (`AXK1` / `axk1`, AXK1ForCausalLM): DeepSeek-V3's MLA rules with `post_mlp_layernorm` copied
(adapters/axk1.py), proven in float64 with transformers' own AXK1ForCausalLM at the published names, original against
the `hubpad mirror` + `hubpad verify` derivative at TP 3 and 6 (4 MLA heads -> 6).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests import axk1_models  # noqa: E402
from tests.helpers import assert_same_logits, folder_tensors, mirror_and_verify  # noqa: E402


@pytest.mark.parametrize("tp", [3, 6])
def test_axk1_pads_exactly(tmp_path, tp):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    axk1_models.build(src)
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert cfg["num_attention_heads"] == 6
    a, b = folder_tensors(src), folder_tensors(dst)
    assert torch.equal(a["model.layers.1.post_mlp_layernorm.weight"], b["model.layers.1.post_mlp_layernorm.weight"])
    assert b["model.layers.1.self_attn.q_b_proj.weight"].shape == (6 * 16, 24)
    ids = torch.randint(0, 128, (12,), generator=torch.Generator().manual_seed(1))
    assert_same_logits(axk1_models.logits(src, ids), axk1_models.logits(dst, ids), f"axk1 tp{tp}")


def test_axk1_published_config_plans_the_same_and_serves_with_remote_code(tmp_path):
    """model_type `AXK1` (the hub's remote-code config) pads like transformers' `axk1`; its card adds
    --trust-remote-code (transformers knows only `axk1`)."""
    from hubpad.plan.adapters import adapter_for
    from hubpad.plan.adapters.vllm import min_vllm
    from hubpad.plan.planner import make_plan
    from hubpad.source.local import LocalSource

    axk1_models.build(tmp_path / "saved")
    axk1_models.build(tmp_path / "published", published=True)
    saved, published = (make_plan(LocalSource(tmp_path / p), 3) for p in ("saved", "published"))
    assert [(d.name, d.after) for d in saved.dims] == [(d.name, d.after) for d in published.dims]
    assert published.new_config["model_type"] == "AXK1"
    out = adapter_for(published.config).serving(published.config)
    assert out["extra_args"] == ["--trust-remote-code"] and out["speculative_config"] is None
    assert adapter_for(saved.config).serving(saved.config)["extra_args"] == []
    assert min_vllm(out["vllm_features"])["version"] == "0.17.0"
