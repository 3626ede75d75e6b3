"""Plan MiniMax-M2.x at its published shapes (FP8 block 128 x 128, 96,103 tensors; tests/minimax_real.py) from headers
over sparse files, at TP 3 and 6: heads padded by whole GQA groups, q/k rescaled in their float32 block scales (the FP8
weight bytes stay) and in the BF16 q/k norms, the expert width left alone (1536 / TP is a multiple of 128)."""

from __future__ import annotations

import json
import math

import pytest

from hubpad.testing import write_checkpoint
from tests.helpers import cli
from tests.minimax_real import M2_CONFIG, m2_tensors

# tp: (heads, kv heads, extra bytes)
CASES = {3: (54, 9, 341_505_920), 6: (72, 12, 1_366_023_680)}


@pytest.fixture(scope="module")
def m2(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("m2") / "MiniMax-M2", M2_CONFIG, m2_tensors(), n_shards=4,
                            header_only=True)


@pytest.mark.parametrize("tp", sorted(CASES))
def test_minimax_m2_plan_at_published_scale(m2, tp):
    heads, kv, extra = CASES[tp]
    result = cli("plan", m2, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    after = {d["config_key"]: d["after"] for d in plan["dims"]}
    assert after == {"num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": 128,
                     "intermediate_size": 1536}
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    groups = {g["pattern"].rpartition("self_attn.")[2]: g for g in plan["tensors"]["padded_groups"]}
    r = heads / 48
    assert kv / 8 == r  # whole GQA groups: q and k take the same factor
    scaled = {k: g["scale"] for k, g in groups.items() if "scale" in g}
    assert scaled == {"q_proj.weight_scale_inv": math.sqrt(r), "k_proj.weight_scale_inv": math.sqrt(r),
                      "q_norm.weight": 1 / math.sqrt(r), "k_norm.weight": 1 / math.sqrt(r)}
    assert groups["q_proj.weight"]["after"] == [heads * 128, 3072] and "scale" not in groups["q_proj.weight"]
    assert all(g["count"] == 62 for g in groups.values())
    assert sum(g["bytes_added"] for g in groups.values()) == extra
