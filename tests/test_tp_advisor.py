"""The TP advisor (`hubpad plan SRC` without one --tp) on header-only copies of real public models.

Every row must be the planner's own answer for that TP (same dims, same refusal), with costs that follow from
the dims: Llama-3.3-70B and tencent/Hy3 at their real shapes.
"""

from __future__ import annotations

import json

import pytest

from hubpad.errors import HubpadError
from hubpad.plan.advisor import advise
from hubpad.plan.planner import make_plan
from hubpad.source.local import LocalSource
from hubpad.testing import tiny_hy3_tensors, write_checkpoint
from tests.helpers import cli
from tests.hy3_real import HY3_CONFIG
from tests.real_models import LLAMA33_70B, header_only_tensors

KV_PER_HEAD = 2 * 128 * 2  # K and V, head_dim 128, BF16, per attention layer


@pytest.fixture(scope="module")
def llama70b(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama") / "Llama-3.3-70B-Instruct"
    return write_checkpoint(path, LLAMA33_70B, header_only_tensors(LLAMA33_70B), n_shards=5, header_only=True)


@pytest.fixture(scope="module")
def hy3(tmp_path_factory):
    path = tmp_path_factory.mktemp("hy3") / "Hy3"
    return write_checkpoint(path, HY3_CONFIG, tiny_hy3_tensors(HY3_CONFIG, "bf16"), n_shards=5, header_only=True)


def _rows(path, tps=tuple(range(1, 9))):
    return {r.tp: r for r in advise(LocalSource(path), tps).rows}


def _agrees_with_planner(path, row):
    """The row is what `hubpad plan --tp N` decides: the same dims and bytes, or the same refusal."""
    try:
        plan = make_plan(LocalSource(path), row.tp)
    except HubpadError as exc:
        assert row.verdict == "cannot" and row.why == [str(exc)]
        return
    assert row.verdict == ("pad" if plan.needs_padding else "as is")
    assert row.dims == [{"name": d.name, "config_key": d.config_keys[0], "before": d.before, "after": d.after}
                        for d in plan.dims if d.before != d.after]
    assert row.extra_bytes == sum(t.nbytes - t.src.nbytes for t in plan.tensors)
    assert row.vocab_patch == plan.vocab["patch_needed"]


def test_llama70b_rows(llama70b):
    rows = _rows(llama70b)
    for tp in (1, 2, 4, 8):  # 64 heads, 8 kv heads, 28672 = 224 tiles of 128, vocab 128256 = 2004 x 64
        r = rows[tp]
        assert (r.verdict, r.dims, r.extra_bytes, r.extra_kv_bytes_per_token) == ("as is", [], 0, 0), tp
        assert r.kv_bytes_per_token == 8 * 80 * KV_PER_HEAD and r.attention_flops_pct == r.mlp_flops_pct == 0
    for tp in (3, 5, 6, 7):
        assert rows[tp].verdict != "as is"
        assert "64 attention heads % tp" in " ".join(rows[tp].why)
    r = rows[3]
    if r.verdict == "pad":  # the derivative can carry 72 heads (a config class that accepts them)
        assert {d["config_key"]: d["after"] for d in r.dims} == {
            "num_attention_heads": 72, "num_key_value_heads": 9, "intermediate_size": 28800}
        assert r.extra_kv_bytes_per_token == 80 * KV_PER_HEAD  # one more kv head per layer: +12.5 %
        assert r.attention_flops_pct == r.attention_score_flops_pct == 12.5
        # 8 q heads + 1 kv head (k and v) + 8 o heads of 128 x 8192 BF16, and 128 MLP channels x 3, per layer
        assert r.extra_bytes == 80 * 2 * 8192 * (8 * 128 + 2 * 128 + 8 * 128 + 3 * 128)
        assert r.mlp_flops_pct == round(100 * 128 / 28672, 2)
    else:
        assert "hidden_size 8192 % 72 heads" in r.why[0]
    for tp in range(1, 9):
        _agrees_with_planner(llama70b, rows[tp])


def test_hy3_rows(hy3):
    rows = _rows(hy3, (1, 2, 3, 4, 6, 8))
    for tp in (1, 2, 4, 8):
        assert (rows[tp].verdict, rows[tp].dims, rows[tp].vocab_patch) == ("as is", [], False), tp
    r = rows[3]
    assert r.verdict == "pad" and r.vocab_patch
    assert {d["config_key"]: (d["before"], d["after"]) for d in r.dims} == {
        "num_attention_heads": (64, 72), "num_key_value_heads": (8, 9), "intermediate_size": (13312, 13440)}
    assert r.extra_kv_bytes_per_token == 81 * KV_PER_HEAD  # 80 layers + the MTP layer, one kv head each
    assert r.attention_flops_pct == 12.5
    assert 0 < r.mlp_flops_pct < 0.1  # one dense layer of 80 grows by 1 %; experts are untouched
    assert any("64 attention heads % tp 3" in w for w in r.why) and any("vocab" in w for w in r.why)
    assert rows[6].dims[0]["after"] == 96 and rows[6].attention_flops_pct == 50.0
    for tp in (3, 6):
        _agrees_with_planner(hy3, rows[tp])


def test_cli_advisor_text_and_json(llama70b):
    text = cli("plan", llama70b)
    assert text.exit_code == 0, text.output
    for needle in ("verdict", "padded dims", "extra KV/token", "attn FLOPs", "MLP FLOPs", "as is"):
        assert needle in text.output
    data = json.loads(cli("plan", llama70b, "--tp", "auto", "--tp", "12", "--json").output)
    assert [r["tp"] for r in data["rows"]] == [1, 2, 3, 4, 5, 6, 7, 8, 12]
    assert set(data["rows"][0]) >= {"verdict", "why", "dims", "extra_bytes", "kv_bytes_per_token",
                                    "extra_kv_bytes_per_token", "attention_flops_pct", "mlp_flops_pct"}
    two = json.loads(cli("plan", llama70b, "--tp", "3", "--tp", "6", "--json").output)
    assert [r["tp"] for r in two["rows"]] == list(range(1, 9))
    single = json.loads(cli("plan", llama70b, "--tp", "4", "--json").output)
    assert single["tp"] == 4 and not single["needs_padding"]  # one size: the full plan, as before
    bad = cli("plan", llama70b, "--tp", "three")
    assert bad.exit_code != 0 and "auto" in bad.output
    parts = cli("plan", llama70b, "--parts", "2")
    assert parts.exit_code == 1 and "--parts needs a single --tp" in parts.output
