"""The GQA families with config quirks at their published shapes: `hubpad plan --tp 3|6 --json` on header-only copies of
the published layouts (tests/gqa_real.py says where every figure comes from): the padded dims, head_dim written, every
per-rank rule met. docs/families/gqa-quirks.md's tables come from these plans.
"""

from __future__ import annotations

import json

import pytest

from hubpad.testing import write_checkpoint
from tests import gqa_real
from tests.helpers import cli

# (hub name, tp) -> padded config keys {key: after} (head_dim: written, as it was or computed)
CASES = {
    ("baidu/ERNIE-4.5-300B-A47B-PT", 3): dict(num_attention_heads=72, num_key_value_heads=9, head_dim=128,
                                              moe_intermediate_size=3648, intermediate_size=28800),
    ("baidu/ERNIE-4.5-300B-A47B-PT", 6): dict(num_attention_heads=96, num_key_value_heads=12, head_dim=128,
                                              moe_intermediate_size=3840, intermediate_size=29184),
    ("baidu/ERNIE-4.5-21B-A3B-PT", 3): dict(num_attention_heads=30, num_key_value_heads=6, head_dim=128,
                                            moe_intermediate_size=1536, intermediate_size=12288),
    ("baidu/ERNIE-4.5-21B-A3B-PT", 6): dict(num_attention_heads=30, num_key_value_heads=6, head_dim=128,
                                            moe_intermediate_size=1536, intermediate_size=12288),
    ("LGAI-EXAONE/EXAONE-4.0-32B", 3): dict(num_attention_heads=45, num_key_value_heads=9, intermediate_size=27648),
    ("LGAI-EXAONE/EXAONE-4.0-32B", 6): dict(num_attention_heads=60, num_key_value_heads=12, intermediate_size=27648),
    ("LGAI-EXAONE/K-EXAONE-236B-A23B", 3): dict(num_attention_heads=72, num_key_value_heads=9,
                                                moe_intermediate_size=2112, intermediate_size=18432),
    ("LGAI-EXAONE/K-EXAONE-236B-A23B", 6): dict(num_attention_heads=96, num_key_value_heads=12,
                                                moe_intermediate_size=2304, intermediate_size=18432),
    ("CohereLabs/c4ai-command-a-03-2025", 3): dict(num_attention_heads=108, num_key_value_heads=9, head_dim=128,
                                                   intermediate_size=36864),
    ("CohereLabs/c4ai-command-a-03-2025", 6): dict(num_attention_heads=144, num_key_value_heads=12, head_dim=128,
                                                   intermediate_size=36864),
    ("CohereLabs/c4ai-command-r-plus", 3): dict(num_attention_heads=108, num_key_value_heads=9, head_dim=128,
                                                intermediate_size=33792),
    ("CohereLabs/c4ai-command-r-plus", 6): dict(num_attention_heads=144, num_key_value_heads=12, head_dim=128,
                                                intermediate_size=33792),
    ("CohereLabs/c4ai-command-r-v01", 3): dict(num_attention_heads=66, num_key_value_heads=66, head_dim=128,
                                               intermediate_size=22656),
    ("CohereLabs/c4ai-command-r-v01", 6): dict(num_attention_heads=66, num_key_value_heads=66, head_dim=128,
                                               intermediate_size=23040),
    ("arcee-ai/Trinity-Large-Thinking", 3): dict(num_attention_heads=54, num_key_value_heads=9,
                                                 moe_intermediate_size=3072, intermediate_size=12288),
    ("arcee-ai/Trinity-Large-Thinking", 6): dict(num_attention_heads=72, num_key_value_heads=12,
                                                 moe_intermediate_size=3072, intermediate_size=12288),
    ("arcee-ai/Trinity-Mini", 3): dict(num_attention_heads=48, num_key_value_heads=6, moe_intermediate_size=1152),
    ("arcee-ai/Trinity-Mini", 6): dict(num_attention_heads=48, num_key_value_heads=6, moe_intermediate_size=1152),
    ("poolside/laguna-XS.2", 3): dict(num_attention_heads=54, num_key_value_heads=9, moe_intermediate_size=576,
                                      shared_expert_intermediate_size=768, intermediate_size=8448),
    ("poolside/laguna-XS.2", 6): dict(num_attention_heads=72, num_key_value_heads=12, moe_intermediate_size=768,
                                      shared_expert_intermediate_size=768, intermediate_size=8448),
}
# the shared experts' one MLP, moe_intermediate_size x n wide (no key of its own)
SHARED = {("baidu/ERNIE-4.5-21B-A3B-PT", 3): 3072, ("LGAI-EXAONE/K-EXAONE-236B-A23B", 3): 2112,
          ("LGAI-EXAONE/K-EXAONE-236B-A23B", 6): 2304, ("arcee-ai/Trinity-Mini", 6): 1152}
PER_LAYER = {3: (54, 72), 6: (72, 96)}  # Laguna XS.2's full / sliding layers


@pytest.mark.parametrize("name, tp", sorted(CASES))
def test_published_layout_plans(tmp_path, name, tp):
    cfg = gqa_real.REAL[name]
    src = write_checkpoint(tmp_path / name.split("/")[1], cfg, gqa_real.tensors(cfg), n_shards=4, header_only=True)
    result = cli("plan", src, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    new = {k: v[1] for k, v in plan["config_changes"].items()}
    want = CASES[name, tp]
    assert {k: new.get(k, cfg.get(k)) for k in want} == want
    assert all(r["ok"] for r in plan["rank_table"] if r["required"]), plan["rank_table"]
    rows = {r["dim"]: r for r in plan["rank_table"]}
    if (name, tp) in SHARED:
        assert rows["shared intermediate"]["total"] == SHARED[name, tp]
    if cfg["model_type"] == "laguna":
        full, sliding = PER_LAYER[tp]
        assert new["num_attention_heads_per_layer"] == [full if t == "full_attention" else sliding
                                                         for t in cfg["layer_types"]]
        assert rows["q_proj rows (64-head layers)"]["per_rank"] == sliding // tp * 128
        assert rows["g_proj rows (64-head layers)"]["per_rank"] == sliding // tp
    if name == "CohereLabs/c4ai-command-r-plus":  # its per-head q/k LayerNorm rows shard with the heads
        assert rows["q_norm rows"]["per_rank"] == CASES[name, tp]["num_attention_heads"] // tp
        assert rows["k_norm rows"]["per_rank"] == CASES[name, tp]["num_key_value_heads"] // tp
    print(name, tp, {k: new[k] for k in sorted(new) if not isinstance(new[k], (list, dict))},
          plan.get("extra_bytes") or plan.get("bytes_added"))
