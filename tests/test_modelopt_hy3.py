"""Hy3 in ModelOpt NVFP4 layout (LibertAIDAI/Hy3-NVFP4 style): transformers-native MoE spellings, W4A16 experts."""

from __future__ import annotations

import json

from hubpad.run.verify import verify_derivative
from hubpad.source.local import LocalSource
from hubpad.testing import TINY_HY3, write_checkpoint
from tests.helpers import cli


def _modelopt_linear(name, out_f, in_f):
    return [(f"{name}.weight", "U8", (out_f, in_f // 2)), (f"{name}.weight_scale", "F8_E4M3", (out_f, in_f // 16)),
            (f"{name}.weight_scale_2", "F32", ()), (f"{name}.input_scale", "F32", ())]


def _bf16(name, out_f, in_f):
    return [(f"{name}.weight", "BF16", (out_f, in_f))]


def modelopt_hy3(path, quant_algo="W4A16_NVFP4"):
    cfg = dict(TINY_HY3)
    h, hd, e = cfg["hidden_size"], cfg["head_dim"], cfg["expert_hidden_dim"]
    t = [("model.embed_tokens.weight", "BF16", (cfg["vocab_size"], h))]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        t += _bf16(f"{p}.self_attn.q_proj", 4 * hd, h) + _bf16(f"{p}.self_attn.k_proj", 2 * hd, h)
        t += _bf16(f"{p}.self_attn.v_proj", 2 * hd, h) + _bf16(f"{p}.self_attn.o_proj", h, 4 * hd)
        t += [(f"{p}.self_attn.q_norm.weight", "BF16", (hd,)), (f"{p}.self_attn.k_norm.weight", "BF16", (hd,)),
              (f"{p}.input_layernorm.weight", "BF16", (h,)), (f"{p}.post_attention_layernorm.weight", "BF16", (h,))]
        if layer == 0:
            i = cfg["intermediate_size"]
            t += _bf16(f"{p}.mlp.gate_proj", i, h) + _bf16(f"{p}.mlp.up_proj", i, h) + _bf16(f"{p}.mlp.down_proj", h, i)
            continue
        # transformers-native spellings: mlp.gate, e_score_correction_bias, shared_experts
        t += [(f"{p}.mlp.gate.weight", "BF16", (cfg["num_experts"], h)),
              (f"{p}.mlp.e_score_correction_bias", "F32", (cfg["num_experts"],))]
        for x in [f"{p}.mlp.shared_experts"] + [f"{p}.mlp.experts.{k}" for k in range(cfg["num_experts"])]:
            t += _modelopt_linear(f"{x}.gate_proj", e, h) + _modelopt_linear(f"{x}.up_proj", e, h)
            t += _modelopt_linear(f"{x}.down_proj", h, e)
    t += [("model.norm.weight", "BF16", (h,)), ("lm_head.weight", "BF16", (cfg["vocab_size"], h))]
    cfg = {k: v for k, v in cfg.items() if k != "num_nextn_predict_layers"}
    hf_quant = {"producer": {"name": "modelopt", "version": "0.41.0"},
                "quantization": {"quant_algo": quant_algo, "kv_cache_quant_algo": None, "group_size": 16,
                                 "exclude_modules": ["lm_head", "model.layers.*.self_attn*", "model.layers.0.mlp*"]}}
    return write_checkpoint(path, cfg, t, n_shards=2, extra_files={"hf_quant_config.json": json.dumps(hf_quant)})


def test_modelopt_hy3_pads_and_serves_with_marlin_moe(tmp_path):
    src = modelopt_hy3(tmp_path / "up")
    dst = tmp_path / "tp3"
    r = cli("mirror", src, "--tp", "3", "--to", dst)
    assert r.exit_code == 0, r.output
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]) == (6, 3, 768)
    assert json.loads((dst / "hf_quant_config.json").read_text())["quantization"]["quant_algo"] == "W4A16_NVFP4"
    manifest = json.loads((dst / "hubpad.json").read_text())
    assert manifest["serving"]["extra_args"][-2:] == ["--moe-backend", "marlin"]
    assert "--moe-backend marlin" in (dst / "README.md").read_text()
    recipe = next(dst.glob("*.yaml")).read_text()
    assert "--moe-backend marlin" in recipe
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0


def test_w4a4_modelopt_gets_no_marlin_flag(tmp_path):
    src = modelopt_hy3(tmp_path / "up", quant_algo="NVFP4")
    dst = tmp_path / "tp3"
    assert cli("mirror", src, "--tp", "3", "--to", dst).exit_code == 0
    assert "--moe-backend" not in (dst / "README.md").read_text()
