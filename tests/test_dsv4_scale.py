"""Plan DeepSeek-V4-Flash and V4-Pro at their published shapes (FP8 `.scale` blocks, MXFP4 experts, MTP layer) from
headers over sparse files, at TP 3 and 6 (tests/dsv4_real.py says where each figure comes from)."""

from __future__ import annotations

import json

import pytest

from hubpad.testing import nbytes, write_checkpoint
from tests.dsv4_real import FLASH_CONFIG, FLASH_INDEX, PRO_CONFIG, v4_tensors
from tests.helpers import cli


def test_flash_tensor_list_reproduces_the_published_index():
    """The tensor list matches V4-Flash's model.safetensors.index.json: its tensor count, its mtp.0. count and its
    total_size to the byte (so every dtype and shape assumed in tests/dsv4_real.py adds up)."""
    tensors = v4_tensors(FLASH_CONFIG)
    count, mtp, total = FLASH_INDEX
    assert len(tensors) == len({n for n, _, _ in tensors}) == count
    assert sum(n.startswith("mtp.0.") for n, _, _ in tensors) == mtp
    assert sum(nbytes(d, s) for _, d, s in tensors) == total


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("dsv4-real")
    return {name: write_checkpoint(root / name, cfg, v4_tensors(cfg), n_shards=4, header_only=True)
            for name, cfg in (("DeepSeek-V4-Flash", FLASH_CONFIG), ("DeepSeek-V4-Pro", PRO_CONFIG))}


# (model, tp) -> heads, o_groups, expert width after; wq_b rows per rank
CASES = {("DeepSeek-V4-Flash", 3): (72, 9, 2304, 12288), ("DeepSeek-V4-Flash", 6): (96, 12, 2304, 8192),
         ("DeepSeek-V4-Pro", 3): (144, 18, 3072, 24576), ("DeepSeek-V4-Pro", 6): (144, 18, 3072, 12288)}


@pytest.mark.parametrize("model,tp", sorted(CASES))
def test_dsv4_plan_at_published_scale(checkpoints, model, tp):
    heads, groups, expert, q_rows = CASES[model, tp]
    cfg = FLASH_CONFIG if model == "DeepSeek-V4-Flash" else PRO_CONFIG
    result = cli("plan", checkpoints[model], "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    after = {d["config_key"]: d["after"] for d in plan["dims"]}
    assert after == {"num_attention_heads": heads, "num_key_value_heads": 1, "head_dim": 512, "o_groups": groups,
                     "moe_intermediate_size": expert}
    table = {r["dim"]: r for r in plan["rank_table"]}
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    assert table["wq_b rows"]["per_rank"] == q_rows and table["o_groups"]["per_rank"] == groups // tp
    assert table["wo_a rows"]["per_rank"] == groups // tp * 1024 and table["wo_b columns"]["per_rank"] == groups // tp * 1024
    assert (expert // tp) % 128 == 0  # MXFP4 expert slices in whole 128 tiles (vLLM's round-up is then a no-op)
    h, ql, g0, h0 = cfg["hidden_size"], cfg["q_lora_rank"], cfg["o_groups"], cfg["num_attention_heads"]
    shapes = {c["name"]: (c["before"], c["after"]) for c in plan["changed_tensors"]}
    for p in ("layers.5.", "mtp.0."):
        assert shapes[p + "attn.wq_b.weight"] == ([h0 * 512, ql], [heads * 512, ql])
        assert shapes[p + "attn.wq_b.scale"] == ([h0 * 4, ql // 128], [heads * 4, ql // 128])
        assert shapes[p + "attn.wo_a.weight"] == ([g0 * 1024, 4096], [groups * 1024, 4096])
        assert shapes[p + "attn.wo_a.scale"] == ([g0 * 8, 32], [groups * 8, 32])
        assert shapes[p + "attn.wo_b.weight"] == ([h, g0 * 1024], [h, groups * 1024])
        assert shapes[p + "attn.wo_b.scale"] == ([h // 128, g0 * 8], [h // 128, groups * 8])
        assert shapes[p + "attn.attn_sink"] == ([h0], [heads])
    inter = cfg["moe_intermediate_size"]
    if expert != inter:
        assert shapes["layers.5.ffn.experts.9.w1.weight"] == ([inter, h // 2], [expert, h // 2])
        assert shapes["layers.5.ffn.experts.9.w1.scale"] == ([inter, h // 32], [expert, h // 32])
        assert shapes["layers.5.ffn.experts.9.w2.weight"] == ([h, inter // 2], [h, expert // 2])
        assert shapes["layers.5.ffn.experts.9.w2.scale"] == ([h, inter // 32], [h, expert // 32])
        assert shapes["mtp.0.ffn.shared_experts.w2.scale"] == ([h // 128, inter // 128], [h // 128, expert // 128])
    else:  # Pro's 3072 already shards in whole tiles at TP 3 and 6
        assert not any(".experts." in n for n in shapes)
    replicated = ("wq_a", "wkv", "compressor", "indexer", "hc_", "ffn.gate", "e_proj", "h_proj", "embed", "norm")
    assert not [n for n in shapes if any(r in n for r in replicated)]


def test_dsv4_refuses_a_heads_only_padding_of_v4_flash(tmp_path):
    """V4-Flash padded by hand to 72 heads with its 8 groups kept (9 heads a group): refused with the reason."""
    cfg = dict(FLASH_CONFIG, num_attention_heads=72)
    path = write_checkpoint(tmp_path / "hand", cfg, v4_tensors(dict(cfg, o_groups=8)), n_shards=2, header_only=True)
    result = cli("plan", path, "--tp", "3")
    assert result.exit_code == 1 and "72 attention heads in 8 o_groups (9 a group)" in result.output
    assert "padded by heads only" in result.output


def test_dsv4_advisor_table(checkpoints):
    """The advisor's table for both models (docs/families/deepseek-v4.md quotes it): TP 3 and 6 need padding."""
    for model in ("DeepSeek-V4-Flash", "DeepSeek-V4-Pro"):
        result = cli("plan", checkpoints[model])
        assert result.exit_code == 0, result.output
        print(f"--- {model}\n{result.output}")
        rows = {line.split()[0]: line for line in result.output.splitlines() if line.split()[:1] in (["3"], ["6"])}
        if model == "DeepSeek-V4-Flash":
            assert "heads 64→72, output groups 8→9, expert 2048→2304" in rows["3"]
            assert "heads 64→96, output groups 8→12, expert 2048→2304" in rows["6"]
        else:
            assert "heads 128→144, output groups 16→18" in rows["3"] and "heads 128→144" in rows["6"]


def test_dsv4_vision_variant_keeps_its_tower(tmp_path):
    """DeepseekV4ForConditionalGeneration (vision_* keys at the top of config.json, `vision.*`, `aligner.*` and
    `image_*` tensors, the routers' `bias_vl`): the language model is padded as V4's, the tower copied byte for byte
    (vLLM replicates it as a data-parallel encoder when vision_n_heads does not divide the TP), and the card names the
    vision class. A small V4 (2 layers, 8 experts) with a made-up tower: no vision checkpoint was found offline."""
    from hubpad.testing import write_checkpoint

    cfg = dict(FLASH_CONFIG, architectures=["DeepseekV4ForConditionalGeneration"], num_hidden_layers=2,
               n_routed_experts=8, compress_ratios=[0, 4, 0], vision_n_layers=2, vision_dim=64, vision_n_heads=4,
               vision_inter_dim=128, vision_patch_size=14)
    tensors = v4_tensors(cfg)
    tensors += [(f"layers.{i}.ffn.gate.bias_vl", "F32", (8,)) for i in (1,)]
    tensors += [("vision.patch_embed.proj.weight", "BF16", (64, 588)), ("vision.blocks.0.attn.wqkv.weight", "BF16",
                                                                       (192, 64)),
                ("vision.blocks.0.attn.wo.weight", "BF16", (64, 64)), ("vision.blocks.0.norm1.weight", "BF16", (64,)),
                ("aligner.proj.weight", "BF16", (4096, 256)), ("image_start", "BF16", (4096,)),
                ("image_pad", "BF16", (4096,)), ("image_newline", "BF16", (4096,)), ("image_end", "BF16", (4096,))]
    path = write_checkpoint(tmp_path / "vl", cfg, tensors, n_shards=1, header_only=True)
    result = cli("plan", path, "--tp", "3", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    changed = {c["name"] for c in plan["changed_tensors"]}
    assert "layers.1.attn.wq_b.weight" in changed
    assert not [n for n in changed if n.startswith(("vision.", "aligner.", "image_")) or "bias_vl" in n]
    assert {d["config_key"]: d["after"] for d in plan["dims"]}["o_groups"] == 9
    from hubpad.plan.adapters.deepseek_v4 import DEEPSEEK_V4

    from hubpad.plan.adapters.vllm import min_vllm

    features = DEEPSEEK_V4.serving(cfg)["vllm_features"]  # the vision variant is served by its own class
    assert "arch:DeepseekV4ForConditionalGeneration" in features
    assert min_vllm(features)["version"] == "0.30.0"


def test_dsv4_fp8_and_mxfp4_bytes_mirror_and_verify(tmp_path):
    """DeepSeek's formats byte for byte on a small V4 with real (random) data: FP8 e4m3 + e8m0 `.scale` blocks and
    MXFP4 experts (I8 + e8m0 per 32). `hubpad mirror` at TP 3 then `hubpad verify` (original bytes in place, pads
    zero, new scale cells finite and positive); the new cells are read back: weights 0x00, scales 0x7f (1.0)."""
    import torch
    from safetensors import safe_open

    from hubpad.testing import write_checkpoint

    cfg = dict(FLASH_CONFIG, hidden_size=256, num_attention_heads=4, o_groups=2, o_lora_rank=128, head_dim=128,
               q_lora_rank=128, index_n_heads=2, index_head_dim=64, n_routed_experts=4, moe_intermediate_size=128,
               num_hidden_layers=2, num_hash_layers=1, compress_ratios=[4, 128, 0], vocab_size=192)
    src = write_checkpoint(tmp_path / "src", cfg, v4_tensors(cfg), n_shards=2)
    dst = tmp_path / "tp3"
    assert cli("mirror", str(src), "--tp", "3", "--to", str(dst)).exit_code == 0
    result = cli("verify", str(src), str(dst))
    assert result.exit_code == 0, result.output
    out = {}
    for f in dst.glob("*.safetensors"):
        with safe_open(f, "pt") as st:
            for name in ("layers.1.attn.wo_a.weight", "layers.1.attn.wo_a.scale", "layers.1.ffn.experts.3.w2.weight",
                         "layers.1.ffn.experts.3.w2.scale", "mtp.0.ffn.experts.0.w1.scale", "layers.0.attn.attn_sink"):
                if name in st.keys():
                    out[name] = st.get_tensor(name)
    assert out["layers.1.attn.wo_a.weight"].shape == (384, 256)  # 3 groups × 128
    assert not out["layers.1.attn.wo_a.weight"][256:].view(dtype=torch.uint8).any()
    assert (out["layers.1.attn.wo_a.scale"][2:].view(dtype=torch.uint8) == 0x7F).all()
    assert out["layers.1.ffn.experts.3.w2.weight"].shape == (256, 192)  # 384 / 2 codes a byte
    assert not out["layers.1.ffn.experts.3.w2.weight"][:, 64:].any()
    assert (out["layers.1.ffn.experts.3.w2.scale"][:, 4:].view(dtype=torch.uint8) == 0x7F).all()
    assert out["mtp.0.ffn.experts.0.w1.scale"].shape == (384, 8)
    assert out["layers.0.attn.attn_sink"].shape == (6,) and not out["layers.0.attn.attn_sink"][4:].any()
