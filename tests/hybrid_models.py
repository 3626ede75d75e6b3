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
