"""The sparse-attention MLA line at its published shapes: `hubpad plan --tp 3|6 --json` on header-only copies of
DeepSeek-V3.2 (FP8), GLM-5 (BF16, FP8, ModelOpt NVFP4), Hy4 (BF16) and LongCat-Flash (BF16) (tests/dsa_real.py says
where each figure comes from and which cannot be confirmed offline): the padded dims, every per-rank rule met, the
indexer and iHC untouched.
docs/families/dsa.md's tables come from these plans and from `hubpad plan SRC` (the advisor)."""

from __future__ import annotations

import json

import pytest

from hubpad.testing import write_checkpoint
from tests import dsa_real
from tests.helpers import cli

MODELS = {
    "deepseek-ai/DeepSeek-V3.2": (dsa_real.DEEPSEEK_V32_CONFIG, dsa_real.dsa_tensors, None),
    "zai-org/GLM-5": (dsa_real.GLM5_CONFIG, dsa_real.dsa_tensors, None),
    "zai-org/GLM-5-FP8": (dsa_real.GLM5_FP8_CONFIG, dsa_real.dsa_tensors, None),
    "nvidia/GLM-5-NVFP4": (dsa_real.GLM5_CONFIG, dsa_real.glm5_nvfp4_tensors, dsa_real.GLM5_NVFP4_QUANT),
    "tencent/Hy4-preview": (dsa_real.HY4_CONFIG, dsa_real.hy4_tensors, None),
    "meituan-longcat/LongCat-Flash-Chat": (dsa_real.LONGCAT_FLASH_CONFIG, dsa_real.longcat_tensors, None),
}
# (model, tp) -> padded dims {config key: after} (every other dim stays)
_H = ("num_attention_heads", "num_key_value_heads")  # MLA: config.json sets both, and both grow
CASES = {
    # block FP8: heads per rank even (q 192 / kv_b 256 / o 128 per head; 128-row blocks); experts 384 per rank
    ("deepseek-ai/DeepSeek-V3.2", 3): {**dict.fromkeys(_H, 132), "moe_intermediate_size": 2304},
    ("deepseek-ai/DeepSeek-V3.2", 6): {**dict.fromkeys(_H, 132), "moe_intermediate_size": 2304},
    # BF16: any head count per rank; experts to the fused-MoE tile per rank (704 at TP 3, 384 at TP 6)
    ("zai-org/GLM-5", 3): {**dict.fromkeys(_H, 66), "moe_intermediate_size": 2112},
    ("zai-org/GLM-5", 6): {**dict.fromkeys(_H, 66), "moe_intermediate_size": 2304},
    # block FP8: kv_b holds 448 rows per head, so heads per rank must be even: 11 per rank at TP 6 is not
    ("zai-org/GLM-5-FP8", 3): {**dict.fromkeys(_H, 66), "moe_intermediate_size": 2304},
    ("zai-org/GLM-5-FP8", 6): {**dict.fromkeys(_H, 72), "moe_intermediate_size": 2304},
    ("nvidia/GLM-5-NVFP4", 3): {**dict.fromkeys(_H, 66), "moe_intermediate_size": 2112},
    ("nvidia/GLM-5-NVFP4", 6): {**dict.fromkeys(_H, 66), "moe_intermediate_size": 2304},
    # Hy4: 32 heads; experts (768) and dense (6912) already divide by 3 and 6 into whole tiles
    ("tencent/Hy4-preview", 3): dict.fromkeys(_H, 33),
    ("tencent/Hy4-preview", 6): dict.fromkeys(_H, 36),
    # LongCat-Flash: both MLA sublayers and the MTP block; the zero-computation experts have nothing to pad
    ("meituan-longcat/LongCat-Flash-Chat", 3): {**dict.fromkeys(_H, 66), "expert_ffn_hidden_size": 2112},
    ("meituan-longcat/LongCat-Flash-Chat", 6): {**dict.fromkeys(_H, 66), "expert_ffn_hidden_size": 2304},
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("dsa-real")
    made = {}

    def get(name):
        if name not in made:
            config, tensors, quant = MODELS[name]
            extra = {"hf_quant_config.json": json.dumps(quant)} if quant else None
            made[name] = write_checkpoint(root / name.replace("/", "__"), config, tensors(config), n_shards=4,
                                          header_only=True, extra_files=extra)
        return made[name]
    return get


# Each plan of these 60k-tensor layouts takes seconds: the default run keeps one TP per format and both TPs where
# the padded heads differ; the rest run with `-m slow`.
SLOW = {("meituan-longcat/LongCat-Flash-Chat", 6), ("deepseek-ai/DeepSeek-V3.2", 6), ("zai-org/GLM-5", 3),
        ("zai-org/GLM-5", 6), ("nvidia/GLM-5-NVFP4", 6)}


@pytest.mark.parametrize("name,tp", [pytest.param(m, t, marks=[pytest.mark.slow] if (m, t) in SLOW else [])
                                     for m in MODELS for t in (3, 6)])
def test_dsa_real_layout_plans(checkpoints, name, tp):
    result = cli("plan", checkpoints(name), "--tp", tp, "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    after = {d["config_key"]: d["after"] for d in plan["dims"] if d["before"] != d["after"]}
    print(f"{name} TP={tp}: {after}, +{(plan['bytes_out'] - plan['bytes_in']) / 1e9:.2f} GB")
    assert after == CASES[name, tp]
    assert all(r["ok"] for r in plan["rank_table"] if r["required"]), plan["rank_table"]
    changed = [c["name"] for c in plan["changed_tensors"]]
    assert not [n for n in changed if ".indexer." in n or ".hc_" in n or "_a_proj" in n or "embed" in n]
