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
    report = cli("plan", m2, "--tp", str(tp)).output  # the text report says what is rescaled and by how much
    assert f"model.layers.*.self_attn.q_norm.weight x {1 / math.sqrt(r):.6f}" in report


@pytest.fixture(scope="module")
def m3(tmp_path_factory):
    from tests.minimax_real import M3_CONFIG, m3_tensors

    return write_checkpoint(tmp_path_factory.mktemp("m3") / "MiniMax-M3", M3_CONFIG, m3_tensors(), n_shards=4,
                            header_only=True)


@pytest.mark.parametrize("tp", [3, 6])
def test_minimax_m3_plan_at_published_scale(m3, tp):
    """MiniMax-M3 (BF16, 64 / 4 heads, the indexer on 57 layers: tests/minimax_real.py says what is assumed): 96 / 6
    heads at TP 3 and 6 (2 and 1 kv heads per rank), index_q_proj with them, both index head counts 6, no MLP padding
    (12288, 3072 and the shared 3072 divide), nothing rescaled, the vision tower copied: +6.60 GB."""
    result = cli("plan", m3, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    after = {d["config_key"]: d["after"] for d in plan["dims"]}
    assert after == {"num_attention_heads": 96, "num_key_value_heads": 6, "head_dim": 128,
                     "dense_intermediate_size": 12288, "intermediate_size": 3072}
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    rows = {r["dim"]: r for r in plan["rank_table"]}
    assert rows["index_q_proj rows"]["total"] == 768 and rows["index_q_proj rows"]["per_rank"] == 768 // 6 * (6 // tp)
    assert plan["config_changes"]["text_config.sparse_attention_config"][1]["sparse_num_index_heads"] == 6
    groups = {g["pattern"].rpartition("self_attn.")[2]: g for g in plan["tensors"]["padded_groups"]}
    assert set(groups) == {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "index_q_proj.weight"}
    assert groups["index_q_proj.weight"]["after"] == [768, 6144] and groups["index_q_proj.weight"]["count"] == 57
    assert not any("scale" in g for g in groups.values())
    assert sum(g["bytes_added"] for g in groups.values()) == 6_596_591_616


def test_minimax_m2_refuses_a_layout_it_cannot_rescale(tmp_path):
    """q/k projections in NVFP4 (compressed-tensors): the factor has no float scale of its own to go into exactly
    (per-16 FP8 scales, a global divisor shared by the whole tensor), and hubpad does not rescale such layers: refused
    with the reason, before anything is written."""
    from tests.minimax_real import M2_CONFIG, m2_tensors

    cfg = dict(M2_CONFIG, num_hidden_layers=1, num_local_experts=8, attn_type_list=[1], quantization_config={
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "quantization_status": "compressed",
        "config_groups": {"all": {"targets": ["Linear"], "format": "nvfp4-pack-quantized",
                                  "weights": {"num_bits": 4, "type": "float", "symmetric": True,
                                              "strategy": "tensor_group", "group_size": 16, "dynamic": False,
                                              "scale_dtype": "torch.float8_e4m3fn"}}},
        "ignore": ["lm_head", "re:.*block_sparse_moe.gate$"]})
    tensors = []
    for name, dtype, shape in m2_tensors(cfg):
        if name.endswith("weight_scale_inv"):
            continue
        if dtype == "F8_E4M3":
            module = name[:-len(".weight")]
            tensors += [(module + ".weight_packed", "U8", (shape[0], shape[1] // 2)),
                        (module + ".weight_scale", "F8_E4M3", (shape[0], shape[1] // 16)),
                        (module + ".weight_global_scale", "F32", (1,))]
        else:
            tensors.append((name, dtype, shape))
    src = write_checkpoint(tmp_path / "m2-nvfp4", cfg, tensors, n_shards=1, header_only=True)
    result = cli("plan", src, "--tp", "3")
    assert result.exit_code == 1
    assert "a nvfp4 layer cannot be rescaled (its q/k norm spans all heads" in result.output


def test_minimax_m2_without_its_qk_norm_weights_is_refused(tmp_path):
    """vLLM's MiniMaxM2Attention (and transformers') normalizes q/k over all heads whether or not the checkpoint has
    the norm weights (ones then): zero heads would change the norm, and there is no weight to rescale. Refused."""
    from tests.minimax_real import M2_CONFIG, m2_tensors

    cfg = dict(M2_CONFIG, num_hidden_layers=1, num_local_experts=8, attn_type_list=[1])
    tensors = [t for t in m2_tensors(cfg) if not t[0].endswith(("q_norm.weight", "k_norm.weight"))]
    src = write_checkpoint(tmp_path / "m2-no-norms", cfg, tensors, n_shards=1, header_only=True)
    result = cli("plan", src, "--tp", "3")
    assert result.exit_code == 1
    assert "no model.layers.0.self_attn.q_norm.weight, but vLLM and transformers normalize" in result.output
    assert cli("plan", src, "--tp", "4").exit_code == 0  # no heads added: nothing to rescale
