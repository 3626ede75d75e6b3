"""Pad tiny real transformers models and compare logits: padding must not change the model's output."""

from __future__ import annotations

import json

import pytest

from tests.logit_bounds import assert_exact_f64, assert_f32_within_noise

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.plan.planner import make_plan
from hubpad.publish.local import LocalPublisher
from hubpad.run.mirror import run_mirror
from hubpad.run.verify import verify_derivative
from hubpad.source.local import LocalSource

COMMON = dict(num_hidden_layers=2, vocab_size=160, max_position_embeddings=64, rms_norm_eps=1e-5,
              tie_word_embeddings=False)

CASES = {
    # name: (model_type, config kwargs, tp, expected {config key: padded value})
    "llama": ("llama", dict(hidden_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                            intermediate_size=100), 3,
              {"num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 384}),
    # Qwen2 at TP=2: only its MLP grows, and its q/k/v biases are carried.
    "qwen2-biases": ("qwen2", dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                   intermediate_size=60), 2,
                     {"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 256}),
    # Qwen2 at TP=3: padded heads (hidden 64 % 6 != 0, which Qwen2Config accepts), biases on q/k/v grow with them;
    # vLLM serves it through its Llama class (test_qwen2_padded_heads_keep_their_label_and_name_the_vllm_route).
    "qwen2-heads-tp3": ("qwen2", dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                      intermediate_size=60), 3,
                        {"num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 384}),
    "qwen3-qknorm-tp6-kv-replicated": ("qwen3", dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                                     head_dim=16, intermediate_size=64), 6,
                                       {"num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 768}),
    "hy_v3-moe": ("hy_v3", dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                intermediate_size=80, moe_intermediate_size=32, num_experts=3, num_experts_per_tok=2,
                                num_shared_experts=1, first_k_dense_replace=1), 3,
                  {"num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 384,
                   "moe_intermediate_size": 192}),
    "qwen3_moe": ("qwen3_moe", dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                    intermediate_size=64, moe_intermediate_size=32, num_experts=4,
                                    num_experts_per_tok=2, decoder_sparse_step=1), 3,
                  {"num_attention_heads": 6, "num_key_value_heads": 3, "moe_intermediate_size": 192}),
    "mixtral": ("mixtral", dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                intermediate_size=40, num_local_experts=3, num_experts_per_tok=2), 3,
                {"num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 192}),
    "mistral": ("mistral", dict(hidden_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                                intermediate_size=100, sliding_window=None), 3,
                {"num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 384}),
    # Qwen2-MoE: heads never padded (as Qwen2); at TP=2 its routed experts grow to the fused-MoE tile (32 → 128),
    # the shared expert (48, 24 per rank) and the unused dense intermediate_size (60: every layer is MoE) stay.
    # Qwen2-MoE at TP=3: padded heads too (vLLM serves it through its Transformers backend, which reads head_dim).
    "qwen2_moe-heads-tp3": ("qwen2_moe", dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                              head_dim=16, intermediate_size=60, moe_intermediate_size=32,
                                              shared_expert_intermediate_size=48, num_experts=4,
                                              num_experts_per_tok=2, decoder_sparse_step=1, qkv_bias=True), 3,
                            {"num_attention_heads": 6, "num_key_value_heads": 3, "moe_intermediate_size": 192}),
    "qwen2_moe-experts-tp2": ("qwen2_moe", dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                                head_dim=16, intermediate_size=60, moe_intermediate_size=32,
                                                shared_expert_intermediate_size=48, num_experts=4,
                                                num_experts_per_tok=2, decoder_sparse_step=1, qkv_bias=True), 2,
                              {"num_attention_heads": 4, "num_key_value_heads": 2, "moe_intermediate_size": 128,
                               "shared_expert_intermediate_size": 48, "intermediate_size": 60}),
}

# Logits are compared in float64 (exact up to 1e-12 relative) and in float32 (within a small multiple of the
# original model's own float32 noise): tests/logit_bounds.py, with the measured figures.


def _build(tmp_path, model_type, kwargs):
    torch.manual_seed(0)
    cfg = transformers.CONFIG_MAPPING[model_type](**COMMON, **kwargs)
    if model_type == "qwen2":
        cfg.attention_bias = True  # Qwen2 has q/k/v biases; make sure they are present and random
    model = transformers.AutoModelForCausalLM.from_config(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.normal_(0, 0.5)
    path = tmp_path / "upstream"
    model.save_pretrained(path)
    return model, path


@pytest.mark.parametrize("case", sorted(CASES))
def test_padded_model_gives_identical_logits(tmp_path, case):
    model_type, kwargs, tp, expected = CASES[case]
    model, src = _build(tmp_path, model_type, kwargs)
    dst = tmp_path / "padded"
    plan = make_plan(LocalSource(src), tp, shard_size=200_000)
    run_mirror(plan, LocalPublisher(dst))
    cfg = json.loads((dst / "config.json").read_text())
    for key, value in expected.items():
        assert cfg[key] == value, key
    assert cfg["head_dim"] == kwargs["head_dim"]
    if model_type == "qwen2":
        assert any(t.name.endswith("q_proj.bias") for t in plan.tensors)

    report = verify_derivative(LocalSource(src), LocalSource(dst))
    assert report["padded"] > 0

    padded = transformers.AutoModelForCausalLM.from_pretrained(dst, dtype=torch.float32).eval()
    ids = torch.randint(0, COMMON["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a32, b32 = model(ids).logits, padded(ids).logits
        a64, b64 = _double(model)(ids).logits, _double(padded)(ids).logits
    assert_exact_f64(a64, b64, case)
    assert_f32_within_noise(a32, b32, a64, case)


def _double(model):
    """The model in float64; MoE experts through the eager loop (torch's grouped_mm takes no float64)."""
    if getattr(model.config, "_experts_implementation", None) not in (None, "eager"):
        model.set_experts_implementation("eager")
    return model.double()


def test_qwen2_padded_heads_keep_their_label_and_name_the_vllm_route(tmp_path):
    """vLLM's Qwen2 computes head_dim = hidden_size // heads (config.head_dim is ignored), so 4 → 6 heads would
    serve with head_dim 10 instead of 16 there. The derivative keeps model_type qwen2 / Qwen2ForCausalLM (other
    engines pick their class from it) and records the route vLLM needs: its Llama class, which reads head_dim, with
    q/k/v-only biases (`--hf-overrides`). transformers' Qwen2 honours head_dim: the logits test above covers it at
    TP=3 (case qwen2-heads-tp3)."""
    _, src = _build(tmp_path, "qwen2", CASES["qwen2-heads-tp3"][1])
    plan = make_plan(LocalSource(src), 3)
    assert plan.new_config["model_type"] == "qwen2" and plan.new_config["architectures"] == ["Qwen2ForCausalLM"]
    assert plan.relabelled is None
    route = plan.vllm_route
    assert route["hf_overrides"] == {"architectures": ["LlamaForCausalLM"], "qkv_bias": True}
    assert route["model_impl"] is None and route["features"] == ["flag:hf-overrides", "llama:qkv_bias"]
    assert "(64 // 6 = 10) and ignores config.json's head_dim (16)" in route["why"]
    assert "head_dim 10" in route["without"] and "wrong outputs" in route["without"]
    assert make_plan(LocalSource(src), 2).vllm_route is None  # no padded heads: vLLM's own Qwen2 class serves it


def test_a_tp_larger_than_the_experts_is_refused_as_vllm_does(tmp_path):
    """vLLM's Qwen3-MoE block raises "Tensor parallel size 6 is greater than the number of experts 4" (seen in the
    serving tier); hubpad refuses that TP up front, in one line, instead of publishing what vLLM will not load."""
    from hubpad.errors import ConfigError

    _, src = _build(tmp_path, "qwen3_moe", CASES["qwen3_moe"][1])
    assert make_plan(LocalSource(src), 4).tp == 4
    with pytest.raises(ConfigError, match=r"4 routed experts < tp 6, and vLLM's qwen_moe MoE block refuses"):
        make_plan(LocalSource(src), 6)
