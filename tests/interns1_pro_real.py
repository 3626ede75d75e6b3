"""internlm/Intern-S1-Pro (1T) for header-only plans (tests/test_registry_rows.py).

config.json: every text_config value is the published one (internlm/Intern-S1-Pro and Intern-S1-Pro-BF16 print the
same, read through the search corpus): 64 / 4 heads of 128, hidden 4096, 94 layers all MoE (mlp_only_layers [],
decoder_sparse_step 1), 512 experts x 1536 top-8 in 8 router groups, vocab 155008, max_position_embeddings 262144,
rope_theta 5e6, FoPE (fope_sep_head, num_inv_freq null). The vision_config as far as the stored copy shows it (depth
24, hidden 1024, MLP 4096, 16 heads, 2304 positions, out 4096, patch 16); the keys after patch_size were cut off there
and are Qwen3-VL's (spatial_merge_size 2, temporal_patch_size 2, deepstack_visual_indexes [8, 16, 24]): the tower is
copied, so they change no padded dim. NOT read: the tensor layout (index, dtypes). It is reconstructed: Qwen3-VL-MoE's
names (tests/vlm_real.py), BF16, the routed experts fused in the orientation vLLM's interns1_pro.py reads ([E, 2I, H],
[E, H, I]), and the FoPE coefficients at the names its load_weights maps, [4, 45, 45] (45 of the 64 inverse
frequencies exceed 2π / 262144 at base 5e6), BF16 assumed. The docs/families.md row is marked †.
"""

from __future__ import annotations

from tests.moe_real import Tensors
from tests.vlm_real import BF16, qwen3_vl_tensors

INTERN_S1_PRO = {
    "architectures": ["InternS1ProForConditionalGeneration"], "image_token_id": 151655, "model_type": "interns1_pro",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1,
        "dtype": "bfloat16", "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
        "initializer_range": 0.02, "intermediate_size": 12288, "max_position_embeddings": 262144,
        "mlp_only_layers": [], "model_type": "interns1_pro_text", "moe_intermediate_size": 1536,
        "norm_topk_prob": True, "num_attention_heads": 64, "num_experts": 512, "num_experts_per_tok": 8,
        "num_hidden_layers": 94, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
        "rope_scaling": {"rope_type": "default", "fope_init_factor": 0.5, "fope_sep_head": True, "num_inv_freq": None},
        "rope_theta": 5000000, "router_n_groups": 8, "use_cache": True, "vocab_size": 155008,
    },
    "tie_word_embeddings": False, "transformers_version": "4.57.0.dev0", "video_token_id": 151656,
    "vision_config": {
        "depth": 24, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1024, "in_channels": 3,
        "initializer_range": 0.02, "intermediate_size": 4096, "model_type": "interns1_pro_vision", "num_heads": 16,
        "num_position_embeddings": 2304, "out_hidden_size": 4096, "patch_size": 16,
        # not in the stored copy: Qwen3-VL's values
        "spatial_merge_size": 2, "temporal_patch_size": 2, "deepstack_visual_indexes": [8, 16, 24],
    },
}
FOPE_FREQS = 45  # inverse frequencies 5e6^(-2i/128) > 2π / 262144: i = 0..44


def tensors(cfg: dict) -> Tensors:
    """Qwen3-VL-MoE's checkpoint with the experts as vLLM's InternS1Pro class reads them and the FoPE coefficients."""
    out = []
    for name, dtype, shape in qwen3_vl_tensors(cfg):
        if name.endswith("mlp.experts.gate_up_proj"):  # the hub's Qwen3-VL-MoE [E, H, 2I] -> [E, 2I, H]
            shape = (shape[0], shape[2], shape[1])
        elif name.endswith("mlp.experts.down_proj"):  # [E, I, H] -> [E, H, I]
            shape = (shape[0], shape[2], shape[1])
        out.append((name, dtype, shape))
    kv = cfg["text_config"]["num_key_value_heads"]
    return out + [(f"model.language_model.rotary_emb.{part}_coef", BF16, (kv, FOPE_FREQS, FOPE_FREQS))
                  for part in ("sin", "cos")]


MODELS = {"internlm/Intern-S1-Pro": (INTERN_S1_PRO, tensors)}
