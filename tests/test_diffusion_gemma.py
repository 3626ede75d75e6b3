"""DiffusionGemma (`diffusion_gemma`, google/diffusiongemma-26B-A4B-it): Gemma 4's backbone saved once under
`model.decoder.` and run in two modes (causal encoder over the prompt, bidirectional decoder over the canvas), padded
by Gemma 4's rules (adapters/gemma4.py), its self-conditioning MLP with the dense width; proven in float64 with
transformers' DiffusionGemmaForBlockDiffusion (prompt, canvas and self-conditioning logits) at TP 3 and 6, the
tower copied byte for byte; the published config (no attention_k_eq_v key) padded as k = v.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers.models.diffusion_gemma")

from tests import diffusion_gemma_models  # noqa: E402
from tests.helpers import assert_same_logits, folder_tensors, mirror_and_verify  # noqa: E402

SC = "model.decoder.self_conditioning."


@pytest.mark.parametrize("tp, heads, kv, gkv, dense", [(3, 12, 6, 3, 384), (6, 12, 6, 3, 768)])
def test_diffusion_gemma_pads_exactly(tmp_path, tp, heads, kv, gkv, dense):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    diffusion_gemma_models.build(src, intermediate_size=40, num_hidden_layers=2,
                                 layer_types=["sliding_attention", "full_attention"])  # 40 does not shard: MLP and SC pad
    mirror_and_verify(src, dst, tp)
    text = json.loads((dst / "config.json").read_text())["text_config"]
    assert "attention_k_eq_v" not in text  # as published
    assert (text["num_attention_heads"], text["num_key_value_heads"], text["num_global_key_value_heads"],
            text["intermediate_size"]) == (heads, kv, gkv, dense)
    a, b = folder_tensors(src), folder_tensors(dst)
    assert b[SC + "gate_proj.weight"].shape == (dense, 64) and b[SC + "down_proj.weight"].shape == (64, dense)
    assert torch.equal(b[SC + "gate_proj.weight"][:40], a[SC + "gate_proj.weight"])
    assert not b[SC + "gate_proj.weight"][40:].any() and not b[SC + "down_proj.weight"][:, 40:].any()
    encoder = [k for k in a if k.startswith("model.encoder.")]
    assert encoder and all(torch.equal(a[k], b[k]) for k in encoder)
    g = torch.Generator().manual_seed(1)
    prompt, canvas = torch.randint(0, 240, (7,), generator=g), torch.randint(0, 240, (8,), generator=g)
    sc = torch.randn(8, 256, generator=g)
    before = diffusion_gemma_models.logits(src, prompt, canvas, sc)
    after = diffusion_gemma_models.logits(dst, prompt, canvas, sc)
    assert_same_logits(before, after, f"diffusion_gemma tp{tp}")


def test_diffusion_gemma_card():
    from hubpad.plan.adapters import adapter_for
    from hubpad.plan.adapters.vllm import min_vllm
    from tests.diffusion_gemma_real import DIFFUSION_GEMMA_26B

    out = adapter_for(DIFFUSION_GEMMA_26B).serving(DIFFUSION_GEMMA_26B)
    assert min_vllm(out["vllm_features"])["version"] == "0.24.0" and out["tool_call_parser"] is None
