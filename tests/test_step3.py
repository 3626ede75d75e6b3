"""Step-3 (`step3_text`; stepfun-ai/step3's language model): multi-query attention whose q / k / v projections are
replicated and whose heads are sharded only through `wq` and `o_proj`, padded in whole heads and proven in float64
against a reference written after vLLM's step3_text.py (tests/step3_models.py), at TP 3 and 6; the published shape
planned header-only; the kv count other than 1 refused as vLLM refuses it.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.adapters import adapter_for  # noqa: E402
from hubpad.plan.adapters.vllm import min_vllm  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import step3_models  # noqa: E402
from tests.helpers import assert_same_logits, cli, folder_tensors, mirror_and_verify  # noqa: E402



@pytest.mark.parametrize("tp, heads", [(3, 6), (6, 6)])
def test_step3_pads_exactly(tmp_path, tp, heads):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    step3_models.build(src)
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_attention_groups"]) == (heads, 1)
    assert "num_key_value_heads" not in cfg  # the kv head is never padded: config.json keeps its own key only
    a, b = folder_tensors(src), folder_tensors(dst)
    p = "model.layers.1.self_attn."
    assert b[p + "wq.weight"].shape == (heads * 8, 16) and b[p + "o_proj.weight"].shape == (32, heads * 8)
    for name in ("q_proj", "k_proj", "v_proj", "inter_norm"):  # replicated on every rank: as they are
        assert torch.equal(a[p + name + ".weight"], b[p + name + ".weight"])
    ids = torch.randint(0, 128, (12,), generator=torch.Generator().manual_seed(1))
    before, after = step3_models.logits(src, ids), step3_models.logits(dst, ids)
    assert_same_logits(before, after, f"step3 tp{tp}")


def test_step3_refuses_more_than_one_kv_head(tmp_path):
    src = tmp_path / "upstream"
    step3_models.build(src, num_attention_groups=2)
    with pytest.raises(ConfigError, match="num_attention_groups 2: vLLM's Step3TextAttention raises unless it is 1"):
        make_plan(LocalSource(src), 3)


STEP3_321B = {**step3_models.CONFIG, "hidden_size": 7168, "intermediate_size": 18432, "num_attention_heads": 64,
              "num_hidden_layers": 61, "vocab_size": 128815, "head_dim": 256, "share_q_dim": 2048,
              "moe_intermediate_size": 5120, "moe_num_experts": 48, "moe_top_k": 3, "share_expert_dim": 5120,
              "norm_expert_weight": False, "moe_layers_enum": ",".join(str(i) for i in range(4, 60)),
              "rope_theta": 500000.0, "max_position_embedding": 65536}


def _tensors(c: dict) -> list:
    bf, h, hd, sq = "BF16", c["hidden_size"], c["head_dim"], c["share_q_dim"]
    out = [("model.embed_tokens.weight", bf, (c["vocab_size"], h)), ("model.norm.weight", bf, (h,)),
           ("lm_head.weight", bf, (c["vocab_size"], h))]
    moe = {int(i) for i in c["moe_layers_enum"].split(",")}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", bf, (h,)), (p + "post_attention_layernorm.weight", bf, (h,)),
                (p + "self_attn.q_proj.weight", bf, (sq, h)), (p + "self_attn.k_proj.weight", bf, (hd, h)),
                (p + "self_attn.v_proj.weight", bf, (hd, h)), (p + "self_attn.inter_norm.weight", bf, (sq,)),
                (p + "self_attn.wq.weight", bf, (c["num_attention_heads"] * hd, sq)),
                (p + "self_attn.o_proj.weight", bf, (h, c["num_attention_heads"] * hd))]
        if i in moe:
            e, m, s = c["moe_num_experts"], c["moe_intermediate_size"], c["share_expert_dim"]
            out += [(p + "moe.gate.weight", bf, (e, h)), (p + "moe.gate_proj.weight", bf, (e, m, h)),
                    (p + "moe.up_proj.weight", bf, (e, m, h)), (p + "moe.down_proj.weight", bf, (e, h, m)),
                    (p + "share_expert.gate_proj.weight", bf, (s, h)), (p + "share_expert.up_proj.weight", bf, (s, h)),
                    (p + "share_expert.down_proj.weight", bf, (h, s))]
        else:
            w = c["intermediate_size"]
            out += [(p + "mlp.gate_proj.weight", bf, (w, h)), (p + "mlp.up_proj.weight", bf, (w, h)),
                    (p + "mlp.down_proj.weight", bf, (h, w))]
    return out


@pytest.mark.parametrize("tp, heads, expert, shared", [(3, 66, 5184, 5376), (6, 66, 5376, 5376)])
def test_step3_published_shape_plans(tmp_path, tp, heads, expert, shared):
    """stepfun-ai/step3's language model as vLLM's own Step3TextConfig defaults state it (vllm/transformers_utils/
    configs/step3_vl.py: hidden 7168, 64 heads of 256 over one kv head, share_q_dim 2048, 48 experts of 5120 top-3 on
    layers 4-59, a shared expert of 5120, dense 18432): 64 heads -> 66 at TP 3 and 6 (22 / 11 per rank), experts to
    whole 64-wide kernel tiles per rank, the shared expert to whole 128-wide tiles; the dense MLP as it is."""
    from hubpad.testing import write_checkpoint

    src = write_checkpoint(tmp_path / "step3", STEP3_321B, _tensors(STEP3_321B), n_shards=4, header_only=True)
    result = cli("plan", src, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    new = {k: v[1] for k, v in plan["config_changes"].items()}
    assert (new["num_attention_heads"], new["moe_intermediate_size"], new["share_expert_dim"]) == (heads, expert, shared)
    assert "intermediate_size" not in new and "num_key_value_heads" not in new
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])


def test_step3_card_flags():
    out = adapter_for(STEP3_321B).serving(STEP3_321B)
    assert (out["tool_call_parser"], out["reasoning_parser"]) == ("step3", "step3")
    assert min_vllm(out["vllm_features"])["version"] == "0.10.1"
    vl = {"model_type": "step3_vl", "architectures": ["Step3VLForConditionalGeneration"], "text_config": STEP3_321B}
    out = adapter_for(vl).serving(vl)
    assert out["mm_encoder_tp_mode"] == "data" and min_vllm(out["vllm_features"])["version"] == "0.10.2"


def test_step3_vl_pads_its_language_model_as_the_text_only_one(tmp_path):
    """stepfun-ai/step3 as published is Step3VLForConditionalGeneration: the language model at `model.` / `lm_head`
    with its dims in text_config, the tower (`vision_model.*`, `vit_large_projector`) beside it. The derivative's
    language-model tensors equal the text-only derivative's byte for byte (so the float64 proof above covers them),
    and the tower is copied."""
    from safetensors.torch import save_file

    text, vl = tmp_path / "text", tmp_path / "vl"
    cfg = step3_models.build(text)
    vl.mkdir()
    tensors = folder_tensors(text)
    tower = {"vision_model.conv1.weight": torch.randn(16, 3, 4, 4), "vit_large_projector.weight": torch.randn(32, 64)}
    save_file({**tensors, **tower}, str(vl / "model.safetensors"), metadata={"format": "pt"})
    (vl / "config.json").write_text(json.dumps({"architectures": ["Step3VLForConditionalGeneration"],
                                                "model_type": "step3_vl", "text_config": cfg,
                                                "vision_config": {"hidden_size": 16}}))
    mirror_and_verify(text, tmp_path / "text-tp3", 3)
    mirror_and_verify(vl, tmp_path / "vl-tp3", 3)
    a, b = folder_tensors(tmp_path / "text-tp3"), folder_tensors(tmp_path / "vl-tp3")
    assert all(torch.equal(a[k], b[k]) for k in a) and all(torch.equal(b[k], v) for k, v in tower.items())
    out = json.loads((tmp_path / "vl-tp3" / "config.json").read_text())
    assert out["text_config"]["num_attention_heads"] == 6 and "num_key_value_heads" not in out["text_config"]
