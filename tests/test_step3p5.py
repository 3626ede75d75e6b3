"""Step-3.5 (`step3p5`, Step3p5ForCausalLM): Step-3.7's language model on its own (tests/step3p7_models.py builds a
tiny one with transformers' Step3p7ForConditionalGeneration and keeps only the language model: the published
Step-3.5 names and config form). Padded by hubpad as a Step-3.5 checkpoint; proved in float64 by giving the padded
language model back its (copied) tower and running transformers' class, whose language model is Step-3.5's
(transformers has no text-only Step-3.5 class).

Tiny geometry: full layers 4 heads / 2 kv, sliding layers 6 / 2, head_dim 8 -> 6 / 9 / 3 at TP 3 and 12 / 18 / 6 at
TP 6 (Step-3.5-Flash: 64 / 96 / 8 -> 72 / 108 / 9 and 96 / 144 / 12; its published layout is planned in
tests/test_step3p7.py beside Step-3.7-Flash's).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.step3p7_models import IMAGE_TOKEN, build_step3p7, text_only, with_tower  # noqa: E402

REL_TOL = 1e-12
CASES = {3: (6, 9, 3), 6: (12, 18, 6)}  # tp -> (full heads, sliding heads, kv heads)


def _logits(path):
    model = transformers.Step3p7ForConditionalGeneration.from_pretrained(path, dtype=torch.float64).eval()
    ids = torch.randint(IMAGE_TOKEN + 1, 128, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("tp", sorted(CASES))
def test_step3p5_padded_model_gives_identical_logits(tmp_path, tp):
    heads, swa, kv = CASES[tp]
    build_step3p7(tmp_path / "step3p7")
    src = text_only(tmp_path / "step3p7", tmp_path / "upstream")
    dst = tmp_path / "padded"
    run_mirror(make_plan(LocalSource(src), tp, shard_size=400_000), LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    cfg = json.loads((dst / "config.json").read_text())
    assert cfg["architectures"] == ["Step3p5ForCausalLM"] and "text_config" not in cfg
    other = cfg["attention_other_setting"]
    # vLLM's reading (Step3p5DecoderLayer): full heads / kv at the top, the sliding ones in attention_other_setting
    assert (cfg["num_attention_heads"], cfg["num_attention_groups"], other["num_attention_heads"],
            other["num_attention_groups"]) == (heads, kv, swa, kv)
    a = _logits(with_tower(src, tmp_path / "step3p7", tmp_path / "a"))
    b = _logits(with_tower(dst, tmp_path / "step3p7", tmp_path / "b"))
    delta = (a - b).abs().max().item()
    print(f"tp{tp}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


def test_step3p5_card_flags_come_from_vllm():
    """The step3p5 parsers and MTP over the 3 MTP layers; no remote code (vLLM registers Step3p5Config) and no
    encoder flag; vLLM 0.23.0 or later (the parsers' first read release)."""
    from hubpad.plan.adapters import adapter_for
    from hubpad.plan.adapters.vllm import min_vllm
    from tests import step3p7_real

    cfg = step3p7_real.STEP35_FLASH
    out = adapter_for(cfg).serving(cfg)
    assert (out["tool_call_parser"], out["reasoning_parser"]) == ("step3p5", "step3p5")
    assert out["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    assert out["extra_args"] == [] and "mm_encoder_tp_mode" not in out
    assert min_vllm(out["vllm_features"])["version"] == "0.23.0"
