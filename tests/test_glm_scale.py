"""Plan GLM-4.5, GLM-4.6 and GLM-4.5-Air at their real shapes from headers over sparse files, at TP=3."""

from __future__ import annotations

import json

import pytest

from hubpad.testing import write_checkpoint
from tests.glm_real import GLM45_AIR_CONFIG, GLM45_CONFIG, GLM46_CONFIG, glm_tensors
from tests.helpers import cli

# name: (config, dense intermediate after, expert width after)
MODELS = {"GLM-4.5": (GLM45_CONFIG, 12288, 1536), "GLM-4.6": (GLM46_CONFIG, 12288, 1536),
          # BF16 dense 10944 = 3 x 3648 already serves at TP=3 (no format rule asks for more): left alone
          "GLM-4.5-Air": (GLM45_AIR_CONFIG, 10944, 1536)}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_glm_plan_at_real_scale(tmp_path, name):
    cfg, dense, expert = MODELS[name]
    src = write_checkpoint(tmp_path / name, cfg, glm_tensors(cfg), n_shards=4, header_only=True)
    result = cli("plan", src, "--tp", "3", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    after = {d["config_key"]: d["after"] for d in plan["dims"]}
    assert after == {"num_attention_heads": 108, "num_key_value_heads": 9, "head_dim": 128,
                     "intermediate_size": dense, "moe_intermediate_size": expert}
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    shapes = {c["name"]: (c["before"], c["after"]) for c in plan["changed_tensors"]}
    h, mtp = cfg["hidden_size"], cfg["num_hidden_layers"]
    for layer in (5, mtp):  # an MoE layer and the MTP layer
        p = f"model.layers.{layer}."
        assert shapes[p + "self_attn.q_proj.bias"] == ([12288], [13824])
        assert shapes[p + "self_attn.k_proj.weight"] == ([1024, h], [1152, h])
        assert shapes[p + "self_attn.o_proj.weight"] == ([h, 12288], [h, 13824])
    moe = cfg["moe_intermediate_size"]
    assert ("model.layers.5.mlp.experts.9.down_proj.weight" in shapes) == (moe != expert)
    assert ("model.layers.0.mlp.gate_proj.weight" in shapes) == (dense != cfg["intermediate_size"])
    if moe != expert:  # Air: the shared expert follows the routed experts' width
        assert shapes["model.layers.5.mlp.shared_experts.gate_proj.weight"] == ([1408, h], [1536, h])
