"""Tiny real Gemma 4 checkpoints (transformers' own classes), for the float64 tier and the serving tier.

`build_gemma4(path, ...)` writes a Gemma4ForConditionalGeneration (vision tower, optionally audio) or a text-only
Gemma4ForCausalLM with sliding and global layers of different head_dim and kv heads (attention_k_eq_v: global layers
without v_proj), optionally the MoE block (dense MLP + fused routed experts) and KV-shared layers. Norm weights are
randomised (Gemma 4's RMSNorms multiply by w, which transformers initialises to 1) so a padding that disturbed
them would show. `legacy_config=True` rewrites config.json the way published Gemma 4 configs state the global layers
(global_head_dim, num_global_key_value_heads, no per_layer_config), which is what the Hub serves.
"""

from __future__ import annotations

import json

import torch
import transformers

TEXT = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True, vocab_size=256,
            max_position_embeddings=256, sliding_window=8, final_logit_softcapping=30.0,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
            hidden_size_per_layer_input=0, vocab_size_per_layer_input=256)
MOE = dict(enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=40)
VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
              head_dim=16, patch_size=4, pooling_kernel_size=2, position_embedding_size=64)
AUDIO = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, subsampling_conv_channels=[8, 4],
             output_proj_dims=32, conv_kernel_size=3, attention_chunk_size=4, attention_context_left=5)


def text_config(moe: bool = False, **over) -> dict:
    return {**TEXT, **(MOE if moe else {}), **over}


def build_gemma4(path, moe: bool = False, multimodal: bool = True, audio: bool = False, legacy_config: bool = True,
                 seed: int = 0, dtype=torch.float64, **text_over):
    """Save a tiny Gemma 4 to `path`; returns the model (eval, float64 unless `dtype`)."""
    torch.manual_seed(seed)
    text = transformers.Gemma4TextConfig(**text_config(moe, **text_over))
    if multimodal:
        cfg = transformers.Gemma4Config(text_config=text.to_dict(), vision_config=VISION,
                                        audio_config=AUDIO if audio else None, image_token_id=250, boi_token_id=251,
                                        eoi_token_id=252, video_token_id=253, audio_token_id=254, boa_token_id=255,
                                        eoa_token_index=249)
        cfg.architectures = ["Gemma4ForConditionalGeneration"]
        model = transformers.Gemma4ForConditionalGeneration(cfg)
    else:
        text.architectures = ["Gemma4ForCausalLM"]
        model = transformers.Gemma4ForCausalLM(text)
    model = model.to(dtype).eval()
    randomize(model)
    model.save_pretrained(path)
    if legacy_config:
        _legacy(path / "config.json", multimodal)
    return model


def randomize(model) -> None:
    """Random weights with the norms (which multiply by w), router scales and layer scalars away from their inits."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(("router.scale", "per_expert_scale")):
                p.normal_(1.0, 0.5)
            elif "layer_scalar" in name:
                p.fill_(0.9)
            else:
                p.normal_(0, 0.2)


def _legacy(config_path, multimodal: bool) -> None:
    """config.json as published Gemma 4 configs have it: the global layers as global_head_dim /
    num_global_key_value_heads, no per_layer_config."""
    cfg = json.loads(config_path.read_text())
    text = cfg["text_config"] if multimodal else cfg
    text.pop("per_layer_config", None)
    text["global_head_dim"] = TEXT["global_head_dim"]
    text["num_global_key_value_heads"] = TEXT["num_global_key_value_heads"]
    config_path.write_text(json.dumps(cfg, indent=2))
