"""Plan meta-llama/Llama-3.3-70B-Instruct at its real shapes (80 layers, 64 heads / 8 kv, hidden 8192,
intermediate 28672, vocab 128256, llama3 rope) from headers over sparse files, in BF16, GPTQ and AWQ int4:
TP=3 gives 72 / 9 heads under the MistralForCausalLM label and a kernel-aligned 28800 intermediate."""

from __future__ import annotations

import json

import pytest

from hubpad.testing import write_checkpoint
from tests.helpers import cli
from tests.real_models import LLAMA33_70B

PROJ = {"self_attn.q_proj": (8192, 8192), "self_attn.k_proj": (1024, 8192), "self_attn.v_proj": (1024, 8192),
        "self_attn.o_proj": (8192, 8192), "mlp.gate_proj": (28672, 8192), "mlp.up_proj": (28672, 8192),
        "mlp.down_proj": (8192, 28672)}  # (out N, in K)
GROUP = 128


def _linear(prefix: str, out_f: int, in_f: int, fmt: str) -> list:
    if fmt == "bf16":
        return [(f"{prefix}.weight", "BF16", (out_f, in_f))]
    g = in_f // GROUP
    if fmt == "gptq":
        return [(f"{prefix}.qweight", "I32", (in_f // 8, out_f)), (f"{prefix}.qzeros", "I32", (g, out_f // 8)),
                (f"{prefix}.scales", "F16", (g, out_f)), (f"{prefix}.g_idx", "I32", (in_f,))]
    return [(f"{prefix}.qweight", "I32", (in_f, out_f // 8)), (f"{prefix}.qzeros", "I32", (g, out_f // 8)),
            (f"{prefix}.scales", "F16", (g, out_f))]


def _tensors(fmt: str) -> list:
    dt = "BF16" if fmt == "bf16" else "F16"
    out = [("model.embed_tokens.weight", dt, (128256, 8192))]
    for i in range(80):
        p = f"model.layers.{i}."
        for name, (n, k) in PROJ.items():
            out += _linear(p + name, n, k, fmt)
        out += [(p + "input_layernorm.weight", dt, (8192,)), (p + "post_attention_layernorm.weight", dt, (8192,))]
    return out + [("model.norm.weight", dt, (8192,)), ("lm_head.weight", dt, (128256, 8192))]


QUANT = {
    "bf16": None,
    "gptq": {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False, "sym": True,
             "checkpoint_format": "gptq"},
    "awq": {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm"},
}


@pytest.fixture(scope="module", params=sorted(QUANT))
def llama70b(request, tmp_path_factory):
    cfg = dict(LLAMA33_70B)
    if QUANT[request.param]:
        cfg["quantization_config"] = QUANT[request.param]
    path = tmp_path_factory.mktemp("llama70b") / f"Llama-3.3-70B-Instruct-{request.param}"
    return request.param, write_checkpoint(path, cfg, _tensors(request.param), n_shards=30, header_only=True)


def test_llama70b_plans_72_9_heads_at_tp3(llama70b):
    fmt, src = llama70b
    result = cli("plan", src, "--tp", "3", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    after = {d["config_key"]: d["after"] for d in plan["dims"]}
    assert (after["num_attention_heads"], after["num_key_value_heads"], after["head_dim"]) == (72, 9, 128)
    # 28672 / 3 is not whole; 9600 = 75·128 per rank is the next whole 128-wide tile (Marlin K%128, N%64, g 128)
    assert after["intermediate_size"] == 28800
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    assert plan["architecture"]["relabelled"]["to"]["architectures"] == ["MistralForCausalLM"]
    assert plan["config_changes"]["model_type"] == ["llama", "mistral"]
    assert not plan["vocab"]["patch_needed"]  # 128256 = 3 · 42752
    shapes = {c["name"]: (c["before"], c["after"]) for c in plan["changed_tensors"]}
    p = "model.layers.79."
    if fmt == "bf16":
        assert shapes[p + "self_attn.q_proj.weight"] == ([8192, 8192], [9216, 8192])
        assert shapes[p + "mlp.down_proj.weight"] == ([8192, 28672], [8192, 28800])
    elif fmt == "gptq":
        assert shapes[p + "self_attn.o_proj.qweight"] == ([1024, 8192], [1152, 8192])
        assert shapes[p + "self_attn.k_proj.qzeros"] == ([64, 128], [64, 144])
        assert shapes[p + "mlp.down_proj.scales"] == ([224, 8192], [225, 8192])
        assert shapes[p + "mlp.down_proj.g_idx"] == ([28672], [28800])
    else:
        assert shapes[p + "self_attn.o_proj.qweight"] == ([8192, 1024], [9216, 1024])
        assert shapes[p + "mlp.gate_proj.qweight"] == ([8192, 3584], [8192, 3600])
        assert shapes[p + "mlp.up_proj.qzeros"] == ([64, 3584], [64, 3600])
    assert plan["quantization"]["formats"] == [fmt]


def test_llama70b_plan_text(llama70b):
    fmt, src = llama70b
    out = cli("plan", src, "--tp", "3").output
    for needle in ("72", "9", "28800", "LlamaForCausalLM → MistralForCausalLM", "same Llama code"):
        assert needle in out
