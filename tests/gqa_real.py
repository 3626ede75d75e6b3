"""The GQA families with config quirks as published: config.json values and tensor lists, for header-only plans of the
real layouts at TP 3 and 6 (tests/test_gqa_scale.py).

Where each figure comes from (stored public copies only: the Hub files could not be read offline; BF16 storage with an
F32 router bias is assumed for every checkpoint, and tensor names are the ones transformers' save writes for each
family, which vLLM's classes read):

- baidu/ERNIE-4.5-300B-A47B-PT: hidden 8192, intermediate 28672, 64 heads / 8 kv (no head_dim key), 54 layers, vocab
  103424, 64 experts of 3584 top-8 from layer 3, one MTP layer, untied head: a PaddlePaddle/FastDeploy test's copy of
  the config (5 layers kept) and a MindIE (atb_llm) test's (54 layers, moe_layer_start_index 3, end 53,
  moe_num_shared_experts 0). The MTP block's names are vLLM's ErnieMTP loader's (`model.mtp_block.0.*`,
  `model.mtp_emb_norm.0`, `model.mtp_hidden_norm.0`, `model.mtp_linear_proj.0`).
- baidu/ERNIE-4.5-21B-A3B-PT: transformers' Ernie4_5_MoeConfig defaults, whose docstring names that checkpoint: hidden
  2560, 28 layers, 20 heads / 4 kv, 64 experts of 1536 top-6 with 2 shared experts from layer 1, intermediate 12288,
  tied embedding. Its MTP layer is left out (not confirmed).
- LGAI-EXAONE/EXAONE-4.0-32B: TensorRT-LLM's Exaone4 test copy: hidden 5120, intermediate 27392, 40 heads / 8 kv,
  head_dim 128, 64 layers, sliding window 4096 on 3 of every 4 layers. vocab 102400: unconfirmed.
- LGAI-EXAONE/K-EXAONE-236B-A23B: TensorRT-LLM's ExaoneMoE test copy (4 layers kept): hidden 6144, 64 heads / 8 kv,
  head_dim 128, intermediate 18432, 128 experts of 2048 top-8, one shared expert, the first layer dense, vocab 153600.
  48 layers (what 236B total gives) and one MTP layer: unconfirmed.
- CohereLabs/c4ai-command-a-03-2025 (Command A, 111B): hidden 12288, intermediate 36864, 96 heads / 8 kv (no head_dim
  key), 64 layers, vocab 256000, tied embedding: recalled, NOT confirmed offline. Likewise Command R+ (104B: hidden
  12288, 96 heads / 8 kv with per-head q/k LayerNorms, intermediate 33792, 64 layers) and Command R (35B: hidden 8192,
  64 heads, all kv, intermediate 22528, 40 layers).
- arcee-ai/Trinity-Large-* and Trinity-Mini: an AWS Neuron port's test copies (Nano's full config, Mini's and Large's
  overrides): Large hidden 3072, 48 heads / 8 kv, head_dim 128, 60 layers (6 dense), intermediate 12288, 256 experts of
  3072 top-4, one shared expert, vocab 200192; Mini hidden 2048, 32 heads / 4 kv, 32 layers (2 dense), intermediate
  6144, 128 experts of 1024 top-8.
- poolside/laguna-XS.2: vLLM's Laguna test copy: hidden 2048, 40 layers (full attention every 4th, from layer 0),
  48 heads on full layers and 64 on sliding ones over 8 kv, head_dim 128, per-head gate, intermediate 8192 (layer 0
  dense), 256 experts of 512 top-8, shared expert 512, vocab 100352.
"""

from __future__ import annotations

BF, F32 = "BF16", "F32"


def _layer_types(n: int, full_every: int, first_full: bool = False) -> list[str]:
    return ["full_attention" if (i % full_every == 0 if first_full else (i + 1) % full_every == 0)
            else "sliding_attention" for i in range(n)]


ERNIE_300B = {
    "architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe", "hidden_size": 8192,
    "intermediate_size": 28672, "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 54,
    "vocab_size": 103424, "moe_num_experts": 64, "moe_intermediate_size": 3584, "moe_k": 8, "moe_layer_start_index": 3,
    "moe_layer_end_index": 53, "moe_layer_interval": 1, "moe_num_shared_experts": 0, "use_bias": False,
    "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "rope_theta": 500000, "rms_norm_eps": 1e-5,
}
ERNIE_21B = {
    "architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe", "hidden_size": 2560,
    "intermediate_size": 12288, "num_attention_heads": 20, "num_key_value_heads": 4, "num_hidden_layers": 28,
    "vocab_size": 103424, "moe_num_experts": 64, "moe_intermediate_size": 1536, "moe_k": 6, "moe_layer_start_index": 1,
    "moe_num_shared_experts": 2, "use_bias": False, "tie_word_embeddings": True, "rope_theta": 500000,
}
EXAONE4_32B = {
    "architectures": ["Exaone4ForCausalLM"], "model_type": "exaone4", "hidden_size": 5120, "intermediate_size": 27392,
    "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 64,
    "vocab_size": 102400, "sliding_window": 4096, "sliding_window_pattern": "LLLG",
    "layer_types": _layer_types(64, 4), "tie_word_embeddings": False,
}
K_EXAONE = {
    "architectures": ["ExaoneMoEForCausalLM"], "model_type": "exaone_moe", "hidden_size": 6144,
    "intermediate_size": 18432, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
    "num_hidden_layers": 48, "vocab_size": 153600, "moe_intermediate_size": 2048, "num_experts": 128,
    "num_experts_per_tok": 8, "num_shared_experts": 1, "n_group": 1, "topk_group": 1, "scoring_func": "sigmoid",
    "layer_types": _layer_types(48, 4), "mlp_layer_types": ["dense"] + ["sparse"] * 47, "sliding_window": 128,
    "num_nextn_predict_layers": 1, "tie_word_embeddings": False,
}
COMMAND_A = {
    "architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2", "hidden_size": 12288, "intermediate_size": 36864,
    "num_attention_heads": 96, "num_key_value_heads": 8, "num_hidden_layers": 64, "vocab_size": 256000,
    "sliding_window": 4096, "sliding_window_pattern": 4, "logit_scale": 0.25, "tie_word_embeddings": True,
}
COMMAND_R_PLUS = {
    "architectures": ["CohereForCausalLM"], "model_type": "cohere", "hidden_size": 12288, "intermediate_size": 33792,
    "num_attention_heads": 96, "num_key_value_heads": 8, "num_hidden_layers": 64, "vocab_size": 256000,
    "use_qk_norm": True, "logit_scale": 0.8333333333333334, "tie_word_embeddings": True,
}
COMMAND_R = {
    "architectures": ["CohereForCausalLM"], "model_type": "cohere", "hidden_size": 8192, "intermediate_size": 22528,
    "num_attention_heads": 64, "num_key_value_heads": 64, "num_hidden_layers": 40, "vocab_size": 256000,
    "use_qk_norm": False, "logit_scale": 0.0625, "tie_word_embeddings": True,
}
_TRINITY = {"architectures": ["AfmoeForCausalLM"], "model_type": "afmoe", "head_dim": 128, "vocab_size": 200192,
            "num_shared_experts": 1, "n_group": 1, "topk_group": 1, "score_func": "sigmoid", "route_norm": True,
            "route_scale": 2.826, "mup_enabled": True, "global_attn_every_n_layers": 4, "tie_word_embeddings": False}
TRINITY_LARGE = {**_TRINITY, "hidden_size": 3072, "intermediate_size": 12288, "moe_intermediate_size": 3072,
                 "num_attention_heads": 48, "num_key_value_heads": 8, "num_hidden_layers": 60, "num_dense_layers": 6,
                 "num_experts": 256, "num_experts_per_tok": 4, "sliding_window": 4096,
                 "layer_types": _layer_types(60, 4)}
TRINITY_MINI = {**_TRINITY, "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 1024,
                "num_attention_heads": 32, "num_key_value_heads": 4, "num_hidden_layers": 32, "num_dense_layers": 2,
                "num_experts": 128, "num_experts_per_tok": 8, "sliding_window": 2048,
                "layer_types": _layer_types(32, 4)}
_LAGUNA_TYPES = _layer_types(40, 4, first_full=True)
LAGUNA_XS2 = {
    "architectures": ["LagunaForCausalLM"], "model_type": "laguna", "hidden_size": 2048, "intermediate_size": 8192,
    "num_hidden_layers": 40, "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 100352, "gating": True, "sliding_window": 512, "layer_types": _LAGUNA_TYPES,
    "num_attention_heads_per_layer": [48 if t == "full_attention" else 64 for t in _LAGUNA_TYPES],
    "mlp_layer_types": ["dense"] + ["sparse"] * 39, "num_experts": 256, "num_experts_per_tok": 8,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "moe_routed_scaling_factor": 2.5,
    "tie_word_embeddings": False,
}

REAL = {"baidu/ERNIE-4.5-300B-A47B-PT": ERNIE_300B, "baidu/ERNIE-4.5-21B-A3B-PT": ERNIE_21B,
        "LGAI-EXAONE/EXAONE-4.0-32B": EXAONE4_32B, "LGAI-EXAONE/K-EXAONE-236B-A23B": K_EXAONE,
        "CohereLabs/c4ai-command-a-03-2025": COMMAND_A, "CohereLabs/c4ai-command-r-plus": COMMAND_R_PLUS,
        "CohereLabs/c4ai-command-r-v01": COMMAND_R, "arcee-ai/Trinity-Large-Thinking": TRINITY_LARGE,
        "arcee-ai/Trinity-Mini": TRINITY_MINI, "poolside/laguna-XS.2": LAGUNA_XS2}


def _attention(p: str, c: dict, heads: int) -> list:
    h, hd, kv = c["hidden_size"], c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"], \
        c["num_key_value_heads"]
    out = [(p + "self_attn.q_proj.weight", BF, (heads * hd, h)), (p + "self_attn.k_proj.weight", BF, (kv * hd, h)),
           (p + "self_attn.v_proj.weight", BF, (kv * hd, h)), (p + "self_attn.o_proj.weight", BF, (h, heads * hd))]
    if c["model_type"] in ("exaone4", "exaone_moe", "afmoe", "laguna"):  # per-head q/k RMSNorms
        out += [(p + "self_attn.q_norm.weight", BF, (hd,)), (p + "self_attn.k_norm.weight", BF, (hd,))]
    if c["model_type"] == "afmoe":
        out.append((p + "self_attn.gate_proj.weight", BF, (heads * hd, h)))
    if c.get("use_qk_norm") and c["model_type"] == "cohere":  # one LayerNorm row per head
        out += [(p + "self_attn.q_norm.weight", BF, (heads, hd)), (p + "self_attn.k_norm.weight", BF, (kv, hd))]
    if c["model_type"] == "laguna":
        out.append((p + "self_attn.g_proj.weight", BF, (heads, h)))
    return out


def _mlp(p: str, width: int, h: int) -> list:
    return [(p + "gate_proj.weight", BF, (width, h)), (p + "up_proj.weight", BF, (width, h)),
            (p + "down_proj.weight", BF, (h, width))]


def _norms(p: str, c: dict) -> list:
    h, t = c["hidden_size"], c["model_type"]
    names = {"exaone4": ("post_attention_layernorm", "post_feedforward_layernorm"), "cohere2": ("input_layernorm",), "cohere": ("input_layernorm",),
             "afmoe": ("input_layernorm", "post_attention_layernorm", "pre_mlp_layernorm", "post_mlp_layernorm")}
    return [(p + n + ".weight", BF, (h,)) for n in names.get(t, ("input_layernorm", "post_attention_layernorm"))]


def _moe(p: str, c: dict) -> list:
    t, h = c["model_type"], c["hidden_size"]
    e = c.get("moe_num_experts") or c["num_experts"]
    width = c["moe_intermediate_size"]
    out = []
    for i in range(e):
        out += _mlp(f"{p}mlp.experts.{i}.", width, h)
    router = {"ernie4_5_moe": [(p + "mlp.gate.weight", F32, (e, h)),
                               (p + "mlp.moe_statics.e_score_correction_bias", F32, (1, e))],
              "exaone_moe": [(p + "mlp.gate.weight", BF, (e, h)), (p + "mlp.e_score_correction_bias", F32, (e,))],
              "afmoe": [(p + "mlp.router.gate.weight", BF, (e, h)), (p + "mlp.expert_bias", F32, (e,))],
              "laguna": [(p + "mlp.gate.weight", BF, (e, h)),
                         (p + "mlp.experts.e_score_correction_bias", F32, (e,))]}[t]
    shared = c.get("moe_num_shared_experts", c.get("num_shared_experts", 0))
    if t == "laguna":
        out += _mlp(p + "mlp.shared_expert.", c["shared_expert_intermediate_size"], h)
    elif shared:
        out += _mlp(p + "mlp.shared_experts.", width * shared, h)
    return out + router


def _is_moe(c: dict, i: int) -> bool:
    t = c["model_type"]
    if t == "ernie4_5_moe":
        return c["moe_layer_start_index"] <= i <= c.get("moe_layer_end_index", c["num_hidden_layers"] - 1)
    if t == "afmoe":
        return i >= c["num_dense_layers"]
    if "mlp_layer_types" in c:
        return c["mlp_layer_types"][i] == "sparse"
    return False


def tensors(c: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every tensor of the published checkpoint `c` describes."""
    h, vocab = c["hidden_size"], c["vocab_size"]
    out = [("model.embed_tokens.weight", BF, (vocab, h)), ("model.norm.weight", BF, (h,))]
    if not c.get("tie_word_embeddings"):
        out.append(("lm_head.weight", BF, (vocab, h)))
    per_layer = c.get("num_attention_heads_per_layer") or [c["num_attention_heads"]] * c["num_hidden_layers"]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += _attention(p, c, per_layer[i]) + _norms(p, c)
        out += _moe(p, c) if _is_moe(c, i) else _mlp(p + "mlp.", c["intermediate_size"], h)
    for k in range(c.get("num_nextn_predict_layers") or 0):
        if c["model_type"] == "ernie4_5_moe":  # vLLM's ErnieMTP: a Llama layer with a dense MLP
            p = f"model.mtp_block.{k}."
            out += _attention(p, c, c["num_attention_heads"]) + _norms(p, c) + _mlp(p + "mlp.", c["intermediate_size"], h)
            out += [(f"model.mtp_emb_norm.{k}.weight", BF, (h,)), (f"model.mtp_hidden_norm.{k}.weight", BF, (h,)),
                    (f"model.mtp_linear_proj.{k}.weight", BF, (h, 2 * h))]
        else:  # vLLM's ExaoneMoeMTP: mtp.layers.k with a dense MLP, mtp.fc and its norms
            p = f"mtp.layers.{k}."
            out += _attention(p, c, c["num_attention_heads"]) + _norms(p, c) + _mlp(p + "mlp.", c["intermediate_size"], h)
            if k == 0:
                out += [("mtp.fc.weight", BF, (h, 2 * h)), ("mtp.norm.weight", BF, (h,)),
                        ("mtp.pre_fc_norm_hidden.weight", BF, (h,)), ("mtp.pre_fc_norm_embedding.weight", BF, (h,))]
    return out
