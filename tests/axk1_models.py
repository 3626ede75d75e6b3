"""Tiny A.X-K1 checkpoints (`axk1`) built with transformers' own AXK1ForCausalLM: its save writes the published names
(DeepSeek-V3's, with `post_mlp_layernorm` at the layer level, conversion_mapping's `axk1` reversed), plus the dense
layers' `post_mlp_layernorm` the published checkpoints also store; config.json is then given the published model_type
`AXK1` where asked (the hub's remote-code spelling).

Geometry: hidden 32, 4 MLA heads (q LoRA 24, kv LoRA 16, nope / rope / v 8), a dense first layer and two MoE layers
(6 experts in 2 groups, top 2, a shared expert), float64.
"""

from __future__ import annotations

import json

import torch
import transformers

CONFIG = dict(vocab_size=128, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=6, kv_lora_rank=16,
              q_lora_rank=24, qk_rope_head_dim=8, v_head_dim=8, qk_nope_head_dim=8, n_group=2, topk_group=1,
              num_experts_per_tok=2, first_k_dense_replace=1, bos_token_id=1, eos_token_id=2)


def build(path, seed: int = 0, dtype=torch.float64, published: bool = False, **over) -> dict:
    """Write a random tiny A.X-K1 to `path`; return its config.json (model_type `AXK1` when `published`)."""
    torch.manual_seed(seed)
    model = transformers.AXK1ForCausalLM(transformers.AXK1Config(**{**CONFIG, **over})).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
        for name, b in model.named_buffers():
            if "e_score_correction_bias" in name:
                b.normal_(0.0, 0.3)
    model.save_pretrained(path)
    add_dense_post_mlp_norms(path)
    cfg = json.loads((path / "config.json").read_text())
    if published:
        cfg["model_type"] = "AXK1"
        (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return cfg


def add_dense_post_mlp_norms(path) -> None:
    """The dense layers' `post_mlp_layernorm`, which the published checkpoints store for every layer and transformers'
    save leaves out (its dense layers have none); vLLM's AXK1DecoderLayer builds one in every layer (applied to the MoE
    layers only) and refuses a checkpoint without it ("Following weights were not initialized from checkpoint")."""
    from safetensors.torch import load_file, save_file

    cfg = json.loads((path / "config.json").read_text())
    tensors = load_file(path / "model.safetensors")
    norm = tensors["model.norm.weight"]
    for i in range(cfg.get("first_k_dense_replace", 1)):
        tensors.setdefault(f"model.layers.{i}.post_mlp_layernorm.weight", torch.ones_like(norm))
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})


def logits(path, ids: torch.Tensor) -> torch.Tensor:
    """float64 logits of transformers' AXK1ForCausalLM (eager experts) for one sequence."""
    model = transformers.AXK1ForCausalLM.from_pretrained(path, dtype=torch.float64,
                                                         experts_implementation="eager").eval()
    with torch.no_grad():
        return model(input_ids=ids[None]).logits[0]
