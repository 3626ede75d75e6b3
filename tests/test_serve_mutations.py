"""The serving comparison catches a wrong derivative: break it on purpose and the same check must fail.

A served row is only evidence if a derivative that is wrong would fail it. Two ways a padder could go wrong, each
applied to a copy of the Llama TP=3 derivative:
- a padded head that is not zero: a pad must be zero on both sides to be inert (zero v rows alone, or zero o_proj
  columns alone, already hide the head), so one new kv head's v rows and its query heads' o_proj columns get
  values, as a padder that copied or shifted rows would leave them;
- the relabel dropped: config.json says LlamaForCausalLM with 6 heads of 32 on hidden 128, which the Llama config
  class refuses when vLLM loads it ("The hidden size (128) is not a multiple of the number of attention heads (6)").
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests import serving

torch = pytest.importorskip("torch")
from safetensors.torch import load_file, save_file  # noqa: E402

pytestmark = pytest.mark.serve


def _copy(zoo, name: str):
    derivative = zoo.derivative("llama", 3)
    broken = derivative.parent / name
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(derivative, broken)
    return derivative, broken


def test_a_padded_head_that_is_not_zero_fails(zoo):
    derivative, broken = _copy(zoo, "tp3-nonzero-pad")
    config = json.loads((broken / "config.json").read_text())
    head_dim, kv = config["head_dim"], config["num_key_value_heads"]
    group = config["num_attention_heads"] // kv
    (shard,) = broken.glob("model-*.safetensors")
    tensors = load_file(shard)
    gen = torch.Generator().manual_seed(0)
    p = "model.layers.0.self_attn."
    v, o = tensors[p + "v_proj.weight"], tensors[p + "o_proj.weight"]
    new_kv = kv - 1  # the appended kv head (2 -> 3)
    assert not v[new_kv * head_dim:].any() and not o[:, new_kv * group * head_dim:].any()  # zero as published
    v[new_kv * head_dim:] = torch.randn(v[new_kv * head_dim:].shape, generator=gen).to(v.dtype) * 0.3
    pad_o = o[:, new_kv * group * head_dim:]
    pad_o[:] = torch.randn(pad_o.shape, generator=gen).to(o.dtype) * 0.3
    save_file(tensors, shard, metadata={"format": "pt"})
    run = serving.run_vllm([serving.job(broken, 3)], broken.parent / "run-nonzero-pad", plugins=zoo.plugin(derivative))
    with pytest.raises(AssertionError, match=r"greedy tokens differ|max \|Δ logprob\|"):
        serving.assert_same_outputs(zoo.original("llama"), run.ok(0), "llama with a non-zero padded head")


def test_the_relabel_dropped_fails(zoo):
    derivative, broken = _copy(zoo, "tp3-llama-label")
    config = json.loads((broken / "config.json").read_text())
    assert config["architectures"] == ["MistralForCausalLM"]
    config.update(architectures=["LlamaForCausalLM"], model_type="llama")
    (broken / "config.json").write_text(json.dumps(config))
    run = serving.run_vllm([serving.job(broken, 3)], broken.parent / "run-llama-label", plugins=zoo.plugin(derivative))
    with pytest.raises(AssertionError, match="vLLM job 0 failed"):
        run.ok(0)
    assert "The hidden size (128) is not a multiple of the number of attention heads (6)" in run.log
