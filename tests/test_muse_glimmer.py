"""Muse Glimmer (`muse_glimmer`, meta-models/Muse-Glimmer-30B; the text-only `muse_glimmer_text`): GQA with weightless
per-head q/k norms and a per-feature sigmoid output gate (`self_attn.gate_proj`, padded as q), proven in float64 with
transformers' MuseGlimmerForConditionalGeneration at TP 3 and 6 at the published key names; the vision tower copied
byte for byte (vLLM runs it data-parallel by itself where its heads do not divide TP); the published shape planned
header-only (tests/muse_glimmer_real.py).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers.models.muse_glimmer")

from hubpad.plan.adapters import adapter_for  # noqa: E402
from hubpad.plan.adapters.vllm import min_vllm  # noqa: E402
from tests import muse_glimmer_models  # noqa: E402
from tests.helpers import assert_same_logits, folder_tensors, mirror_and_verify  # noqa: E402

LM = "model.language_model.layers.1.self_attn."


@pytest.mark.parametrize("tp, heads, kv", [(3, 6, 3), (6, 6, 3)])
def test_muse_glimmer_pads_exactly(tmp_path, tp, heads, kv):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    muse_glimmer_models.build(src)
    mirror_and_verify(src, dst, tp)
    text = json.loads((dst / "config.json").read_text())["text_config"]
    assert (text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"]) == (heads, kv, 8)
    assert text["hidden_size"] % heads  # 40 % 6: the padded heads need not divide hidden, as vLLM's config allows
    a, b = folder_tensors(src), folder_tensors(dst)
    assert b[LM + "gate_proj.weight"].shape == b[LM + "q_proj.weight"].shape == (heads * 8, 40)
    # a whole kv group added at the end: its gate rows are zero, like its q rows (and its o_proj columns)
    assert torch.equal(b[LM + "gate_proj.weight"][:32], a[LM + "gate_proj.weight"])
    assert not b[LM + "gate_proj.weight"][32:].any() and not b[LM + "q_proj.weight"][32:].any()
    tower = [k for k in a if k.startswith(("model.vision_", "model.vision_tower."))]
    assert tower and all(torch.equal(a[k], b[k]) for k in tower)
    ids = torch.randint(0, 128, (12,), generator=torch.Generator().manual_seed(1))
    before, after = muse_glimmer_models.logits(src, ids), muse_glimmer_models.logits(dst, ids)
    assert_same_logits(before, after, f"muse_glimmer tp{tp}")


def test_muse_glimmer_text_pads_as_the_language_model(tmp_path):
    """The text-only export (`muse_glimmer_text`, the language model at `model.`, its dims at the top level): the
    derivative's tensors equal the multimodal derivative's language model byte for byte, so the proof above covers
    it."""
    from safetensors.torch import save_file

    mm, text = tmp_path / "mm", tmp_path / "text"
    cfg = muse_glimmer_models.build(mm)
    text.mkdir()
    lm = {k.replace("model.language_model.", "model."): v for k, v in folder_tensors(mm).items()
          if k.startswith(("model.language_model.", "lm_head."))}
    save_file(lm, str(text / "model.safetensors"), metadata={"format": "pt"})
    (text / "config.json").write_text(json.dumps({**cfg["text_config"], "architectures": ["MuseGlimmerForCausalLM"]}))
    mirror_and_verify(mm, tmp_path / "mm-tp3", 3)
    mirror_and_verify(text, tmp_path / "text-tp3", 3)
    a, b = folder_tensors(tmp_path / "mm-tp3"), folder_tensors(tmp_path / "text-tp3")
    assert b and all(torch.equal(a[k.replace("model.", "model.language_model.", 1) if k != "lm_head.weight" else k], v)
                     for k, v in b.items())


def test_muse_glimmer_card():
    cfg = {**muse_glimmer_models.CONFIG, "text_config": muse_glimmer_models.TEXT}
    out = adapter_for(cfg).serving(cfg)
    assert min_vllm(out["vllm_features"])["version"] == "0.28.0" and "mm_encoder_tp_mode" not in out
