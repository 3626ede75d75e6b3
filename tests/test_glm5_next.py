"""GLM-5-Next (GLM-5.3-Flash's architecture) at TP=3 and TP=6: KDA layers (plan/kda.py, proven on Kimi-Linear in
tests/test_kda.py) and DSA layers (adapters/dsa.py from the `dsa` branch: NoPE MLA heads padded, the indexer and its
k-pool compression copied), mHC copied, MoE widths padded, vision tower copied, MTP layer padded like a DSA layer.

A tiny Glm5NextForConditionalGeneration built with transformers (tests/linear_models.py) is mirrored with hubpad; its
float64 logits on a prompt holding an image must equal the original's exactly, and hubpad verify must pass.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "Glm5NextForConditionalGeneration"):
    pytest.skip("transformers has no GLM-5-Next", allow_module_level=True)

from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import linear_models  # noqa: E402
from tests.helpers import mirror_and_verify  # noqa: E402

LM = "model.language_model."
AFTER = {3: (6, 6, 192), 6: (6, 6, 384)}  # tp -> (KDA heads, MLA heads, expert width)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    src = linear_models.build_glm5_next(tmp_path_factory.mktemp("glm5-next") / "upstream")
    return src, linear_models.glm5_logits(src)


@pytest.mark.parametrize("tp", [3, 6])
def test_glm5_next_pads_exactly(tmp_path, upstream, tp):
    src, before = upstream
    dst = tmp_path / "padded"
    mirror_and_verify(src, dst, tp)

    text = json.loads((dst / "config.json").read_text())["text_config"]
    kda_heads, mla_heads, experts = AFTER[tp]
    assert (text["linear_num_heads"], text["num_attention_heads"], text["num_key_value_heads"],
            text["moe_intermediate_size"]) == (kda_heads, mla_heads, mla_heads, experts)

    shapes = {t.name: (t.src.shape, t.shape) for t in make_plan(LocalSource(src), tp).tensors if t.padded}
    kda = LM + "layers.0.self_attn."
    assert shapes[kda + "q_proj.weight"] == ((64, 64), (kda_heads * 16, 64))
    assert shapes[kda + "A_log"] == ((4,), (kda_heads,))
    assert shapes[kda + "g_b_proj.weight"] == ((64, 16), (kda_heads * 16, 16))
    for layer in (3, 4):  # the DSA layer and the MTP layer
        dsa = f"{LM}layers.{layer}.self_attn."
        assert shapes[dsa + "q_b_proj.weight"] == ((64, 24), (mla_heads * 16, 24))  # NoPE: 16 rows a head
        assert shapes[dsa + "kv_b_proj.weight"] == ((128, 16), (mla_heads * 32, 16))
    copied = ("indexer", "hc_", "model.visual.", "eh_proj", "f_a_proj", "g_a_proj", "o_norm", "kv_a_proj")
    assert not [n for n in shapes if any(c in n for c in copied)]

    after = linear_models.glm5_logits(dst)
    delta = (before - after).abs().max().item()
    print(f"glm5_next TP={tp}: float64 max |Δ| = {delta} (max |logit| {before.abs().max().item():.1f})")
    assert delta == 0.0
