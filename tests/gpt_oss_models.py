"""Tiny gpt-oss checkpoints written the way OpenAI ships gpt-oss: attention, router, embeddings in BF16, routed
experts as MXFP4 `_blocks` (two E2M1 codes per byte, 32 values per block) with e8m0 `_scales` and BF16 `_bias`.

Used by tests/test_gpt_oss.py (float64 logits in transformers) and tests/serve_models.py (served by vLLM).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

NOT_CONVERTED = ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]


def mxfp4_gpt_oss(path: Path, *, hidden: int, intermediate: int, experts: int, vocab: int, heads: int, kv: int,
                  head_dim: int, scales: tuple[int, int] = (122, 128), max_positions: int = 64,
                  sliding_window: int = 4) -> Path:
    """A two-layer gpt-oss saved by transformers with O(0.3) weights, its experts replaced by random MXFP4 codes
    with e8m0 scales drawn from [scales[0], scales[1]) (127 is 2^0)."""
    torch.manual_seed(0)
    cfg = transformers.CONFIG_MAPPING["gpt_oss"](
        num_hidden_layers=2, vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
        num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim, num_local_experts=experts,
        num_experts_per_tok=2, sliding_window=sliding_window, layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=max_positions)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if "norm" in name else 0.0, 0.3)
    model.save_pretrained(path)
    tensors = load_file(path / "model.safetensors")
    gen = torch.Generator().manual_seed(3)
    for layer in range(2):
        p = f"model.layers.{layer}.mlp.experts."
        for proj, out_f, in_f in (("gate_up_proj", 2 * intermediate, hidden), ("down_proj", hidden, intermediate)):
            del tensors[p + proj]
            tensors[p + proj + "_blocks"] = torch.randint(0, 256, (experts, out_f, in_f // 32, 16), generator=gen,
                                                          dtype=torch.uint8)
            tensors[p + proj + "_scales"] = torch.randint(*scales, (experts, out_f, in_f // 32), generator=gen,
                                                          dtype=torch.uint8)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    data = json.loads((path / "config.json").read_text())
    data["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": NOT_CONVERTED}
    (path / "config.json").write_text(json.dumps(data))
    return path
