"""An unquantized checkpoint is named by its own dtype (fp32 / fp16 / bf16) in the plan and the card's manifest,
never "bf16" whatever it holds."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("tag", sorted(DTYPES))
def test_dense_checkpoint_is_tagged_by_its_dtype(tmp_path, tag):
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                                   num_hidden_layers=1, vocab_size=96, head_dim=16)
    transformers.LlamaForCausalLM(cfg).to(DTYPES[tag]).save_pretrained(tmp_path / "src")

    plan = make_plan(LocalSource(tmp_path / "src"), 3)
    assert plan.formats == [tag]

    run_mirror(plan, LocalPublisher(tmp_path / "dst"))
    manifest = json.loads((tmp_path / "dst" / "hubpad.json").read_text())
    assert manifest["quantization"]["formats"] == [tag]
