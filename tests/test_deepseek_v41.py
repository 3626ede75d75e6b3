"""DeepSeek-V4.1 (`deepseek_v41`): V4's heads padded in whole o_groups, in the backbone and the DSpark stages; Engram,
the shared compressed attention, the vision tower and the DSpark heads copied (hubpad/plan/adapters/deepseek_v41.py).

There is no transformers class for V4.1. Padding changes only the attention's head-sharded tensors (wq_b, wo_a,
wo_b, attn_sink) and two config keys; everything else is byte for byte upstream's (`hubpad verify`) and never reads
the head count. So the float64 proof is made on that block: every layer's and DSpark stage's attention of a tiny V4.1
(tests/dsv41_real.py, published names) loaded into transformers' own DeepseekV4Attention (V4's, which vLLM's V4.1
module ports: the same q / kv / sink / grouped output path; run as a sliding-window layer, since the compressed
caches V4.1 shares across layers are replicated and head-free), original against derivative, and the padded wo_a /
wo_b split per rank as vLLM splits them. Then the published V4.1-Flash header-only at TP 3 and 6, the card's serving
mode for its Engram wkv (25600 outputs: neither 3 nor 6 divides it) and DSpark, and the formats byte for byte.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import dsv41_real  # noqa: E402
from tests.dsv4_models import config_kwargs  # noqa: E402
from tests.helpers import cli, folder_tensors, mirror_and_verify  # noqa: E402
from tests.test_deepseek_v4 import _vllm_output_projection  # noqa: E402

CASES = {3: (6, 3), 6: (12, 6)}  # TP -> heads, o_groups
PREFIXES = [f"layers.{i}." for i in range(5)] + [f"mtp.{i}." for i in range(3)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("dsv41")
    dsv41_real.build_tiny(root / "upstream")
    for tp in CASES:
        mirror_and_verify(root / "upstream", root / f"tp{tp}", tp)
    return root


def _text(folder) -> dict:
    return json.loads((folder / "config.json").read_text())["text_config"]


def _attention(folder, prefix: str, hidden: torch.Tensor, edit=None) -> torch.Tensor:
    """`prefix`'s attention of the checkpoint in `folder` as transformers' DeepseekV4Attention, in float64 (`edit`:
    a change made to the tensors first, for controls)."""
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m

    t = _text(folder)
    cfg = transformers.DeepseekV4Config(**config_kwargs(
        hidden_size=t["hidden_size"], num_attention_heads=t["num_attention_heads"], head_dim=t["head_dim"],
        qk_rope_head_dim=t["qk_rope_head_dim"], q_lora_rank=t["q_lora_rank"], o_groups=t["o_groups"],
        o_lora_rank=t["o_lora_rank"], sliding_window=t["sliding_window"], rms_norm_eps=t["rms_norm_eps"]))
    cfg._attn_implementation = "eager"
    attn = m.DeepseekV4Attention(cfg, layer_idx=0)  # layer 0: sliding_attention
    w = folder_tensors(folder)
    if edit is not None:
        edit(w)
    names = {"q_a_proj.weight": "wq_a.weight", "q_a_norm.weight": "q_norm.weight", "q_b_proj.weight": "wq_b.weight",
             "kv_proj.weight": "wkv.weight", "kv_norm.weight": "kv_norm.weight", "o_a_proj.weight": "wo_a.weight",
             "o_b_proj.weight": "wo_b.weight", "sinks": "attn_sink"}
    state = {k: w[prefix + "attn." + v] for k, v in names.items()}
    assert set(state) == {k for k, _ in attn.named_parameters()}
    attn.load_state_dict(state)
    attn = attn.to(torch.float64).eval()
    rope = m.DeepseekV4RotaryEmbedding(cfg)
    pos = torch.arange(hidden.shape[1])[None]
    emb = {k: rope(hidden, pos, k) for k in ("main", "compress")}
    i = torch.arange(hidden.shape[1])
    seen = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < t["sliding_window"])
    mask = torch.zeros(seen.shape, dtype=torch.float64).masked_fill(~seen, float("-inf"))[None, None]
    with torch.no_grad():
        return attn(hidden, emb, pos, mask)[0]


@pytest.mark.parametrize("tp", sorted(CASES))
def test_dsv41_padded_attention_gives_identical_outputs(tiny, tp):
    dst = tiny / f"tp{tp}"
    t = _text(dst)
    assert (t["num_attention_heads"], t["o_groups"]) == CASES[tp]
    hidden = torch.randn(2, 20, t["hidden_size"], generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    worst = 0.0
    for prefix in PREFIXES:  # the five backbone layers and the three DSpark stages
        a, b = _attention(tiny / "upstream", prefix, hidden), _attention(dst, prefix, hidden)
        worst = max(worst, (a - b).abs().max().item() / a.abs().max().item())
    print(f"deepseek_v41 tp{tp}: attention of {len(PREFIXES)} layers, relative max |Δ| = {worst:.1e}")
    assert worst <= 1e-12


def test_dsv41_attention_control_a_zero_group_in_front_changes_the_outputs(tiny):
    """The proof can fail: the derivative's zero wo_a group moved in front of the real ones (heads meet other
    groups' projections) changes the attention output."""
    def zero_group_first(w):
        name = "layers.0.attn.wo_a.weight"
        w[name] = torch.cat([w[name][-32:], w[name][:-32]])  # o_lora_rank 32 rows a group

    hidden = torch.randn(1, 12, 64, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    a = _attention(tiny / "upstream", "layers.0.", hidden)
    b = _attention(tiny / "tp3", "layers.0.", hidden, edit=zero_group_first)
    assert (a - b).abs().max().item() > 1e-3 * a.abs().max().item()


@pytest.mark.parametrize("tp", sorted(CASES))
def test_dsv41_vllm_split_of_the_grouped_projection_is_exact(tiny, tp):
    """The padded wo_a / wo_b cut per rank as vLLM cuts them, fed outputs that are not zero for the padded heads."""
    src, out = folder_tensors(tiny / "upstream"), folder_tensors(tiny / f"tp{tp}")
    c1, c2 = _text(tiny / "upstream"), _text(tiny / f"tp{tp}")
    o = torch.randn(7, c2["num_attention_heads"], c2["head_dim"], generator=torch.Generator().manual_seed(5),
                    dtype=torch.float64)
    for p in ("layers.1.", "mtp.2."):
        want = _vllm_output_projection({k: v.double() for k, v in src.items() if k.startswith(p)}, p,
                                       o[:, :c1["num_attention_heads"]], c1, 1)
        got = _vllm_output_projection({k: v.double() for k, v in out.items() if k.startswith(p)}, p, o, c2, tp)
        assert (got - want).abs().max().item() <= 1e-12 * want.abs().max().item()


def test_dsv41_copies_engram_compressors_vision_and_dspark_heads(tiny):
    before, after = folder_tensors(tiny / "upstream"), folder_tensors(tiny / "tp3")
    padded = {n for n in before if not torch.equal(before[n], after[n]) or before[n].shape != after[n].shape}
    assert {n.split(".", 2)[2] if n.startswith(("layers.", "mtp.")) else n for n in padded} == {
        "attn.wq_b.weight", "attn.wo_a.weight", "attn.wo_b.weight", "attn.attn_sink"}
    for name in ("layers.1.engram.wkv.weight", "layers.1.engram.embed.weight", "layers.2.attn.indexer.wk.weight",
                 "mtp.0.main_proj.weight", "mtp.2.markov_head.head.weight", "vision.blocks.0.attn.wqkv.weight"):
        assert name in after and torch.equal(after[name], before[name])
    sink = after["mtp.1.attn.attn_sink"]
    assert sink.shape == (6,) and torch.equal(sink[:4], before["mtp.1.attn.attn_sink"]) and not sink[4:].any()


def test_dsv41_card_states_dspark_the_engram_mode_and_the_minimum_vllm(tiny):
    manifest = json.loads((tiny / "tp3" / "hubpad.json").read_text())["serving"]
    assert (manifest["tool_call_parser"], manifest["reasoning_parser"]) == ("deepseek_v41", "deepseek_v41")
    assert manifest["speculative_config"] == {"method": "dspark", "num_speculative_tokens": 5}
    assert manifest["min_vllm"]["version"] == "0.30.0"
    engram = next(n for n in manifest["notes"] if "Engram" in n)
    assert "hidden_size x (hc_mult + 1) = 320 outputs" in engram and "--enable-expert-parallel" in engram
    assert "`AssertionError: 320 is not divisible by 3`" in engram and "vLLM 0.30.0 builds wkv replicated" in engram
    card = (tiny / "tp3" / "README.md").read_text().replace("\n", " ")
    assert "--speculative-config" in card and "dspark" in card and "AssertionError: 320 is not divisible by 3" in card
    assert "o\\_groups (3)" in card or "o_groups (3)" in card


def test_dsv41_fp8_and_mxfp4_bytes_mirror_and_verify(tmp_path):
    """V4.1's formats on the tiny model with random bytes: FP8 e4m3 with e8m0 `.scale` in 32 x 32 blocks, MXFP4
    experts (I8 + e8m0 per 32): mirrored at TP 3 and verified; new weight bytes 0x00, new scale cells 0x7f (1.0)."""
    src = dsv41_real.build_tiny(tmp_path / "src", quantized=True)
    dst = tmp_path / "tp3"
    mirror_and_verify(src, dst, 3)
    out = folder_tensors(dst)
    wq_b, scale = out["mtp.0.attn.wq_b.weight"].view(torch.uint8), out["mtp.0.attn.wq_b.scale"].view(torch.uint8)
    assert wq_b.shape == (6 * 32, 32) and not wq_b[4 * 32:].any()  # two zero heads of 32 rows
    assert scale.shape == (6, 1) and (scale[4:] == 0x7F).all()  # one 32-row block a head
    wo_a = out["layers.1.attn.wo_a.weight"].view(torch.uint8)
    assert wo_a.shape == (3 * 32, 64) and not wo_a[64:].any()
    assert out["layers.1.ffn.experts.0.w1.weight"].shape == (384, 32)  # 128 a rank at TP 3: not padded


def test_v41_flash_tensor_list_matches_the_published_count():
    assert len(dsv41_real.v41_tensors(dsv41_real.FLASH)) == dsv41_real.FLASH_COUNT


@pytest.fixture(scope="module")
def flash(tmp_path_factory):
    from hubpad.testing import write_checkpoint

    return write_checkpoint(tmp_path_factory.mktemp("flash") / "DeepSeek-V4.1-Flash", dsv41_real.FLASH,
                            dsv41_real.v41_tensors(dsv41_real.FLASH), n_shards=48, header_only=True)


@pytest.mark.parametrize("tp", [3, 6])
def test_v41_flash_published_layout_plans(flash, tp):
    """64 heads / 8 o_groups -> 72 / 9 (TP 3) or 96 / 12 (TP 6), in the 40 layers and the 3 DSpark stages; the MXFP4
    experts (2304: 768 / 384 a rank, whole 128-wide tiles) and the shared expert shard as they are."""
    result = cli("plan", flash, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    dims = {d["name"]: (d["before"], d["after"]) for d in plan["dims"]}
    heads, groups = {3: (72, 9), 6: (96, 12)}[tp]
    assert dims["attention heads"] == (64, heads) and dims["output groups"] == (8, groups)
    assert dims["expert intermediate"] == (2304, 2304)
    assert plan["config_changes"] == {"text_config.num_attention_heads": [64, heads], "text_config.o_groups": [8, groups]}
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    padded = {g["pattern"] for g in plan["tensors"]["padded_groups"]}
    assert padded == {f"{p}.*.attn.{n}" for p in ("layers", "mtp") for n in
                      ("wq_b.weight", "wq_b.scale", "wo_a.weight", "wo_a.scale", "wo_b.weight", "wo_b.scale",
                       "attn_sink")}
    assert plan["vocab"]["patch_needed"]
    print(f"V4.1-Flash TP {tp}: +{sum(g['bytes_added'] for g in plan['tensors']['padded_groups']) / 1e9:.2f} GB")


def test_v41_flash_advisor_names_the_engram_mode(flash):
    result = cli("plan", flash, "--json")
    assert result.exit_code == 0, result.output
    rows = {r["tp"]: r for r in json.loads(result.output)["rows"]}
    assert [t for t, r in rows.items() if r["verdict"] == "as is"] == [1, 2]
    # TP 4 and 8: heads and groups shard, the MXFP4 experts get whole 128-wide tiles a rank (2304 / 4 = 576, as for
    # every MXFP4 expert hubpad pads: plan/quant.py), and 25600 divides: no Engram note
    for tp in (4, 8):
        assert [d["name"] for d in rows[tp]["dims"]] == ["expert intermediate"]
        assert not any("Engram" in w for w in rows[tp]["why"])
    for tp in (3, 6, 7):
        assert any(f"25600 % {tp} != 0" in w and "--enable-expert-parallel" in w for w in rows[tp]["why"]), tp
    assert not any("Engram" in w for w in rows[5]["why"])  # 25600 / 5: the default mode serves it


def test_dspark_v41_draft_repo_is_refused(tmp_path):
    src = dsv41_real.build_tiny(tmp_path / "draft")
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "architectures": ["DSparkV41DraftModel"]}))
    with pytest.raises(ConfigError, match=r"V4.1 DSpark draft .* ship inside the target checkpoint"):
        make_plan(LocalSource(src), 3)
