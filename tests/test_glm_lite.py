"""GLM-4.7-Flash (`glm4_moe_lite`): DeepSeek-V3's MLA with GLM-4.5's MoE block; pad tiny real transformers models with
`hubpad mirror` + `hubpad verify` at TP 3 and 6 and compare float64 logits (transformers' Glm4MoeLiteForCausalLM, the
published names: `q_a_proj`, `kv_a_proj_with_mqa`, `kv_b_proj`, per-expert `mlp.experts.N.*`, `mlp.gate` with its
correction bias, `shared_experts`, and the MTP layer at index num_hidden_layers, which transformers skips and
tests/test_mtp.py runs).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.helpers import folder_tensors, mirror_and_verify  # noqa: E402
from tests.test_mla import TINY  # noqa: E402
from tests.test_models_transformers import COMMON  # noqa: E402
from tests.tiny_moe import assert_same_logits, build_with_mtp  # noqa: E402

GLM_LITE = {k: v for k, v in TINY.items() if k != "first_k_dense_replace"} | dict(n_group=1, topk_group=1)


def build_glm_lite(tmp_path, **overrides):
    """A tiny float64 GLM-4.7-Flash (one dense and one MoE layer) and its checkpoint, MTP layer appended."""
    return build_with_mtp(tmp_path, "glm4_moe_lite", {**COMMON, **GLM_LITE, **overrides})


@pytest.mark.parametrize("tp,heads,expert", [(3, 6, 192), (6, 6, 384)])
def test_glm_lite_padded_model_gives_identical_logits(tmp_path, tp, heads, expert):
    model, src = build_glm_lite(tmp_path)
    dst = tmp_path / "padded"
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["moe_intermediate_size"]) == (
        heads, heads, expert)
    out, original = folder_tensors(dst), folder_tensors(src)
    for layer in (0, 1, 2):  # a dense layer, a MoE layer, the MTP block
        p = f"model.layers.{layer}.self_attn."
        assert out[p + "q_b_proj.weight"].shape == (heads * 24, 48)
        assert out[p + "kv_b_proj.weight"].shape == (heads * 32, 32)
        assert out[p + "o_proj.weight"].shape == (64, heads * 16)
        assert torch.equal(out[p + "kv_a_proj_with_mqa.weight"], original[p + "kv_a_proj_with_mqa.weight"])
    assert out["model.layers.1.mlp.shared_experts.up_proj.weight"].shape == (expert, 64)
    assert torch.equal(out["model.layers.1.mlp.gate.e_score_correction_bias"],
                       original["model.layers.1.mlp.gate.e_score_correction_bias"])
    card = (dst / "README.md").read_text()
    assert "--tool-call-parser glm47" in card and "--reasoning-parser glm45" in card and '"method": "mtp"' in card
    assert "**vLLM 0.15.0 or newer**: the first release with Glm4MoeLiteForCausalLM" in card

    assert_same_logits(model, dst, f"glm4_moe_lite tp={tp}", COMMON["vocab_size"])


def test_glm_lite_plan_warns_when_vllms_key_is_missing(tmp_path):
    """vLLM's Glm4MoeLiteDecoderLayer reads first_k_dense_replace without a default; transformers saves mlp_layer_types
    instead (found by the serving tier: the engine stops at load). Published configs state it; the plan says so."""
    from hubpad.plan.planner import make_plan
    from hubpad.source.local import LocalSource

    _, src = build_glm_lite(tmp_path)
    warnings = make_plan(LocalSource(src), 3).warnings
    assert [w.split(",")[0] for w in warnings] == ["config.json has no first_k_dense_replace"]
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "first_k_dense_replace": 1}))
    assert make_plan(LocalSource(src), 3).warnings == []
