"""LongCat-Flash (`longcat_flash`): two MLA and two dense MLP sublayers per layer, routed plus zero-computation experts,
an MTP layer under `model.mtp.`; pad tiny real transformers models and compare float64 logits at TP 3 and 6.

The checkpoint carries the names vLLM 0.32's loader reads (longcat_flash.py, longcat_flash_mtp.py). transformers
holds gate/up weights for the zero-computation experts too (its fused gate_up has E + Z experts, never used) and will
not load a checkpoint without them, while the published ones have none: the logits proof keeps transformers' tensors
(padded like any expert's, and never read), and the published layout (`published=True`, without them) is planned,
mirrored and verified alike. The MTP layer (transformers ignores it) is built from layer 0's tensors under its
published names. The router may send tokens to the zero experts
(2 of 6), so identity outputs are in the logits.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402

from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.tiny_moe import assert_same_logits, randomize  # noqa: E402

TINY = dict(vocab_size=160, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False, hidden_size=64,
            ffn_hidden_size=96, expert_ffn_hidden_size=32, num_layers=2, num_attention_heads=4, q_lora_rank=48,
            kv_lora_rank=32, qk_rope_head_dim=8, head_dim=8, qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=4,
            zero_expert_num=2, moe_topk=2)
# What vLLM reads from config.json without a default (published configs set them).
VLLM_KEYS = {"mla_scale_q_lora": True, "mla_scale_kv_lora": True, "zero_expert_type": "identity"}


def build_longcat(root, published: bool = False, **overrides):
    torch.manual_seed(0)
    dims = {**TINY, **overrides}
    cfg = transformers.CONFIG_MAPPING["longcat_flash"](**dims)
    model = transformers.AutoModelForCausalLM.from_config(cfg, experts_implementation="eager").double().eval()
    randomize(model)
    path = root / "upstream"
    model.save_pretrained(path)
    tensors = load_file(path / "model.safetensors")
    e = dims["n_routed_experts"]
    if published:
        tensors = {k: v for k, v in tensors.items()
                   if not any(f".mlp.experts.{z}." in k for z in range(e, e + dims["zero_expert_num"]))}
    mtp = {"model.mtp.embed_tokens.weight": tensors["model.embed_tokens.weight"] + 0.5,
           "model.mtp.norm.weight": tensors["model.norm.weight"] + 0.5}
    for name, t in tensors.items():
        for old, new in ((".self_attn.0.", ".self_attn."), (".mlps.0.", ".transformer_layer.mlp."),
                         (".input_layernorm.0.", ".input_layernorm."),
                         (".post_attention_layernorm.0.", ".post_attention_layernorm.")):
            if name.startswith("model.layers.0.") and old in name:
                mtp[name.replace("model.layers.0.", "model.mtp.layers.0.").replace(old, new)] = t + 0.5
    gen = torch.Generator().manual_seed(7)
    h = dims["hidden_size"]
    for module, shape in {"enorm.m": (h,), "hnorm.m": (h,), "eh_proj": (h, 2 * h)}.items():
        mtp[f"model.mtp.layers.0.{module}.weight"] = torch.randn(shape, generator=gen, dtype=torch.float64)
    save_file({**tensors, **mtp}, path / "model.safetensors", metadata={"format": "pt"})
    data = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**data, **VLLM_KEYS}))
    return model, path


@pytest.mark.parametrize("tp,expert", [(3, 192), (6, 384)])
def test_longcat_padded_model_gives_identical_logits(tmp_path, tp, expert):
    model, src = build_longcat(tmp_path)
    dst = tmp_path / "padded"
    plan = make_plan(LocalSource(src), tp, shard_size=400_000)
    run_mirror(plan, LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    cfg = json.loads((dst / "config.json").read_text())
    heads = 6
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["expert_ffn_hidden_size"]) == (
        heads, heads, expert)
    assert (cfg["zero_expert_num"], cfg["n_routed_experts"]) == (2, 4)
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    for p in ["model.layers.1.self_attn.0.", "model.layers.1.self_attn.1.", "model.mtp.layers.0.self_attn."]:
        assert shapes[p + "q_b_proj.weight"] == ((96, 48), (heads * 24, 48))
        assert shapes[p + "kv_b_proj.weight"] == ((128, 32), (heads * 32, 32))
        assert shapes[p + "o_proj.weight"] == ((64, 64), (64, heads * 16))
    assert shapes["model.layers.1.mlp.experts.3.down_proj.weight"] == ((64, 32), (64, expert))
    assert not any("router" in n or "_a_proj" in n or "embed" in n or "eh_proj" in n for n in shapes)
    assert "--tool-call-parser longcat" in (dst / "README.md").read_text()

    assert_same_logits(model, dst, f"longcat_flash tp={tp}", TINY["vocab_size"])

    if tp != 3:
        return
    _, published = build_longcat(tmp_path / "published", published=True)
    assert not any(".experts.4." in t.name for t in make_plan(LocalSource(published), tp).tensors)
    run_mirror(make_plan(LocalSource(published), tp, shard_size=400_000), LocalPublisher(tmp_path / "published-tp"))
    assert verify_derivative(LocalSource(published), LocalSource(tmp_path / "published-tp"))["padded"] > 0
