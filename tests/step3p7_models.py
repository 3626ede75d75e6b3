"""Tiny Step-3.7 checkpoints (`step3p7`) in the published layout, built with transformers' own
Step3p7ForConditionalGeneration: its save writes the published tensor names (transformers' conversion mapping
reversed: `model.layers.N.*`, stacked experts `moe.{gate,up,down}_proj.weight`, `moe.router_bias`, `share_expert.*`,
`vision_model.*` in the hub's names, `vit_large_projector`), and config.json is then written in the published form
(`num_attention_groups`, `attention_other_setting`, `moe_layers_enum`), which vLLM's Step3p5 classes read.

Geometry: full layers 4 heads / 2 kv (group 2), sliding layers 6 heads / 2 kv (group 3), head_dim 8 (Step-3.7-Flash:
64 / 8 and 96 / 8, head_dim 128); a dense first layer and two MoE layers (6 experts: vLLM's Step3p5 MoE block refuses TP > experts; top 2, a
shared expert).
"""

from __future__ import annotations

import json
import shutil

import torch
import transformers

IMAGE_TOKEN = 5


def published_config(**over) -> dict:
    text = {"hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "num_attention_groups": 2,
            "head_dim": 8, "attention_other_setting": {"attention_type": "sliding_attention", "num_attention_heads": 6,
                                                       "num_attention_groups": 2, "head_dim": 8, "true_head_dim": 8},
            "layer_types": ["full_attention", "sliding_attention", "sliding_attention"], "sliding_window": 4,
            "att_impl_type": "GQA", "use_head_wise_attn_gate": True, "moe_layers_enum": "1,2", "vocab_size": 128,
            "intermediate_size": 48, "moe_intermediate_size": 16, "moe_num_experts": 6, "moe_top_k": 2,
            "share_expert_dim": 24, "use_moe_router_bias": True, "need_fp32_gate": True, "norm_expert_weight": True,
            "moe_router_activation": "sigmoid", "moe_router_scaling_factor": 1.5, "rope_theta": [10000.0, 5000.0, 5000.0],
            "swiglu_limits": [0.0, 0.0, 7.0], "swiglu_limits_shared": [0.0, 0.0, 7.0],
            "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "model_type": "step3p5"}
    text.update(over)
    return {"architectures": ["Step3p7ForConditionalGeneration"], "model_type": "step3p7", "text_config": text,
            "vision_config": {"width": 16, "layers": 1, "heads": 2, "image_size": 56, "patch_size": 14},
            "projector_bias": False, "image_token_id": IMAGE_TOKEN}


def build_step3p7(path, seed: int = 0, dtype=torch.float64, **over) -> dict:
    """Write a tiny random Step-3.7 to `path` (published names and config form); return its config.json."""
    cfg = published_config(**over)
    config = transformers.Step3p7Config(**json.loads(json.dumps(cfg)))
    torch.manual_seed(seed)
    model = transformers.Step3p7ForConditionalGeneration(config).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
        experts = cfg["text_config"]["moe_num_experts"]
        for b in model.buffers():
            if b.is_floating_point() and b.dim() == 1 and b.numel() == experts:  # the routers' correction bias
                b.normal_(0.0, 0.3)
    model.save_pretrained(path)
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return cfg


def text_only(model, into):
    """The same checkpoint as vLLM's text-only Step3p5ForCausalLM reads it (a Step-3.5 checkpoint): text_config's keys
    at the top, the vision tensors left out, every other file (tokenizer, vocab plugin) as it is."""
    from safetensors.torch import load_file, save_file

    into.mkdir(parents=True)
    for f in model.iterdir():
        if f.is_dir():
            shutil.copytree(f, into / f.name)
        elif not f.name.endswith(".safetensors") and f.name not in ("config.json", "model.safetensors.index.json"):
            shutil.copy(f, into / f.name)
    tensors = {}
    for f in sorted(model.glob("*.safetensors")):
        tensors.update({k: v for k, v in load_file(f).items() if not k.startswith(("vision_model.", "vit_"))})
    save_file(tensors, into / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((model / "config.json").read_text())
    text = {**cfg["text_config"], "model_type": "step3p5", "architectures": ["Step3p5ForCausalLM"]}
    (into / "config.json").write_text(json.dumps(text, indent=2))
    return into


def with_tower(step3p5, tower_from, into):
    """A Step-3.5 checkpoint given back the vision tower of the Step-3.7 it came from (`text_only`'s inverse), so that
    transformers' Step3p7ForConditionalGeneration, whose language model is Step-3.5's, loads it at its published
    names (transformers has no text-only Step-3.5 class)."""
    from safetensors.torch import load_file, save_file

    into.mkdir(parents=True)
    tensors = {}
    for f in sorted(step3p5.glob("*.safetensors")):
        tensors.update(load_file(f))
    tensors.update({k: v for k, v in load_file(tower_from / "model.safetensors").items()
                    if k.startswith(("vision_model.", "vit_"))})
    save_file(tensors, into / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((tower_from / "config.json").read_text())
    text = json.loads((step3p5 / "config.json").read_text())
    text.pop("architectures", None)
    (into / "config.json").write_text(json.dumps({**cfg, "text_config": text}, indent=2))
    return into


def build_served(path, seed: int = 1):
    """A tiny Step-3.7 that vLLM's CPU build serves (its language model, through the Step3p5 classes), with the
    serving tier's tokenizer; returns `path`."""
    from tests import serve_models

    other = dict(published_config()["text_config"]["attention_other_setting"], head_dim=32, true_head_dim=32)
    # head_dim 32 (vLLM's CPU attention takes it), no swiglu clamp (the clamped fused-MoE activation is not the point),
    # softmax routing: the CPU router asserts softmax outside grouped top-k (cpu_router._compute_routing), and
    # Step3p5 routes ungrouped; the published sigmoid + bias routing stops there (original and derivative alike)
    build_step3p7(path, seed=seed, dtype=torch.bfloat16, hidden_size=128, head_dim=32, attention_other_setting=other,
                  vocab_size=serve_models.VOCAB, intermediate_size=256, moe_intermediate_size=64, share_expert_dim=64,
                  sliding_window=16, max_position_embeddings=256, moe_router_activation="softmax",
                  swiglu_limits=[0.0] * 3, swiglu_limits_shared=[0.0] * 3)
    serve_models.add_tokenizer(path)
    return path
