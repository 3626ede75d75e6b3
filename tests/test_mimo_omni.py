"""MiMo-V2.5 with its vision tower (vLLM's MiMoV2OmniForCausalLM): the tower's heads padded in whole kv groups and its
MLP in zero neurons (hubpad/plan/tower.py), the language model in MiMo-V2.5's fused FP8 form as before.

Proofs, float64: a tiny MiMo-V2.5 (tests/mimo_omni.py: tower 4 heads / 2 kv heads of 8, MLP 16, hidden 24 so that its
merger, 96 wide, divides 3 and 6) mirrored and verified at TP 3 (6 / 3 heads) and TP 6 (12 / 6), MLP 16 -> 18: the
tower alone, written after vLLM's module, on two images (one of two frames) through full, row-window and
column-window blocks with sinks, gives the original's features; the language model read back as transformers'
MiMoV2FlashForCausalLM gives the original's logits. Controls: the zero kv head moved in front, or the sinks of real
heads moved, changes the features. The published MiMo-V2.5 (its merger 5120 = 1280 x 2² wide) is refused at TP 3,
6 and 7 with that reason, padded at TP 5, and serves as it is at TP 2, 4 and 8 (header-only, tests/mimo_real.py).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.helpers import cli, folder_tensors, mirror_and_verify  # noqa: E402
from tests.mimo_fused import dequantize  # noqa: E402
from tests.mimo_omni import VISION, build_omni, image, relative, text_view, tower_forward  # noqa: E402

GRID = [(1, 4, 6), (2, 4, 4)]  # two images in patches (t, h, w): 24 + 2 x 16 tokens, 14 after the merger
CASES = {3: (6, 3, 18), 6: (12, 6, 18)}  # TP -> vision heads, kv heads, MLP


@pytest.fixture(scope="module")
def omni(tmp_path_factory):
    root = tmp_path_factory.mktemp("omni")
    cfg = build_omni(root, root / "upstream")
    for tp in CASES:
        mirror_and_verify(root / "upstream", root / f"tp{tp}", tp)
    return root, cfg


def _features(folder, grid=GRID):
    cfg = json.loads((folder / "config.json").read_text())
    return tower_forward(folder_tensors(folder), cfg["vision_config"], image(grid, VISION), grid)


@pytest.mark.parametrize("tp", sorted(CASES))
def test_mimo_v2_5_padded_vision_tower_gives_identical_features(omni, tp):
    root, cfg = omni
    dst = root / f"tp{tp}"
    heads, kv, inter = CASES[tp]
    out = json.loads((dst / "config.json").read_text())
    vision = out["vision_config"]
    assert (vision["num_heads"], vision["num_key_value_heads"], vision["intermediate_size"]) == (heads, kv, inter)
    assert {k: v for k, v in vision.items() if k not in ("num_heads", "num_key_value_heads", "intermediate_size")} \
        == {k: v for k, v in cfg["vision_config"].items() if k not in ("num_heads", "num_key_value_heads",
                                                                        "intermediate_size")}
    assert (out["num_attention_heads"], out["num_key_value_heads"], out["swa_num_key_value_heads"]) == (12, 3, 6)

    before, after = folder_tensors(root / "upstream"), folder_tensors(dst)
    hd, h0, k0 = VISION["qk_channels"], VISION["num_heads"], VISION["num_key_value_heads"]
    qkv0, qkv1 = before["visual.blocks.1.attn.qkv.weight"], after["visual.blocks.1.attn.qkv.weight"]
    assert qkv1.shape == ((heads + 2 * kv) * hd, VISION["hidden_size"])
    for (a, n0), (b, n1) in zip(((0, h0 * hd), (h0 * hd, k0 * hd), ((h0 + k0) * hd, k0 * hd)),
                                ((0, heads * hd), (heads * hd, kv * hd), ((heads + kv) * hd, kv * hd))):
        assert torch.equal(qkv1[b:b + n0], qkv0[a:a + n0]) and not qkv1[b + n0:b + n1].any()  # each section grows
    sinks = after["visual.blocks.1.attn.sinks"]
    assert torch.equal(sinks[:h0], before["visual.blocks.1.attn.sinks"]) and not sinks[h0:].any()
    assert "visual.blocks.0.attn.sinks" not in after  # a full-attention block has none
    for name in ("visual.merger.mlp.0.weight", "visual.patch_embed.proj.weight", "speech_embeddings.0.weight",
                 "audio_encoder.projection.mlp.0.weight"):
        assert torch.equal(after[name], before[name])
    assert (dst / "audio_tokenizer" / "model.safetensors").read_bytes() == \
        (root / "upstream" / "audio_tokenizer" / "model.safetensors").read_bytes()

    a, b = _features(root / "upstream"), _features(dst)
    print(f"tower tp{tp}: {a.shape}, relative max |Δ| = {relative(a, b):.1e}")
    assert a.shape == (14, cfg["hidden_size"]) and relative(a, b) <= 1e-12


@pytest.mark.parametrize("tp", sorted(CASES))
def test_mimo_v2_5_padded_language_model_gives_identical_logits(omni, tp):
    root, _ = omni
    logits = []
    for name in ("upstream", f"tp{tp}"):
        text_view(root / name, root / f"{name}-text-{tp}")
        dequantize(root / f"{name}-text-{tp}", root / f"{name}-f64-{tp}")
        model = transformers.MiMoV2FlashForCausalLM.from_pretrained(root / f"{name}-f64-{tp}",
                                                                    dtype=torch.float64).eval()
        model.set_experts_implementation("eager")
        ids = torch.randint(0, 256, (2, 14), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            logits.append(model(input_ids=ids).logits)
    print(f"language model tp{tp}: relative max |Δ| = {relative(*logits):.1e}")
    assert relative(*logits) <= 1e-12


def test_mimo_v2_5_tower_controls_change_the_features(omni):
    """The proof can fail: the zero kv head in front of the real ones (query heads meet other kv heads), or a real
    head's sink swapped with a padded head's."""
    root, cfg = omni
    dst = root / "tp3"
    base = _features(root / "upstream")
    tensors = folder_tensors(dst)
    out = json.loads((dst / "config.json").read_text())["vision_config"]
    hd, heads, kv = VISION["qk_channels"], out["num_heads"], out["num_key_value_heads"]
    moved = dict(tensors)
    for n in range(VISION["depth"]):
        for suffix in ("weight", "bias"):
            t = tensors[f"visual.blocks.{n}.attn.qkv.{suffix}"]
            q, k, v = t.split([heads * hd, kv * hd, kv * hd])
            k, v = (torch.cat([x[-hd:], x[:-hd]]) for x in (k, v))
            moved[f"visual.blocks.{n}.attn.qkv.{suffix}"] = torch.cat([q, k, v])
    assert relative(base, tower_forward(moved, out, image(GRID, VISION), GRID)) > 1e-3
    swapped = dict(tensors)
    s = tensors["visual.blocks.1.attn.sinks"].clone()
    s[[0, heads - 1]] = s[[heads - 1, 0]]
    swapped["visual.blocks.1.attn.sinks"] = s
    assert relative(base, tower_forward(swapped, out, image(GRID, VISION), GRID)) > 1e-6


def test_mimo_v2_5_tower_whose_merger_does_not_divide_the_tp_is_refused(tmp_path):
    """vLLM shards the merger (hidden x merge² wide), which no head padding changes: hidden 20 -> 80, not 3 x n."""
    src = tmp_path / "upstream"
    build_omni(tmp_path, src, vision={"hidden_size": 20})
    with pytest.raises(ConfigError, match=r"patch merger, a column-parallel layer 80 wide .* 80 % tp 3 != 0; padding "
                                          r"never changes the tower's hidden size"):
        make_plan(LocalSource(src), 3)
    dims = {d.name: d.after for d in make_plan(LocalSource(src), 4).dims}  # 80 / 4 = 20: the merger shards
    # vLLM divides the tower's kv heads by TP too (never replicates them): 2 kv heads -> 4 at TP 4, in whole groups
    assert (dims["vision heads"], dims["vision kv heads"], dims["vision intermediate"]) == (8, 4, 16)


def test_mimo_v2_5_tower_of_unequal_qk_and_v_widths_is_refused(tmp_path):
    src = tmp_path / "upstream"
    build_omni(tmp_path, src, vision={"kv_channels": 4})
    with pytest.raises(ConfigError, match="qk_channels 8 != kv_channels 4; vLLM splits the tower's fused qkv"):
        make_plan(LocalSource(src), 3)


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    from hubpad.testing import write_checkpoint
    from tests import mimo_real

    cfg = mimo_real.MIMO_V2_5
    tensors = mimo_real.pro_tensors(cfg)
    assert len(tensors) == mimo_real.MIMO_V2_5_COUNT  # the published inventory, tensor for tensor
    return write_checkpoint(tmp_path_factory.mktemp("v25") / "MiMo-V2.5", cfg, tensors, n_shards=17,
                            header_only=True)


@pytest.mark.parametrize("tp", [3, 6])
def test_mimo_v2_5_published_layout_is_refused_at_tp3_and_tp6(published, tp):
    result = cli("plan", published, "--tp", str(tp))
    assert result.exit_code != 0
    assert (f"error: config.json: vLLM shards the vision tower's patch merger, a column-parallel layer 5120 wide "
            f"(vision_config.hidden_size 1280 x vision_config.spatial_merge_size² 4), and 5120 % tp {tp} != 0; "
            f"padding never changes the tower's hidden size, so this tower cannot serve at tp {tp} (of TP 2-8 it can "
            f"at 2, 4, 5, 8)") in result.output
    assert "Traceback" not in result.output


def test_mimo_v2_5_published_layout_advisor_and_tp5(published):
    result = cli("plan", published, "--json")
    assert result.exit_code == 0, result.output
    rows = {r["tp"]: r for r in json.loads(result.output)["rows"]}
    assert [t for t, r in rows.items() if r["verdict"] == "as is"] == [1, 2, 4, 8]
    assert [t for t, r in rows.items() if r["verdict"] == "cannot"] == [3, 6, 7]
    dims = {d["name"]: (d["before"], d["after"]) for d in rows[5]["dims"]}
    assert dims["vision heads"] == (32, 40) and dims["vision kv heads"] == (8, 10)
    assert dims["vision intermediate"] == (4608, 4610) and dims["attention heads"] == (64, 80)
    assert dims["kv heads"] == (4, 5) and dims["swa kv heads"] == (8, 10)
    print(f"MiMo-V2.5 at TP 5: +{rows[5]['extra_bytes'] / 1e9:.1f} GB")
