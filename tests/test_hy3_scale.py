"""Plan Hy3 at its real shapes (81 layers, 192 experts, ~47k tensors) from headers over sparse files."""

from __future__ import annotations

import json

import pytest

from hubpad.testing import quant_config, tiny_hy3_tensors, write_checkpoint
from tests.helpers import cli
from tests.hy3_real import HY3_CONFIG

EXPECTED = {"num_attention_heads": 72, "num_key_value_heads": 9, "head_dim": 128, "intermediate_size": 13440,
            "moe_intermediate_size": 1536, "expert_hidden_dim": 1536}


@pytest.fixture(scope="module")
def hy3_bf16(tmp_path_factory):
    path = tmp_path_factory.mktemp("hy3") / "Hy3"
    return write_checkpoint(path, HY3_CONFIG, tiny_hy3_tensors(HY3_CONFIG, "bf16"), n_shards=5, header_only=True)


@pytest.fixture(scope="module")
def hy3_redhat(tmp_path_factory):
    cfg = dict(HY3_CONFIG, quantization_config=quant_config(80))
    path = tmp_path_factory.mktemp("hy3rh") / "Hy3-NVFP4-FP8"
    return write_checkpoint(path, cfg, tiny_hy3_tensors(cfg, "redhat"), n_shards=5, header_only=True)


@pytest.mark.parametrize("layout", ["hy3_bf16", "hy3_redhat"])
def test_hy3_plan_at_real_scale(layout, request):
    src = request.getfixturevalue(layout)
    result = cli("plan", src, "--tp", "3", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["needs_padding"]
    changes = {d["config_key"]: d["after"] for d in plan["dims"]}
    assert changes["num_attention_heads"] == 72 and changes["num_key_value_heads"] == 9
    assert changes["head_dim"] == 128 and changes["intermediate_size"] == 13440
    assert changes["expert_hidden_dim"] == 1536  # experts already shard: 512 per rank
    if layout == "hy3_bf16":
        assert 45_000 <= plan["tensors"]["total"] <= 48_000
    # 81 attention blocks (80 + MTP) padded, dense MLP of layer 0 padded, nothing else.
    padded = {c["name"] for c in plan["changed_tensors"]}
    assert "model.layers.80.self_attn.q_proj.weight" in padded
    assert not any(".experts." in n or "shared_mlp" in n or "embed" in n or "lm_head" in n for n in padded)
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    assert plan["vocab"]["patch_needed"] and plan["vocab"]["patched_size"] == 120960
    shapes = {c["name"]: (c["before"], c["after"]) for c in plan["changed_tensors"]}
    if layout == "hy3_redhat":
        assert shapes["model.layers.3.self_attn.q_proj.weight_scale"] == ([64, 32], [72, 32])
        assert shapes["model.layers.0.mlp.down_proj.weight_packed"] == ([4096, 6656], [4096, 6720])
        assert shapes["model.layers.0.mlp.down_proj.weight_scale"] == ([4096, 832], [4096, 840])
        assert shapes["model.layers.80.self_attn.o_proj.weight"] == ([4096, 8192], [4096, 9216])  # BF16 MTP


def test_hy3_plan_text_prints_the_table(hy3_bf16):
    result = cli("plan", hy3_bf16, "--tp", "3")
    assert result.exit_code == 0
    out = result.output
    for needle in ("attention heads", "64", "72", "kv heads", "13312", "13440", "Per-rank divisibility",
                   "120960", "Output shards"):
        assert needle in out


def test_hy3_needs_nothing_at_tp4(hy3_bf16):
    result = cli("plan", hy3_bf16, "--tp", "4", "--json")
    plan = json.loads(result.output)
    assert not plan["needs_padding"]
    assert plan["upstream_tp_values"] == [1, 2, 4, 8]
    assert "No padding needed" in cli("plan", hy3_bf16, "--tp", "4").output
