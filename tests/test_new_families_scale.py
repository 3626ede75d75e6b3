"""The Qwen2 line, the vision-language models and the hybrid linear-attention models at their real shapes.

`hubpad plan --tp 3|6 --json` on header-only copies of the published layouts (tests/qwen35_real.py,
tests/vlm_real.py: real config values, tensor names, shapes and dtypes): the padded dims, every per-rank rule met,
no vision-tower tensor touched, the vLLM route where one is needed, and the refusals with their reasons. The README's
tables for these models come from the same plans (and `hubpad plan SRC`, the TP advisor).
"""

from __future__ import annotations

import json

import pytest

from hubpad.testing import write_checkpoint
from tests import qwen35_real, vlm_real
from tests.helpers import cli

MODELS = {**qwen35_real.REAL_GDN_MODELS, **vlm_real.REAL_VLM_MODELS}

# (hub name, tp) -> padded dims {config key: after}; every other dim stays as it is
CASES = {
    ("Qwen/Qwen3.5-397B-A17B", 3): dict(num_attention_heads=48, num_key_value_heads=3, linear_num_key_heads=18,
                                        linear_num_value_heads=72, moe_intermediate_size=1152,
                                        shared_expert_intermediate_size=1152),
    ("Qwen/Qwen3.5-397B-A17B", 6): dict(num_attention_heads=48, num_key_value_heads=3, linear_num_key_heads=18,
                                        linear_num_value_heads=72, moe_intermediate_size=1152,
                                        shared_expert_intermediate_size=1536),
    ("Qwen/Qwen3.5-122B-A10B", 3): dict(num_attention_heads=48, num_key_value_heads=3, linear_num_key_heads=18,
                                        linear_num_value_heads=72, moe_intermediate_size=1152,
                                        shared_expert_intermediate_size=1152),
    ("Qwen/Qwen3.5-27B", 3): dict(num_attention_heads=36, num_key_value_heads=6, linear_num_key_heads=18,
                                  linear_num_value_heads=54, intermediate_size=17664),
    ("Qwen/Qwen3.5-27B", 6): dict(num_attention_heads=36, num_key_value_heads=6, linear_num_key_heads=18,
                                  linear_num_value_heads=54, intermediate_size=17664),
    ("Qwen/Qwen3.5-27B-FP8", 3): dict(num_attention_heads=36, num_key_value_heads=6, linear_num_key_heads=18,
                                      linear_num_value_heads=54, intermediate_size=17664),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", 3): dict(num_attention_heads=24, num_key_value_heads=3,
                                                  linear_num_key_heads=18, linear_num_value_heads=36,
                                                  moe_intermediate_size=576, shared_expert_intermediate_size=768),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", 6): dict(num_attention_heads=24, num_key_value_heads=3,
                                                  linear_num_key_heads=18, linear_num_value_heads=36,
                                                  moe_intermediate_size=768, shared_expert_intermediate_size=768),
    ("Qwen/Qwen3-VL-235B-A22B-Instruct", 3): dict(num_attention_heads=96, num_key_value_heads=6),
    ("Qwen/Qwen3-VL-235B-A22B-Instruct", 6): dict(num_attention_heads=96, num_key_value_heads=6),
    ("moonshotai/Kimi-K2.5", 3): dict(num_attention_heads=66, num_key_value_heads=66, moe_intermediate_size=2112),
    ("moonshotai/Kimi-K2.5", 6): dict(num_attention_heads=66, num_key_value_heads=66, moe_intermediate_size=2304),
    ("zai-org/GLM-4.5V", 3): dict(num_attention_heads=108, num_key_value_heads=9, moe_intermediate_size=1536),
    ("Qwen/QwQ-32B", 3): dict(num_attention_heads=45, num_key_value_heads=9),
    ("Qwen/QwQ-32B", 6): dict(num_attention_heads=60, num_key_value_heads=12),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", 3): dict(num_attention_heads=45, num_key_value_heads=9),
    ("Qwen/Qwen2-57B-A14B", 3): dict(num_attention_heads=42, num_key_value_heads=6, moe_intermediate_size=2688,
                                     shared_expert_intermediate_size=20736),
}
ROUTES = {"Qwen/QwQ-32B": "hf_overrides", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": "hf_overrides",
          "Qwen/Qwen2-57B-A14B": "model_impl"}
REFUSED = {"meta-llama/Llama-4-Scout-17B-16E-Instruct": "multi_modal_projector.linear_1 is column-parallel",
           "meta-llama/Llama-4-Maverick-17B-128E-Instruct": "multi_modal_projector.linear_1 is column-parallel"}
VISION = ("model.visual.", "vision_tower.", "mm_projector.", "vision_model.", "multi_modal_projector.")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("new-families")
    made = {}

    def get(name):
        if name not in made:
            config, tensors = MODELS[name]
            made[name] = write_checkpoint(root / name.replace("/", "__"), config, tensors(config) if tensors else [],
                                          n_shards=4, header_only=True)
        return made[name]
    return get


@pytest.mark.parametrize("name,tp", sorted(CASES))
def test_real_layout_plans(checkpoints, name, tp):
    result = cli("plan", checkpoints(name), "--tp", tp, "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    after = {d["config_key"]: d["after"] for d in plan["dims"] if d["before"] != d["after"]}
    assert after == CASES[name, tp]
    assert all(r["ok"] for r in plan["rank_table"] if r["required"]), plan["rank_table"]
    assert not [c["name"] for c in plan["changed_tensors"] if c["name"].startswith(VISION)]
    route = plan["architecture"]["vllm_route"]
    assert (route and [k for k in ("hf_overrides", "model_impl") if route[k]]) == (
        [ROUTES[name]] if name in ROUTES else None)
    print(f"{name} TP={tp}: {after}, +{(plan['bytes_out'] - plan['bytes_in']) / 1e9:.1f} GB")


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_real_layouts(checkpoints, name):
    result = cli("plan", checkpoints(name), "--tp", 3)
    assert result.exit_code == 1
    assert REFUSED[name] in result.output and len(result.output.strip().splitlines()) == 1


def test_qwen2_5_vl_is_refused_with_the_reason(tmp_path):
    result = cli("plan", write_checkpoint(tmp_path / "q25vl", vlm_real.QWEN25_VL_72B, [], n_shards=1,
                                          header_only=True), "--tp", 3)
    assert result.exit_code == 1
    assert "builds their language model with its Qwen2 class" in result.output


def test_the_advisor_prices_gdn_heads(checkpoints):
    """hubpad plan SRC (all TPs): the GDN heads are in the padded dims, the why and the attention FLOPs."""
    result = cli("plan", checkpoints("Qwen/Qwen3.5-397B-A17B"), "--json")
    assert result.exit_code == 0, result.output
    rows = {r["tp"]: r for r in json.loads(result.output)["rows"]}
    assert [t for t, r in rows.items() if r["verdict"] == "as is"] == [1, 2, 4, 8]
    three = rows[3]
    assert "16 linear key heads % tp 3 != 0" in three["why"]
    assert {d["config_key"]: d["after"] for d in three["dims"]}["linear_num_value_heads"] == 72
    assert three["attention_flops_pct"] > 0 and three["mlp_flops_pct"] == 12.5
