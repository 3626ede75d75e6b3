"""Hybrid linear attention (Qwen3.5 dense / MoE, multimodal and text-only, and Qwen3-Next) at TP=3 and TP=6.

Tiny models built with transformers (tests/gdn_models.py, the MTP layer added as the releases ship it) are mirrored
with hubpad: whole GDN key heads with their value heads appended at the end of every section (plan/gdn.py), whole
gated-attention GQA groups, MLP / expert / shared-expert widths to their per-rank rules. The padded model's float64
logits must equal the original's exactly (on a prompt holding an image for the multimodal ones), every `model.visual.*`
and every untouched tensor byte-identical (hubpad verify), and the MTP layer padded like a decoder layer.

transformers runs GDN through its torch fallback here (flash-linear-attention is not installed, and its kernels take
no float64): `torch_chunk_gated_delta_rule`, which computes in float32. Each head's recurrence is independent of the
others', so the real heads compute the same float32 values with or without padded ones, and the rest is float64.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import gdn_models  # noqa: E402
from tests.helpers import cli  # noqa: E402

# kind -> (heads, kv, linear key heads, linear value heads) after padding, at TP=3 and at TP=6
AFTER = {3: (6, 3, 3, 6), 6: (6, 3, 6, 12)}


def _logits(path, multimodal: bool, prepare=None):
    """float64 logits on a fixed prompt (with an image when `multimodal`); `prepare(model)` first, if given."""
    cls = transformers.AutoModelForImageTextToText if multimodal else transformers.AutoModelForCausalLM
    model = cls.from_pretrained(path, dtype=torch.float64).eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    if prepare is not None:
        prepare(model)
    gen = torch.Generator().manual_seed(0)
    if not multimodal:
        ids = torch.randint(0, 512, (2, 20), generator=gen)
        with torch.no_grad():
            return model(input_ids=ids).logits
    v, tok = gdn_models.VISION, gdn_models.TOKENS
    pixels = torch.randn(16, 3 * 2 * v["patch_size"] ** 2, generator=gen, dtype=torch.float64)
    ids = torch.tensor([[1, 20, tok["vision_start_token_id"]] + [tok["image_token_id"]] * 4
                        + [tok["vision_end_token_id"], 30, 40, 50, 60, 70, 80]])
    with torch.no_grad():
        return model(input_ids=ids, pixel_values=pixels, image_grid_thw=torch.tensor([[1, 4, 4]]),
                     mm_token_type_ids=(ids == tok["image_token_id"]).long()).logits


def test_transformers_runs_gdn_through_its_torch_fallback():
    """transformers picks flash-linear-attention's chunk_gated_delta_rule when the `fla` package imports (and hub
    kernels when asked for); neither is the case here, so the float64 comparisons below run its torch code."""
    import importlib.util

    assert importlib.util.find_spec("fla") is None


@pytest.mark.parametrize("tp", [3, 6])
@pytest.mark.parametrize("kind", sorted(gdn_models.KINDS))
def test_gdn_model_pads_exactly(tmp_path, kind, tp):
    multimodal = gdn_models.KINDS[kind][1]
    src = gdn_models.build(kind, tmp_path / "upstream")
    dst = tmp_path / "padded"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    report = cli("verify", src, dst)
    assert report.exit_code == 0, report.output

    config = json.loads((dst / "config.json").read_text())
    text = config.get("text_config", config)
    got = (text["num_attention_heads"], text["num_key_value_heads"], text["linear_num_key_heads"],
           text["linear_num_value_heads"])
    assert got == AFTER[tp]
    assert text["head_dim"] == 32 and text["linear_key_head_dim"] == text["linear_value_head_dim"] == 64

    plan = make_plan(LocalSource(src), tp)
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    nk, nv = AFTER[tp][2], AFTER[tp][3]
    lm = "model.language_model." if multimodal else "model."
    gdn = lm + "layers.0.linear_attn."
    if kind == "qwen3_next":  # grouped per key head: 2 x 64 + 2 x 2 x 64 = 384 rows each
        assert shapes[gdn + "in_proj_qkvz.weight"] == ((2 * 384, 128), (nk * 384, 128))
        assert shapes[gdn + "in_proj_ba.weight"] == ((2 * 4, 128), (nk * 4, 128))
    else:
        assert shapes[gdn + "in_proj_qkv.weight"] == ((2 * 128 + 256, 128), (2 * nk * 64 + nv * 64, 128))
        assert shapes[gdn + "in_proj_z.weight"] == ((256, 128), (nv * 64, 128))
        assert shapes[gdn + "in_proj_b.weight"] == ((4, 128), (nv, 128))
    assert shapes[gdn + "conv1d.weight"] == ((512, 1, 4), (2 * nk * 64 + nv * 64, 1, 4))
    assert shapes[gdn + "A_log"] == ((4,), (nv,)) and shapes[gdn + "out_proj.weight"] == ((128, 256), (128, nv * 64))
    assert shapes["mtp.layers.0.self_attn.q_proj.weight"] == ((256, 128), (2 * 6 * 32, 128))  # query and gate
    assert not any(n.startswith(("mtp.fc", "mtp.norm", "mtp.pre_fc")) for n in shapes)
    assert gdn + "norm.weight" not in shapes
    if multimodal:
        assert not any(n.startswith("model.visual.") for n in shapes)

    a, b = _logits(src, multimodal), _logits(dst, multimodal)
    delta = (a - b).abs().max().item()
    print(f"{kind} TP={tp}: float64 max |Δ| = {delta} (max |logit| {a.abs().max().item():.1f})")
    assert delta == 0.0


def test_mtp_is_left_out_where_vllm_cannot_shard_the_hidden_size(tmp_path):
    """vLLM's Qwen3.5 / Qwen3-Next MTP layer projects to the hidden size column-parallel: hidden 128 at TP=3 has no
    MTP in the card (and says why); hidden 192 = 3 x 64 keeps it."""
    for hidden, expected in ((128, False), (192, True)):
        src = gdn_models.build("qwen3_5_text", tmp_path / f"up{hidden}", text={"hidden_size": hidden})
        dst = tmp_path / f"tp3-{hidden}"
        assert cli("mirror", src, "--tp", 3, "--to", dst).exit_code == 0
        card = (dst / "README.md").read_text()
        serving = json.loads((dst / "hubpad.json").read_text())["serving"]
        assert ("--speculative-config" in card) is expected
        assert ("MTP speculative decoding is left out" in card) is not expected
        if expected:
            assert serving["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
            assert serving["min_vllm"]["version"] == "0.27.0"  # Qwen3_5ForCausalLM registered by name


def test_gdn_refusals_name_the_reason(tmp_path):
    src = gdn_models.build("qwen3_5_text", tmp_path / "upstream")
    config = json.loads((src / "config.json").read_text())
    bad = dict(config, linear_num_value_heads=5)
    (src / "config.json").write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match="linear_num_value_heads 5 is not a multiple of linear_num_key_heads 2"):
        make_plan(LocalSource(src), 3)
    (src / "config.json").write_text(json.dumps(dict(config, linear_key_head_dim=32)))
    # q and k sections of 2 x 32 rows each, v of 4 x 64: 384, where the checkpoint holds 512
    with pytest.raises(ConfigError, match=r"linear_attn\.\w+\.weight: shape \[512, .*\], expected \[384, .*\]"):
        make_plan(LocalSource(src), 3)


# --------------------------------------------------------------------------------------------------
# Qwen's FP8 releases (Qwen3.5-27B-FP8 and the like): 128 x 128 e4m3 blocks with float32 weight_scale_inv on every
# linear layer but the ones the release leaves in BF16 (its modules_to_not_convert): lm_head, the embeddings, each
# GDN layer's conv1d, in_proj_a and in_proj_b, and mtp.fc.

FP8_EXCLUDED = ("lm_head", "embed_tokens", "conv1d", "in_proj_a", "in_proj_b", "mtp.fc")
FP8_TEXT = dict(hidden_size=256, intermediate_size=256, head_dim=64, linear_key_head_dim=128,
                linear_value_head_dim=128)


def _qwen35_fp8(path):
    """A tiny Qwen3.5 (text only) in Qwen's FP8 layout, written by the spec (tests/test_fp8_scales.py)."""
    from safetensors.torch import load_file, save_file

    from tests.test_fp8_scales import _block_quantize

    gdn_models.build("qwen3_5_text", path, text=FP8_TEXT)
    tensors = load_file(path / "model.safetensors")
    out, excluded = {}, set()
    for name, t in tensors.items():
        module = name.rpartition(".")[0]
        if name.endswith(".weight") and t.ndim == 2 and "norm" not in name and not name.endswith("mlp.gate.weight"):
            if any(x in module for x in FP8_EXCLUDED):
                excluded.add(module)
            else:
                out[name], out[module + ".weight_scale_inv"] = _block_quantize(t.float())
                continue
        out[name] = t
    save_file(out, path / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((path / "config.json").read_text())
    config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [128, 128], "modules_to_not_convert": sorted(excluded)}
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


def _dequantized_logits(path):
    """float64 logits of the checkpoint with every FP8 weight dequantized by the spec (weight x its block scale)."""
    from safetensors.torch import load_file

    from tests.test_fp8_scales import _block_dequantize

    tensors = load_file(next(path.glob("model*.safetensors")))
    state = {}
    for name, t in tensors.items():
        if name.endswith(".weight_scale_inv"):
            continue
        scale = tensors.get(name.removesuffix(".weight") + ".weight_scale_inv")
        state[name] = _block_dequantize(t, scale).double() if scale is not None else t.double()
    config = transformers.Qwen3_5TextConfig.from_pretrained(path)
    config.quantization_config = None
    model = transformers.Qwen3_5ForCausalLM(config).double().eval()
    missing, unexpected = model.load_state_dict({k: v for k, v in state.items() if not k.startswith("mtp.")},
                                                strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    ids = torch.randint(0, 512, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("tp", [3, 6])
def test_qwen35_fp8_block_release_pads_exactly(tmp_path, tp):
    src = _qwen35_fp8(tmp_path / "upstream")
    dst = tmp_path / "padded"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    assert cli("verify", src, dst).exit_code == 0
    plan = make_plan(LocalSource(src), tp)
    assert "fp8" in plan.formats
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    gdn = "model.layers.0.linear_attn."
    nk, nv = (3, 6) if tp == 3 else (6, 12)
    # sections [q 256 | k 256 | v 512] in whole 128-row blocks: [2 | 2 | 4] scale rows, each growing at its end
    assert shapes[gdn + "in_proj_qkv.weight"] == ((1024, 256), ((2 * nk + nv) * 128, 256))
    assert shapes[gdn + "in_proj_qkv.weight_scale_inv"] == ((8, 2), (2 * nk + nv, 2))
    assert shapes[gdn + "in_proj_b.weight"] == ((4, 256), (nv, 256))  # BF16, as the release leaves it
    a, b = _dequantized_logits(src), _dequantized_logits(dst)
    delta = (a - b).abs().max().item()
    print(f"qwen3.5 FP8 TP={tp}: float64 max |Δ| = {delta}")
    assert delta == 0.0
