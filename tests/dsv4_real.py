"""DeepSeek-V4-Flash and DeepSeek-V4-Pro: their public config.json values and tensor list, for header-only plans.

Sources (offline, through stored public code; the Hub itself was not reachable):
- config.json: V4-Flash as transcribed verbatim in third-party code that pins it by sha256 (the DSpark variant's keys
  `dspark_*` and its 46-entry compress_ratios left out: V4-Flash ships 44, [0, 0] + [4, 128] × 20 + [4, 0]);
  V4-Pro as written out in full by another (hidden 7168, 61 layers, 128 heads, 16 o_groups, q_lora_rank 1536,
  384 experts of 3072, compress_ratios [128, 128] + [4, 128] × 29 + [4, 0]).
- the tensor list: names as DeepSeek's model.safetensors.index.json gives them (82 patterns; an independent
  checkpoint-inventory oracle enumerates them), dtypes and shapes as its FP8 / MXFP4 contract states (FP8 e4m3
  weights with an e8m0 `.scale` per 128 × 128 block for wq_a, wq_b, wkv, wo_a, wo_b, the indexer's wq_b, the
  shared expert and the MTP e_proj / h_proj; routed experts I8 (two e2m1 codes a byte) with an e8m0 scale per 32;
  BF16 embed, head, norms, compressors, router and indexer weights_proj; F32 sinks, ape, hyper-connections and router
  bias; the hash routers' tid2eid I64 [vocab, 6]).
Checked for V4-Flash against the index's published figures: 69,187 tensors (1,575 under mtp.0.) and total_size
159,609,485,896 bytes, both reproduced exactly by `flash_tensors()` (tests/test_dsv4_scale.py). For V4-Pro no
published total was found offline: its list follows the same rules at Pro's dims, unconfirmed.
"""

from __future__ import annotations

Tensors = list[tuple[str, str, tuple[int, ...]]]

_QUANT = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0",
          "weight_block_size": [128, 128]}
_COMMON = {
    "architectures": ["DeepseekV4ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 0,
    "eos_token_id": 1, "expert_dtype": "fp4", "hc_eps": 1e-06, "hc_mult": 4, "hc_sinkhorn_iters": 20, "head_dim": 512,
    "hidden_act": "silu", "index_head_dim": 128, "index_n_heads": 64, "initializer_range": 0.02,
    "max_position_embeddings": 1048576, "model_type": "deepseek_v4", "n_shared_experts": 1, "norm_topk_prob": True,
    "num_experts_per_tok": 6, "num_hash_layers": 3, "num_key_value_heads": 1, "num_nextn_predict_layers": 1,
    "o_lora_rank": 1024, "qk_rope_head_dim": 64, "quantization_config": _QUANT, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16, "original_max_position_embeddings": 65536,
                     "type": "yarn"},
    "rope_theta": 10000, "scoring_func": "sqrtsoftplus", "sliding_window": 128, "swiglu_limit": 10.0,
    "tie_word_embeddings": False, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
    "transformers_version": "4.57.1", "use_cache": True, "vocab_size": 129280, "compress_rope_theta": 160000,
}
FLASH_CONFIG = dict(_COMMON, hidden_size=4096, index_topk=512, moe_intermediate_size=2048, n_routed_experts=256,
                    num_attention_heads=64, num_hidden_layers=43, o_groups=8, q_lora_rank=1024,
                    routed_scaling_factor=1.5, compress_ratios=[0, 0] + [4, 128] * 20 + [4, 0])
PRO_CONFIG = dict(_COMMON, hidden_size=7168, index_topk=1024, moe_intermediate_size=3072, n_routed_experts=384,
                  num_attention_heads=128, num_hidden_layers=61, o_groups=16, q_lora_rank=1536,
                  routed_scaling_factor=2.5, compress_ratios=[128, 128] + [4, 128] * 29 + [4, 0])
# The published index's figures for V4-Flash (tensor count, of them under mtp.0., total_size).
FLASH_INDEX = (69187, 1575, 159609485896)


def _fp8(out: Tensors, name: str, o: int, i: int) -> None:
    out += [(f"{name}.weight", "F8_E4M3", (o, i)), (f"{name}.scale", "F8_E8M0", (-(-o // 128), -(-i // 128)))]


def _layer(out: Tensors, cfg: dict, p: str, ratio: int, hashed: bool) -> None:
    h, heads, hd, ql = cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"], cfg["q_lora_rank"]
    g, rank, e, inter = cfg["o_groups"], cfg["o_lora_rank"], cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    hc, ih, ihd = cfg["hc_mult"], cfg["index_n_heads"], cfg["index_head_dim"]
    out += [(p + "attn_norm.weight", "BF16", (h,)), (p + "ffn_norm.weight", "BF16", (h,)),
            (p + "attn.q_norm.weight", "BF16", (ql,)), (p + "attn.kv_norm.weight", "BF16", (hd,)),
            (p + "attn.attn_sink", "F32", (heads,))]
    _fp8(out, p + "attn.wq_a", ql, h)
    _fp8(out, p + "attn.wq_b", heads * hd, ql)
    _fp8(out, p + "attn.wkv", hd, h)
    _fp8(out, p + "attn.wo_a", g * rank, heads * hd // g)
    _fp8(out, p + "attn.wo_b", h, g * rank)
    if ratio:  # compressor: overlapping windows (2 × head_dim) at ratio 4
        width = (2 if ratio == 4 else 1) * hd
        out += [(p + "attn.compressor.wkv.weight", "BF16", (width, h)), (p + "attn.compressor.wgate.weight", "BF16",
                                                                        (width, h)),
                (p + "attn.compressor.norm.weight", "BF16", (hd,)), (p + "attn.compressor.ape", "F32", (ratio, width))]
    if ratio == 4:  # the lightning indexer, replicated
        _fp8(out, p + "attn.indexer.wq_b", ih * ihd, ql)
        out += [(p + "attn.indexer.weights_proj.weight", "BF16", (ih, h)),
                (p + "attn.indexer.compressor.wkv.weight", "BF16", (2 * ihd, h)),
                (p + "attn.indexer.compressor.wgate.weight", "BF16", (2 * ihd, h)),
                (p + "attn.indexer.compressor.norm.weight", "BF16", (ihd,)),
                (p + "attn.indexer.compressor.ape", "F32", (4, 2 * ihd))]
    for block in ("attn", "ffn"):
        out += [(f"{p}hc_{block}_fn", "F32", ((2 + hc) * hc, hc * h)), (f"{p}hc_{block}_base", "F32", ((2 + hc) * hc,)),
                (f"{p}hc_{block}_scale", "F32", (3,))]
    out += [(p + "ffn.gate.weight", "BF16", (e, h)),
            (p + "ffn.gate.tid2eid", "I64", (cfg["vocab_size"], cfg["num_experts_per_tok"])) if hashed
            else (p + "ffn.gate.bias", "F32", (e,))]
    _fp8(out, p + "ffn.shared_experts.w1", inter, h)
    _fp8(out, p + "ffn.shared_experts.w2", h, inter)
    _fp8(out, p + "ffn.shared_experts.w3", inter, h)
    for x in range(e):
        q = f"{p}ffn.experts.{x}."
        out += [(q + "w1.weight", "I8", (inter, h // 2)), (q + "w1.scale", "F8_E8M0", (inter, h // 32)),
                (q + "w2.weight", "I8", (h, inter // 2)), (q + "w2.scale", "F8_E8M0", (h, inter // 32)),
                (q + "w3.weight", "I8", (inter, h // 2)), (q + "w3.scale", "F8_E8M0", (inter, h // 32))]


def v4_tensors(cfg: dict) -> Tensors:
    """Every tensor of a published DeepSeek-V4 checkpoint with config `cfg`, the MTP layers included."""
    h, hc, v = cfg["hidden_size"], cfg["hc_mult"], cfg["vocab_size"]
    out: Tensors = [("embed.weight", "BF16", (v, h)), ("head.weight", "BF16", (v, h)), ("norm.weight", "BF16", (h,)),
                    ("hc_head_fn", "F32", (hc, hc * h)), ("hc_head_base", "F32", (hc,)), ("hc_head_scale", "F32", (1,))]
    for i in range(cfg["num_hidden_layers"]):
        _layer(out, cfg, f"layers.{i}.", cfg["compress_ratios"][i], i < cfg["num_hash_layers"])
    for k in range(cfg["num_nextn_predict_layers"]):
        p = f"mtp.{k}."
        _layer(out, cfg, p, 0, False)
        _fp8(out, p + "e_proj", h, h)
        _fp8(out, p + "h_proj", h, h)
        out += [(p + "enorm.weight", "BF16", (h,)), (p + "hnorm.weight", "BF16", (h,)), (p + "norm.weight", "BF16", (h,)),
                (p + "hc_head_fn", "F32", (hc, hc * h)), (p + "hc_head_base", "F32", (hc,)),
                (p + "hc_head_scale", "F32", (1,))]
    return out
