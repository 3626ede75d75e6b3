"""Tiny Inkling checkpoints in the published layout, built with transformers' InklingForConditionalGeneration.

transformers saves Inkling under the published names (`model.llm.layers.N.attn.wq_du`, `attn.k_sconv`,
`mlp.experts.w13_weight`, `model.llm.unembed`, `model.visual.*`, `model.audio.*`); `build_inkling` adds the MTP depths
published checkpoints carry (`mtp_config`, `model.mtp.layers.N.{hidden_norm, embed_norm, input_proj,
transformer_block.*}`: a sliding and a global depth, dense MLP), which transformers skips on load. Every parameter is
random (O(0.3), norms and scales around 1), so a padded value in the wrong place changes the logits.

Tiny geometry: hidden 48, 4 heads of 8, 1 global kv head (group 4), 2 sliding kv heads (group 2), layers 0, 1 and 3
sliding; a dense first layer (96 wide) then MoE (4 experts of 384 and one shared expert: widths that shard at TP 3 and
6 as they are, since hubpad does not pad Inkling's interleaved gate/up rows).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

from tests.tiny_moe import randomize_seeded

TEXT = dict(vocab_size=256, hidden_size=48, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=1,
            head_dim=8, swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=8, sliding_window_size=6,
            d_rel=4, rel_extent=16, local_layer_ids=[0, 1, 3], mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
            intermediate_size=96, moe_intermediate_size=384, n_routed_experts=4, num_experts_per_tok=2,
            n_shared_experts=1, max_position_embeddings=128, log_scaling_n_floor=4)
# towers small enough to build without scipy (transformers plans the vision tower's scales with it otherwise)
VISION = dict(num_hidden_layers=4, patch_size=4, temporal_patch_size=2)
AUDIO = dict(n_mel_bins=4, mel_vocab_size=8)
MTP = {"num_nextn_predict_layers": 2, "chain_hidden_post_norm": True, "local_layer_ids": [0]}


def build_inkling(path, seed: int = 0, dtype=torch.float64, mtp: bool = True, **over) -> dict:
    """Save a tiny Inkling in the published layout under `path`; returns its config.json."""
    cfg = transformers.InklingConfig(text_config={**TEXT, **over}, vision_config=VISION, audio_config=AUDIO)
    cfg.architectures = ["InklingForConditionalGeneration"]
    torch.manual_seed(seed)
    model = transformers.InklingForConditionalGeneration(cfg).to(dtype).eval()
    randomize_seeded(model, seed)
    model.save_pretrained(path)
    config = json.loads((path / "config.json").read_text())
    if mtp:
        file = path / "model.safetensors"
        tensors = load_file(file)
        tensors.update(_mtp_depths(tensors, {**TEXT, **over}, dtype))
        save_file(tensors, file, metadata={"format": "pt"})
        config["mtp_config"] = dict(MTP)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return config


def text_only(mm: Path, path: Path) -> dict:
    """The text-only checkpoint vLLM serves as InklingForCausalLM (model_type inkling_model) cut from a tiny Inkling in
    the published layout: its text_config at the top of config.json (with the mtp_config), the language model and MTP
    depths under the same names, no towers. Returns its config.json."""
    cfg = json.loads((mm / "config.json").read_text())
    flat = {**cfg["text_config"], "architectures": ["InklingForCausalLM"], "model_type": "inkling_model"}
    flat.update({"mtp_config": cfg["mtp_config"]} if "mtp_config" in cfg else {})
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v for k, v in load_file(mm / "model.safetensors").items() if k.startswith(("model.llm.", "model.mtp."))},
              path / "model.safetensors", metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(flat, indent=2))
    return flat


def load_text(path: Path, dtype=torch.float64):
    """transformers' text class (InklingForCausalLM) on a text-only checkpoint in the published names. transformers has
    no conversion for its inkling_text model type, so the class gets inkling_mm_model's, with the language model at
    `model.` instead of `model.language_model.` and without the towers' renames."""
    from transformers.conversion_mapping import get_checkpoint_conversion_mapping, register_checkpoint_conversion_mapping
    from transformers.core_model_loading import WeightRenaming

    mapping = []
    for rule in get_checkpoint_conversion_mapping("inkling_mm_model"):
        if isinstance(rule, WeightRenaming):
            if any(t in p for p in rule.source_patterns for t in ("audio", "visual", "vision_tower")):
                continue
            rule = WeightRenaming(list(rule.source_patterns),
                                  [p.replace("model.language_model.", "model.") for p in rule.target_patterns])
        mapping.append(rule)
    register_checkpoint_conversion_mapping("InklingForCausalLM", mapping, overwrite=True)
    flat = json.loads((path / "config.json").read_text())
    config = transformers.InklingTextConfig(**{k: v for k, v in flat.items()
                                               if k not in ("architectures", "model_type", "mtp_config")})
    return transformers.InklingForCausalLM.from_pretrained(path, config=config, dtype=dtype).eval()


def _mtp_depths(tensors: dict, text: dict, dtype) -> dict:
    """Two MTP depths as vLLM's InklingMTP loads them: depth 0 sliding (layer 0's block), depth 1 global (layer 2's
    attention with layer 0's dense MLP), each with its norms and input projection; the chain norm."""
    h, g = text["hidden_size"], torch.Generator().manual_seed(13)
    out = {"model.mtp.chain_norm.weight": (1.0 + 0.3 * torch.randn(h, generator=g)).to(dtype)}
    for depth, attn in ((0, 0), (1, 2)):
        p = f"model.mtp.layers.{depth}."
        for n in ("hidden_norm", "embed_norm"):
            out[p + n + ".weight"] = (1.0 + 0.3 * torch.randn(h, generator=g)).to(dtype)
        out[p + "input_proj.weight"] = (0.3 * torch.randn(h, 2 * h, generator=g)).to(dtype)
        for name, t in tensors.items():
            for layer, keep in ((attn, ".attn."), (0, "")):
                src = f"model.llm.layers.{layer}."
                if name.startswith(src) and (keep in name if keep else ".attn." not in name):
                    out[p + "transformer_block." + name[len(src):]] = t.clone()
    return out
