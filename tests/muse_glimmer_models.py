"""Tiny Muse Glimmer checkpoints (`muse_glimmer`, the published layout: the language model under
`model.language_model.`, the vision tower, adapter and projection beside it) built with transformers'
MuseGlimmerForConditionalGeneration, and its float64 text logits.

transformers' strict MuseGlimmerTextConfig rejects hidden_size % heads != 0; vLLM reads the family through its own
config class, which does not. The derivative's padded heads need not divide the hidden size (6656 has no factor 3),
so `logits` builds the model from a config made with the published head counts and then given the padded ones: the
modeling code reads head_dim, never hidden // heads.
"""

from __future__ import annotations

import json

import torch

from tests.bailing_models import save

TEXT = dict(model_type="muse_glimmer_text", vocab_size=128, hidden_size=40, intermediate_size=36, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=4, max_position_embeddings=256,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, bos_token_id=1, eos_token_id=2)
VISION = dict(model_type="muse_glimmer_vision", hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
              intermediate_size=24, patch_size=4, pos_emb_height=4, pos_emb_width=4)
CONFIG = dict(architectures=["MuseGlimmerForConditionalGeneration"], model_type="muse_glimmer", out_hidden_size=128,
              projector_hidden_size=16, image_token_id=120, video_token_id=121)


def _model(cfg: dict):
    from transformers import MuseGlimmerConfig, MuseGlimmerForConditionalGeneration

    text = dict(cfg["text_config"])
    heads, kv = text["num_attention_heads"], text["num_key_value_heads"]
    text.update(num_attention_heads=TEXT["num_attention_heads"], num_key_value_heads=TEXT["num_key_value_heads"])
    config = MuseGlimmerConfig(**{**cfg, "text_config": text})
    object.__setattr__(config.text_config, "num_attention_heads", heads)  # past the strict hidden % heads check
    object.__setattr__(config.text_config, "num_key_value_heads", kv)
    return MuseGlimmerForConditionalGeneration(config).to(torch.float64)


def build(path, seed: int = 0, **text_over) -> dict:
    """Write a random tiny Muse Glimmer checkpoint (published names, float64) to `path`; returns its config.json."""
    cfg = {**CONFIG, "text_config": {**TEXT, **text_over}, "vision_config": dict(VISION)}
    model = _model(cfg)
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, p in model.state_dict().items():
        mean = 1.0 if name.endswith(("norm.weight", "layernorm.weight", "norm1.weight", "norm2.weight")) else 0.0
        tensors[name] = (torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.3 + mean).contiguous()
    return save(path, tensors, cfg)


def logits(path, ids: torch.Tensor) -> torch.Tensor:
    """float64 logits of the Muse Glimmer checkpoint at `path` for one sequence of token ids (no image)."""
    from safetensors.torch import load_file

    cfg = json.loads((path / "config.json").read_text())
    model = _model(cfg)
    state = {k: v for f in sorted(path.glob("*.safetensors")) for k, v in load_file(f).items()}
    model.load_state_dict(state, strict=True)
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids[None]).logits[0]


def build_served(path, seed: int = 0) -> dict:
    """A tiny Muse Glimmer for the serving tier (BF16, the published names, a word-level tokenizer): 4 / 2 heads of
    32 on hidden 128 (6 / 3 at TP 3), a one-layer tower of 4 heads. vLLM's own config class names the adapter's
    widths in vision_config (output_dim = hidden x merge², adapter_dim), which transformers' keeps at the top level."""
    from tests.serve_models import VOCAB, add_tokenizer
    from tests.tiny_moe import randomize

    text = dict(TEXT, vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2, head_dim=32,
                sliding_window=16, bos_token_id=1, eos_token_id=2)
    vision = dict(VISION, num_hidden_layers=1, intermediate_size=32)
    cfg = {**CONFIG, "out_hidden_size": 128, "projector_hidden_size": 16, "image_token_id": VOCAB - 2,
           "video_token_id": VOCAB - 1, "text_config": text, "vision_config": vision}
    torch.manual_seed(seed)
    model = _model(cfg)
    randomize(model)
    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    out = save(path, tensors, {**cfg, "vision_config": {**vision, "output_dim": 128, "adapter_dim": 16,
                                                         "merge_kernel_size": 2}})
    add_tokenizer(path)
    return out
