"""Nemotron 3 Super as published (nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16 and -NVFP4), Nemotron 3 Ultra and the
dense Nemotron-H 47B / 56B: config.json values and the tensor list, for header-only plans of the real layouts at TP 3
and 6.

Where the facts come from (stored public copies only; the Hub files could not be read offline):
- config.json: a public C++ test transcribes the -NVFP4 release's config.json (commit 4f0cf9da) key by key; a Python
  test quoting the -BF16 release's headers and a Rust loader test agree on every dim: hidden 4096, 88 layers
  (hybrid_override_pattern: 40 Mamba2 "M", 40 latent-MoE "E", 8 attention "*"), Mamba2 128 heads of 64 in 8 groups,
  state 128, conv 4; attention 32 heads / 2 kv of 128; 512 routed experts (top 22) of 2688 over a 1024 latent, one
  shared expert of 5376; one MTP block ("*E"); vocab 131072.
- Tensors: the names transformers' NemotronH writes (`backbone.*`, per-expert experts) and vLLM's NemotronH /
  NemotronHMTP loaders read. The same Python test gives the BF16 headers' totals, which this list reproduces
  exactly (`BF16_PARAMETERS`, `MTP_PARAMETERS`, checked in tests/test_nemotron_h.py) with the routers' correction
  biases F32 ("F32 routing buffers" there) and everything else BF16 (the routers' weights and A_log / D / dt_bias
  included: any of them in F32 would leave the BF16 total short); the MTP block has no embedding or head of its own.
- -NVFP4 (ModelOpt MIXED_PRECISION): the C++ test rebuilds its 41,100-module quantization map from per-class layer
  lists: every routed expert and layer 1's shared down_proj NVFP4 (U8 weight [o, i/2], F8_E4M3 weight_scale
  [o, i/16], F32 weight_scale_2 and input_scale), 139 modules per-tensor FP8 (F8_E4M3 weight, F32 weight_scale and
  input_scale), among them 28 Mamba2 in_proj and 29 out_proj; the rest BF16. Scalar scales as ModelOpt writes them
  (shape []); its KV-cache scales (kv_cache_quant_algo FP8) are left out: their names were not confirmed.
"""

from __future__ import annotations

PATTERN = "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME"

SUPER = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "attention_bias": False,
    "bos_token_id": 1, "chunk_size": 128, "conv_kernel": 4, "dtype": "bfloat16", "eos_token_id": 2, "expand": 2,
    "head_dim": 128, "hidden_size": 4096, "hybrid_override_pattern": PATTERN, "initializer_range": 0.02,
    "intermediate_size": 2688, "layer_norm_epsilon": 1e-05, "mamba_head_dim": 64, "mamba_hidden_act": "silu",
    "mamba_num_heads": 128, "mamba_proj_bias": False, "mamba_ssm_cache_dtype": "float32",
    "max_position_embeddings": 262144, "mlp_bias": False, "mlp_hidden_act": "relu2", "moe_intermediate_size": 2688,
    "moe_latent_size": 1024, "moe_shared_expert_intermediate_size": 5376, "moe_shared_expert_overlap": False,
    "mtp_hybrid_override_pattern": "*E", "n_group": 1, "n_groups": 8, "n_routed_experts": 512, "n_shared_experts": 1,
    "norm_eps": 1e-05, "norm_topk_prob": True, "num_attention_heads": 32, "num_experts_per_tok": 22,
    "num_hidden_layers": 88, "num_key_value_heads": 2, "num_logits_to_keep": 1, "num_nextn_predict_layers": 1,
    "pad_token_id": 0, "partial_rotary_factor": 1.0, "rescale_prenorm_residual": True, "residual_in_fp32": False,
    "rope_theta": 10000, "routed_scaling_factor": 5.0, "sliding_window": None, "ssm_state_size": 128,
    "tie_word_embeddings": False, "time_step_floor": 0.0001, "time_step_max": 0.1, "time_step_min": 0.001,
    "topk_group": 1, "use_bias": False, "use_cache": True, "use_conv_bias": True, "use_mamba_kernels": True,
    "vocab_size": 131072,
}
# Nemotron 3 Ultra (nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16): its config.json as public training and serving
# scripts quote it (miles' nemotron-3-ultra-550b-a55b model args, an Aurora vLLM deployment's table, a config
# resolver's PUBLISHED entry): 108 layers in `layers_block_type` (no hybrid_override_pattern): attention at 7, 14,
# 23, 32, 39, 48, 57, 64, 73, 82, 89, 98 and Mamba2 / MoE alternating between them (48 each); hidden 8192; attention
# 64 heads / 2 kv of 128; Mamba2 256 heads in 8 groups, state 128, conv 4; 512 experts (top 22) of 5120 over a 2048
# latent, one shared expert of 10240; MTP ["attention", "moe"]; vocab 131072. mamba_head_dim is not quoted by any of
# them: 64 here (Super's, and 256 x 64 = 2 x hidden, expand 2) is unconfirmed.
ULTRA_ATTENTION = (7, 14, 23, 32, 39, 48, 57, 64, 73, 82, 89, 98)


def _ultra_layers() -> list[str]:
    out, mamba = [], True
    for i in range(108):
        if i in ULTRA_ATTENTION:
            out.append("attention")
        else:
            out.append("mamba" if mamba else "moe")
            mamba = not mamba
    return out


ULTRA = {**{k: v for k, v in SUPER.items() if k != "hybrid_override_pattern" and k != "mtp_hybrid_override_pattern"},
         "hidden_size": 8192, "num_hidden_layers": 108, "layers_block_type": _ultra_layers(),
         "mtp_layers_block_type": ["attention", "moe"], "num_attention_heads": 64, "mamba_num_heads": 256,
         "intermediate_size": 5120, "moe_intermediate_size": 5120, "moe_shared_expert_intermediate_size": 10240,
         "moe_latent_size": 2048}
# The dense Nemotron-H base models (nvidia/Nemotron-H-47B-Base-8K, its -Reasoning-128K, nvidia/Nemotron-H-56B-Base-8K):
# Mamba2, attention and relu2 MLP blocks, no MoE, no MTP. From public copies: Megatron-Bridge's NemotronHModelProvider47B
# / 56B (its functional test maps each HF repo to that provider and compares the configs), Megatron-LM's 47B-Reasoning
# conversion script (--kv-channels 128 --num-query-groups 8 --mamba-head-dim 64 --mamba-num-heads 256
# --mamba-num-groups 8 --mamba-state-dim 256) and a config parser's test quoting the 56B config.json keys
# (attention_head_dim 128, not head_dim; num_key_value_heads 8; intermediate_size 32768; ssm_state_size 256;
# chunk_size 128). hidden 8192, 64 heads / 8 kv of 128, Mamba2 256 heads of 64 in 8 groups, conv 4; MLP 30720 (47B)
# and 32768 (56B); vocab 131072. The two patterns: NeMo's configs and the providers (a public test checks the 56B
# string's length against num_hidden_layers: 98 and 118 layers).
_DENSE = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "attention_bias": False,
          "attention_head_dim": 128, "chunk_size": 128, "conv_kernel": 4, "expand": 2, "hidden_size": 8192,
          "layer_norm_epsilon": 1e-05, "mamba_head_dim": 64, "mamba_hidden_act": "silu", "mamba_num_heads": 256,
          "mamba_proj_bias": False, "max_position_embeddings": 8192, "mlp_bias": False, "mlp_hidden_act": "relu2",
          "n_groups": 8, "num_attention_heads": 64, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
          "ssm_state_size": 256, "tie_word_embeddings": False, "use_bias": False, "use_conv_bias": True,
          "vocab_size": 131072}
DENSE_47B = {**_DENSE, "num_hidden_layers": 98, "intermediate_size": 30720, "hybrid_override_pattern":
             "M-M-M-M-M-M-M-M-M*-M-M-M-M-M-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-M-M---MM---M-M*-M-M-M-M-M-"}
DENSE_56B = {**_DENSE, "num_hidden_layers": 118, "intermediate_size": 32768, "hybrid_override_pattern":
             "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-"
             "M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"}
# Nemotron-Labs-3-Puzzle-75B-A9B (nvidia/NVIDIA-Nemotron-Labs-3-Puzzle-75B-A9B-BF16, also -FP8 and -NVFP4:
# NemotronHPuzzleForCausalLM, `nemotron_h_puzzle`): Nemotron 3 Super compressed by Iterative Puzzle, 75.3B / 9.3B
# active. Its layer list as Megatron-LM's example transcribes the BF16 config.json (commit 7cd7fa01, "no Hugging Face
# download or remote code is needed"): Super's 88-layer pattern, every MoE layer with a width and top-k of its own
# (25 x 1280, 4 x 1536, 3 x 1792, 1 x 2048, 7 x 2688, and the MTP's attention + MoE of 2688 / 22); Mamba2 128 heads of
# 64 in 8 groups with state 96 (Super: 128); 512 experts over a 1024 latent, one shared expert of 5376; attention
# 32 / 2 of 128; vocab 131072. Names under `model.` (Megatron-Bridge's Puzzle bridge: HF_PREFIX "model"; a llama.cpp
# and an MLX conversion read `model.embeddings`, `model.layers.N.mixer.experts.E.up_proj`), the MTP's `mtp.layers.N`
# as vLLM's NemotronHMTP loads them. The config keys are Megatron-Bridge's export (block_configs and
# mtp_block_configs with moe_intermediate_size and num_experts_per_tok per MoE block, those two left out at the top,
# layers_block_type). The card's 75.3B total is what this list holds (75.35B; tests/test_nemotron_h.py). The published config.json
# itself and the -FP8 / -NVFP4 layouts were not read offline.
_PUZZLE_MOE = [(1280, 4), (1280, 8), (1280, 10), (1280, 8), (1280, 8), (1280, 8), (1280, 12), (1280, 8), (1280, 10),
               (1280, 8), (2688, 12), (1536, 14), (2688, 12), (1536, 12), (1536, 12), (2688, 12), (2688, 12),
               (2688, 12), (1536, 10), (2688, 12), (2688, 12), (1792, 12), (1792, 14), (1280, 10), (1280, 10),
               (1280, 12), (1280, 8), (1280, 12), (1280, 10), (1280, 8), (1280, 8), (1280, 10), (1280, 10), (1280, 10),
               (1280, 12), (1280, 12), (1280, 14), (1280, 16), (1792, 18), (2048, 18)]


def _puzzle_blocks() -> list[dict]:
    moe, out = iter(_PUZZLE_MOE), []
    for letter in PATTERN:
        if letter == "E":
            width, top_k = next(moe)
            out.append({"block_type": "moe", "moe_intermediate_size": width, "num_experts_per_tok": top_k})
        else:
            out.append({"block_type": {"M": "mamba", "*": "attention"}[letter]})
    return out


PUZZLE = {**{k: v for k, v in SUPER.items() if k not in ("hybrid_override_pattern", "mtp_hybrid_override_pattern",
                                                        "moe_intermediate_size", "num_experts_per_tok")},
          "architectures": ["NemotronHPuzzleForCausalLM"], "model_type": "nemotron_h_puzzle", "ssm_state_size": 96,
          "auto_map": {"AutoConfig": "configuration_nemotron_h_puzzle.NemotronHPuzzleConfig",
                       "AutoModelForCausalLM": "modeling_nemotron_h_puzzle.NemotronHPuzzleForCausalLM"},
          "block_configs": _puzzle_blocks(), "layers_block_type": [b["block_type"] for b in _puzzle_blocks()],
          "mtp_block_configs": [{"block_type": "attention"},
                                {"block_type": "moe", "moe_intermediate_size": 2688, "num_experts_per_tok": 22}],
          "mtp_layers_block_type": ["attention", "moe"]}
PUZZLE_BILLIONS = 75.3  # "75.3B total" (the model card; the MTP block not counted): this list holds 75.35B
BF16_PARAMETERS = 123_611_012_096  # the -BF16 release's BF16 headers, MTP included
MTP_PARAMETERS = 2_942_324_736

# -NVFP4: the layers whose module of that name is per-tensor FP8 (every other non-expert module is BF16)
FP8_LAYERS = {
    "in_proj": [0, 2, 4, 6, 9, 11, 13, 15, 18, 20, 27, 29, 31, 40, 49, 51, 53, 55, 57, 60, 62, 66, 68, 71, 73, 82, 84,
                86],
    "out_proj": [0, 2, 4, 9, 11, 13, 18, 38, 40, 42, 44, 49, 51, 53, 55, 57, 60, 62, 64, 66, 68, 71, 73, 75, 77, 80, 82,
                 84, 86],
    "shared_experts.up_proj": [1, 3, 5, 8, 10, 12, 14, 17, 19, 21, 23, 26, 28, 30, 32, 34, 37, 39, 43, 45, 48, 50, 52,
                               54, 56, 59, 61, 63, 65, 67, 70, 72, 74, 76, 79, 81, 83, 85, 87],
    "shared_experts.down_proj": [3, 5, 10, 12, 14, 17, 19, 21, 23, 26, 28, 30, 32, 34, 37, 39, 41, 43, 45, 48, 50, 52,
                                 54, 56, 59, 61, 63, 65, 67, 70, 72, 74, 79, 81, 83, 85, 87],
    "fc1_latent_proj": [1, 3, 5], "fc2_latent_proj": [3], "o_proj": [69, 78],
}
NVFP4_SHARED_DOWN = 1  # the one NVFP4 matrix outside the routed experts


def tensors(cfg: dict, nvfp4: bool = False) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every tensor of a BF16 release (Mamba2 "M", attention "*", MLP "-", latent MoE "E"
    blocks), or of Super's -NVFP4 one."""
    h, bf = cfg["hidden_size"], "BF16"
    heads, p, groups, n, k = (cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["n_groups"], cfg["ssm_state_size"],
                              cfg["conv_kernel"])
    width, bc = heads * p, groups * n
    nh, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg.get("head_dim") or cfg["attention_head_dim"]
    latent, experts = cfg.get("moe_latent_size"), cfg.get("n_routed_experts")

    def linear(name: str, rows: int, cols: int, layer: int | None = None, leaf: str = "", fp4: bool = False) -> list:
        if nvfp4 and fp4:
            return [(name + ".weight", "U8", (rows, cols // 2)), (name + ".weight_scale", "F8_E4M3", (rows, cols // 16)),
                    (name + ".weight_scale_2", "F32", ()), (name + ".input_scale", "F32", ())]
        if nvfp4 and layer is not None and layer in FP8_LAYERS.get(leaf, ()):
            return [(name + ".weight", "F8_E4M3", (rows, cols)), (name + ".weight_scale", "F32", ()),
                    (name + ".input_scale", "F32", ())]
        return [(name + ".weight", bf, (rows, cols))]

    def mixer(prefix: str, kind: str, layer: int | None, block: dict | None = None) -> list:
        m, width_of = prefix + "mixer.", (lambda key: (block or {}).get(key, cfg.get(key)))
        if kind == "M":
            return (linear(m + "in_proj", 2 * width + 2 * bc + heads, h, layer, "in_proj")
                    + [(m + "conv1d.weight", bf, (width + 2 * bc, 1, k)), (m + "conv1d.bias", bf, (width + 2 * bc,)),
                       (m + "A_log", bf, (heads,)), (m + "D", bf, (heads,)), (m + "dt_bias", bf, (heads,)),
                       (m + "norm.weight", bf, (width,))] + linear(m + "out_proj", h, width, layer, "out_proj"))
        if kind == "*":
            return (linear(m + "q_proj", nh * hd, h) + linear(m + "k_proj", kv * hd, h) + linear(m + "v_proj", kv * hd, h)
                    + linear(m + "o_proj", h, nh * hd, layer, "o_proj"))
        if kind == "-":
            return [(m + "up_proj.weight", bf, (width_of("intermediate_size"), h)),
                    (m + "down_proj.weight", bf, (h, width_of("intermediate_size")))]
        out = [(m + "gate.weight", bf, (experts, h)), (m + "gate.e_score_correction_bias", "F32", (experts,))]
        out += linear(m + "fc1_latent_proj", latent, h, layer, "fc1_latent_proj")
        out += linear(m + "fc2_latent_proj", h, latent, layer, "fc2_latent_proj")
        s = width_of("moe_shared_expert_intermediate_size")
        out += linear(m + "shared_experts.up_proj", s, h, layer, "shared_experts.up_proj")
        out += linear(m + "shared_experts.down_proj", h, s, layer, "shared_experts.down_proj",
                      fp4=layer == NVFP4_SHARED_DOWN)
        i = width_of("moe_intermediate_size")
        for e in range(experts):
            out += linear(f"{m}experts.{e}.up_proj", i, latent, fp4=layer is not None)
            out += linear(f"{m}experts.{e}.down_proj", latent, i, fp4=layer is not None)
        return out

    top = "model" if "block_configs" in cfg else "backbone"  # a Puzzle's decoder is published under `model.`
    out = [(f"{top}.embeddings.weight", bf, (cfg["vocab_size"], h)), (f"{top}.norm_f.weight", bf, (h,)),
           ("lm_head.weight", bf, (cfg["vocab_size"], h))]
    letters = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "moe": "E", "mlp": "-"}
    blocks = cfg.get("block_configs") or [{"block_type": t} for t in cfg.get("layers_block_type") or []]
    pattern = cfg.get("hybrid_override_pattern") or "".join(letters[b["block_type"]] for b in blocks)
    for layer, kind in enumerate(pattern):
        out += [(f"{top}.layers.{layer}.norm.weight", bf, (h,))]
        out += mixer(f"{top}.layers.{layer}.", kind, layer, blocks[layer] if blocks else None)
    if cfg.get("num_nextn_predict_layers"):
        mtp = cfg.get("mtp_block_configs") or [None, None]
        out += [(f"mtp.layers.0.{name}.weight", bf, (h,)) for name in ("enorm", "hnorm", "norm")]
        out += [("mtp.layers.0.eh_proj.weight", bf, (h, 2 * h))] + mixer("mtp.layers.0.", "*", None, mtp[0])
        out += [("mtp.layers.1.norm.weight", bf, (h,)), ("mtp.layers.1.final_layernorm.weight", bf, (h,))]
        out += mixer("mtp.layers.1.", "E", None, mtp[1])
    return out
