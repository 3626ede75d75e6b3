"""EXAONE 4.5's published layout planned header-only (its float64 proof: tests/test_vlm.py; the refused
vision-language families' one-line reasons: tests/test_registry_families.py)."""

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
