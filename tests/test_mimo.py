"""MiMo-V2-Flash (`mimo_v2_flash`): pad a tiny real transformers MiMoV2FlashForCausalLM in the published layout
(per-expert experts, attention_sink_bias, an MTP layer; tests/mimo_models.py) and compare float64 logits; check the
padded config keeps transformers' reading (SWA kv = 2 x num_key_value_heads) and vLLM's (swa_* keys,
hybrid_layer_pattern) the same, attention_value_scale untouched; refuse what cannot be padded, with the reason.

Tiny geometry: 8 heads, 2 full kv heads (group 4), 4 SWA kv heads (group 2), q/k 16 and v/o 8 per head: at TP 3 and 6
the heads go to 12 (a multiple of both groups and of TP), full kv 3, SWA kv 6 (MiMo-V2-Flash: 64 / 4 / 8 -> 96 / 6 / 12).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors import safe_open  # noqa: E402

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.mimo_models import build_mimo  # noqa: E402

REL_TOL = 1e-12


def _logits(path):
    model = transformers.MiMoV2FlashForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    ids = torch.randint(0, 256, (2, 14), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(input_ids=ids).logits


# tp -> model overrides and the padded (heads, full kv, SWA kv). One full kv head (MQA in the full layers): the
# padding still appends whole groups of both types, as transformers reads SWA kv as 2 x num_key_value_heads (12 heads
# with the full layers kept at 1 kv head would give SWA 6 in vLLM's reading and 2 in transformers').
MIMO_CASES = {"tp3": (3, {}, (12, 3, 6)), "tp6": (6, {}, (12, 3, 6)),
              "tp3-one-full-kv-head": (3, dict(num_attention_heads=4, num_key_value_heads=1), (12, 3, 6))}


@pytest.mark.parametrize("case", sorted(MIMO_CASES))
def test_mimo_v2_flash_padded_model_gives_identical_logits(tmp_path, case):
    tp, over, (heads, kv, swa_kv) = MIMO_CASES[case]
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    upstream = build_mimo(src, **over)
    plan = make_plan(LocalSource(src), tp, shard_size=400_000)
    run_mirror(plan, LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (heads, kv)
    assert (cfg["swa_num_attention_heads"], cfg["swa_num_key_value_heads"]) == (heads, swa_kv)  # vLLM's reading
    assert cfg["swa_num_key_value_heads"] == 2 * cfg["num_key_value_heads"]  # transformers' reading
    assert cfg["attention_value_scale"] == upstream["attention_value_scale"] == 0.707
    assert cfg["hybrid_layer_pattern"] == upstream["hybrid_layer_pattern"]
    assert cfg["moe_intermediate_size"] == (192 if tp == 3 else 384)
    index = json.loads((dst / "model.safetensors.index.json").read_text())["weight_map"]
    shape = {n: safe_open(str(dst / f), "pt").get_slice(n).get_shape() for n, f in index.items() if ".mtp." in n}
    p = "model.mtp.layers.0.self_attn."  # the MTP layer is an SWA layer: padded as one
    assert (shape[p + "q_proj.weight"], shape[p + "k_proj.weight"], shape[p + "v_proj.weight"],
            shape[p + "o_proj.weight"], shape[p + "attention_sink_bias"]) == ([192, 64], [96, 64], [48, 64],
                                                                              [64, 96], [12])
    a, b = _logits(src), _logits(dst)
    delta = (a - b).abs().max().item()
    print(f"{case}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


def test_mimo_v2_flash_readings_that_disagree_are_refused(tmp_path):
    src = tmp_path / "upstream"
    build_mimo(src, mtp=False)
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "swa_num_key_value_heads": 8}))
    with pytest.raises(ConfigError, match="swa_num_key_value_heads 8 \\(transformers reads 4\\)"):
        make_plan(LocalSource(src), 3)
    (src / "config.json").write_text(json.dumps({**cfg, "hybrid_layer_pattern": [0, 1, 1, 1]}))
    with pytest.raises(ConfigError, match="hybrid_layer_pattern .* disagree"):
        make_plan(LocalSource(src), 3)


def test_mimo_v2_omni_without_its_tower_tensors_is_refused_with_the_reason(tmp_path):
    """A vision_config is a tower hubpad pads with the language model (tests/test_mimo_omni.py): a checkpoint that
    states one but holds none of its tensors is refused, naming what is missing."""
    src = tmp_path / "upstream"
    build_mimo(src, mtp=False)
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "model_type": "mimo_v2",
                                                 "architectures": ["MiMoV2OmniForCausalLM"],
                                                 "vision_config": {"num_heads": 32}}))
    with pytest.raises(ConfigError, match="has a vision_config but no shard holds a tensor of its vision tower"):
        make_plan(LocalSource(src), 3)


@pytest.mark.parametrize("tp", [3, 6])
def test_mimo_v2_flash_published_layout_plans(tmp_path, tp):
    """64 heads / 4 full kv / 8 SWA kv -> 96 / 6 / 12; experts 2048 -> 2112 (TP 3: 704 per rank) or 2304 (TP 6: 384);
    the dense MLP 16384 -> 16512 / 16896 (whole 128-wide tiles per rank); the three MTP layers padded as SWA layers."""
    from hubpad.testing import write_checkpoint
    from tests import mimo_real
    from tests.helpers import cli

    cfg = mimo_real.MIMO_V2_FLASH
    src = write_checkpoint(tmp_path / "MiMo-V2-Flash", cfg, mimo_real.tensors(cfg), n_shards=4, header_only=True)
    result = cli("plan", src, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    dims = {d["name"]: d["after"] for d in plan["dims"]}
    assert (dims["attention heads"], dims["kv heads"], dims["swa kv heads"]) == (96, 6, 12)
    assert (dims["expert intermediate"], dims["dense intermediate"]) == ({3: 2112, 6: 2304}[tp],
                                                                         {3: 16512, 6: 16896}[tp])
    changes = plan["config_changes"]
    assert changes["swa_num_attention_heads"] == [64, 96] and changes["swa_num_key_value_heads"] == [8, 12]
    assert "attention_value_scale" not in changes
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    padded = {g["pattern"]: g["after"] for g in plan["tensors"]["padded_groups"]}
    assert padded["model.mtp.layers.*.self_attn.k_proj.weight"] == [12 * 192, 4096]
    assert padded["model.mtp.layers.*.self_attn.attention_sink_bias"] == [96]
