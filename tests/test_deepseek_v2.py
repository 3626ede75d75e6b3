"""DeepSeek-V2 (`deepseek_v2`): pad tiny real transformers models (V2's q LoRA, V2-Lite's plain q_proj; two shared
experts; V2's softmax group-limited router) with `hubpad mirror` + `hubpad verify` at TP 3 and 6 and compare float64
logits in transformers' own DeepseekV2ForCausalLM, at the published names.

The padded heads never divide the hidden size here (64 / 6), as at the real shapes (5120 / 129 or 132): transformers'
DeepseekV2Config refuses such a config.json (checked), and vLLM serves it through the card's --hf-overrides route
(adapters/deepseek_v2.py; tests/test_serve_families.py runs it). The modeling code has no such rule (q rows heads ×
qk_head_dim, o_proj columns heads × v_head_dim), so the proof loads the derivative with that one config check left out.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.helpers import cli, folder_tensors, mirror_and_verify  # noqa: E402
from tests.test_mla import TINY  # noqa: E402
from tests.test_models_transformers import COMMON  # noqa: E402
from tests.tiny_moe import assert_same_logits, randomize  # noqa: E402

# V2's router as published (group-limited greedy top-k over softmax scores, scaled), two shared experts
V2 = {k: v for k, v in TINY.items() if k != "num_nextn_predict_layers"} | dict(
    n_shared_experts=2, topk_method="group_limited_greedy", scoring_func="softmax", routed_scaling_factor=16.0,
    norm_topk_prob=False)
VARIANTS = {"v2": V2, "v2_lite": V2 | dict(q_lora_rank=None, n_group=1, topk_group=1, topk_method="greedy",
                                            routed_scaling_factor=1.0)}
ROUTE = """--hf-overrides '{"model_type": "deepseek_v32"}'"""


def build_deepseek_v2(tmp_path, variant: str = "v2", **overrides):
    """A tiny float64 DeepSeek-V2 (one dense and one MoE layer) and its checkpoint under the published names."""
    torch.manual_seed(0)
    cfg = transformers.CONFIG_MAPPING["deepseek_v2"](**{**COMMON, **VARIANTS[variant], **overrides})
    model = transformers.AutoModelForCausalLM.from_config(cfg, experts_implementation="eager").double().eval()
    randomize(model)
    path = tmp_path / "upstream"
    model.save_pretrained(path)
    return model, path


@pytest.fixture
def accept_uneven_heads(monkeypatch):
    """transformers' DeepseekV2Config without its hidden_size % heads check (the only thing that refuses the
    derivative in transformers)."""
    cls = transformers.DeepseekV2Config
    monkeypatch.setattr(cls, "__class_validators__",
                        [v for v in cls.__class_validators__ if v.__name__ != "validate_architecture"])


# (variant, tp) -> heads after, expert width after
CASES = {("v2", 3): (6, 192), ("v2_lite", 6): (6, 384)}


@pytest.mark.parametrize("variant,tp", sorted(CASES))
def test_deepseek_v2_padded_model_gives_identical_logits(tmp_path, variant, tp, request):
    heads, expert = CASES[variant, tp]
    model, src = build_deepseek_v2(tmp_path, variant)
    dst = tmp_path / "padded"
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["model_type"], cfg["architectures"]) == ("deepseek_v2", ["DeepseekV2ForCausalLM"])  # kept
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["moe_intermediate_size"]) == (
        heads, heads, expert)
    assert (cfg["n_shared_experts"], cfg["topk_method"], cfg["scoring_func"]) == (
        2, VARIANTS[variant]["topk_method"], "softmax")
    out, original = folder_tensors(dst), folder_tensors(src)
    q = "q_b_proj" if variant == "v2" else "q_proj"
    for layer in (0, 1):
        p = f"model.layers.{layer}.self_attn."
        assert out[p + f"{q}.weight"].shape[0] == heads * 24
        assert out[p + "kv_b_proj.weight"].shape == (heads * 32, 32)
        assert out[p + "o_proj.weight"].shape == (64, heads * 16)
    # one shared MLP of n_shared_experts x the routed experts' width, padded at its end
    shared = "model.layers.1.mlp.shared_experts."
    assert out[shared + "gate_proj.weight"].shape == (2 * expert, 64)
    assert out[shared + "down_proj.weight"].shape == (64, 2 * expert)
    assert torch.equal(out[shared + "gate_proj.weight"][:64], original[shared + "gate_proj.weight"])
    assert not out[shared + "gate_proj.weight"][64:].any() and not out[shared + "down_proj.weight"][:, 64:].any()
    card = (dst / "README.md").read_text()
    assert ROUTE in card and "**vLLM 0.20.0 or newer**" in card
    assert "--tool-call-parser" not in card and "speculative" not in card

    with pytest.raises(Exception, match=r"The hidden size \(64\) is not a multiple of the number of attention "
                                         rf"heads \({heads}\)"):
        transformers.AutoConfig.from_pretrained(dst)
    request.getfixturevalue("accept_uneven_heads")
    assert_same_logits(model, dst, f"deepseek_v2 {variant} tp={tp}", COMMON["vocab_size"])


def test_deepseek_v2_plan_names_the_route(tmp_path):
    _, src = build_deepseek_v2(tmp_path)
    plan = json.loads(cli("plan", src, "--tp", 3, "--json").output)
    assert plan["architecture"]["vllm_route"]["hf_overrides"] == {"model_type": "deepseek_v32"}
    assert "rejects hidden_size 64 % 6 attention heads != 0" in plan["architecture"]["vllm_route"]["why"]
    shared = next(r for r in plan["rank_table"] if r["dim"] == "shared intermediate")
    assert (shared["total"], shared["per_rank"], shared["ok"]) == (384, 128, True)
    dims = {d["name"]: d for d in plan["dims"]}  # the shared MLP has no config key: vLLM derives its width
    assert (dims["shared intermediate"]["config_keys"], dims["shared intermediate"]["after"]) == ([], 384)
    assert set(plan["config_changes"]) == {"num_attention_heads", "num_key_value_heads", "moe_intermediate_size"}
    text = cli("plan", src, "--tp", 3).output
    assert ROUTE in text
