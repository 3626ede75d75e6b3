"""The TP advisor (`hubpad plan SRC` without one --tp) on header-only copies of real public models.

Every row must be the planner's own answer for that TP (same dims, same refusal, same relabel), with costs that
follow from the dims: Llama-3.3-70B, tencent/Hy3, Kimi-K2 and DeepSeek-V3 (MLA) at their real shapes.
"""

from __future__ import annotations

import json

import pytest

from hubpad.app.advice_report import advice_text, cost_cells, dims_cell, verdict_cell
from hubpad.errors import HubpadError
from hubpad.plan.advisor import advise, kv_values_per_token
from hubpad.plan.heads import HeadShape
from hubpad.plan.planner import make_plan
from hubpad.source.local import LocalSource
from hubpad.testing import tiny_hy3_tensors, write_checkpoint
from tests.helpers import cli
from tests.hy3_real import HY3_CONFIG
from tests.mla_real import DEEPSEEK_V3_CONFIG, KIMI_K2_CONFIG, mla_tensors
from tests.real_models import LLAMA33_70B, header_only_tensors

KV_PER_HEAD = 2 * 128 * 2  # K and V, head_dim 128, BF16, per attention layer
MLA_LATENT = (512 + 64) * 2  # kv_lora_rank + qk_rope_head_dim, BF16, per attention layer and rank


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
    assert row.relabelled == plan.relabelled


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
        assert r.padding_kv_bytes_per_token == r.extra_kv_bytes_per_token  # 9 kv heads on 3 ranks: no replication
        assert r.relabelled["to"]["architectures"] == ["MistralForCausalLM"]  # LlamaConfig cannot hold 72 heads
        assert verdict_cell(r) == "pad, as MistralForCausalLM"
        assert all(rows[tp].relabelled is None for tp in (1, 2, 4, 8))
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


@pytest.fixture(scope="module")
def mla(tmp_path_factory):
    root = tmp_path_factory.mktemp("mla")
    return {name: write_checkpoint(root / name, cfg, mla_tensors(cfg), n_shards=4, header_only=True)
            for name, cfg in (("DeepSeek-V3", DEEPSEEK_V3_CONFIG), ("Kimi-K2-Instruct", KIMI_K2_CONFIG))}


def _mla_attention_macs(heads: int) -> int:
    """Per layer: q_a_proj and kv_a_proj_with_mqa (replicated, any head count), q_b/kv_b/o_proj (per head)."""
    return 1536 * 7168 + 576 * 7168 + heads * (192 * 1536 + 256 * 512 + 128 * 7168)


def test_kimi_k2_rows_use_the_mla_geometry(mla):
    """Kimi-K2 (64 heads, 61 layers): the latent KV cache never grows with padded heads, attention FLOPs grow
    only in the head-sharded projections, and every row is the planner's."""
    rows = _rows(mla["Kimi-K2-Instruct"], (1, 3, 6, 8))
    for tp in (1, 8):  # 64 heads: 8 per rank x 192 q_b_proj rows = 12 FP8 blocks
        assert (rows[tp].verdict, rows[tp].dims, rows[tp].attention_flops_pct) == ("as is", [], 0.0), tp
    for tp, heads in ((3, 66), (6, 72)):
        r = rows[tp]
        assert {d["config_key"]: d["after"] for d in r.dims}["num_attention_heads"] == heads
        assert r.kv_cache == "latent" and r.padding_kv_bytes_per_token == 0
        assert r.kv_bytes_per_token == tp * 61 * MLA_LATENT and r.kv_bytes_per_token_per_rank == 61 * MLA_LATENT
        assert r.extra_kv_bytes_per_token == (tp - 1) * 61 * MLA_LATENT  # vLLM keeps the latent on every rank
        assert r.attention_flops_pct == round(100 * (_mla_attention_macs(heads) / _mla_attention_macs(64) - 1), 2)
        assert r.attention_score_flops_pct == round(100 * (heads - 64) / 64, 2)
        assert "64 attention heads % tp" in r.why[0] and not any("kv" in w for w in r.why)
        assert dims_cell(r).startswith(f"heads 64→{heads}, expert 2048→2304") and "kv" not in dims_cell(r)
        assert cost_cells(r)[1].endswith("; padding +0")
        _agrees_with_planner(mla["Kimi-K2-Instruct"], r)
    assert rows[3].attention_flops_pct == 2.66  # not the +28 % a uniform 192-wide head_dim gave
    assert rows[8].extra_kv_bytes_per_token == 7 * 61 * MLA_LATENT and rows[8].padding_kv_bytes_per_token == 0


def test_deepseek_v3_rows_count_the_mtp_layer(mla):
    r = _rows(mla["DeepSeek-V3"], (3,))[3]
    assert {d["config_key"]: d["after"] for d in r.dims}["num_attention_heads"] == 132
    assert r.kv_bytes_per_token == 3 * 62 * MLA_LATENT  # 61 layers + the MTP layer, one latent per rank
    assert r.padding_kv_bytes_per_token == 0 and r.attention_score_flops_pct == 3.12
    assert r.attention_flops_pct == round(100 * (_mla_attention_macs(132) / _mla_attention_macs(128) - 1), 2)
    _agrees_with_planner(mla["DeepSeek-V3"], r)
    text = advice_text(advise(LocalSource(mla["DeepSeek-V3"]), (3,)))
    assert "heads 128→132, expert 2048→2304" in text and "kv 128" not in text and "latent" in text


def test_kv_values_per_token_gqa_and_mla():
    gqa = HeadShape.uniform(128)
    assert kv_values_per_token(gqa, 8, 1) == 8 * 256
    assert kv_values_per_token(gqa, 4, 8) == 8 * 256  # 4 kv heads replicated on 8 ranks
    assert kv_values_per_token(gqa, 8, 3) is None  # 8 kv heads do not shard on 3 ranks
    mla = HeadShape({"q": 192, "o": 128, "kv_b": 256}, {}, kv_heads=False, latent_kv=576)
    assert [kv_values_per_token(mla, heads, tp) for heads, tp in ((64, 1), (66, 3), (72, 6))] == [576, 3 * 576, 6 * 576]


def test_cli_advisor_says_the_relabel(llama70b):
    text = cli("plan", llama70b).output
    assert "pad, as MistralForCausalLM" in text and "as MistralForCausalLM: the derivative's config" in text
    rows = {r["tp"]: r for r in json.loads(cli("plan", llama70b, "--tp", "auto", "--json").output)["rows"]}
    assert rows[3]["relabelled"]["to"] == {"model_type": "mistral", "architectures": ["MistralForCausalLM"]}
    assert rows[4]["relabelled"] is None
