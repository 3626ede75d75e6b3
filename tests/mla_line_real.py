"""The rest of the registry's MLA line and K2-Horizon: published config.json values and tensor lists, for header-only
plans at full scale (tests/test_mla_line_scale.py).

Where each figure comes from (huggingface.co cannot be reached offline; the values are public copies of each repo's
config.json found in other projects' sources, not confirmed against the Hub itself):
- GLM-4.7-Flash (zai-org/GLM-4.7-Flash): the config vLLM's own glm4_moe_lite test quotes (hidden 2048, 47 layers, 20
  heads, q_lora 768, kv_lora 512, qk_nope 192, qk_rope 64, v 256, 64 experts of 1536, one shared, dense 10240 on the
  first layer, vocab 154880), one MTP layer (num_nextn_predict_layers 1, as other copies state), BF16 — the same
  values as transformers' Glm4MoeLiteConfig defaults.
- DeepSeek-V2 (deepseek-ai/DeepSeek-V2; V2-Chat, V2-Chat-0628, V2.5 and V2.5-1210 share these dims): a copy of its
  config.json (hidden 5120, 60 layers, 128 heads, q_lora 1536, 160 experts of 1536, two shared, group-limited greedy
  routing over 8 groups, dense 12288 on layer 0, vocab 102400), BF16. DeepSeek-V2-Lite: a copy of its config.json as
  transformers prints it (hidden 2048, 27 layers, 16 heads, no q LoRA, 64 experts of 1408, two shared, greedy
  routing, dense 10944, vocab 102400), BF16. Tensor names: transformers' and vLLM's DeepSeek-V2 names (the router
  without a correction bias); the shard index itself was not read.
- K2-Horizon-375B-A23B (IFM/K2-Horizon-375B-A23B): its config.json as a public test quotes it with the URL (hidden 6144,
  61 layers, 48 heads / 8 kv heads of 128, RoPE on 64, dense 16384 on layers 0-2, 192 experts of 1792, one shared, no
  value experts, vocab 250624), BF16, and that test's list of layer 3's tensor names from the repo's index.
  K2-Horizon-MoVA-36B-A4B (IFM/K2-Horizon-MoVA-36B-A4B): its config.json as another project's parser test copies it
  (hidden 2560, 48 layers, 32 / 8 heads of 128, 2 norm groups, dense 6144 on layers 0-2, 100 experts of 768, one
  shared, 64 value experts (top 4) in every MoE layer, softplus output gate, vocab 250624), BF16; the value experts'
  and gate's names are those of the repo's modeling code and vLLM's loader.
- Dots3 Note (dots-studio/dots3-note-prev): the values other projects check against the released config.json
  (hidden 5120, 46 layers of which 13 full DSA / 33 sliding, full MLA 128 heads with kv_lora 512 / qk_nope 128 /
  qk_rope 64 / v 128, sliding MLA 64 heads with kv_lora 1024 / qk_nope 192 / qk_rope 64 / v 128, window 513, indexer
  64 × 128 top 2048, headwise gates, 256 experts of 1536 (top 8), one shared, dense 13824 on layer 0, vocab 152064,
  no n_group / num_nextn_predict_layers keys, one MTP layer `model.layers.46` in the sliding geometry with a dense
  MLP and `model.mtp.embed_tokens`); q_lora_rank / swa_q_lora_rank 1024 and the layer pattern (full at 0, 1 and
  every i % 4 == 1) are transformers' Dots3NoteTextConfig defaults, documented against that checkpoint; the towers
  (`vision_encoder.*`, `audio_encoder.*`, copied) are a few representative tensors, not their ~2600. BF16.
  Dots3 Note FP8 (the `-fp8` sibling): DeepSeek's block-FP8 format (quant_method fp8, 128 × 128 weight_scale_inv,
  as quoted) on the attention projections, g_proj and MLPs; its exact per-tensor dtypes are a reconstruction.
"""

from __future__ import annotations

from tests.moe_real import Linear, Tensors, checkpoint

GLM4_7_FLASH_CONFIG = {
    "architectures": ["Glm4MoeLiteForCausalLM"], "model_type": "glm4_moe_lite", "vocab_size": 154880,
    "hidden_size": 2048, "intermediate_size": 10240, "moe_intermediate_size": 1536, "num_hidden_layers": 47,
    "num_attention_heads": 20, "num_key_value_heads": 20, "hidden_act": "silu", "rms_norm_eps": 1e-5,
    "attention_dropout": 0.0, "attention_bias": False, "max_position_embeddings": 202752, "rope_theta": 1000000.0,
    "rope_scaling": None, "partial_rotary_factor": 1.0, "q_lora_rank": 768, "kv_lora_rank": 512,
    "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256, "n_routed_experts": 64,
    "n_shared_experts": 1, "num_experts_per_tok": 4, "norm_topk_prob": True, "routed_scaling_factor": 1.8,
    "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc", "first_k_dense_replace": 1,
    "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}
_V2_COMMON = {
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 100000, "eos_token_id": 100001, "first_k_dense_replace": 1,
    "hidden_act": "silu", "initializer_range": 0.02, "kv_lora_rank": 512, "max_position_embeddings": 163840,
    "moe_layer_freq": 1, "n_shared_experts": 2, "norm_topk_prob": False, "num_experts_per_tok": 6,
    "pretraining_tp": 1, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "rope_theta": 10000,
    "scoring_func": "softmax", "seq_aux": True, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "v_head_dim": 128, "vocab_size": 102400, "aux_loss_alpha": 0.001, "ep_size": 1,
}
DEEPSEEK_V2_CONFIG = dict(
    _V2_COMMON, hidden_size=5120, intermediate_size=12288, moe_intermediate_size=1536, n_group=8, n_routed_experts=160,
    num_attention_heads=128, num_hidden_layers=60, num_key_value_heads=128, q_lora_rank=1536,
    routed_scaling_factor=16.0, topk_group=3, topk_method="group_limited_greedy",
    rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                  "original_max_position_embeddings": 4096, "type": "yarn"},
)
DEEPSEEK_V2_LITE_CONFIG = dict(
    _V2_COMMON, hidden_size=2048, intermediate_size=10944, moe_intermediate_size=1408, n_group=1, n_routed_experts=64,
    num_attention_heads=16, num_hidden_layers=27, num_key_value_heads=16, q_lora_rank=None,
    routed_scaling_factor=1.0, topk_group=1, topk_method="greedy",
    rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
                  "original_max_position_embeddings": 4096, "type": "yarn"},
)
_K2 = {
    "architectures": ["K2HorizonForCausalLM"], "model_type": "k2_horizon", "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 0, "decoder_sparse_step": 1, "dtype": "bfloat16", "eos_token_id": 1,
    "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 524288, "mlp_only_layers": [0, 1, 2],
    "moe_gate_bias": True, "norm_topk_prob": True, "num_experts_per_tok": 8, "num_key_value_heads": 8,
    "num_shared_experts": 1, "output_router_logits": False, "pad_token_id": None, "query_key_norm": False,
    "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 10000000.0, "rope_type": "default"},
    "router_scaling_factor": 2.5, "router_score_func": "sigmoid", "sliding_window": None,
    "tie_word_embeddings": False, "transformers_version": "5.13.0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 250624,
}
K2_HORIZON_375B_CONFIG = dict(
    _K2, attention_gate_func=None, hidden_size=6144, initializer_range=0.01, intermediate_size=16384,
    layernorm_num_groups=1, moe_intermediate_size=1792, mova_num_experts=0, mova_num_experts_per_tok=0,
    num_attention_heads=48, num_experts=192, num_hidden_layers=61, rope_head_dim=64, router_aux_loss_coef=0.0001,
)
K2_HORIZON_MOVA_36B_CONFIG = dict(
    _K2, attention_gate_func="softplus", hidden_size=2560, initializer_range=0.02, intermediate_size=6144,
    layernorm_num_groups=2, moe_intermediate_size=768, mova_num_experts=64, mova_num_experts_per_tok=4,
    num_attention_heads=32, num_experts=100, num_hidden_layers=48, rope_head_dim=128, router_aux_loss_coef=0.001,
    auto_map={"AutoConfig": "configuration_k2_horizon.K2HorizonConfig",
              "AutoModel": "modeling_k2_horizon.K2HorizonModel",
              "AutoModelForCausalLM": "modeling_k2_horizon.K2HorizonForCausalLM"},
)


def _bf16(name: str, out_f: int, in_f: int) -> Tensors:
    return [(f"{name}.weight", "BF16", (out_f, in_f))]


def mla_attention(linear: Linear):
    """One MLA block's tensors (q LoRA or a plain q_proj), as DeepSeek-V2/V3 and GLM-4.7-Flash name them."""
    def attention(cfg: dict, i: int) -> Tensors:
        h, heads, p = cfg["hidden_size"], cfg["num_attention_heads"], f"model.layers.{i}.self_attn."
        nope, rope, v, lq, lkv = (cfg[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                                    "q_lora_rank", "kv_lora_rank"))
        out = [(p + "kv_a_layernorm.weight", "BF16", (lkv,))] + linear(p + "kv_a_proj_with_mqa", lkv + rope, h)
        if lq:
            out += [(p + "q_a_layernorm.weight", "BF16", (lq,))] + linear(p + "q_a_proj", lq, h)
            out += linear(p + "q_b_proj", heads * (nope + rope), lq)
        else:
            out += linear(p + "q_proj", heads * (nope + rope), h)
        return out + linear(p + "kv_b_proj", heads * (nope + v), lkv) + linear(p + "o_proj", h, heads * v)
    return attention


def mla_tensors(cfg: dict) -> Tensors:
    """Every tensor of a BF16 GLM-4.7-Flash or DeepSeek-V2 checkpoint, MTP layers included where it has them."""
    return checkpoint({"num_nextn_predict_layers": 0, **cfg}, mla_attention(_bf16), _bf16)


def k2_horizon_tensors(cfg: dict) -> Tensors:
    """Every tensor of a BF16 K2-Horizon checkpoint: GQA (or MoVA value experts and the output gate) and MLPs."""
    h, vocab, heads, kv, d = (cfg[k] for k in ("hidden_size", "vocab_size", "num_attention_heads",
                                               "num_key_value_heads", "head_dim"))
    moe, n_exp = cfg["moe_intermediate_size"], cfg["num_experts"]

    def mlp(p: str, inter: int) -> Tensors:
        return _bf16(p + "gate_proj", inter, h) + _bf16(p + "up_proj", inter, h) + _bf16(p + "down_proj", h, inter)

    out = [("model.embed_tokens.weight", "BF16", (vocab, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        sparse = i not in cfg["mlp_only_layers"]
        out += [(p + "input_layernorm.weight", "BF16", (h,)), (p + "post_attention_layernorm.weight", "BF16", (h,))]
        out += _bf16(p + "self_attn.q_proj", heads * d, h) + _bf16(p + "self_attn.k_proj", kv * d, h)
        out += _bf16(p + "self_attn.o_proj", h, heads * d)
        if cfg["attention_gate_func"]:
            out += _bf16(p + "self_attn.gate_proj", heads * d, h)
        if sparse and cfg["mova_num_experts"]:
            out += [(p + "self_attn.v_router.weight", "BF16", (cfg["mova_num_experts"], h)),
                    (p + "self_attn.v_router.bias", "F32", (cfg["mova_num_experts"],))]
            for e in range(cfg["mova_num_experts"]):
                out += _bf16(p + f"self_attn.v_experts.{e}", kv * d, h)
        else:
            out += _bf16(p + "self_attn.v_proj", kv * d, h)
        if sparse:
            out += [(p + "mlp.gate.weight", "BF16", (n_exp, h)), (p + "mlp.gate.bias", "F32", (n_exp,))]
            for e in range(n_exp):
                out += mlp(p + f"mlp.experts.{e}.", moe)
            out += mlp(p + "mlp.shared_experts.", moe * cfg["num_shared_experts"])
        else:
            out += mlp(p + "mlp.", cfg["intermediate_size"])
    return out + [("model.norm.weight", "BF16", (h,)), ("lm_head.weight", "BF16", (vocab, h))]


DOTS3_LAYER_TYPES = ["full_attention" if i < 2 or i % 4 == 1 else "sliding_attention" for i in range(46)]
DOTS3_NOTE_CONFIG = {
    "architectures": ["Dots3NoteForCausalLM"], "model_type": "dots3_note", "vocab_size": 152064, "hidden_size": 5120,
    "intermediate_size": 13824, "moe_intermediate_size": 1536, "num_hidden_layers": 46, "layer_types": DOTS3_LAYER_TYPES,
    "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1024, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "rope_theta": 80000000.0,
    "swa_num_attention_heads": 64, "swa_num_key_value_heads": 64, "swa_q_lora_rank": 1024, "swa_kv_lora_rank": 1024,
    "swa_qk_nope_head_dim": 192, "swa_qk_rope_head_dim": 64, "swa_v_head_dim": 128, "swa_rope_theta": 50000.0,
    "sliding_window_size": 513, "attention_gate_type": "headwise", "swa_attention_gate_type": "headwise",
    "apply_mla_qkv_lora_rescale": True, "attention_bias": False, "attention_dropout": 0.0, "index_n_heads": 64,
    "index_head_dim": 128, "index_topk": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "first_k_dense_replace": 1, "moe_layer_freq": 1, "routed_scaling_factor": 1.0,
    "norm_topk_prob": True, "scoring_func": "sigmoid", "topk_method": "noaux_tc", "hidden_act": "silu",
    "rms_norm_eps": 1e-05, "max_position_embeddings": 524288, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vision_config": {"embed_dim": 1536, "num_heads": 24}, "audio_config": {},
}
DOTS3_NOTE_FP8_CONFIG = dict(DOTS3_NOTE_CONFIG, quantization_config={
    "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})


def _fp8(name: str, out_f: int, in_f: int) -> Tensors:
    return [(f"{name}.weight", "F8_E4M3", (out_f, in_f)),
            (f"{name}.weight_scale_inv", "F32", (-(-out_f // 128), -(-in_f // 128)))]


def dots3_note_tensors(cfg: dict) -> Tensors:
    """Every tensor of Dots3 Note's language model in its config's format (the MTP layer included) and a few of each
    tower's."""
    linear = _fp8 if cfg.get("quantization_config") else _bf16
    h, vocab, n = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    types = cfg["layer_types"] + ["sliding_attention"]  # the MTP layer: the sliding geometry

    def attention(p: str, swa: bool) -> Tensors:
        k = "swa_" if swa else ""
        heads, lq, lkv = cfg[k + "num_attention_heads"], cfg[k + "q_lora_rank"], cfg[k + "kv_lora_rank"]
        nope, rope, v = cfg[k + "qk_nope_head_dim"], cfg[k + "qk_rope_head_dim"], cfg[k + "v_head_dim"]
        out = [(p + "q_a_layernorm.weight", "BF16", (lq,)), (p + "kv_a_layernorm.weight", "BF16", (lkv,)),
               (p + "k_rope_only_layernorm.weight", "BF16", (rope,))]
        out += linear(p + "q_a_proj", lq, h) + linear(p + "q_b_proj", heads * (nope + rope), lq)
        out += linear(p + "kv_a_proj_with_mqa", lkv + rope, h) + linear(p + "kv_b_proj", heads * (nope + v), lkv)
        out += linear(p + "o_proj", h, heads * v) + linear(p + "g_proj", heads, h)
        if not swa:
            ih, idim = cfg["index_n_heads"], cfg["index_head_dim"]
            out += linear(p + "indexer.wq_b", ih * idim, lq) + linear(p + "indexer.wk", idim, h)
            out += [(p + "indexer.k_norm.weight", "BF16", (idim,)), (p + "indexer.k_norm.bias", "BF16", (idim,)),
                    (p + "indexer.weights_proj.weight", "BF16", (ih, h))]
        return out

    def mlp(p: str, inter: int) -> Tensors:
        return linear(p + "gate_proj", inter, h) + linear(p + "up_proj", inter, h) + linear(p + "down_proj", h, inter)

    out = [("model.embed_tokens.weight", "BF16", (vocab, h))]
    for i in range(n + 1):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", "BF16", (h,)), (p + "post_attention_layernorm.weight", "BF16", (h,))]
        out += attention(p + "self_attn.", types[i] == "sliding_attention")
        if i < cfg["first_k_dense_replace"] or i == n:
            out += mlp(p + "mlp.", cfg["intermediate_size"])
        else:
            e, moe = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
            out += [(p + "mlp.gate.weight", "BF16", (e, h)), (p + "mlp.gate.e_score_correction_bias", "F32", (e,))]
            for j in range(e):
                out += mlp(p + f"mlp.experts.{j}.", moe)
            out += mlp(p + "mlp.shared_experts.", moe * cfg["n_shared_experts"])
    p = f"model.layers.{n}."
    out += [(p + "enorm.weight", "BF16", (h,)), (p + "hnorm.weight", "BF16", (h,)),
            (p + "eh_proj.weight", "BF16", (h, 2 * h)), (p + "shared_head.norm.weight", "BF16", (h,)),
            ("model.mtp.embed_tokens.weight", "BF16", (vocab, h))]
    out += [("vision_encoder.patch_embed.proj.weight", "BF16", (1536, 3, 14, 14)),
            ("vision_encoder.blocks.0.attn.qkv.weight", "BF16", (4608, 1536)),
            ("audio_encoder.dots_encoder.speech_encoder.layers.0.self_attn.q_proj.weight", "BF16", (1280, 1280))]
    return out + [("model.norm.weight", "BF16", (h,)), ("lm_head.weight", "BF16", (vocab, h))]
