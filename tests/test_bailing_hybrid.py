"""Ling / Ring 2.5 and Ling 3 (`bailing_hybrid`) and Ling V3 VL (`bailing_moe_v3_vl`): what hubpad answers.

Ling V3 VL is refused for its vision tower (vLLM's BailingMoeV3VLForConditionalGeneration builds a Qwen3 ViT it
shards by heads, head_dim = hidden_size // heads, with no data-parallel encoder mode), whatever its Ling 3 language
model would allow: one `error:` line in `plan` and in `mirror`, nothing written.
"""

from __future__ import annotations

from hubpad.testing import write_checkpoint
from tests.helpers import cli

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
