"""GLM-4.5 / 4.6 / 4.5-Air (`glm4_moe`): pad tiny real transformers models and compare float64 logits.

The tiny models carry everything the real ones do: q/k/v biases, per-head q/k norms (GLM-4.5/4.6; Air has
none), partial rotary (half of each head), a dense first layer, routed experts with `e_score_correction_bias`,
one shared expert and an MTP block at index num_hidden_layers (transformers does not load it; the plan pads it).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.errors import HubpadError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.test_models_transformers import COMMON  # noqa: E402
from tests.tiny_moe import assert_same_logits, build_with_mtp  # noqa: E402

TINY = dict(hidden_size=64, intermediate_size=80, moe_intermediate_size=44, num_attention_heads=8,
            num_key_value_heads=2, head_dim=16, attention_bias=True, n_routed_experts=4, num_experts_per_tok=2,
            n_group=1, topk_group=1, first_k_dense_replace=1, n_shared_experts=1, num_nextn_predict_layers=1,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})


def _build(tmp_path, **overrides):
    return build_with_mtp(tmp_path, "glm4_moe", dict(COMMON, **{**TINY, **overrides}))


# name: (config overrides, tp, heads, kv heads, expert width after)
CASES = {"glm45-qknorm-tp3": (dict(use_qk_norm=True), 3, 12, 3, 192),
         "air-no-qknorm-tp3": (dict(use_qk_norm=False), 3, 12, 3, 192),
         "glm45-qknorm-tp6-kv-replicated": (dict(use_qk_norm=True), 6, 12, 3, 384)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_glm_padded_model_gives_identical_logits(tmp_path, case):
    overrides, tp, heads, kv, expert = CASES[case]
    model, src = _build(tmp_path, **overrides)
    dst = tmp_path / "padded"
    plan = make_plan(LocalSource(src), tp, shard_size=400_000)
    run_mirror(plan, LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (heads, kv, 16)
    assert cfg["moe_intermediate_size"] == expert
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    for layer in (0, 1, 2):  # layer 2 is the MTP block
        assert shapes[f"model.layers.{layer}.self_attn.q_proj.bias"] == ((128,), (heads * 16,))
        assert shapes[f"model.layers.{layer}.self_attn.k_proj.bias"] == ((32,), (kv * 16,))
    assert shapes["model.layers.2.mlp.experts.3.up_proj.weight"] == ((44, 64), (expert, 64))
    assert shapes["model.layers.1.mlp.shared_experts.down_proj.weight"] == ((64, 44), (64, expert))
    card = (dst / "README.md").read_text()
    assert "--tool-call-parser glm45" in card and "--reasoning-parser glm45" in card and '"method": "mtp"' in card
    assert "vLLM 0.11.0 or newer" in card  # speculative method "mtp" (plan/adapters/vllm.py)

    assert_same_logits(model, dst, case, COMMON["vocab_size"])


def test_glm_refuses_several_shared_experts(tmp_path):
    _, src = _build(tmp_path, n_shared_experts=2)
    with pytest.raises(HubpadError, match="n_shared_experts 2"):
        make_plan(LocalSource(src), 3)
