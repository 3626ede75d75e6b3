"""Dots3 Note (`dots3_note`): pad tiny real transformers models (tests/dots3_models.py: the published flat config and
names, full DSA layers and sliding layers with their own MLA geometry at the published 2 : 1 head ratio, the headwise
g_proj, vision and audio towers, an MTP layer) with `hubpad mirror` + `hubpad verify` at TP 3 and 6, and compare
float64 logits in transformers' Dots3NoteForConditionalGeneration; the MTP block is run as one more sliding layer.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests import dots3_models  # noqa: E402
from tests.helpers import cli, folder_tensors, mirror_and_verify  # noqa: E402

REL_TOL = 1e-12
IDS = torch.randint(3, 160, (2, 12), generator=torch.Generator().manual_seed(1))
# tp -> (full heads, sliding heads, expert width) after padding (BF16-like float64: any count per rank)
CASES = {3: (6, 3, 192), 6: (12, 6, 384)}


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    made = {}

    def get(tp):
        if tp not in made:
            root = tmp_path_factory.mktemp(f"dots3-tp{tp}")
            model, src = dots3_models.build(root / "upstream")
            mirror_and_verify(src, root / "padded", tp)
            made[tp] = (model, src, root / "padded")
        return made[tp]
    return get


def _logits(model):
    with torch.no_grad():
        return model(input_ids=IDS).logits


@pytest.mark.parametrize("tp", sorted(CASES))
def test_dots3_note_padded_model_gives_identical_logits(padded, tp):
    heads, swa, expert = CASES[tp]
    model, src, dst = padded(tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (heads, heads)
    assert (cfg["swa_num_attention_heads"], cfg["swa_num_key_value_heads"]) == (swa, swa)
    assert (cfg["moe_intermediate_size"], cfg["moe_shared_expert_intermediate_size"]) == (expert, expert)
    out, original = folder_tensors(dst), folder_tensors(src)
    for layer, (h, q, kv_b, v) in {0: (heads, 24, 32, 16), 1: (swa, 32, 40, 16), 3: (swa, 32, 40, 16)}.items():
        p = f"model.layers.{layer}.self_attn."  # a full layer, a sliding layer, the MTP layer (sliding geometry)
        assert out[p + "q_b_proj.weight"].shape[0] == h * q
        assert out[p + "kv_b_proj.weight"].shape[0] == h * kv_b
        assert out[p + "o_proj.weight"].shape[1] == h * v
        g = out[p + "g_proj.weight"]
        assert g.shape == (h, 64) and not g[original[p + "g_proj.weight"].shape[0]:].any()
    copied = [n for n in original if n.startswith(("vision_encoder.", "audio_encoder.", "model.mtp.")) or ".indexer." in n
              or "k_rope_only" in n or "_a_proj" in n]
    assert copied and all(torch.equal(out[n], original[n]) for n in copied)
    card = (dst / "README.md").read_text()
    assert "--tool-call-parser dots" in card and '"method": "mtp"' in card and "--reasoning-parser" not in card
    assert "**vLLM 0.28.0 or newer**" in card

    a, b = _logits(model), _logits(dots3_models.load(dst))
    delta = (a - b).abs().max().item()
    print(f"dots3_note tp={tp}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


@pytest.mark.parametrize("tp", [3])
def test_dots3_note_mtp_block_pads_exactly(padded, tp, tmp_path):
    """The MTP layer's block in float64: both checkpoints loaded with it as one more (sliding, dense) layer, so
    transformers runs `model.layers.<n>` as an ordinary layer (its weights checked to be the stored ones)."""
    _, src, dst = padded(tp)
    n = dots3_models.FLAT["num_hidden_layers"]
    logits = []
    for path in (src, dst):
        view = tmp_path / path.parent.name / path.name  # the checkpoint with one more layer in config.json
        view.mkdir(parents=True)
        for f in path.glob("*.safetensors*"):
            (view / f.name).symlink_to(f)
        cfg = json.loads((path / "config.json").read_text())
        cfg.update(num_hidden_layers=n + 1, layer_types=cfg["layer_types"] + ["sliding_attention"],
                   mlp_layer_types=["dense"] + ["sparse"] * (n - 1) + ["dense"])
        (view / "config.json").write_text(json.dumps(cfg))
        model = dots3_models.load(view)
        stored = folder_tensors(path)
        layer = model.model.language_model.layers[n]
        assert torch.equal(layer.self_attn.kv_b_proj.weight, stored[f"model.layers.{n}.self_attn.kv_b_proj.weight"])
        logits.append(_logits(model))
    delta = (logits[0] - logits[1]).abs().max().item()
    print(f"dots3_note tp={tp} with the MTP block as layer {n}: max |Δ| = {delta}")
    assert delta <= REL_TOL * logits[0].abs().max().item()


def test_dots3_note_refuses_the_elementwise_gate(tmp_path):
    from hubpad.testing import write_checkpoint

    src = write_checkpoint(tmp_path / "c", dots3_models.config_dict(attention_gate_type="elementwise"), [],
                           n_shards=1, header_only=True)
    result = cli("plan", src, "--tp", 3)
    assert result.exit_code == 1 and "attention_gate_type 'elementwise' is not supported" in result.output
