"""DeepSeek-V3.2, GLM-5 (BF16, FP8, NVFP4) and Hy4: config values and tensor lists of the published layouts, for
header-only plans at full scale (tests/test_dsa_scale.py).

Where each figure comes from (the Hub itself cannot be reached offline, and no copy of these repos' config.json or
model.safetensors.index.json was found in the stored sources):
- DeepSeek-V3.2 (deepseek-ai/DeepSeek-V3.2): DeepSeek-V3's published FP8 config (tests/mla_real.py) with the
  indexer's keys, index_n_heads 64, index_head_dim 128, index_topk 2048 — the values of transformers'
  DeepseekV32Config defaults and of public copies of the V3.2 config in other projects' test fixtures. Indexer
  tensors: `wq_b` and `wk` FP8 with 128×128 `weight_scale_inv` blocks, `k_norm` (weight, bias) and `weights_proj`
  BF16, as vLLM's loader expects them (deepseek_v2.py `_try_load_fp8_indexer_wk`: "WK is stored in FP8 with a
  separate weight_scale_inv, while weights_proj is stored in BF16"); the dtypes are not confirmed against the index.
- GLM-5 (zai-org/GLM-5): transformers' GlmMoeDsaConfig defaults, documented against that checkpoint (hidden 6144, 78
  layers, 64 heads, q_lora 2048, kv_lora 512, qk_nope 192, qk_rope 64, v 256, 256 experts of 2048, dense 12288 on
  3 layers, index 32 × 128, vocab 154880) and one MTP layer; BF16. GLM-5-FP8: the same in DeepSeek's block-FP8
  format (quant_method fp8, 128×128 `weight_scale_inv`; GLM-4.5-FP8's format), indexer wq_b / wk FP8 as above.
  GLM-5-NVFP4: a ModelOpt NVFP4 layout (hf_quant_config.json; routed and shared experts NVFP4 with group 16,
  attention, indexer, dense layers and MTP kept BF16) reconstructed, not read.
- LongCat-Flash (meituan-longcat/LongCat-Flash-Chat): transformers' LongcatFlashConfig defaults (hidden 6144, 28
  layers of two MLA + two dense MLP sublayers, 64 heads, q_lora 1536, kv_lora 512, qk_nope 128, qk_rope 64, v 128,
  512 routed experts of 2048 plus 256 zero-computation experts, dense 12288, vocab 131072), BF16, the names vLLM's
  longcat_flash loader reads, one MTP layer under `model.mtp.`.
- Hy4 (tencent/Hy4-preview, the checkpoint transformers' HYV4Config documents): its defaults (hidden 2816, 34
  layers, 32 heads, q_lora 1536, kv_lora 512, qk_nope 192, qk_rope 64, v 256, 256 experts of 768, dense 6912 on one
  layer, index 16 × 128, hc_mult 4, vocab 120832), BF16, fused routed experts (the layout transformers loads), the
  names vLLM's hy_v4 loader reads, one MTP layer.
"""

from __future__ import annotations

from tests.mla_real import DEEPSEEK_V3_CONFIG
from tests.moe_real import Tensors, checkpoint

_FP8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
_INDEX = {"index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048}

DEEPSEEK_V32_CONFIG = dict(DEEPSEEK_V3_CONFIG, model_type="deepseek_v32", architectures=["DeepseekV32ForCausalLM"],
                           **_INDEX)
GLM5_CONFIG = {
    "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "attention_bias": False,
    "hidden_act": "silu", "hidden_size": 6144, "intermediate_size": 12288, "moe_intermediate_size": 2048,
    "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64, "n_shared_experts": 1,
    "n_routed_experts": 256, "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 2048,
    "qk_rope_head_dim": 64, "v_head_dim": 256, "qk_nope_head_dim": 192, "n_group": 1, "topk_group": 1,
    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "norm_topk_prob": True, "topk_method": "noaux_tc",
    "scoring_func": "sigmoid", "max_position_embeddings": 202752, "rms_norm_eps": 1e-05, "vocab_size": 154880,
    "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 32, "num_nextn_predict_layers": 1,
    "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"}, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
GLM5_FP8_CONFIG = dict(GLM5_CONFIG, quantization_config=_FP8)
HY4_CONFIG = {
    "architectures": ["HYV4ForCausalLM"], "model_type": "hy_v4", "vocab_size": 120832, "hidden_size": 2816,
    "intermediate_size": 6912, "moe_intermediate_size": 768, "num_hidden_layers": 34, "num_attention_heads": 32,
    "num_key_value_heads": 32, "hidden_act": "silu", "max_position_embeddings": 262144, "rms_norm_eps": 1e-05,
    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "routed_scaling_factor": 2.827,
    "norm_topk_prob": True, "n_group": 1, "topk_group": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
    "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256, "index_topk": 2048, "index_head_dim": 128,
    "index_n_heads": 16, "hc_mult": 4, "hc_magnitude": 2.0, "hc_eps": 1e-06, "gated_mla": True,
    "gating_type": "elementwise", "learnable_sink": True, "enable_ihc": True, "swiglu_limit": 10.0,
    "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "mlp_layer_types": ["dense"] + ["sparse"] * 33,
}


def _bf16(name: str, out_f: int, in_f: int) -> Tensors:
    return [(f"{name}.weight", "BF16", (out_f, in_f))]


def _fp8(name: str, out_f: int, in_f: int) -> Tensors:
    return [(f"{name}.weight", "F8_E4M3", (out_f, in_f)),
            (f"{name}.weight_scale_inv", "F32", (-(-out_f // 128), -(-in_f // 128)))]


def _nvfp4(name: str, out_f: int, in_f: int) -> Tensors:
    return [(f"{name}.weight", "U8", (out_f, in_f // 2)), (f"{name}.weight_scale", "F8_E4M3", (out_f, in_f // 16)),
            (f"{name}.weight_scale_2", "F32", ()), (f"{name}.input_scale", "F32", ())]


def _dsa_attention(attn_linear, indexer_linear):
    def attention(cfg: dict, i: int) -> Tensors:
        h, heads, p = cfg["hidden_size"], cfg["num_attention_heads"], f"model.layers.{i}.self_attn."
        nope, rope, v, lq, lkv = (cfg[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                                    "q_lora_rank", "kv_lora_rank"))
        ih, idim = cfg["index_n_heads"], cfg["index_head_dim"]
        out = [(p + "q_a_layernorm.weight", "BF16", (lq,)), (p + "kv_a_layernorm.weight", "BF16", (lkv,))]
        out += attn_linear(p + "q_a_proj", lq, h) + attn_linear(p + "q_b_proj", heads * (nope + rope), lq)
        out += attn_linear(p + "kv_a_proj_with_mqa", lkv + rope, h)
        out += attn_linear(p + "kv_b_proj", heads * (nope + v), lkv) + attn_linear(p + "o_proj", h, heads * v)
        out += indexer_linear(p + "indexer.wq_b", ih * idim, lq) + indexer_linear(p + "indexer.wk", idim, h)
        out += [(p + "indexer.k_norm.weight", "BF16", (idim,)), (p + "indexer.k_norm.bias", "BF16", (idim,)),
                (p + "indexer.weights_proj.weight", "BF16", (ih, h))]
        return out
    return attention


def dsa_tensors(cfg: dict) -> Tensors:
    """Every tensor of a DeepSeek-V3.2 / GLM-5 checkpoint in its config's format, MTP layer included."""
    fp8 = (cfg.get("quantization_config") or {}).get("quant_method") == "fp8"
    linear = _fp8 if fp8 else _bf16
    return checkpoint(cfg, _dsa_attention(linear, linear), linear)


def glm5_nvfp4_tensors(cfg: dict) -> Tensors:
    """GLM-5 in ModelOpt NVFP4: routed and shared experts NVFP4, the rest BF16 (hf_quant_config's exclude list)."""
    def expert_linear(name: str, out_f: int, in_f: int) -> Tensors:
        dense = any(f"model.layers.{i}.mlp." in name for i in range(cfg["first_k_dense_replace"]))
        return (_bf16 if dense or f"model.layers.{cfg['num_hidden_layers']}." in name else _nvfp4)(name, out_f, in_f)
    return checkpoint(cfg, _dsa_attention(_bf16, _bf16), expert_linear)


GLM5_NVFP4_QUANT = {"producer": {"name": "modelopt", "version": "0.41.0"},
                    "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                                     "exclude_modules": ["lm_head", "model.layers.*.self_attn*",
                                                         "model.layers.0.mlp*", "model.layers.1.mlp*",
                                                         "model.layers.2.mlp*", "model.layers.78*"]}}


def hy4_tensors(cfg: dict) -> Tensors:
    """Every tensor of Hy4 as vLLM's hy_v4 loader names them: gated MLA with sinks, indexer, iHC, fused experts."""
    h, n, vocab, hc = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"], cfg["hc_mult"]
    heads, v = cfg["num_attention_heads"], cfg["v_head_dim"]
    moe, e = cfg["moe_intermediate_size"], cfg["n_routed_experts"]
    attention = _dsa_attention(_bf16, _bf16)
    out = [("model.embed_tokens.weight", "BF16", (vocab, h))]
    for i in range(n + cfg["num_nextn_predict_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", "BF16", (h,)), (p + "post_attention_layernorm.weight", "BF16", (h,))]
        out += attention(cfg, i) + _bf16(p + "self_attn.linear_gate", heads * v, h)
        out += [(p + "self_attn.learnable_sink_param", "F32", (heads,))]
        if i == 0:
            inter = cfg["intermediate_size"]
            out += _bf16(p + "mlp.gate_proj", inter, h) + _bf16(p + "mlp.up_proj", inter, h)
            out += _bf16(p + "mlp.down_proj", h, inter)
        else:
            out += [(p + "mlp.gate.weight", "F32", (e, h)), (p + "mlp.gate.e_score_correction_bias", "F32", (e,)),
                    (p + "mlp.experts.gate_up_proj", "BF16", (e, 2 * moe, h)),
                    (p + "mlp.experts.down_proj", "BF16", (e, h, moe))]
            out += _bf16(p + "mlp.shared_experts.gate_proj", moe, h) + _bf16(p + "mlp.shared_experts.up_proj", moe, h)
            out += _bf16(p + "mlp.shared_experts.down_proj", h, moe)
        if i < n:
            for block in ("hc_attn_layer", "hc_mlp_layer"):
                out += [(p + f"{block}.hc_fn", "F32", (2 * hc, hc * h)),  # shapes as transformers' HYV4HyperConnection
                        (p + f"{block}.hc_base", "F32", (2 * hc,)), (p + f"{block}.hc_scale", "F32", (2,))]
        else:
            out += [(p + "enorm.weight", "BF16", (h,)), (p + "hnorm.weight", "BF16", (h,)),
                    (p + "eh_proj.weight", "BF16", (h, 2 * h)), (p + "shared_head.norm.weight", "BF16", (h,)),
                    (p + "final_layernorm.weight", "BF16", (h,))]
    out += [("model.hc_head.hc_head_fn", "F32", (hc, hc * h)), ("model.hc_head.hc_head_base", "F32", (hc,)),
            ("model.hc_head.hc_head_scale", "F32", (1,))]
    return out + [("model.norm.weight", "BF16", (h,)), ("lm_head.weight", "F32", (vocab, h))]


LONGCAT_FLASH_CONFIG = {
    "architectures": ["LongcatFlashForCausalLM"], "model_type": "longcat_flash", "vocab_size": 131072,
    "hidden_size": 6144, "num_layers": 28, "num_attention_heads": 64, "num_key_value_heads": 64,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "ffn_hidden_size": 12288, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "head_dim": 64, "v_head_dim": 128,
    "moe_topk": 12, "n_routed_experts": 512, "zero_expert_num": 256, "zero_expert_type": "identity",
    "expert_ffn_hidden_size": 2048, "routed_scaling_factor": 6.0, "mla_scale_q_lora": True,
    "mla_scale_kv_lora": True, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def longcat_tensors(cfg: dict) -> Tensors:
    """Every tensor of LongCat-Flash as vLLM's loader names them (BF16), the `model.mtp.` layer included."""
    h, vocab, heads = cfg["hidden_size"], cfg["vocab_size"], cfg["num_attention_heads"]
    nope, rope, v, lq, lkv = (cfg[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "q_lora_rank",
                                                "kv_lora_rank"))
    ffn, moe, e = cfg["ffn_hidden_size"], cfg["expert_ffn_hidden_size"], cfg["n_routed_experts"]

    def mla(p: str) -> Tensors:
        return ([(p + "q_a_layernorm.weight", "BF16", (lq,)), (p + "kv_a_layernorm.weight", "BF16", (lkv,))]
                + _bf16(p + "q_a_proj", lq, h) + _bf16(p + "q_b_proj", heads * (nope + rope), lq)
                + _bf16(p + "kv_a_proj_with_mqa", lkv + rope, h) + _bf16(p + "kv_b_proj", heads * (nope + v), lkv)
                + _bf16(p + "o_proj", h, heads * v))

    def mlp(p: str, inter: int) -> Tensors:
        return _bf16(p + "gate_proj", inter, h) + _bf16(p + "up_proj", inter, h) + _bf16(p + "down_proj", h, inter)

    out = [("model.embed_tokens.weight", "BF16", (vocab, h))]
    for i in range(cfg["num_layers"]):
        p = f"model.layers.{i}."
        for j in (0, 1):
            out += [(p + f"input_layernorm.{j}.weight", "BF16", (h,)),
                    (p + f"post_attention_layernorm.{j}.weight", "BF16", (h,))]
            out += mla(p + f"self_attn.{j}.") + mlp(p + f"mlps.{j}.", ffn)
        out += [(p + "mlp.router.classifier.weight", "F32", (e + cfg["zero_expert_num"], h)),
                (p + "mlp.router.e_score_correction_bias", "F32", (e + cfg["zero_expert_num"],))]
        for k in range(e):
            out += mlp(p + f"mlp.experts.{k}.", moe)
    m = "model.mtp.layers.0."
    out += [("model.mtp.embed_tokens.weight", "BF16", (vocab, h)), ("model.mtp.norm.weight", "BF16", (h,)),
            (m + "enorm.m.weight", "BF16", (h,)), (m + "hnorm.m.weight", "BF16", (h,)),
            (m + "eh_proj.weight", "BF16", (h, 2 * h)), (m + "input_layernorm.weight", "BF16", (h,)),
            (m + "post_attention_layernorm.weight", "BF16", (h,))]
    out += mla(m + "self_attn.") + mlp(m + "transformer_layer.mlp.", ffn)
    return out + [("model.norm.weight", "BF16", (h,)), ("lm_head.weight", "BF16", (vocab, h))]
