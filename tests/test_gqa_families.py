"""The GQA families with config quirks (issue 33): each tiny transformers model (tests/gqa_models.py, the published
tensor names and config form) padded at TP 3 and 6 with `hubpad mirror`, checked with `hubpad verify`, and its
float64 logits compared with the original's through the same transformers class.

Tiny geometry 4 heads / 2 kv, head_dim 8: 6 / 3 at TP 3 and 6 (kv heads replicated at TP 6). Every derivative writes head_dim (vLLM's
ERNIE-4.5, EXAONE and Cohere classes and transformers' Cohere2Config fall back to hidden_size // heads without it).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.gqa_models import FAMILIES, build, logits  # noqa: E402
from tests.helpers import assert_same_logits, mirror_and_verify  # noqa: E402

HEADS = {3: (6, 3), 6: (6, 3)}  # TP 6: kv 3 replicated twice
# Laguna's layers of 4 / 6 / 4 heads over 2 kv: at TP 6 the 6-head layers' 9 (over 3 kv) would not divide, so whole
# kv groups go on to 12 / 18 / 12 heads over 6 kv
OWN_HEADS = {("laguna", 6): (12, 6)}
PER_LAYER = {("laguna", 3): [6, 9, 6], ("laguna", 6): [12, 18, 12]}


@pytest.mark.parametrize("tp", sorted(HEADS))
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_padded_family_gives_identical_logits(tmp_path, family, tp):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build(family, src)
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    heads, kv = OWN_HEADS.get((family, tp), HEADS[tp])
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (heads, kv, 8)
    a, _ = logits(src, family)
    b, model = logits(dst, family)
    attn = model.model.layers[0].self_attn
    assert attn.q_proj.out_features == heads * 8 and attn.k_proj.out_features == kv * 8
    if (family, tp) in PER_LAYER:  # every entry of the per-layer list padded, and transformers builds each
        assert cfg["num_attention_heads_per_layer"] == PER_LAYER[family, tp]
        assert [lay.self_attn.q_proj.out_features // 8 for lay in model.model.layers] == PER_LAYER[family, tp]
    assert_same_logits(a, b, f"{family} tp{tp}")


def test_cohere_derivative_whose_heads_do_not_divide_is_refused(tmp_path):
    """vLLM's CohereAttention computes num_attention_heads // tp without checking: hubpad checks the padded config in
    plan (check_derivative on the config it writes) and a derivative's config.json in verify."""
    from hubpad.errors import ConfigError
    from hubpad.plan.adapters import adapter_for
    from hubpad.run.verify import verify_derivative
    from hubpad.source.local import LocalSource

    cfg = build("cohere2", tmp_path / "upstream")
    adapter = adapter_for(cfg)
    adapter.check_derivative({"num_attention_heads": 6, "num_key_value_heads": 3}, 3)  # shards
    with pytest.raises(ConfigError, match="do not shard at tp 3, and vLLM's CohereAttention computes"):
        adapter.check_derivative({"num_attention_heads": 4, "num_key_value_heads": 2}, 3)
    mirror_and_verify(tmp_path / "upstream", tmp_path / "padded", 3)
    config = json.loads((tmp_path / "padded" / "config.json").read_text())
    (tmp_path / "padded" / "config.json").write_text(json.dumps({**config, "num_attention_heads": 7}))
    with pytest.raises(ConfigError, match="7 attention heads / 3 kv heads do not shard at tp 3"):
        verify_derivative(LocalSource(tmp_path / "upstream"), LocalSource(tmp_path / "padded"))


def test_cohere2_moe_dense_layers_keep_their_width_when_the_config_names_none(tmp_path):
    """Without prefix_dense_intermediate_size, vLLM and transformers build Cohere2-MoE's dense layers from
    intermediate_size, the routed experts' key: the derivative writes the dense layers' own (padded) width under
    prefix_dense_intermediate_size, so the experts' padding does not change them."""
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build("cohere2_moe", src, prefix_dense_intermediate_size=None, intermediate_size=16)
    mirror_and_verify(src, dst, 3)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["intermediate_size"], cfg["prefix_dense_intermediate_size"]) == (192, 384)  # 64- vs 128-wide tiles
    a, _ = logits(src, "cohere2_moe")
    b, _ = logits(dst, "cohere2_moe")
    assert_same_logits(a, b, "cohere2_moe, dense width implicit")
