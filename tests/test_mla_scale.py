"""Plan DeepSeek-V3 and Kimi-K2 at their real shapes (61 layers, 256/384 FP8 experts) from headers over sparse files."""

from __future__ import annotations

import json

import pytest

from hubpad.testing import write_checkpoint
from tests.helpers import cli
from tests.mla_real import DEEPSEEK_V3_CONFIG, KIMI_K2_CONFIG, mla_tensors


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("mla")
    return {name: write_checkpoint(root / name, cfg, mla_tensors(cfg), n_shards=4, header_only=True)
            for name, cfg in (("DeepSeek-V3", DEEPSEEK_V3_CONFIG), ("Kimi-K2-Instruct", KIMI_K2_CONFIG))}


# (model, tp) → heads after, q_b_proj rows per rank, routed/shared expert width after.
CASES = {("DeepSeek-V3", 3): (132, 8448, 2304), ("Kimi-K2-Instruct", 3): (66, 4224, 2304),
         ("Kimi-K2-Instruct", 6): (72, 2304, 2304)}


@pytest.mark.parametrize("model,tp", sorted(CASES))
def test_mla_plan_at_real_scale(checkpoints, model, tp):
    heads, q_rows, expert = CASES[model, tp]
    result = cli("plan", checkpoints[model], "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    after = {d["config_key"]: d["after"] for d in plan["dims"]}
    assert after == {"num_attention_heads": heads, "num_key_value_heads": heads, "intermediate_size": 18432,
                     "moe_intermediate_size": expert}
    table = {r["dim"]: r for r in plan["rank_table"]}
    assert table["q_b_proj rows"]["per_rank"] == q_rows and q_rows % 128 == 0
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    assert "kv heads" not in table  # MLA: the latent KV is replicated, not sharded
    src_heads = 128 if model == "DeepSeek-V3" else 64
    shapes = {c["name"]: (c["before"], c["after"]) for c in plan["changed_tensors"]}
    p = "model.layers.5.self_attn."
    assert shapes[p + "q_b_proj.weight"] == ([src_heads * 192, 1536], [heads * 192, 1536])
    assert shapes[p + "q_b_proj.weight_scale_inv"] == ([src_heads * 192 // 128, 12], [heads * 192 // 128, 12])
    assert shapes[p + "kv_b_proj.weight"] == ([src_heads * 256, 512], [heads * 256, 512])
    assert shapes[p + "kv_b_proj.weight_scale_inv"] == ([src_heads * 2, 4], [heads * 2, 4])
    assert shapes[p + "o_proj.weight"] == ([7168, src_heads * 128], [7168, heads * 128])
    assert shapes[p + "o_proj.weight_scale_inv"] == ([56, src_heads], [56, heads])
    assert shapes["model.layers.5.mlp.experts.7.down_proj.weight_scale_inv"] == ([56, 16], [56, expert // 128])
    assert shapes["model.layers.5.mlp.shared_experts.up_proj.weight"] == ([2048, 7168], [expert, 7168])
    assert not any("kv_a_proj" in n or "q_a_proj" in n or ".mlp.gate." in n or "embed" in n for n in shapes)
    assert ("model.layers.61.self_attn.q_b_proj.weight" in shapes) == (model == "DeepSeek-V3")  # the MTP layer


def test_mla_plan_text_names_the_mla_rows(checkpoints):
    out = cli("plan", checkpoints["Kimi-K2-Instruct"], "--tp", "6").output
    for needle in ("attention heads", "64", "72", "q_b_proj rows", "kv_b_proj rows", "2304"):
        assert needle in out
