"""Tiny DiffusionGemma checkpoints (transformers' DiffusionGemmaForBlockDiffusion: one Gemma 4 backbone, saved once
under `model.decoder.`, run as a causal encoder over the prompt and a bidirectional decoder over the canvas, with a
self-conditioning MLP), and their float64 canvas logits.

transformers casts the block-diffusion logits to float32; `logits` applies lm_head and the soft cap to the decoder's
float64 hidden states itself, so the proof stays in float64.
"""

from __future__ import annotations

import json

import torch
import transformers

from tests.gemma4_models import MOE, TEXT, VISION, _legacy, randomize


def build(path, moe: bool = True, seed: int = 0, **text_over) -> None:
    """Save a tiny DiffusionGemma (sliding and global layers, attention_k_eq_v, optionally the MoE block) to `path`
    in float64, config.json in the published form (global_head_dim / num_global_key_value_heads)."""
    torch.manual_seed(seed)
    text = {k: v for k, v in {**TEXT, **(MOE if moe else {}), **text_over}.items()
            if k not in ("hidden_size_per_layer_input", "vocab_size_per_layer_input")}
    cfg = transformers.DiffusionGemmaConfig(text_config=text, vision_config={**VISION, "model_type": "gemma4_vision"},
                                            image_token_id=250, boi_token_id=251, eoi_token_id=252, canvas_length=8)
    cfg.architectures = ["DiffusionGemmaForBlockDiffusion"]
    model = transformers.DiffusionGemmaForBlockDiffusion(cfg).to(torch.float64).eval()
    randomize(model)
    model.save_pretrained(path)
    _legacy(path / "config.json", multimodal=True)
    cfg = json.loads((path / "config.json").read_text())  # as published: neither flag (both engines imply them)
    for key in ("attention_k_eq_v", "enable_moe_block"):
        cfg["text_config"].pop(key, None)
    (path / "config.json").write_text(json.dumps(cfg, indent=2))


def logits(path, prompt: torch.Tensor, canvas: torch.Tensor, self_conditioning: torch.Tensor) -> torch.Tensor:
    """float64 logits over the canvas, conditioned on the prompt (encoder mode, causal) and on the previous step's
    logits (the self-conditioning MLP)."""
    model = transformers.DiffusionGemmaForBlockDiffusion.from_pretrained(path, dtype=torch.float64).eval()
    model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    with torch.no_grad():
        out = model.model(input_ids=prompt[None], decoder_input_ids=canvas[None],
                          self_conditioning_logits=self_conditioning[None].to(torch.float64))
        cap = model.final_logit_softcapping
        return (torch.tanh(model.lm_head(out.last_hidden_state) / cap) * cap)[0]
