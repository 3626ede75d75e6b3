"""The rest of the registry's MLA line and K2-Horizon at their published shapes: `hubpad plan --tp 3|6 --json` on
header-only copies (tests/mla_line_real.py says where each figure comes from and what could not be confirmed offline):
the padded dims, every per-rank rule met, the latent projections, routers and value router untouched, the vLLM route
where one is needed. docs/families/mla-line.md's tables come from these plans and from `hubpad plan SRC`."""

from __future__ import annotations

import json

import pytest

from tests import mla_line_real as real
from tests.helpers import cli, header_only_layouts

MODELS = {
    "zai-org/GLM-4.7-Flash": (real.GLM4_7_FLASH_CONFIG, real.mla_tensors),
    "deepseek-ai/DeepSeek-V2": (real.DEEPSEEK_V2_CONFIG, real.mla_tensors),
    "deepseek-ai/DeepSeek-V2-Lite": (real.DEEPSEEK_V2_LITE_CONFIG, real.mla_tensors),
    "IFM/K2-Horizon-375B-A23B": (real.K2_HORIZON_375B_CONFIG, real.k2_horizon_tensors),
    "IFM/K2-Horizon-MoVA-36B-A4B": (real.K2_HORIZON_MOVA_36B_CONFIG, real.k2_horizon_tensors),
    "dots-studio/dots3-note-prev": (real.DOTS3_NOTE_CONFIG, real.dots3_note_tensors),
    "dots-studio/dots3-note-prev (FP8)": (real.DOTS3_NOTE_FP8_CONFIG, real.dots3_note_tensors),
}
_H = ("num_attention_heads", "num_key_value_heads")  # MLA: config.json sets both, and both grow
_SWA = ("swa_num_attention_heads", "swa_num_key_value_heads")
# (model, tp) -> padded dims {config key: after} (every other dim stays)
CASES = {
    # BF16 MLA: any head count per rank; the dense MLP grows to whole 128-wide tiles per rank
    ("zai-org/GLM-4.7-Flash", 3): {**dict.fromkeys(_H, 21), "intermediate_size": 10368},
    ("zai-org/GLM-4.7-Flash", 6): {**dict.fromkeys(_H, 24), "intermediate_size": 10752},
    # no head count divides 5120 (V2) or 2048 (Lite) at TP 3 or 6: served through the --hf-overrides route
    ("deepseek-ai/DeepSeek-V2", 3): dict.fromkeys(_H, 129),
    ("deepseek-ai/DeepSeek-V2", 6): dict.fromkeys(_H, 132),
    # Lite: experts 1408 -> 1536 (64 per rank), the two-expert shared MLP 2816 -> 3072 with them
    ("deepseek-ai/DeepSeek-V2-Lite", 3): {**dict.fromkeys(_H, 18), "moe_intermediate_size": 1536},
    ("deepseek-ai/DeepSeek-V2-Lite", 6): {**dict.fromkeys(_H, 18), "moe_intermediate_size": 1536},
    # 48 heads / 8 kv heads in groups of 6: 9 or 12 kv heads; dense 16384 and experts 1792 grow (1 shared, tied)
    ("IFM/K2-Horizon-375B-A23B", 3): {"num_attention_heads": 54, "num_key_value_heads": 9,
                                      "intermediate_size": 16512, "moe_intermediate_size": 1920},
    ("IFM/K2-Horizon-375B-A23B", 6): {"num_attention_heads": 72, "num_key_value_heads": 12,
                                      "intermediate_size": 16896, "moe_intermediate_size": 1920},
    # 32 / 8 in groups of 4; the value experts grow with the kv heads; dense 6144 and experts 768 already divide
    ("IFM/K2-Horizon-MoVA-36B-A4B", 3): {"num_attention_heads": 36, "num_key_value_heads": 9},
    ("IFM/K2-Horizon-MoVA-36B-A4B", 6): {"num_attention_heads": 48, "num_key_value_heads": 12},
    # full 128 / sliding 64 heads grow together (2 : 1); BF16 takes any count per rank, block FP8 needs the sliding
    # kv_b_proj's 320 rows per head in whole blocks per rank (an even count: 11 per rank at TP 6 is not)
    ("dots-studio/dots3-note-prev", 3): {**dict.fromkeys(_H, 132), **dict.fromkeys(_SWA, 66)},
    ("dots-studio/dots3-note-prev", 6): {**dict.fromkeys(_H, 132), **dict.fromkeys(_SWA, 66)},
    ("dots-studio/dots3-note-prev (FP8)", 3): {**dict.fromkeys(_H, 132), **dict.fromkeys(_SWA, 66)},
    ("dots-studio/dots3-note-prev (FP8)", 6): {**dict.fromkeys(_H, 144), **dict.fromkeys(_SWA, 72)},
}
ROUTED = {"deepseek-ai/DeepSeek-V2", "deepseek-ai/DeepSeek-V2-Lite"}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return header_only_layouts(tmp_path_factory.mktemp("mla-line-real"), MODELS)


@pytest.mark.parametrize("name,tp", [(m, t) for m in MODELS for t in (3, 6)])  # 14 plans: 13 s here
def test_mla_line_real_layout_plans(checkpoints, name, tp):
    result = cli("plan", checkpoints(name), "--tp", tp, "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    after = {k: v for k, (_, v) in plan["config_changes"].items()} if "config_changes" in plan else {}
    after = {k: v for k, v in after.items() if k not in ("architectures", "model_type")}
    print(f"{name} TP={tp}: {after}, +{(plan['bytes_out'] - plan['bytes_in']) / 1e9:.2f} GB")
    assert after == CASES[name, tp]
    assert all(r["ok"] for r in plan["rank_table"] if r["required"]), plan["rank_table"]
    changed = [c["name"] for c in plan["changed_tensors"]]
    assert not [n for n in changed if "_a_proj" in n or "embed" in n or ".mlp.gate." in n or "v_router" in n
                or ".indexer." in n or "_encoder." in n]
    route = plan["architecture"]["vllm_route"]
    assert (route is not None) == (name in ROUTED)
    if name in ROUTED:
        assert route["hf_overrides"] == {"model_type": "deepseek_v32"}
