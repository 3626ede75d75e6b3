"""The late-2026 linear-attention releases (GLM-5.3-Flash, Qwen3.8-Flash-Next, Kimi-Linear-48B-A3B, Kimi-K3) at their published shapes (tests/linear_real.py: third-party reproductions
of the config.json values and tensor names, none confirmable offline): `hubpad plan --tp 3|6 --json` on header-only
copies gives the padded dims, every per-rank rule met and nothing replicated touched; the advisor's table (`hubpad
plan SRC`) is what docs/families/linear-attention.md quotes. Kimi-K3's full layout (250k tensors) is planned in the `slow` tier.
"""

from __future__ import annotations

import json

import pytest

from hubpad.testing import write_checkpoint
from tests import linear_real
from tests.helpers import cli, header_only_layouts

MODELS = linear_real.REAL_LINEAR_MODELS

# (hub name, tp) -> padded dims {config key: (before, after)}; every other dim stays as it is
CASES = {
    ("zai-org/GLM-5.3-Flash", 3): {"num_attention_heads": (64, 66), "num_key_value_heads": (64, 66),
                                   "linear_attn_config.num_heads": (64, 66), "moe_intermediate_size": (2048, 2112)},
    ("zai-org/GLM-5.3-Flash", 6): {"num_attention_heads": (64, 66), "num_key_value_heads": (64, 66),
                                   "linear_attn_config.num_heads": (64, 66), "moe_intermediate_size": (2048, 2304)},
    ("Qwen/Qwen3.8-Flash-Next", 3): dict(num_attention_heads=(24, 36), num_key_value_heads=(2, 3),
                                         linear_num_key_heads=(16, 18), linear_num_value_heads=(48, 54),
                                         moe_intermediate_size=(640, 768),
                                         shared_expert_intermediate_size=(640, 768)),
    ("Qwen/Qwen3.8-Flash-Next", 6): dict(linear_num_key_heads=(16, 18), linear_num_value_heads=(48, 54),
                                         moe_intermediate_size=(640, 768),
                                         shared_expert_intermediate_size=(640, 768)),
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", 3): {"num_attention_heads": (32, 33), "num_key_value_heads": (32, 33),
                                                     "linear_attn_config.num_heads": (32, 33),
                                                     "moe_intermediate_size": (1024, 1152)},
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", 6): {"num_attention_heads": (32, 36), "num_key_value_heads": (32, 36),
                                                     "linear_attn_config.num_heads": (32, 36),
                                                     "moe_intermediate_size": (1024, 1152)},
}
REPLICATED = ("hc_", "hyper_connection", ".ple.", ".indexer.", "model.visual.", "mtp.fc", "mtp.pre_fc", "f_a_proj",
              "g_a_proj", "o_norm", "kv_a_proj_with_mqa", "routed_expert_", "_res_")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return header_only_layouts(tmp_path_factory.mktemp("linear-real"), MODELS)


@pytest.mark.parametrize("name,tp", sorted(CASES))
def test_published_layout_plans(checkpoints, name, tp):
    result = cli("plan", checkpoints(name), "--tp", tp, "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    after = {d["config_key"]: (d["before"], d["after"]) for d in plan["dims"] if d["before"] != d["after"]}
    assert after == CASES[name, tp]
    assert all(r["ok"] for r in plan["rank_table"] if r["required"]), plan["rank_table"]
    assert not [c["name"] for c in plan["changed_tensors"] if any(r in c["name"] for r in REPLICATED)]
    print(f"{name} TP={tp}: {after}, +{(plan['bytes_out'] - plan['bytes_in']) / 1e9:.1f} GB")


@pytest.mark.parametrize("name", ["Qwen/Qwen3.8-Flash-Next", "moonshotai/Kimi-Linear-48B-A3B-Instruct",
                                  "zai-org/GLM-5.3-Flash"])
def test_the_advisor_prices_the_linear_heads(checkpoints, name):
    result = cli("plan", checkpoints(name), "--json")
    assert result.exit_code == 0, result.output
    rows = {r["tp"]: r for r in json.loads(result.output)["rows"]}
    for tp in (3, 6):
        assert rows[tp]["verdict"] != "as is" and rows[tp]["attention_flops_pct"] > 0
    print(cli("plan", checkpoints(name)).output)


def test_kimi_k3_mxfp4_release_is_refused_with_the_reason(tmp_path):
    """Refused from config.json alone (its quantization_config), before any header is read."""
    config, _ = MODELS["moonshotai/Kimi-K3 (MXFP4 experts)"]
    result = cli("plan", write_checkpoint(tmp_path / "k3", config, [], n_shards=1, header_only=True), "--tp", 3)
    assert result.exit_code == 1
    assert "mxfp4-pack-quantized" in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_kimi_k3_serves_as_published_at_3_and_6_and_refuses_expert_padding(checkpoints):
    """96 MLA heads, 96 KDA heads, expert width 3072 and dense 33792 all shard at TP 3 and 6: nothing to pad (the
    plan copies every byte). At TP 5 the expert width would need padding, which the two shared experts forbid."""
    src = checkpoints("moonshotai/Kimi-K3")
    for tp in (3, 6):
        result = cli("plan", src, "--tp", tp, "--json")
        assert result.exit_code == 0, result.output
        plan = json.loads(result.output)
        assert [d for d in plan["dims"] if d["before"] != d["after"]] == []
        assert plan["changed_tensors"] == []
    refused = cli("plan", src, "--tp", 5)
    assert refused.exit_code == 1 and "2 shared experts" in refused.output
