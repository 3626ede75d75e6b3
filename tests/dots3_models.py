"""Tiny Dots3 Note checkpoints built with transformers' own classes, in the published layout: config.json flat (the text
model's keys at the top with the sliding layers' `swa_*` keys, vision_config / audio_config beside them, as vLLM's
Dots3NoteConfig and transformers' legacy reading both take it), tensors under the published names (`model.layers.*`,
`vision_encoder.*`, `audio_encoder.*`), and an MTP layer at index num_hidden_layers as vLLM's Dots3NoteMTP reads it
(the sliding geometry, a dense MLP, enorm / hnorm / eh_proj / shared_head.norm, `model.mtp.embed_tokens`).

Geometry: full (DSA) layers 4 heads (qk_nope 16, qk_rope 8, v 16, q LoRA 48, kv LoRA 32), sliding layers 2 heads
(qk_nope 24, qk_rope 8, v 16, q LoRA 40, kv LoRA 48), the published 2 : 1 ratio; the indexer keeps 4 of 12 keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

from tests.tiny_moe import randomize

LAYER_TYPES = ["full_attention", "sliding_attention", "full_attention"]
FLAT = dict(
    vocab_size=160, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
    layer_types=LAYER_TYPES, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=48, kv_lora_rank=32,
    qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, rope_theta=80000000.0,
    swa_num_attention_heads=2, swa_num_key_value_heads=2, swa_q_lora_rank=40, swa_kv_lora_rank=48,
    swa_head_dim=32, swa_qk_nope_head_dim=24, swa_qk_rope_head_dim=8, swa_v_head_dim=16, swa_rope_theta=50000.0,
    sliding_window_size=5, attention_gate_type="headwise", swa_attention_gate_type="headwise",
    apply_mla_qkv_lora_rescale=True, attention_bias=False, attention_dropout=0.0, index_n_heads=2, index_head_dim=16,
    index_topk=4, n_routed_experts=4, n_shared_experts=1, moe_shared_expert_intermediate_size=32,
    num_experts_per_tok=2, first_k_dense_replace=1,
    moe_layer_freq=1, routed_scaling_factor=2.5, norm_topk_prob=True, scoring_func="sigmoid", topk_method="noaux_tc",
    hidden_act="silu", rms_norm_eps=1e-5, max_position_embeddings=64, tie_word_embeddings=False,
    pad_token_id=0, bos_token_id=1, eos_token_id=2,
)
VISION = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2, patch_size=4,
              moe_intermediate_size=16, num_local_experts=2, pyramid_num_routed=[-1, 2], adapter_in_dim=32,
              adapter_out_dim=64)
AUDIO = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2, adapter_input_size=32,
             adapter_out_dim=64, downsample_hidden_size=8, feature_size=16)


def config_dict(**overrides) -> dict:
    """The published (flat) config.json."""
    flat = {**FLAT, **overrides}
    return {"architectures": ["Dots3NoteForCausalLM"], "model_type": "dots3_note", **flat,
            "vision_config": VISION, "audio_config": AUDIO}


def load(path: Path, dtype=torch.float64, **overrides):
    """transformers' Dots3NoteForConditionalGeneration from a checkpoint folder (its flat config read as published)."""
    return transformers.AutoModelForImageTextToText.from_pretrained(path, dtype=dtype, experts_implementation="eager",
                                                                    **overrides).eval()


def build(path: Path, seed: int = 0, dtype=torch.float64, **overrides) -> tuple[torch.nn.Module, Path]:
    """A tiny float64 Dots3 Note saved under the published names, with its MTP layer; returns (model, path)."""
    torch.manual_seed(seed)
    data = config_dict(**overrides)
    cfg = transformers.CONFIG_MAPPING["dots3_note"](**{k: v for k, v in data.items() if k != "architectures"})
    model = transformers.AutoModelForImageTextToText.from_config(cfg, experts_implementation="eager").double().eval()
    randomize(model)
    model.to(dtype).save_pretrained(path)
    (path / "config.json").write_text(json.dumps(data, indent=2))  # the published flat form
    _add_mtp_layer(path, data)
    return load(path), path


def _add_mtp_layer(path: Path, cfg: dict) -> None:
    """model.layers.{n}: sliding layer 1's attention and dense layer 0's MLP (+0.5), its own norms and projection."""
    file = path / "model.safetensors"
    tensors = load_file(file)
    n, h = cfg["num_hidden_layers"], cfg["hidden_size"]
    sliding = LAYER_TYPES.index("sliding_attention")
    for name, t in list(tensors.items()):
        if name.startswith(f"model.layers.{sliding}.self_attn.") or name.startswith(f"model.layers.{sliding}.") and \
                "layernorm" in name:
            tensors[name.replace(f".{sliding}.", f".{n}.", 1)] = t.clone() + 0.5
        if name.startswith("model.layers.0.mlp."):
            tensors[name.replace(".0.", f".{n}.", 1)] = t.clone() + 0.5
    gen = torch.Generator().manual_seed(7)
    own = {"enorm.weight": (h,), "hnorm.weight": (h,), "eh_proj.weight": (h, 2 * h), "shared_head.norm.weight": (h,)}
    for name, shape in own.items():
        tensors[f"model.layers.{n}.{name}"] = torch.randn(shape, generator=gen, dtype=torch.float64).to(
            tensors["model.norm.weight"].dtype)
    tensors["model.mtp.embed_tokens.weight"] = tensors["model.embed_tokens.weight"].clone() + 0.5
    save_file(tensors, file, metadata={"format": "pt"})
