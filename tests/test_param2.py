"""Param-2 MoE (`param2moe`, Param2MoEForCausalLM): Ling's layout with the kv heads always sharded (adapters/param2.py),
proven in float64 against the reference written after vLLM's bailing_moe.py (tests/bailing_models.py), which
computes what vLLM's param2moe.py does (the fused [q | k | v] split by the config's counts, per-head RMSNorm on q and
k, neox RoPE on head_dim x partial_rotary_factor, sigmoid routing with the expert bias for the choice only,
renormalized top-k times routed_scaling_factor, shared experts, pre-norm residuals): transformers 5.24 has no class
for it. Original against the `hubpad mirror` + `hubpad verify` derivative at TP 3 and 6.

Tiny geometry: two shared experts in one MLP of its own width; 4 heads / 2 kv of 8 -> 6 / 3 at TP 3 and 12 / 6 at TP 6 (Ling pads 6 / 3 there, its kv heads
replicated; vLLM's Param2MoEAttention asserts kv heads % TP == 0).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from tests import bailing_models  # noqa: E402
from tests.helpers import assert_same_logits, mirror_and_verify  # noqa: E402

# two shared experts in one MLP of a width of its own (32 = 2 x 16), as Param2-17B states it (2 and 4096)
PARAM2 = dict(architectures=["Param2MoEForCausalLM"], model_type="param2moe", partial_rotary_factor=1.0,
              num_shared_experts=2, moe_shared_expert_intermediate_size=32)


@pytest.mark.parametrize("tp, heads, kv", [(3, 6, 3), (6, 12, 6)])
def test_param2_moe_pads_exactly_with_kv_heads_sharded(tmp_path, tp, heads, kv):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    bailing_models.build(src, **PARAM2)
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (heads, kv, 8)
    assert cfg["num_key_value_heads"] % tp == 0 and cfg["moe_shared_expert_intermediate_size"] > 32
    ids = torch.randint(0, 128, (12,), generator=torch.Generator().manual_seed(1))
    assert_same_logits(bailing_models.logits(src, ids), bailing_models.logits(dst, ids), f"param2moe tp{tp}")


@pytest.mark.parametrize("tp, heads, kv", [(3, 36, 9), (6, 48, 12)])
def test_param2_17b_plans(tmp_path, tp, heads, kv):
    """Param2-17B-A2.4B's layout (tests/moe_stream_real.py): 32 heads / 8 kv -> 36 / 9 at TP 3 and 48 / 12 at TP 6,
    the kv heads sharded; the shared MLP of its own width (4096, two shared experts) padded under its key; the card."""
    from hubpad.plan.adapters import adapter_for
    from hubpad.plan.adapters.vllm import min_vllm
    from hubpad.plan.planner import make_plan
    from hubpad.source.local import LocalSource
    from hubpad.testing import write_checkpoint
    from tests import moe_stream_real

    cfg = moe_stream_real.PARAM2_17B
    src = write_checkpoint(tmp_path / "param2", cfg, moe_stream_real.ling_tensors(cfg), n_shards=2, header_only=True)
    plan = make_plan(LocalSource(src), tp)
    assert (plan.new_config["num_attention_heads"], plan.new_config["num_key_value_heads"]) == (heads, kv)
    dims = {d.name: (d.before, d.after) for d in plan.dims}
    print(tp, dims, (plan.bytes_out - plan.bytes_in) / 1e9)
    assert dims["shared intermediate"][0] == 4096
    assert plan.new_config["moe_shared_expert_intermediate_size"] == dims["shared intermediate"][1]
    out = adapter_for(plan.config).serving(plan.config)
    assert out["extra_args"] == ["--trust-remote-code"]
    assert min_vllm(out["vllm_features"])["version"] == "0.20.0"
