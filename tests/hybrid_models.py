"""Tiny Falcon-H1 checkpoints in the published layout, built with transformers' FalconH1ForCausalLM.

transformers saves FalconH1 under the published names (`model.layers.N.{self_attn,mamba,feed_forward}.*`, `lm_head`).
Every parameter is random (the Mamba2 A_log / D / dt_bias at realistic values, the gated norm's weight around 1), and
every muP multiplier differs from 1 and from the others, as Falcon-H1-34B's do (tests/hybrid_real.py), so a padded
value in the wrong section, or a multiplier applied to the wrong rows, changes the logits.
"""

from __future__ import annotations

import json

import torch
import transformers

from tests.nemotron_h_models import SSM_LEAVES
from tests.tiny_moe import randomize_seeded

# Mamba2: 8 heads of 8 channels in 2 groups (state 16), width 64; attention 4 heads / 2 kv of 16 (hidden 64 would give
# 16 too: head_dim is stated, as the 34B states 128 with hidden 5120 / 20 heads = 256); MLP 96.
FALCON_TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, mamba_d_ssm=64, mamba_n_heads=8, mamba_d_head=8,
                   mamba_n_groups=2, mamba_d_state=16, mamba_d_conv=4, mamba_chunk_size=8, mamba_expand=2,
                   mamba_conv_bias=True, mamba_proj_bias=False, mamba_rms_norm=True, mamba_norm_before_gate=False,
                   max_position_embeddings=128, rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                   embedding_multiplier=2.5, lm_head_multiplier=0.3, mlp_multipliers=[0.7, 1.6], key_multiplier=0.6,
                   attention_in_multiplier=1.3, attention_out_multiplier=0.4,
                   ssm_multipliers=[0.35, 1.7, 0.6, 1.4, 0.8],
                   ssm_in_multiplier=0.9, ssm_out_multiplier=1.2)


def build_falcon_h1(path, seed: int = 0, dtype=torch.float64, **over) -> dict:
    """Save a tiny FalconH1 under `path` in the published layout; returns its config.json."""
    cfg = transformers.FalconH1Config(**{**FALCON_TINY, **over})
    cfg.architectures = ["FalconH1ForCausalLM"]
    torch.manual_seed(seed)
    model = transformers.FalconH1ForCausalLM(cfg).to(dtype).eval()
    randomize_seeded(model, seed, SSM_LEAVES)
    model.save_pretrained(path)
    return json.loads((path / "config.json").read_text())


def falcon_h1_logits(path, ids: torch.Tensor) -> torch.Tensor:
    model = transformers.FalconH1ForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    with torch.no_grad():
        return model(input_ids=ids).logits


# Ling 3 (bailing_hybrid, BailingMoeV3ForCausalLM): 4 layers in groups of 2 (KDA, MLA, KDA, MLA), 4 heads (KDA head_dim
# 16; MLA nope 16 + rope 8, v 16, kv_lora_rank 16, q_proj without LoRA, a headwise output gate), a dense first MLP,
# then MoE of 4 experts with one shared expert. Expert and shared widths 768 need no padding at TP 3 or 6: vLLM builds
# the shared expert from moe_shared_expert_intermediate_size, transformers from moe_intermediate_size, so the float64
# proof keeps the two equal.
LING3_TINY = dict(vocab_size=256, pad_token_id=0, bos_token_id=1, eos_token_id=1, hidden_size=64, intermediate_size=96,
                  moe_intermediate_size=768, moe_shared_expert_intermediate_size=768, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=4, head_dim=16, num_experts=4, num_experts_per_tok=2,
                  num_shared_experts=1, n_group=1, topk_group=1, first_k_dense_replace=1, layer_group_size=2,
                  kv_lora_rank=16, q_lora_rank=None, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                  short_conv_kernel_size=4, max_position_embeddings=128, num_nextn_predict_layers=0)
KDA_LEAVES = {"A_log": lambda shape, g: torch.rand(shape, generator=g) * 1.4,
              "dt_bias": lambda shape, g: torch.rand(shape, generator=g) * 2.0 - 4.5}


# A stand-in for a Ling 3 checkpoint's own config code (auto_map; the published file was not read offline): vLLM
# 0.32 registers its BailingMoeV3TextConfig (model_type bailing_hybrid) only inside the VL config, and the serving
# lock's transformers (< 5.20) has no bailing_hybrid, so a text checkpoint reaches vLLM through remote code.
LING3_CONFIG_CLASS = """from vllm.transformers_utils.configs.bailing_moe_v3_vl import BailingMoeV3TextConfig


class BailingHybridConfig(BailingMoeV3TextConfig):
    model_type = "bailing_hybrid"
"""


def build_ling3(path, seed: int = 0, dtype=torch.float64, remote_code: bool = False, **over) -> dict:
    """Save a tiny Ling 3 under `path` in the published layout (transformers writes the published names back; its
    config.json gets the published architectures, the headwise gate and no_kda_lora, as vLLM reads them; with
    `remote_code`, LING3_CONFIG_CLASS and its auto_map)."""
    cfg = transformers.BailingHybridConfig(**{**LING3_TINY, **over})
    torch.manual_seed(seed)
    model = transformers.BailingHybridForCausalLM(cfg).to(dtype).eval()
    randomize_seeded(model, seed, KDA_LEAVES)
    model.save_pretrained(path)
    config_json = json.loads((path / "config.json").read_text())
    config_json.update(architectures=["BailingMoeV3ForCausalLM"], gated_attention_proj_granularity_type="head_wise",
                       no_kda_lora=True)
    if remote_code:
        (path / "configuration_bailing_hybrid.py").write_text(LING3_CONFIG_CLASS)
        config_json["auto_map"] = {"AutoConfig": "configuration_bailing_hybrid.BailingHybridConfig"}
    (path / "config.json").write_text(json.dumps(config_json, indent=2))
    return config_json


def ling3_logits(path, ids: torch.Tensor) -> torch.Tensor:
    model = transformers.BailingHybridForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    with torch.no_grad():
        return model(input_ids=ids).logits
