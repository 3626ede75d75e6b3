"""Issue 33's MLA rows (stream mla2): openPangu Ultra-MoE, Sarvam-105B, LongCat-Flash-Lite. Tiny float64 models are
padded with `hubpad mirror` + `hubpad verify` at TP 3 and 6 and their logits compared with the original's, at the
names vLLM's loader reads (docs/families/mla2.md).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.helpers import folder_tensors, mirror_and_verify  # noqa: E402
from tests.test_mla import TINY  # noqa: E402
from tests.test_models_transformers import COMMON  # noqa: E402

PANGU = {k: v for k, v in TINY.items() if k not in ("n_group", "topk_group")}


def _same_logits(a, b, label: str, vocab: int) -> None:
    ids = torch.randint(0, vocab, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        x, y = a(ids).logits, b(ids).logits
    delta = (x - y).abs().max().item()
    print(f"{label}: max |Δ| = {delta}")
    assert delta <= 1e-12 * x.abs().max().item(), f"{label}: max |Δ| = {delta}"


def _padded(src, dst, tp: int) -> tuple[dict, dict, dict]:
    """`hubpad mirror` + `hubpad verify` at `tp`: the derivative's config.json, its tensors and the original's."""
    mirror_and_verify(src, dst, tp)
    return json.loads((dst / "config.json").read_text()), folder_tensors(dst), folder_tensors(src)


def _assert_heads(out: dict, prefixes: list[str], heads: int, q: str, q_in: int) -> None:
    """TINY's MLA shapes with `heads` heads: q rows of 24 (16 nope + 8 rope), kv_b rows of 32, o columns of 16."""
    for p in prefixes:
        assert out[p + q + ".weight"].shape == (heads * 24, q_in)
        assert out[p + "kv_b_proj.weight"].shape == (heads * 32, 32)
        assert out[p + "o_proj.weight"].shape == (64, heads * 16)


@pytest.mark.parametrize("tp,heads,expert", [(3, 6, 192), (6, 6, 384)])
def test_pangu_ultra_moe_padded_model_gives_identical_logits(tmp_path, tp, heads, expert):
    from tests import mla2_models

    model, src = mla2_models.build_pangu(tmp_path / "upstream", {**COMMON, **PANGU})
    cfg, out, original = _padded(src, tmp_path / "padded", tp)
    dst = tmp_path / "padded"
    assert (cfg["num_attention_heads"], cfg["moe_intermediate_size"], cfg["sandwich_norm"]) == (heads, expert, True)
    layers = [f"model.layers.{layer}." for layer in (0, 1, 2)]  # a dense layer, a MoE layer, the MTP block
    _assert_heads(out, [p + "self_attn." for p in layers], heads, "q_b_proj", 48)
    for p in layers:
        for norm in ("pre_mlp_layernorm", "post_mlp_layernorm", "self_attn.kv_a_proj_with_mqa"):
            assert torch.equal(out[p + norm + ".weight"], original[p + norm + ".weight"])
    assert torch.equal(out["model.layers.1.mlp.e_score_correction_bias"],
                       original["model.layers.1.mlp.e_score_correction_bias"])
    card = (dst / "README.md").read_text()
    assert "--trust-remote-code" in card and '"method": "mtp"' in card

    padded = mla2_models.load_reference(dst, tmp_path / "reference")
    _same_logits(model, padded, f"pangu_ultra_moe tp={tp}", COMMON["vocab_size"])


def test_pangu_plan_warns_without_sandwich_norm(tmp_path):
    """vLLM's openpangu reads sandwich_norm with a default of False (it would skip the checkpoint's MLP norms)."""
    from hubpad.plan.planner import make_plan
    from hubpad.source.local import LocalSource
    from tests import mla2_models

    _, src = mla2_models.build_pangu(tmp_path / "upstream", {**COMMON, **PANGU})
    assert make_plan(LocalSource(src), 3).warnings == []
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "sandwich_norm"}))
    assert [w.split(",")[0] for w in make_plan(LocalSource(src), 3).warnings] == ["config.json has no sandwich_norm"]


# Sarvam-105B's layout in small (tests/mla2_models.py), with YaRN's mscale (vLLM scales the softmax by mscale²,
# transformers alike).
SARVAM = {**{k: v for k, v in TINY.items() if k not in ("q_lora_rank", "num_nextn_predict_layers", "n_group",
                                                        "topk_group")},
          "q_lora_rank": None, "n_group": 1, "topk_group": 1,
          "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "mscale": 1.0,
                              "mscale_all_dim": 1.0, "original_max_position_embeddings": 16, "beta_fast": 32,
                              "beta_slow": 1}}


@pytest.mark.parametrize("tp,heads,expert", [(3, 6, 192), (6, 6, 384)])
def test_sarvam_mla_padded_model_gives_identical_logits(tmp_path, tp, heads, expert):
    from tests import mla2_models
    from tests.tiny_moe import assert_same_logits

    model, src = mla2_models.build_sarvam(tmp_path / "upstream", {**COMMON, **SARVAM})
    cfg, out, original = _padded(src, tmp_path / "padded", tp)
    dst = tmp_path / "padded"
    assert (cfg["num_attention_heads"], cfg["moe_intermediate_size"], cfg["num_experts"]) == (heads, expert, 4)
    _assert_heads(out, [f"model.layers.{layer}.self_attn." for layer in (0, 1)], heads, "q_proj", 64)
    assert out["model.layers.1.mlp.shared_experts.up_proj.weight"].shape == (expert, 64)
    assert torch.equal(out["model.layers.1.mlp.gate.e_score_correction_bias"],
                       original["model.layers.1.mlp.gate.e_score_correction_bias"])
    assert "--trust-remote-code" in (dst / "README.md").read_text()
    assert_same_logits(model, dst, f"sarvam_mla tp={tp}", COMMON["vocab_size"])


def test_sarvam_shared_width_and_count_rules(tmp_path):
    """A stated moe_shared_expert_intermediate_size is padded with the routed experts' width (vLLM builds the shared
    expert from it); a different one, or two shared experts, is refused in one line. The plan warns where vLLM's
    sarvam model would stop: no num_experts, or head_dim other than the MLA cache width."""
    from hubpad.errors import HubpadError
    from hubpad.plan.planner import make_plan
    from hubpad.source.local import LocalSource
    from tests import mla2_models

    _, src = mla2_models.build_sarvam(tmp_path / "upstream", {**COMMON, **SARVAM})
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "moe_shared_expert_intermediate_size": 32}))
    plan = make_plan(LocalSource(src), 3)
    assert plan.warnings == []
    dst = tmp_path / "padded"
    mirror_and_verify(src, dst, 3)
    assert json.loads((dst / "config.json").read_text())["moe_shared_expert_intermediate_size"] == 192
    for bad, message in (({"moe_shared_expert_intermediate_size": 64}, "disagree"),
                         ({"num_shared_experts": 2}, "num_shared_experts 2 is not supported")):
        (src / "config.json").write_text(json.dumps({**config, **bad}))
        with pytest.raises(HubpadError, match=message):
            make_plan(LocalSource(src), 3)
    (src / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "num_experts"}))
    assert [w.split(",")[0] for w in make_plan(LocalSource(src), 3).warnings] == ["config.json has no num_experts"]
    (src / "config.json").write_text(json.dumps({**config, "head_dim": 8}))  # transformers saves qk_rope_head_dim
    assert [w.split(",")[0] for w in make_plan(LocalSource(src), 3).warnings] == [
        "config.json has head_dim 8"]


@pytest.mark.parametrize("tp,expert", [(3, 192), (6, 384)])
def test_longcat_flash_lite_padded_model_gives_identical_logits(tmp_path, tp, expert):
    """LongCat-Flash's rule (tests/test_longcat.py) with the n-gram tables and projections copied byte for byte."""
    from tests import mla2_models

    model, src = mla2_models.build_lite(tmp_path)
    cfg, out, original = _padded(src, tmp_path / "padded", tp)
    dst = tmp_path / "padded"
    assert (cfg["num_attention_heads"], cfg["expert_ffn_hidden_size"], cfg["emb_split_num"]) == (6, expert, 2)
    ngram = [k for k in original if ".ngram_embeddings." in k]
    assert len(ngram) == 8 and all(torch.equal(out[k], original[k]) for k in ngram)
    assert out["model.layers.0.self_attn.1.q_b_proj.weight"].shape == (6 * 24, 48)
    assert out["model.mtp.layers.0.self_attn.kv_b_proj.weight"].shape == (6 * 32, 32)
    card = (dst / "README.md").read_text()
    assert "--tool-call-parser longcat" in card and "speculative" not in card
    _same_logits(model, mla2_models.load_lite(dst, tmp_path / "reference"), f"longcat_flash_ngram tp={tp}",
                 COMMON["vocab_size"])


def test_longcat_flash_lite_without_model_type_is_known_by_its_architecture(tmp_path):
    """vLLM reads a Lite config.json without model_type as longcat_flash (its remote code only names the class)."""
    from hubpad.plan.planner import make_plan
    from hubpad.source.local import LocalSource
    from tests import mla2_models

    _, src = mla2_models.build_lite(tmp_path)
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "model_type"}))
    plan = make_plan(LocalSource(src), 3)
    assert (plan.adapter.name, plan.new_config["num_attention_heads"], plan.warnings) == ("longcat_flash_ngram", 6, [])
    cfg, _, _ = _padded(src, tmp_path / "padded", 3)
    assert "model_type" not in cfg and cfg["num_attention_heads"] == 6
