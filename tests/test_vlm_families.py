"""EXAONE 4.5: its published layout planned header-only and its MTP layer's padding (its float64 proof:
tests/test_vlm.py; the refused vision-language families' one-line reasons: tests/test_registry_families.py)."""

from __future__ import annotations

import json

import pytest

from hubpad.testing import write_checkpoint
from tests.helpers import cli


@pytest.mark.parametrize("tp,expected", [
    (3, {"num_attention_heads": 45, "num_key_value_heads": 9, "intermediate_size": 27648}),
    (6, {"num_attention_heads": 60, "num_key_value_heads": 12, "intermediate_size": 27648})])
def test_exaone4_5_33b_plans_as_published(tmp_path, tp, expected):
    """`hubpad plan` on a header-only copy of EXAONE-4.5-33B's layout: EXAONE-4.0-32B's dims in text_config (the tower
    untouched), and the top-level copies of those keys written alike."""
    from tests.vlm_families_real import EXAONE45_33B, exaone45_tensors

    src = write_checkpoint(tmp_path / "src", EXAONE45_33B, exaone45_tensors(EXAONE45_33B), n_shards=4, header_only=True)
    result = cli("plan", src, "--tp", tp, "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert {d["config_key"]: d["after"] for d in plan["dims"] if d["after"] != d["before"]} == expected
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    changes = plan["config_changes"]
    assert all(changes[key] == changes["text_config." + key] for key in expected)  # the top-level copies too
    assert not any(key.startswith("vision_config") for key in changes)


def test_exaone4_5_pads_its_mtp_layer_as_its_decoder_layers(tmp_path):
    """The MTP layer under `mtp.` (vLLM's Exaone4_5_MTP: an Exaone4 decoder layer beside `mtp.fc`) gets the padded
    heads, kv heads and MLP width; `mtp.fc` and the norms (hidden-size wide) are copied; the tower is never padded."""
    pytest.importorskip("torch")
    from tests.vlm_models import build_exaone4_5

    src = build_exaone4_5(tmp_path / "src")
    plan = json.loads(cli("plan", src, "--tp", 3, "--json").output)
    changed = {t["name"]: t["after"] for t in plan["changed_tensors"]}
    assert changed["mtp.layers.0.self_attn.q_proj.weight"] == [6 * 32, 128]
    assert changed["mtp.layers.0.self_attn.k_proj.weight"] == [3 * 32, 128]
    assert changed["mtp.layers.0.self_attn.o_proj.weight"] == [128, 6 * 32]
    assert changed["mtp.layers.0.mlp.down_proj.weight"] == [128, 384]
    assert not any(n.startswith(("mtp.fc", "mtp.norm", "mtp.pre_fc", "model.visual.")) for n in changed)


def test_hyperclovax_seed_think_is_refused_by_its_architecture(tmp_path):
    """Its published config.json says model_type "vlm": the architecture names the refusal, in plan and mirror."""
    src = write_checkpoint(tmp_path / "hcx", {"model_type": "vlm", "architectures": ["HCXVisionV2ForCausalLM"]}, [],
                           n_shards=1, header_only=True)
    for args in (("plan", src, "--tp", 3), ("mirror", src, "--tp", 3, "--to", tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code == 1 and "shards its Qwen2.5-VL vision tower by heads" in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("error:")
    assert not (tmp_path / "out").exists()
