"""Vision-language families of issue 33's `vlm` stream: the towers vLLM shards that no padding fixes (refused with
one line in `plan` and `mirror`), and EXAONE 4.5 (its EXAONE 4 language model padded, its tower copied)."""

from __future__ import annotations

import pytest

from hubpad.testing import write_checkpoint
from tests.helpers import cli


@pytest.mark.parametrize("model_type,reason", [
    ("ernie4_5_moe_vl", "shards its DFN vision tower by heads (16 heads of 80"),
    ("ernie4_5_vl_moe", "Ernie4_5_VLMoeForConditionalGeneration shards its DFN vision tower"),
    ("ovis", "AIMv2 (Ovis2) or SigLIP (Ovis1.6) visual tokenizer by heads (16 heads of 128 or 72"),
    ("ovis2_6_moe", "SigLIP2-NaViT visual tokenizer by heads (16 heads of 72"),
    ("hyperclovax_vision_v2", "shards its Qwen2.5-VL vision tower by heads (16 heads of 80"),
    ("deepseek_vl_v2", "4304-wide hidden layer, which divides neither 3 nor 6")])
def test_sharded_towers_are_refused_with_the_reason(tmp_path, model_type, reason):
    """One `error:` line in `plan` and in `mirror`, nothing written."""
    src = write_checkpoint(tmp_path / model_type, {"model_type": model_type, "num_attention_heads": 32}, [],
                           n_shards=1, header_only=True)
    for args in (("plan", src, "--tp", 3), ("mirror", src, "--tp", 6, "--to", tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code == 1 and reason in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("error:")
    assert not (tmp_path / "out").exists()
