"""Vision-language families of issue 33's `vlm` stream: the towers vLLM shards that no padding fixes (refused with
one line in `plan` and `mirror`), and EXAONE 4.5 (its EXAONE 4 language model padded, its tower copied)."""

from __future__ import annotations

import json

import pytest

from hubpad.testing import write_checkpoint
from tests.helpers import cli


@pytest.mark.parametrize("model_type,reason", [
    ("ernie4_5_moe_vl", "shards its DFN vision tower by heads (16 heads of 80"),
    ("ernie4_5_vl_moe", "Ernie4_5_VLMoeForConditionalGeneration shards its DFN vision tower"),
    ("ovis", "AIMv2 (Ovis2) or SigLIP (Ovis1.6) visual tokenizer by heads (16 heads of 128 or 72"),
    ("ovis2_6_moe", "SigLIP2-NaViT visual tokenizer by heads (16 heads of 72"),
    ("hyperclovax_vision_v2", "shards its Qwen2.5-VL vision tower by heads (16 heads of 80"),
    ("deepseek_vl_v2", "4304-wide hidden layer, which divides neither 3 nor 6")])
def test_sharded_towers_are_refused_with_the_reason(tmp_path, model_type, reason):
    """One `error:` line in `plan` and in `mirror`, nothing written."""
    src = write_checkpoint(tmp_path / model_type, {"model_type": model_type, "num_attention_heads": 32}, [],
                           n_shards=1, header_only=True)
    for args in (("plan", src, "--tp", 3), ("mirror", src, "--tp", 6, "--to", tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code == 1 and reason in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("error:")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------------------------
# EXAONE 4.5: EXAONE 4 inside, the tower copied and replicated (--mm-encoder-tp-mode data)

def _exaone_logits(path):
    import torch
    import transformers

    model = transformers.AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float64).eval()
    cfg = model.config
    v = cfg.vision_config
    pixels = torch.randn(16, 3 * v.temporal_patch_size * v.patch_size ** 2, generator=torch.Generator().manual_seed(1),
                         dtype=torch.float64)
    ids = torch.tensor([[1, 20, 7] + [cfg.image_token_id] * 4 + [8, 30, 40, 50, 60]])
    with torch.no_grad():
        return model(input_ids=ids, pixel_values=pixels, image_grid_thw=torch.tensor([[1, 4, 4]]),
                     mm_token_type_ids=(ids == cfg.image_token_id).long()).logits


@pytest.mark.parametrize("tp,heads,kv", [(3, 6, 3), (6, 6, 3)])
def test_exaone4_5_pads_its_language_model_and_copies_its_tower(tmp_path, tp, heads, kv):
    """float64 logits on a prompt holding an image equal the original's (transformers' Exaone4_5_ForConditionalGeneration
    at the published key names); the tower byte for byte; the MTP layer padded like the decoder's; the card serves
    the tower data-parallel."""
    pytest.importorskip("torch")
    from safetensors import safe_open

    from tests.vlm_models import build_exaone4_5

    src = build_exaone4_5(tmp_path / "upstream")
    dst = tmp_path / "padded"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    assert cli("verify", src, dst).exit_code == 0
    config = json.loads((dst / "config.json").read_text())
    text = config["text_config"]
    assert (text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"]) == (heads, kv, 32)
    assert config["vision_config"] == json.loads((src / "config.json").read_text())["vision_config"]

    def tensors(path):
        with safe_open(path, "pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}
    before = tensors(src / "model.safetensors")
    after = {k: v for p in dst.glob("model-*.safetensors") for k, v in tensors(p).items()}
    tower = [n for n in before if n.startswith("model.visual.")]
    assert tower and all(after[n].numpy().tobytes() == before[n].numpy().tobytes() for n in tower)
    assert after["mtp.layers.0.self_attn.q_proj.weight"].shape[0] == heads * 32
    assert after["mtp.layers.0.self_attn.k_proj.weight"].shape[0] == kv * 32

    delta = (_exaone_logits(src) - _exaone_logits(dst)).abs().max().item()
    print(f"exaone4_5 TP={tp}: float64 max |Δ| = {delta}")
    assert delta == 0.0
    card = " ".join(line.strip().rstrip("\\").strip() for line in (dst / "README.md").read_text().splitlines())
    assert "--mm-encoder-tp-mode data" in card and "--tool-call-parser hermes" in card


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
