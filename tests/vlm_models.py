"""Tiny vision-language models built with transformers (float32, random O(0.3) weights): Qwen3-VL dense / MoE,
GLM-4.5V, Kimi-K2.5 and EXAONE 4.5, for the float64 proofs (test_vlm.py) and the serving tier (test_serve_vlm.py)."""

from __future__ import annotations

import json

import torch
import transformers
from safetensors.torch import load_file, save_file

from tests.tiny_moe import randomize

TEXT = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, max_position_embeddings=256, rms_norm_eps=1e-6,
            tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                        "mrope_section": [4, 6, 6], "mrope_interleaved": True})
MOE = dict(moe_intermediate_size=96, num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1)
VISION = dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=2, patch_size=8, spatial_merge_size=2,
              temporal_patch_size=2, out_hidden_size=128, num_position_embeddings=64, deepstack_visual_indexes=[0])
TOKENS = dict(image_token_id=5, video_token_id=6, vision_start_token_id=7, vision_end_token_id=8)


def build_qwen3_vl(path, moe: bool, hub_layout: bool = False):
    torch.manual_seed(0)
    cls = transformers.Qwen3VLMoeConfig if moe else transformers.Qwen3VLConfig
    cfg = cls(text_config={**TEXT, **(MOE if moe else {})}, vision_config=VISION, **TOKENS)
    model = transformers.AutoModelForImageTextToText.from_config(cfg).eval()
    randomize(model)
    model.save_pretrained(path)
    if hub_layout:  # the layout Qwen ships and vLLM reads: the last two axes of each fused expert tensor swapped
        tensors = load_file(path / "model.safetensors")
        for name in [n for n in tensors if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
            tensors[name] = tensors[name].transpose(1, 2).contiguous()
        save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    return path


def build_glm4v(path):
    torch.manual_seed(0)
    text = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, moe_intermediate_size=96, n_routed_experts=4,
                num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1,
                attention_bias=True, max_position_embeddings=256,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3],
                                 "partial_rotary_factor": 0.5})
    vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, patch_size=8, spatial_merge_size=2,
                  temporal_patch_size=2, out_hidden_size=128, image_size=32)
    cfg = transformers.Glm4vMoeConfig(text_config=text, vision_config=vision, image_token_id=5, video_token_id=6,
                                      image_start_token_id=7, image_end_token_id=8, video_start_token_id=9,
                                      video_end_token_id=10)
    model = transformers.AutoModelForImageTextToText.from_config(cfg).eval()
    randomize(model)
    model.save_pretrained(path)
    return path


KIMI_TEXT = dict(model_type="kimi_k2", vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=4, q_lora_rank=96, kv_lora_rank=64, qk_rope_head_dim=32,
                 qk_nope_head_dim=32, v_head_dim=32, n_routed_experts=4, n_group=1, topk_group=1,
                 first_k_dense_replace=1, n_shared_experts=1, num_experts_per_tok=2, moe_intermediate_size=64,
                 max_position_embeddings=256, tie_word_embeddings=False)
KIMI_VISION = dict(patch_size=4, pos_emb_height=8, pos_emb_width=8, pos_emb_time=2, num_attention_heads=2,
                   num_hidden_layers=1, hidden_size=32, intermediate_size=64)
# transformers 5.24 saves these prefixes; the hub's files (and vLLM) name them as on the right
KIMI_HUB_NAMES = {"language_model.model.blocks.": "language_model.model.layers.", "model.mm_projector.": "mm_projector.",
                  "vision_tower.encoder.patch_embed.": "vision_tower.patch_embed."}


def build_kimi_k25(path, text: dict | None = None, seed: int = 0, media_id: int = 5, dtype=None):
    """Kimi-K2.5 saved as the hub has it: its tensor names (KIMI_HUB_NAMES), its architecture name
    (KimiK25ForConditionalGeneration, which vLLM registers) and an untied head."""
    torch.manual_seed(seed)
    cfg = transformers.Kimi_K25Config(text_config=text or KIMI_TEXT, vision_config=KIMI_VISION,
                                      media_placeholder_token_id=media_id, image_token_id=media_id,
                                      video_token_id=media_id + 1, projection_hidden_size=32, tie_word_embeddings=False)
    model = transformers.AutoModelForImageTextToText.from_config(cfg).eval()
    randomize(model)
    if dtype is not None:
        model.to(dtype)
    model.save_pretrained(path)
    hub = {}
    for name, t in load_file(path / "model.safetensors").items():
        for old, new in KIMI_HUB_NAMES.items():
            name = name.replace(old, new)
        hub[name] = t
    save_file(hub, path / "model.safetensors", metadata={"format": "pt"})
    data = json.loads((path / "config.json").read_text())
    data["architectures"] = ["KimiK25ForConditionalGeneration"]
    (path / "config.json").write_text(json.dumps(data, indent=2))
    return path


EXAONE45_TEXT = dict(model_type="exaone4", vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
                     rms_norm_eps=1e-6, sliding_window=4, sliding_window_pattern=4, tie_word_embeddings=False)
EXAONE45_VISION = dict(depth=2, hidden_size=64, intermediate_size=96, num_heads=4, num_key_value_heads=2, patch_size=8,
                       spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=128, window_size=32,
                       fullatt_block_indexes=[1])


def build_exaone4_5(path, mtp: bool = True):
    """EXAONE 4.5 (Exaone4_5_ForConditionalGeneration) as transformers saves it, plus (`mtp`) one MTP layer under
    `mtp.` in EXAONE MoE's layout, which vLLM's Exaone4_5_MTP reads and transformers ignores on load."""
    torch.manual_seed(0)
    cfg = transformers.Exaone4_5_Config(text_config=EXAONE45_TEXT, vision_config=EXAONE45_VISION, image_token_id=5,
                                        video_token_id=6)
    model = transformers.AutoModelForImageTextToText.from_config(cfg).eval()
    randomize(model)
    model.save_pretrained(path)
    if mtp:
        tensors = load_file(path / "model.safetensors")
        g = torch.Generator().manual_seed(3)
        layer = "model.language_model.layers.0."
        for name in [n for n in tensors if n.startswith(layer)]:
            tensors["mtp.layers.0." + name[len(layer):]] = torch.randn(tensors[name].shape, generator=g) * 0.3
        h = EXAONE45_TEXT["hidden_size"]
        tensors["mtp.fc.weight"] = torch.randn(h, 2 * h, generator=g) * 0.3
        for norm in ("norm", "pre_fc_norm_hidden", "pre_fc_norm_embedding"):
            tensors[f"mtp.{norm}.weight"] = 1 + torch.randn(h, generator=g) * 0.1
        save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    return path
