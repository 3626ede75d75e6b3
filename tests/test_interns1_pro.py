"""Intern-S1-Pro (`interns1_pro`, adapters/interns1_pro.py): float64 proof of the whole language model at TP 3 and 6.

A tiny checkpoint in the published layout (tests/interns1_pro_models.py: Qwen3-VL-MoE's names, fused experts as vLLM's
interns1_pro.py reads them, a dense layer, the FoPE coefficients `model.language_model.rotary_emb.{sin,cos}_coef`
[kv heads, freqs, freqs]) is mirrored and verified; its logits, from transformers' Qwen3-VL-MoE with the FoPE
reference in place of its rotary, must equal the original's exactly (max |Δ| = 0.0). The coefficients' real rows are
byte-identical, the new kv heads' rows zero, the vision tower copied byte for byte; the reference is shown to read
the coefficients (changing one real row changes the logits), so the proof is not vacuous.
"""

from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402

from tests import interns1_pro_models as models  # noqa: E402
from tests.helpers import cli, folder_tensors  # noqa: E402

PROMPT = torch.tensor([[1, 20, 30, 40, 50, 60, 70, 80, 90]])


def _card(dst) -> str:
    return " ".join(line.strip().rstrip("\\").strip() for line in (dst / "README.md").read_text().splitlines())


@pytest.mark.parametrize("tp", [3, 6])
def test_interns1_pro_pads_kv_groups_and_fope_rows_exactly(tmp_path, tp):
    src = models.build(tmp_path / "upstream")
    dst = tmp_path / "padded"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    assert cli("verify", src, dst).exit_code == 0

    text = json.loads((dst / "config.json").read_text())["text_config"]
    assert (text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"]) == (6, 3, 32)
    assert text["rope_scaling"] == models.FOPE and text["num_experts"] == 6
    before, after = folder_tensors(src), folder_tensors(dst)
    for name in models.FOPE_NAMES:  # one zero row for the new kv head, the real rows as they were
        assert after[name].shape == (3, *before[name].shape[1:])
        assert torch.equal(after[name][:2], before[name]) and not after[name][2].any()
    visual = [n for n in before if n.startswith("model.visual.")]
    assert visual and all(torch.equal(before[n], after[n]) for n in visual)
    card = _card(dst)
    assert "--mm-encoder-tp-mode data" in card and "--trust-remote-code" in card and "FoPE" in card

    original = models.logits(src, PROMPT)
    delta = (original - models.logits(dst, PROMPT)).abs().max().item()
    print(f"interns1_pro TP={tp}: float64 max |Δ| = {delta}")
    assert delta == 0.0

    changed = tmp_path / "changed"  # the reference reads the coefficients: a real row moves the logits
    changed.mkdir()
    shutil.copy(src / "config.json", changed / "config.json")
    tensors = load_file(src / "model.safetensors")
    tensors[models.FOPE_NAMES[0]][1] += 0.5
    save_file(tensors, changed / "model.safetensors", metadata={"format": "pt"})
    assert (original - models.logits(changed, PROMPT)).abs().max().item() > 1e-3


def test_interns1_pro_per_expert_layout_pads_exactly(tmp_path):
    """The routed experts stored one module each (`mlp.experts.E.gate_proj`...), which vLLM loads too: padded as
    Qwen3-MoE's, the proof stacking them back as vLLM does."""
    src = models.per_expert(models.build(tmp_path / "upstream"))
    dst = tmp_path / "padded"
    result = cli("mirror", src, "--tp", 3, "--to", dst)
    assert result.exit_code == 0, result.output
    assert cli("verify", src, dst).exit_code == 0
    after = folder_tensors(dst)
    assert "model.language_model.layers.0.mlp.experts.5.gate_proj.weight" in after
    assert not any(n.endswith("gate_up_proj") for n in after)
    delta = (models.logits(src, PROMPT) - models.logits(dst, PROMPT)).abs().max().item()
    print(f"interns1_pro per-expert TP=3: float64 max |Δ| = {delta}")
    assert delta == 0.0


def test_interns1_pro_refuses_fope_rows_that_are_not_one_per_kv_head(tmp_path):
    src = models.build(tmp_path / "upstream")
    tensors = load_file(src / "model.safetensors")
    tensors[models.FOPE_NAMES[1]] = torch.zeros(4, *tensors[models.FOPE_NAMES[1]].shape[1:])
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    for command in (("plan", src, "--tp", 3), ("mirror", src, "--tp", 3, "--to", tmp_path / "padded")):
        result = cli(*command)
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert result.exit_code != 0 and len(lines) == 1 and "Traceback" not in result.output, result.output
        assert models.FOPE_NAMES[1] in lines[0] and "expected 2 rows first" in lines[0]
