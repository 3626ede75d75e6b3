"""MiMo-V2.5's "Pro format" (one FP8 `qkv_proj` per layer, pre-sharded in num_key_value_heads chunks of
[Q_c | K_c | V_c]; plan/presharded.py) and MiMo-V2.5-Pro-FP4's MXFP4 experts: pad a tiny real model in that form
(tests/mimo_fused.py), verify the bytes, and compare float64 logits of both read back as transformers'
MiMoV2FlashForCausalLM.

Tiny geometry (tests/mimo_models.py): 8 heads, 2 full kv heads, 4 SWA kv heads, q/k 16, v 8, so num_key_value_heads
= 2 chunks of 4 q heads + 1 full kv head (88 rows: 5.5 blocks of 16, 6 scale rows per chunk against 11 for one grid)
or 2 SWA kv heads (112 rows: 7 whole blocks). At TP 3 and 6: 12 heads, kv 3, SWA kv 6, so 3 chunks of the same
shape: the third is appended, all zero.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.helpers import folder_tensors, mirror_and_verify  # noqa: E402
from tests.mimo_fused import BLOCK, chunk_rows, dequantize, fuse  # noqa: E402

CASES = {"tp3-chunk-tiled": (3, "chunk", False), "tp6-one-grid": (6, "grid", False),
         "tp3-mxfp4-experts": (3, "chunk", True), "tp6-mxfp4-experts": (6, "chunk", True)}


def _logits(path):
    model = transformers.MiMoV2FlashForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    model.set_experts_implementation("eager")
    ids = torch.randint(0, 256, (2, 14), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_qkv_padded_model_gives_identical_logits(tmp_path, case):
    tp, tiling, mxfp4 = CASES[case]
    over = {"moe_intermediate_size": 64} if mxfp4 else {}  # MXFP4 needs whole groups of 32 inputs
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    cfg = fuse(tmp_path / "flash", src, tiling=tiling, mxfp4_experts=mxfp4, **over)
    mirror_and_verify(src, dst, tp)
    out = json.loads((dst / "config.json").read_text())
    assert (out["num_attention_heads"], out["num_key_value_heads"], out["swa_num_key_value_heads"]) == (12, 3, 6)
    assert out["quantization_config"] == cfg["quantization_config"]

    before, after = folder_tensors(src), folder_tensors(dst)
    for layer, swa in (("model.layers.0.", False), ("model.layers.1.", True), ("model.mtp.layers.0.", True)):
        name = layer + "self_attn.qkv_proj.weight"
        rows = chunk_rows(cfg, swa)
        w0, w1 = before[name].view(torch.uint8), after[name].view(torch.uint8)
        assert w1.shape == (3 * rows, cfg["hidden_size"])  # num_key_value_heads 3 chunks of the same shape
        assert torch.equal(w1[:2 * rows], w0) and not w1[2 * rows:].any()  # upstream in place, then a zero chunk
        s0, s1 = before[name + "_scale_inv"], after[name + "_scale_inv"]
        per_chunk = -(-rows // BLOCK)
        grid = tiling == "grid" and rows % BLOCK
        assert s1.shape[0] == (-(-3 * rows // BLOCK) if grid else 3 * per_chunk)
        assert torch.equal(s1[:s0.shape[0]], s0) and (s1[s0.shape[0]:] == 1.0).all()
    if mxfp4:
        e = "model.layers.1.mlp.experts.0."
        assert after[e + "down_proj.weight"].dtype == torch.uint8 and after[e + "down_proj.weight_scale"].shape[1] \
            == out["moe_intermediate_size"] // 32

    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    dequantize(src, a_dir)
    dequantize(dst, b_dir)
    a, b = _logits(a_dir), _logits(b_dir)
    delta = (a - b).abs().max().item()
    print(f"{case}: max |Δ| = {delta}")
    assert delta <= 1e-12 * a.abs().max().item()


def test_fused_qkv_control_a_zero_chunk_in_the_wrong_place_changes_the_logits(tmp_path):
    """The proof can fail: the zero chunk inserted first instead of appended (real heads move to other kv heads)."""
    from safetensors.torch import save_file

    src, dst = tmp_path / "upstream", tmp_path / "padded"
    cfg = fuse(tmp_path / "flash", src)
    mirror_and_verify(src, dst, 3)
    tensors = folder_tensors(dst)
    name = "model.layers.0.self_attn.qkv_proj.weight"
    rows = chunk_rows(cfg, False)
    tensors[name] = torch.cat([tensors[name][2 * rows:], tensors[name][:2 * rows]])
    for f in dst.glob("*.safetensors"):
        f.unlink()
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    dequantize(src, a_dir)
    dequantize(dst, b_dir)
    assert (_logits(a_dir) - _logits(b_dir)).abs().max().item() > 1e-3


def test_unquantized_fused_qkv_is_refused_with_the_reason(tmp_path):
    """vLLM's decoder layers read a BF16 fused qkv_proj as one [Q | K | V] block, its MTP layers as chunks."""
    from safetensors.torch import load_file, save_file

    src = tmp_path / "upstream"
    fuse(tmp_path / "flash", src)
    tensors = load_file(src / "model.safetensors")
    name = "model.layers.0.self_attn.qkv_proj.weight"
    tensors[name] = tensors[name].to(torch.bfloat16)
    del tensors[name + "_scale_inv"]
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ConfigError, match="unquantized fused qkv_proj is not supported: vLLM's MiMo-V2 decoder layers"):
        make_plan(LocalSource(src), 3)


def test_fused_qkv_with_the_wrong_chunk_count_is_refused(tmp_path):
    """A fused qkv_proj whose rows are not num_key_value_heads chunks of the config's heads is named, not guessed."""
    src = tmp_path / "upstream"
    cfg = fuse(tmp_path / "flash", src)
    (src / "config.json").write_text(json.dumps({**cfg, "num_key_value_heads": 4, "swa_num_key_value_heads": 8}))
    with pytest.raises(ConfigError, match="qkv_proj"):
        make_plan(LocalSource(src), 3)


@pytest.mark.parametrize("fp4", [False, True], ids=["fp8", "fp4-experts"])
@pytest.mark.parametrize("tp", [3, 6])
def test_mimo_v2_5_pro_published_layout_plans(tmp_path, tp, fp4):
    """128 heads / 8 kv (both layer types) -> 144 / 9 at TP 3, 192 / 12 at TP 6: the fused qkv_proj [27136, 6144]
    (8 chunks of 3392 rows, 216 = 8 x 27 scale rows) gains 1 / 4 whole chunks; experts 2048 -> 2304 (768 / 384 per
    rank, whole 128-row blocks), the dense MLP 16384 -> 16512 / 16896; the MTP layers' fused qkv_proj too."""
    from hubpad.testing import write_checkpoint
    from tests import mimo_real
    from tests.helpers import cli

    cfg = mimo_real.MIMO_V2_5_PRO_FP4 if fp4 else mimo_real.MIMO_V2_5_PRO
    src = write_checkpoint(tmp_path / "MiMo-V2.5-Pro", cfg, mimo_real.pro_tensors(cfg), n_shards=34, header_only=True)
    result = cli("plan", src, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    dims = {d["name"]: d["after"] for d in plan["dims"]}
    heads, kv = {3: (144, 9), 6: (192, 12)}[tp]
    assert (dims["attention heads"], dims["kv heads"]) == (heads, kv)
    assert (dims["expert intermediate"], dims["dense intermediate"]) == (2304, {3: 16512, 6: 16896}[tp])
    assert plan["config_changes"]["swa_num_key_value_heads"] == [8, kv]
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    padded = {g["pattern"]: g["after"] for g in plan["tensors"]["padded_groups"]}
    assert padded["model.layers.*.self_attn.qkv_proj.weight"] == [kv * 3392, 6144]
    assert padded["model.layers.*.self_attn.qkv_proj.weight_scale_inv"] == [kv * 27, 48]
    assert padded["model.mtp.layers.*.self_attn.qkv_proj.weight"] == [kv * 3392, 6144]
    assert padded["model.layers.*.self_attn.o_proj.weight"] == [6144, heads * 128]
    if fp4:
        assert padded["model.layers.*.mlp.experts.*.down_proj.weight_scale"] == [6144, 2304 // 32]
    if tp == 3 and not fp4:  # the advisor counts the K and V rows of the fused qkv_proj (BF16 cache)
        advice = json.loads(cli("plan", src, "--json").output)
        row = next(r for r in advice["rows"] if r["tp"] == 3)
        assert row["extra_kv_bytes_per_token"] == 73 * (192 + 128) * 2  # one more kv head, K and V, in every layer


def test_mimo_v2_5_with_its_vision_config_but_no_tower_is_refused_with_the_reason(tmp_path):
    """MiMo-V2.5's config as published (a vision_config: vLLM makes it MiMoV2OmniForCausalLM) over a checkpoint
    without the tower's tensors: refused, naming them. The tower itself is padded (tests/test_mimo_omni.py), and the
    published MiMo-V2.5 is refused at TP 3 for its merger."""
    src = tmp_path / "upstream"
    cfg = fuse(tmp_path / "flash", src)
    vision = {"depth": 28, "hidden_size": 1280, "num_heads": 32, "num_key_value_heads": 8, "num_query_groups": 4,
              "fullatt_block_indexes": [0, 9, 18, 27], "use_sink": True, "out_hidden_size": 4096}
    (src / "config.json").write_text(json.dumps({**cfg, "vision_config": vision, "vision_model_type": "mimovl"}))
    with pytest.raises(ConfigError, match="has a vision_config but no shard holds a tensor of its vision tower"):
        make_plan(LocalSource(src), 3)


def test_mimo_v2_5_pro_card_states_the_vllm_release_that_reads_its_fused_qkv(tmp_path):
    """vLLM reads num_key_value_heads as the chunk count and re-shards the fused qkv_proj for any TP from 0.31.0."""
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    fuse(tmp_path / "flash", src, mxfp4_experts=True, moe_intermediate_size=64)
    mirror_and_verify(src, dst, 3)
    card = (dst / "README.md").read_text()
    assert "**vLLM 0.31.0 or newer**: the first release with MiMo-V2.5's fused FP8 qkv" in card
    assert "stored in num\\_key\\_value\\_heads = 3 chunks" in card.replace("\n", " ")  # when vLLM re-quantizes
