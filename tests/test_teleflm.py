"""Tele-FLM / FLM-2 (`TeleFLMForCausalLM`): Llama with muP multipliers. A tiny checkpoint (multi-head, as FLM-2-52B:
64 heads, no kv key) is mirrored and verified at TP 3 and 6, its float64 logits equal to the original's through
tests/teleflm_models.py's reference (vLLM's teleflm.py: Llama, logits x output_mult / mup_scale_factor), the muP
scalars kept, head_dim written; a GQA one keeps its groups whole (kv 3 replicated at TP 6).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests import teleflm_models as models  # noqa: E402
from tests.helpers import assert_same_logits, mirror_and_verify  # noqa: E402


@pytest.mark.parametrize("tp", [3, 6])
@pytest.mark.parametrize("kv", [4, 2])
def test_padded_model_gives_identical_logits(tmp_path, tp, kv):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    models.build(src, num_key_value_heads=kv)
    mirror_and_verify(src, dst, tp)
    new = json.loads((dst / "config.json").read_text())
    heads, kv2 = new["num_attention_heads"], new["num_key_value_heads"]
    assert (heads, kv2) == {(4, 3): (6, 6), (4, 6): (6, 6), (2, 3): (6, 3), (2, 6): (6, 3)}[kv, tp]
    assert new["head_dim"] == 16 and {k: new[k] for k in models.MUP} == models.MUP
    assert new["intermediate_size"] == {3: 384, 6: 768}[tp]
    ids = torch.randint(0, models.TINY["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    assert_same_logits(models.logits(src, ids), models.logits(dst, ids), f"teleflm kv={kv} tp={tp}")
