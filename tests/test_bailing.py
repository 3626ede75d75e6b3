"""Ling / Ring 1.x-2.0 (`bailing_moe`): the fused `attention.query_key_value` padded section by section (plan/sections.py)
and proven in float64 against a reference written after vLLM's bailing_moe.py (tests/bailing_models.py: transformers
has no class for it), at TP 3 and 6, at the published tensor names.

Tiny geometry: 4 heads / 2 kv of 8 (6 / 3 at TP 3 and 6), q/k norms, one dense layer and two MoE layers with sigmoid
routing and an expert bias, one shared expert.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import bailing_models  # noqa: E402
from tests.helpers import assert_same_logits, folder_tensors, mirror_and_verify  # noqa: E402



@pytest.mark.parametrize("tp", [3, 6])
@pytest.mark.parametrize("bias", [False, True])
def test_fused_qkv_pads_exactly(tmp_path, tp, bias):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    bailing_models.build(src, use_qkv_bias=bias)
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (6, 3, 8)
    a, b = folder_tensors(src), folder_tensors(dst)
    qkv, qkv2 = a["model.layers.1.attention.query_key_value.weight"], b["model.layers.1.attention.query_key_value.weight"]
    # [q 4x8 | k 2x8 | v 2x8] -> [q 6x8 | k 3x8 | v 3x8], each part's original rows first, zeros after
    for (s0, n, s2, n2) in ((0, 32, 0, 48), (32, 16, 48, 24), (48, 16, 72, 24)):
        assert torch.equal(qkv2[s2:s2 + n], qkv[s0:s0 + n]) and not qkv2[s2 + n:s2 + n2].any()
    ids = torch.randint(0, 128, (12,), generator=torch.Generator().manual_seed(1))
    before, after = bailing_models.logits(src, ids), bailing_models.logits(dst, ids)
    assert_same_logits(before, after, f"bailing tp{tp} bias={bias}")


def test_head_dim_is_written_where_upstream_has_none(tmp_path):
    """vLLM's BailingAttention takes config.head_dim or hidden_size // heads: 32 // 6 would be 5, not 8."""
    src = tmp_path / "upstream"
    cfg = bailing_models.build(src)
    del cfg["head_dim"]
    (src / "config.json").write_text(json.dumps(cfg))
    assert make_plan(LocalSource(src), 3).new_config["head_dim"] == 8


def test_shared_experts_of_their_own_width(tmp_path):
    """moe_shared_expert_intermediate_size is the shared MLP's own key for one shared expert; vLLM multiplies it by
    num_shared_experts, which hubpad refuses to pad for more than one."""
    src = tmp_path / "upstream"
    bailing_models.build(src, moe_shared_expert_intermediate_size=16)
    plan = make_plan(LocalSource(src), 3)
    assert {d.name: d.config_keys for d in plan.dims}["shared intermediate"] == ("moe_shared_expert_intermediate_size",)
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "num_shared_experts": 2}))
    with pytest.raises(ConfigError, match="2 shared experts of moe_shared_expert_intermediate_size 16"):
        make_plan(LocalSource(src), 3)
