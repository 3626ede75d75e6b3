"""gpt-oss (`gpt_oss`) with its native MXFP4 experts: pad a tiny real transformers model at TP=3 and TP=6 and
compare float64 logits; plan the real 120b/20b configs from headers; refuse a TP its experts cannot serve at.

The tiny checkpoint is written the way OpenAI ships gpt-oss: attention, router, embeddings in BF16/F32, routed
experts as MXFP4 `_blocks` (two E2M1 codes per byte) with e8m0 `_scales` and BF16 `_bias`, dequantized with
transformers' own MXFP4 dequantizer (in float64), both before and after padding. Only attention is padded
(whole GQA groups, q/k/v biases, zero sinks for the new heads); the MXFP4 expert bytes are copied unchanged,
because vLLM needs no expert padding at TP=3/6 (intermediate 2880 = 3 × 960 = 6 × 480, whole 32-blocks per rank).
(transformers' MXFP4 loader needs accelerate, so the test dequantizes with its `convert_moe_packed_tensors`.)
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402
from transformers.integrations.mxfp4 import convert_moe_packed_tensors  # noqa: E402

from hubpad.errors import HubpadError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from hubpad.testing import write_checkpoint  # noqa: E402
from tests.helpers import cli  # noqa: E402
from tests.gpt_oss_models import mxfp4_gpt_oss  # noqa: E402
from tests.gpt_oss_real import GPT_OSS_SIZES, gpt_oss_real  # noqa: E402

E, H, I, VOCAB = 4, 64, 192, 160  # I = 192: whole 32-wide MXFP4 blocks on each of 3 or 6 ranks


def _mxfp4_checkpoint(path):
    """A tiny gpt-oss saved by transformers, its experts replaced by random MXFP4 codes and scales."""
    mxfp4_gpt_oss(path, hidden=H, intermediate=I, experts=E, vocab=VOCAB, heads=4, kv=2, head_dim=16)


def _logits(path, ids):
    """Logits in float64 with the experts dequantized by transformers' own MXFP4 dequantizer."""
    config = json.loads((path / "config.json").read_text())
    del config["quantization_config"]
    model = transformers.AutoModelForCausalLM.from_config(transformers.GptOssConfig(**config),
                                                          experts_implementation="eager").double().eval()
    state = {}
    for f in path.glob("*.safetensors"):
        state.update(load_file(f))
    for name in [n for n in state if n.endswith("_blocks")]:
        base = name[:-len("_blocks")]
        state[base] = convert_moe_packed_tensors(state.pop(name), state.pop(base + "_scales"), dtype=torch.float64)
    model.load_state_dict({k: v.double() for k, v in state.items()})
    with torch.no_grad():
        return model(ids).logits


@pytest.mark.parametrize("tp,heads,kv", [(3, 6, 3), (6, 6, 3)])
def test_gpt_oss_mxfp4_padded_model_gives_identical_logits(tmp_path, tp, heads, kv):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    _mxfp4_checkpoint(src)
    plan = make_plan(LocalSource(src), tp, shard_size=400_000)
    run_mirror(plan, LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]) == (heads, kv, I)
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    assert shapes["model.layers.1.self_attn.sinks"] == ((4,), (heads,))
    assert shapes["model.layers.1.self_attn.k_proj.bias"] == ((32,), (kv * 16,))
    assert not any(".experts." in n for n in shapes)  # MXFP4 expert bytes copied as they are
    sinks = {k: v for f in dst.glob("*.safetensors") for k, v in load_file(f).items()}  # new heads' sinks: 0.0
    assert torch.equal(sinks["model.layers.0.self_attn.sinks"][4:], torch.zeros(heads - 4, dtype=torch.bfloat16))
    card = (dst / "README.md").read_text()
    assert "--tool-call-parser openai" in card and "--reasoning-parser openai_gptoss" in card
    assert "vLLM 0.10.2 or newer" in card  # the openai / openai_gptoss parsers (plan/adapters/vllm.py)

    ids = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    a, b = _logits(src, ids), _logits(dst, ids)
    delta = (a - b).abs().max().item()
    print(f"gpt-oss MXFP4 tp={tp}: max |Δ| = {delta}")
    assert torch.isfinite(a).all() and delta <= 1e-12 * a.abs().max().item()


def test_gpt_oss_refuses_a_tp_its_experts_cannot_serve_at(tmp_path):
    _mxfp4_checkpoint(tmp_path / "upstream")
    # vLLM asserts intermediate_size % tp == 0 (its MXFP4 loader then slices whole 32-blocks per rank, uneven
    # at the last rank), so 192 serves at TP 4 but not at TP 5.
    with pytest.raises(HubpadError, match=r"intermediate_size 192 % tp 5 != 0, which vLLM's gpt-oss refuses"):
        make_plan(LocalSource(tmp_path / "upstream"), 5)


@pytest.mark.parametrize("repo", sorted(GPT_OSS_SIZES))
def test_gpt_oss_plan_at_real_scale(tmp_path, repo):
    cfg, tensors = gpt_oss_real(*GPT_OSS_SIZES[repo])
    src = write_checkpoint(tmp_path / repo.split("/")[1], cfg, tensors, n_shards=3, header_only=True)
    for tp, heads, kv in ((3, 72, 9), (6, 96, 12)):
        result = cli("plan", src, "--tp", str(tp), "--json")
        assert result.exit_code == 0, result.output
        plan = json.loads(result.output)
        after = {d["config_key"]: d["after"] for d in plan["dims"]}
        assert after == {"num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": 64}
        shapes = {c["name"]: (c["before"], c["after"]) for c in plan["changed_tensors"]}
        assert shapes["model.layers.3.self_attn.sinks"] == ([64], [heads])
        assert shapes["model.layers.3.self_attn.q_proj.weight"] == ([4096, 2880], [heads * 64, 2880])
        assert not any(".experts." in n for n in shapes) and all(r["ok"] for r in plan["rank_table"] if r["required"])
