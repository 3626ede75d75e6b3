"""Qwen4-Exp (the Qwen3.8-Flash-Next architecture) at TP=3 and TP=6.

A tiny Qwen4ExpForConditionalGeneration built with transformers (tests/linear_models.py: three Gated DeltaNet layers,
one QSA layer with its token indexer, hyper-connections, an n-gram per-layer embedding, fused experts with a shared
expert, a vision tower, the MTP layer) is mirrored with hubpad; the padded model's float64 logits on a prompt holding an
image must equal the original's exactly, and hubpad verify must find every untouched tensor byte-identical (the
hyper-connections, the PLE tables and projections, the indexer and the tower among them).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "Qwen4ExpForConditionalGeneration"):
    pytest.skip("transformers has no Qwen4-Exp (5.24+)", allow_module_level=True)

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import linear_models  # noqa: E402
from tests.helpers import cli, mirror_and_verify  # noqa: E402

LM = "model.language_model."
# tp -> (heads, kv heads, linear key heads, linear value heads)
AFTER = {3: (6, 3, 3, 6), 6: (6, 3, 6, 12)}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    src = linear_models.build_qwen4_exp(tmp_path_factory.mktemp("qwen4") / "upstream")
    return src, linear_models.qwen4_logits(src)


@pytest.mark.parametrize("tp", [3, 6])
def test_qwen4_exp_pads_exactly(tmp_path, upstream, tp):
    src, before = upstream
    dst = tmp_path / "padded"
    mirror_and_verify(src, dst, tp)

    text = json.loads((dst / "config.json").read_text())["text_config"]
    assert (text["num_attention_heads"], text["num_key_value_heads"], text["linear_num_key_heads"],
            text["linear_num_value_heads"]) == AFTER[tp]

    plan = make_plan(LocalSource(src), tp)
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    nk, nv = AFTER[tp][2], AFTER[tp][3]
    gdn = LM + "layers.0.linear_attn."
    # [q 2x16 | k 2x16 | v 4x16] rows, each section growing at its end
    assert shapes[gdn + "in_proj_qkv.weight"] == ((128, 64), (2 * nk * 16 + nv * 16, 64))
    assert shapes[gdn + "conv1d.weight"] == ((128, 1, 4), (2 * nk * 16 + nv * 16, 1, 4))
    assert shapes[gdn + "in_proj_z.weight"] == ((64, 64), (nv * 16, 64))
    assert shapes[gdn + "in_proj_a.weight"] == ((4, 64), (nv, 64))
    assert shapes[gdn + "A_log"] == ((4,), (nv,)) and shapes[gdn + "dt_bias"] == ((4,), (nv,))
    assert shapes[gdn + "out_proj.weight"] == ((64, 64), (64, nv * 16))
    qsa = LM + "layers.3.self_attn."
    assert shapes[qsa + "q_proj.weight"] == ((4 * 2 * 16, 64), (6 * 2 * 16, 64))  # [query | gate] per head
    assert shapes["mtp.layers.0.self_attn.q_proj.weight"] == ((128, 64), (192, 64))
    replicated = ("hyper_connection", ".ple.", "indexer", "model.visual.", "mtp.fc", "mtp.pre_fc", "norm.weight")
    assert not [n for n in shapes if any(r in n for r in replicated)]

    after = linear_models.qwen4_logits(dst)
    delta = (before - after).abs().max().item()
    print(f"qwen4_exp TP={tp}: float64 max |Δ| = {delta} (max |logit| {before.abs().max().item():.1f})")
    assert delta == 0.0


def test_qwen4_exp_per_expert_layout_pads_exactly(tmp_path):
    """Experts stored one by one (transformers' save) pad per expert to the same widths (the fused layout's logits are
    compared above; measured here too when this test was written: max abs diff 0.0)."""
    src = linear_models.build_qwen4_exp(tmp_path / "upstream", fused=False)
    dst = tmp_path / "padded"
    assert cli("mirror", src, "--tp", 3, "--to", dst).exit_code == 0
    assert cli("verify", src, dst).exit_code == 0
    shapes = {t.name: (t.src.shape, t.shape) for t in make_plan(LocalSource(src), 3).tensors if t.padded}
    assert shapes[LM + "layers.0.mlp.experts.7.gate_proj.weight"] == ((48, 64), (192, 64))
    assert shapes[LM + "layers.0.mlp.experts.7.down_proj.weight"] == ((64, 48), (64, 192))


def test_qwen4_exp_mtp_needs_the_hidden_size_to_shard(tmp_path, upstream):
    """vLLM's Qwen4ExpMTP projects with column-parallel fc_embedding / fc_hidden over hidden_size: hidden 64 at TP=3
    leaves MTP out of the card and says why."""
    src, _ = upstream
    dst = tmp_path / "tp3"
    assert cli("mirror", src, "--tp", 3, "--to", dst).exit_code == 0
    serving = json.loads((dst / "hubpad.json").read_text())["serving"]
    assert serving["speculative_config"] is None
    assert "hidden_size % 3 == 0" in serving["mtp_unavailable"]


def test_qwen4_exp_unknown_tensor_is_refused(tmp_path):
    """A tensor the adapter does not know (here a hypothetical second indexer projection) is refused by name."""
    from safetensors.torch import load_file, save_file

    src = linear_models.build_qwen4_exp(tmp_path / "upstream")
    tensors = load_file(src / "model.safetensors")
    tensors[LM + "layers.3.self_attn.indexer.weights_proj.weight"] = torch.zeros(2, 64, dtype=torch.bfloat16)
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ConfigError, match=r"indexer\.weights_proj\.weight: not a tensor hubpad knows for qwen4_exp"):
        make_plan(LocalSource(src), 3)
