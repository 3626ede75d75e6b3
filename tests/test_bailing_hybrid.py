"""Ling 3 (`bailing_hybrid`, BailingMoeV3ForCausalLM) and Ling V3 VL (`bailing_moe_v3_vl`): what hubpad answers.

Ling 3 is padded: tiny real transformers BailingHybridForCausalLM models in the published layout
(tests/hybrid_models.py: KDA and gated MLA layers, dense and MoE MLPs) are padded with `hubpad mirror` + `hubpad
verify` at TP 3 and 6 (4 heads -> 6, the MLA and KDA layers together) and their float64 logits compared.

Ling V3 VL is refused for its vision tower (vLLM's BailingMoeV3VLForConditionalGeneration builds a Qwen3 ViT it
shards by heads, head_dim = hidden_size // heads, with no data-parallel encoder mode), whatever its Ling 3 language
model would allow: one `error:` line in `plan` and in `mirror`, nothing written.
"""

from __future__ import annotations

import json

import pytest

from hubpad.source.local import LocalSource
from hubpad.testing import write_checkpoint
from tests.helpers import cli

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# Ling-3.0-flash-VL's config.json as vLLM's own test (tests/transformers_utils, bailing_moe_v3_vl) transcribes it
LING3_FLASH_VL_VISION = {"model_type": "qwen3_moe_vit", "depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
                         "num_heads": 16, "patch_size": 16, "spatial_merge_size": 2, "out_hidden_size": 4096}


def test_ling_v3_vl_is_refused_for_its_head_sharded_vision_tower(tmp_path):
    config = {"architectures": ["BailingMoeV3VLForConditionalGeneration"], "model_type": "bailing_moe_v3_vl",
              "vision_config": LING3_FLASH_VL_VISION,
              "text_config": {"model_type": "bailing_hybrid", "hidden_size": 2560, "num_attention_heads": 32}}
    src = write_checkpoint(tmp_path / "src", config, [], n_shards=1, header_only=True)
    for args in (("plan", src, "--tp", 3), ("mirror", src, "--tp", 6, "--to", tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code == 1 and result.output.startswith("error:"), result.output
        assert len(result.output.strip().splitlines()) == 1
        assert ("vLLM's BailingMoeV3VLForConditionalGeneration shards its Qwen3 ViT vision tower by heads (16 heads "
                "of 72, head_dim = hidden_size // heads)") in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("tp", [3, 6])
def test_ling3_padded_model_gives_identical_logits(tmp_path, tp):
    from tests.helpers import assert_same_logits, folder_tensors, mirror_and_verify
    from tests.hybrid_models import build_ling3, ling3_logits

    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build_ling3(src)
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert cfg["num_attention_heads"] == cfg["num_key_value_heads"] == 6
    shapes = {n: list(t.shape) for n, t in folder_tensors(dst).items()}
    assert shapes["model.layers.0.attention.q_conv1d.weight"] == [6 * 16, 1, 4]  # KDA (layer 0)
    assert shapes["model.layers.0.attention.b_proj.weight"] == [6, 64]
    assert shapes["model.layers.1.attention.q_proj.weight"] == [6 * 24, 64]  # MLA (layer 1): nope 16 + rope 8
    assert shapes["model.layers.1.attention.g_proj.weight"] == [6, 64]  # its headwise gate
    assert shapes["model.layers.1.attention.dense.weight"] == [64, 6 * 16]
    ids = torch.randint(0, 256, (2, 13), generator=torch.Generator().manual_seed(1))
    assert_same_logits(ling3_logits(src, ids), ling3_logits(dst, ids), f"ling3 tp {tp}")


def test_ling3_layers_come_from_layer_group_size_when_config_lists_none(tmp_path):
    """Published Ling 3 configs state layer_group_size, not layer_types: the last layer of each whole group and the
    trailing layers are MLA (vLLM's BailingMoeV3TextConfig), the rest KDA."""
    from hubpad.plan import kda

    assert kda.layers({"num_hidden_layers": 8, "layer_group_size": 3}) == frozenset({0, 1, 3, 4})
    assert kda.layers({"num_hidden_layers": 42, "layer_group_size": 6}) == frozenset(
        i for i in range(42) if (i + 1) % 6)


def test_ling3_with_config_code_keeps_it_and_the_card_trusts_it(tmp_path):
    """A checkpoint that ships its config code (auto_map): the derivative keeps the file and its card serves with
    --trust-remote-code (vLLM 0.32 registers no config class for a text-only bailing_hybrid)."""
    from hubpad.plan.planner import make_plan
    from hubpad.publish.local import LocalPublisher
    from hubpad.run.mirror import run_mirror
    from tests.hybrid_models import build_ling3

    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build_ling3(src, remote_code=True)
    run_mirror(make_plan(LocalSource(src), 3), LocalPublisher(dst))
    code = "configuration_bailing_hybrid.py"
    assert (dst / code).read_text() == (src / code).read_text()
    assert "--trust-remote-code" in json.loads((dst / "hubpad.json").read_text())["serving"]["extra_args"]
