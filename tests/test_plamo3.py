"""PLaMo 3 (`plamo3`): fused qkv_proj [q | k | v] and gate_up_proj [gate | up], each section padded at its own end
(plan/sections.py). A tiny checkpoint (sliding and full layers, GQA) is mirrored and verified at TP 3 and 6 and its
float64 logits compared with the original's through tests/plamo3_models.py's reference, written after vLLM's
plamo3.py (transformers has no class).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from tests import plamo3_models as models  # noqa: E402
from tests.helpers import assert_same_logits, folder_tensors, mirror_and_verify  # noqa: E402


@pytest.mark.parametrize("tp", [3, 6])
def test_padded_model_gives_identical_logits(tmp_path, tp):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    models.build(src)
    mirror_and_verify(src, dst, tp)
    new = json.loads((dst / "config.json").read_text())
    heads, kv, inter = new["num_attention_heads"], new["num_key_value_heads"], new["intermediate_size"]
    assert (heads, kv, inter) == {3: (6, 3, 384), 6: (6, 3, 768)}[tp] and new["head_dim"] == 16
    # each section padded at its own end: q rows, then k, then v; gate, then up
    old_t, new_t = folder_tensors(src), folder_tensors(dst)
    name = "model.layers.layers.1.mixer.qkv_proj.weight"
    q, k, v = old_t[name].split([64, 32, 32], 0)  # 4 heads, 2 kv heads of 16 -> 6 and 3
    assert [torch.equal(new_t[name][a:b], w) for a, b, w in ((0, 64, q), (96, 128, k), (144, 176, v))] == [True] * 3
    assert not new_t[name][64:96].any() and not new_t[name][128:144].any() and not new_t[name][176:].any()
    gate_up = "model.layers.layers.0.mlp.gate_up_proj.weight"
    assert torch.equal(new_t[gate_up][inter:inter + 100], old_t[gate_up][100:])
    assert not new_t[gate_up][100:inter].any()
    ids = torch.randint(0, models.TINY["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    assert_same_logits(models.logits(src, ids), models.logits(dst, ids), f"plamo3 tp={tp}")
