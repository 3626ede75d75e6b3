"""K2-Horizon (`k2_horizon`): pad tiny checkpoints (published names; the plain layout of K2-Horizon-375B-A23B and the
MoVA layout of K2-Horizon-MoVA-36B-A4B, with value experts and the softplus output gate) with `hubpad mirror` +
`hubpad verify` at TP 3 and 6, and compare float64 logits in a forward written after vLLM's module
(tests/k2_horizon_models.py; transformers has no class).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from safetensors.torch import load_file, save_file  # noqa: E402

from tests import k2_horizon_models as k2  # noqa: E402
from tests.helpers import cli, folder_tensors, mirror_and_verify  # noqa: E402

REL_TOL = 1e-12
IDS = torch.randint(0, k2.TINY["vocab_size"], (12,), generator=torch.Generator().manual_seed(1))
VARIANTS = {"plain": {}, "mova": k2.MOVA}
# 4 heads / 2 kv heads (groups of 2) -> 6 / 3 at TP 3 and at TP 6 (3 kv heads replicated twice); experts 32 -> 64 per
# rank; the dense 96 already divides
CASES = {("plain", 3): 192, ("mova", 3): 192, ("plain", 6): 384, ("mova", 6): 384}


@pytest.mark.parametrize("variant,tp", sorted(CASES))
def test_k2_horizon_padded_model_gives_identical_logits(tmp_path, variant, tp):
    expert = CASES[variant, tp]
    src = k2.write(tmp_path / "upstream", k2.config(**VARIANTS[variant]))
    dst = tmp_path / "padded"
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (6, 3, 16)
    assert (cfg["moe_intermediate_size"], cfg["intermediate_size"], cfg["num_shared_experts"]) == (expert, 96, 1)
    out, original = folder_tensors(dst), folder_tensors(src)
    for layer in (0, 1):
        p = f"model.layers.{layer}.self_attn."
        assert out[p + "q_proj.weight"].shape == (96, 64) and out[p + "k_proj.weight"].shape == (48, 64)
        assert out[p + "o_proj.weight"].shape == (64, 96)
    p = "model.layers.2."
    assert out[p + "mlp.shared_experts.up_proj.weight"].shape == (expert, 64)  # tied to the routed width
    assert torch.equal(out[p + "mlp.gate.bias"], original[p + "mlp.gate.bias"])
    if variant == "mova":
        assert out[p + "self_attn.gate_proj.weight"].shape == (96, 64)
        for e in range(4):
            v = out[p + f"self_attn.v_experts.{e}.weight"]
            assert v.shape == (48, 64) and torch.equal(v[:32], original[p + f"self_attn.v_experts.{e}.weight"])
            assert not v[32:].any()
        assert torch.equal(out[p + "self_attn.v_router.weight"], original[p + "self_attn.v_router.weight"])
    card = (dst / "README.md").read_text()
    assert "--tool-call-parser k2_horizon" in card and "--reasoning-parser k2_horizon" in card
    assert "--trust-remote-code" in card and "**vLLM 0.30.0 or newer**" in card

    a, b = k2.logits(src, IDS), k2.logits(dst, IDS)
    delta = (a - b).abs().max().item()
    print(f"k2_horizon {variant} tp={tp}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


def test_k2_horizon_reference_sees_a_wrong_padded_value_head(tmp_path):
    """The forward reads every padded tensor: one value expert's padded rows and the o_proj columns that read them set
    nonzero (a wrong pad needs both: either alone stays inert) change the logits."""
    src = k2.write(tmp_path / "upstream", k2.config(**k2.MOVA))
    dst = tmp_path / "padded"
    mirror_and_verify(src, dst, 3)
    file = next(dst.glob("*.safetensors"))
    tensors = load_file(file)
    p = "model.layers.2.self_attn."
    tensors[p + "v_experts.0.weight"][32:] = 0.3
    tensors[p + "v_experts.1.weight"][32:] = 0.3
    tensors[p + "o_proj.weight"][:, 64:] = 0.3
    save_file(tensors, file, metadata={"format": "pt"})
    delta = (k2.logits(src, IDS) - k2.logits(dst, IDS)).abs().max().item()
    print(f"k2_horizon with nonzero padded value heads: max |Δ| = {delta}")
    assert delta > 1e-3


def test_k2_horizon_refuses_query_key_norm(tmp_path):
    src = k2.write(tmp_path / "upstream", k2.config(query_key_norm=True))
    result = cli("plan", src, "--tp", 3)
    assert result.exit_code == 1 and "query_key_norm true is not supported for k2_horizon" in result.output
