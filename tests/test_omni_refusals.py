"""Qwen3-Omni and Nemotron 3 Omni refused with the reason, in one `error:` line in `plan` and in `mirror`, nothing
written (issue 33; docs/families/omni.md): vLLM shards Qwen3-Omni's vision encoder by heads (16 of 72) and the RADIO
tower's MLP of the Nemotron Omni wrapper by TP (5120 wide, a width taken from the model name), and neither class
runs its encoder data-parallel."""

from __future__ import annotations

import pytest

from hubpad.testing import write_checkpoint
from tests.helpers import cli


@pytest.mark.parametrize("model_type, reason", [
    ("qwen3_omni_moe", "Qwen3OmniMoeThinkerForConditionalGeneration shards its vision encoder by heads (16 heads of 72"),
    ("NemotronH_Nano_Omni_Reasoning_V3", "vit_huge_patch16_224: 5120, which divides neither 3 nor 6"),
    ("NemotronH_Super_Omni_Reasoning_V3", "shards the RADIO vision tower's MLP by TP"),
    ("NemotronH_Omni_Reasoning_V3", "has no data-parallel encoder mode"),
    ("nemotron_h_omni", "the text-only Nemotron 3 checkpoints (model_type 'nemotron_h') pad at TP 3 and 6")])
def test_omni_refusals_name_the_reason(tmp_path, model_type, reason):
    src = write_checkpoint(tmp_path / model_type, {"model_type": model_type, "num_attention_heads": 32}, [],
                           n_shards=1, header_only=True)
    for args in (("plan", src, "--tp", 3), ("mirror", src, "--tp", 6, "--to", tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code == 1 and reason in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("error:")
    assert not (tmp_path / "out").exists()
