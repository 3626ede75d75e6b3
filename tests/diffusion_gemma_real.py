"""google/diffusiongemma-26B-A4B-it's published layout, header-only (issue 33's table, tests/test_registry_rows.py).

config.json: a public loader's test fixture quotes the checkpoint's config as "a literal snippet of the real
checkpoint config.json" (not re-read against huggingface.co: the row carries †): Gemma-4-26B-A4B's text config
(hidden 2816, 30 layers 5 sliding : 1 global, 16 heads, 8 kv of 256, 2 global kv of 512, dense 2112, 128 experts
top-8 of 704, vocab 262144) without the attention_k_eq_v and enable_moe_block keys, model_type
diffusion_gemma_text; Gemma 4's vision tower; canvas_length 256. Tensor names: transformers'
DiffusionGemmaForBlockDiffusion on the meta device, as save_pretrained writes them (the language model once under
`model.decoder.`, the encoder's tied copies left out but its layer_scalar buffers, lm_head tied).
"""

from __future__ import annotations

from tests.gemma4_real import GEMMA4_26B_A4B

_DROP = ("attention_k_eq_v", "enable_moe_block", "hidden_size_per_layer_input", "vocab_size_per_layer_input",
         "num_kv_shared_layers", "use_double_wide_mlp")
DIFFUSION_GEMMA_26B = {
    "architectures": ["DiffusionGemmaForBlockDiffusion"], "model_type": "diffusion_gemma", "canvas_length": 256,
    "boi_token_id": 255999, "eoi_token_id": 258882, "image_token_id": 258880, "tie_word_embeddings": True,
    "text_config": {**{k: v for k, v in GEMMA4_26B_A4B["text_config"].items() if k not in _DROP},
                    "model_type": "diffusion_gemma_text", "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1},
    "vision_config": dict(GEMMA4_26B_A4B["vision_config"])}


def tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every saved tensor: transformers' model on the meta device (no memory)."""
    import torch
    import transformers

    with torch.device("meta"):
        model = transformers.DiffusionGemmaForBlockDiffusion(transformers.DiffusionGemmaConfig(**{
            k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}))
    out = []
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" or (name.startswith("model.encoder.language_model.")
                                         and not name.endswith(".layer_scalar")):
            continue
        out.append((name, "BF16", tuple(t.shape)))
    return out
