"""Tiny late-2026 linear-attention checkpoints built with transformers' own classes: Qwen4-Exp (the Qwen3.8-Flash-Next
architecture) and Kimi-Linear (KDA + MLA), in the tensor names their releases publish.

Qwen4-Exp: 4 layers (three Gated DeltaNet, one QSA full-attention layer with its token indexer), hyper-connections
(2 streams), an n-gram per-layer embedding on layer 1 stored as `ngram_embedding.shard_N` (as released), 8 fused
experts plus a shared expert, a vision tower, and the MTP layer the release ships (`mtp.*`, transformers drops it).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

from tests.tiny_moe import randomize

QWEN4_TEXT = dict(vocab_size=256, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                  linear_num_value_heads=4, linear_conv_kernel_dim=4, moe_intermediate_size=48,
                  shared_expert_intermediate_size=32, num_experts=8, num_experts_per_tok=2, hc_count=2, hc_lowrank=8,
                  ple_layer_ids=[2], ple_embed_dim=64, ngram_size=3, heads_per_ngram=2, ngram_vocab_size_base=100,
                  make_ngram_vocab_size_divisible_by=4, split_ngram_parts=4, indexer_n_heads=2, indexer_kv_heads=1,
                  indexer_head_dim=16, indexer_budget=4, indexer_compress_ratio=2, eos_token_id=1,
                  output_gate_type="sigmoid", max_position_embeddings=256, tie_word_embeddings=False,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                                   "mrope_interleaved": True, "mrope_section": [2, 1, 1]})
QWEN4_VISION = dict(depth=1, hidden_size=32, intermediate_size=48, num_heads=2, out_hidden_size=64,
                    num_position_embeddings=16, patch_size=4)
QWEN4_TOKENS = dict(image_token_id=5, video_token_id=6, vision_start_token_id=7, vision_end_token_id=8)


def build_qwen4_exp(path: Path, seed: int = 0, text: dict | None = None, fused: bool = True) -> Path:
    """Save a tiny Qwen4-Exp (multimodal, with its MTP layer) under `path`; routed experts fused 3-D
    (`experts.gate_up_proj` [E, 2I, H], `experts.down_proj` [E, H, I], as Qwen3.8-Flash-Next's public tensor lists
    show them) or, with `fused=False`, per expert as transformers' save writes them."""
    torch.manual_seed(seed)
    config = transformers.Qwen4ExpConfig(text_config={**QWEN4_TEXT, **(text or {})}, vision_config=QWEN4_VISION,
                                         **QWEN4_TOKENS)
    model = transformers.Qwen4ExpForConditionalGeneration(config).eval()
    randomize(model)
    model.to(torch.bfloat16).save_pretrained(path)
    _add_qwen4_mtp(path, fused)
    return path


def _fuse_experts(tensors: dict) -> None:
    """Per-expert gate/up/down of every layer into the fused [E, 2I, H] / [E, H, I] tensors."""
    prefixes = sorted({n.split("experts.")[0] for n in tensors if ".mlp.experts.0.gate_proj." in n})
    for p in prefixes:
        n = len({k for k in tensors if k.startswith(p + "experts.") and k.endswith("gate_proj.weight")})
        gate_up = [torch.cat([tensors.pop(f"{p}experts.{e}.gate_proj.weight"),
                              tensors.pop(f"{p}experts.{e}.up_proj.weight")]) for e in range(n)]
        tensors[p + "experts.gate_up_proj"] = torch.stack(gate_up).contiguous()
        tensors[p + "experts.down_proj"] = torch.stack([tensors.pop(f"{p}experts.{e}.down_proj.weight")
                                                        for e in range(n)]).contiguous()


def _add_qwen4_mtp(path: Path, fused: bool) -> None:
    """The MTP layer as Qwen4-Exp releases store it: a copy of the last (QSA) layer under `mtp.layers.0.` with its
    hyper-connections, `mtp.fc_embedding` / `mtp.fc_hidden` [H, H], the pre-fc norms (embedding [H], hidden
    [hc x H]) and a hyper-connection mixer; config.json says there is one (mtp_num_hidden_layers)."""
    file = path / "model.safetensors"
    tensors = load_file(file)
    config = json.loads((path / "config.json").read_text())
    text = config["text_config"]
    last = f"model.language_model.layers.{text['num_hidden_layers'] - 1}."
    h, hc = text["hidden_size"], text["hc_count"]
    gen = torch.Generator().manual_seed(11)
    for name in [n for n in tensors if n.startswith(last)]:
        tensors["mtp.layers.0." + name.removeprefix(last)] = tensors[name].clone()
    mixer = "model.language_model.hyper_connection_mixer."
    for name in [n for n in tensors if n.startswith(mixer)]:
        tensors["mtp.hyper_connection_mixer." + name.removeprefix(mixer)] = tensors[name].clone()
    for fc in ("fc_embedding", "fc_hidden"):
        tensors[f"mtp.{fc}.weight"] = (torch.randn(h, h, generator=gen) * 0.05).to(torch.bfloat16)
    tensors["mtp.pre_fc_norm_embedding.weight"] = (torch.randn(h, generator=gen) * 0.1).to(torch.bfloat16)
    tensors["mtp.pre_fc_norm_hidden.weight"] = (torch.randn(hc * h, generator=gen) * 0.1).to(torch.bfloat16)
    if fused:
        _fuse_experts(tensors)
    save_file(tensors, file, metadata={"format": "pt"})
    text["mtp_num_hidden_layers"] = 1
    (path / "config.json").write_text(json.dumps(config, indent=2))


def qwen4_logits(path: Path) -> torch.Tensor:
    """float64 logits of a Qwen4-Exp on a prompt holding a 4-patch image (eager experts: grouped_mm takes no
    float64)."""
    model = transformers.AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float64).eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    gen = torch.Generator().manual_seed(0)
    v, tok = QWEN4_VISION, QWEN4_TOKENS
    pixels = torch.randn(16, 3 * 2 * v["patch_size"] ** 2, generator=gen, dtype=torch.float64)
    ids = torch.tensor([[1, 20, tok["vision_start_token_id"]] + [tok["image_token_id"]] * 4
                        + [tok["vision_end_token_id"], 30, 40, 50, 60, 70, 80, 30, 40, 50, 90]])
    with torch.no_grad():
        return model(input_ids=ids, pixel_values=pixels, image_grid_thw=torch.tensor([[1, 4, 4]]),
                     mm_token_type_ids=(ids == tok["image_token_id"]).long()).logits


# Kimi-Linear: layers 1-3 KDA, layer 4 MLA (linear_attn_config.kda_layers is 1-based, as published); layer 1 a dense
# MLP (`mlp.*`), the others MoE (`block_sparse_moe.*`: experts w1/w2/w3, router with correction bias, one shared
# expert). KDA heads 16 wide, 4 of them; MLA 4 heads (nope 16, rope 8, v 16, kv_lora 16, no q LoRA).
KIMI_LINEAR = dict(vocab_size=256, pad_token_id=0, bos_token_id=1, eos_token_id=2, hidden_size=64, intermediate_size=96,
                   moe_intermediate_size=48, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                   kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
                   num_local_experts=8, num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
                   tie_word_embeddings=False,
                   linear_attn_config={"head_dim": 16, "num_heads": 4, "short_conv_kernel_size": 4,
                                       "kda_layers": [1, 2, 3], "full_attn_layers": [4]})
# what transformers writes besides linear_attn_config; the published config.json has only the sub-object
_KIMI_DERIVED = ("linear_head_dim", "linear_num_heads", "linear_conv_kernel_dim", "layer_types", "mlp_layer_types")


def build_kimi_linear(path: Path, seed: int = 0, text: dict | None = None, published_config: bool = True) -> Path:
    """Save a tiny Kimi-Linear under `path` with the published tensor names (the dense MLP as `mlp.*`: transformers'
    save writes it under `block_sparse_moe.`); `published_config`: config.json keeps only linear_attn_config for the
    KDA dims, as the release's does."""
    torch.manual_seed(seed)
    model = transformers.KimiLinearForCausalLM(transformers.KimiLinearConfig(**{**KIMI_LINEAR, **(text or {})})).eval()
    randomize(model)
    model.to(torch.bfloat16).save_pretrained(path)
    file = path / "model.safetensors"
    tensors = load_file(file)
    dense = [n for n in tensors if ".block_sparse_moe." in n and n.split(".block_sparse_moe.")[1].split(".")[0]
             in ("gate_proj", "up_proj", "down_proj")]
    for name in dense:
        tensors[name.replace(".block_sparse_moe.", ".mlp.")] = tensors.pop(name)
    save_file(tensors, file, metadata={"format": "pt"})
    if published_config:
        config = json.loads((path / "config.json").read_text())
        for key in _KIMI_DERIVED:
            config.pop(key, None)
        (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


def kimi_linear_logits(path: Path) -> torch.Tensor:
    """float64 logits of a Kimi-Linear on two 20-token prompts (KDA's torch fallback computes in float32)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    ids = torch.randint(3, 256, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return model(input_ids=ids).logits


# GLM-5-Next: layers 0-2 KDA, layer 3 DSA (NoPE MLA + indexer with k-pool compression), mHC with 2 streams, layer 0
# dense, 8 experts + 1 shared, a vision tower, and the MTP layer at index 4 (GLM-4.x style: enorm, hnorm, eh_proj,
# shared_head.norm, one DSA decoder layer). KDA 4 heads of 16; MLA 4 heads (nope 16, v 16, kv_lora 16, q_lora 24).
GLM5_TEXT = dict(vocab_size=256, pad_token_id=0, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                 num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8,
                 num_experts_per_tok=2, n_shared_experts=1, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=0,
                 qk_nope_head_dim=16, v_head_dim=16, index_topk=8, index_head_dim=16, index_n_heads=2, index_kpool=2,
                 linear_head_dim=16, linear_num_heads=4, linear_conv_kernel_dim=4, hc_mult=2,
                 mlp_layer_types=["dense", "sparse", "sparse", "sparse"], tie_word_embeddings=False)
GLM5_VISION = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=48, out_hidden_size=64, patch_size=4,
                   image_size=16, projection_intermediate_size=64, spatial_merge_size=2, temporal_patch_size=2)
GLM5_TOKENS = dict(image_token_id=5, video_token_id=6, image_start_token_id=7, image_end_token_id=8,
                   video_start_token_id=9, video_end_token_id=10)


def build_glm5_next(path: Path, seed: int = 0, text: dict | None = None) -> Path:
    """Save a tiny GLM-5-Next (multimodal) under `path`, with the MTP layer its releases ship."""
    torch.manual_seed(seed)
    config = transformers.Glm5NextConfig(text_config={**GLM5_TEXT, **(text or {})}, vision_config=GLM5_VISION,
                                         **GLM5_TOKENS)
    model = transformers.Glm5NextForConditionalGeneration(config).eval()
    randomize(model)
    model.to(torch.bfloat16).save_pretrained(path)
    file = path / "model.safetensors"
    tensors = load_file(file)
    cfg = json.loads((path / "config.json").read_text())
    text_cfg = cfg["text_config"]
    n, h = text_cfg["num_hidden_layers"], text_cfg["hidden_size"]
    last, mtp = f"model.language_model.layers.{n - 1}.", f"model.language_model.layers.{n}."
    gen = torch.Generator().manual_seed(11)
    for name in [k for k in tensors if k.startswith(last)]:
        tensors[mtp + name.removeprefix(last)] = tensors[name].clone()
    tensors[mtp + "eh_proj.weight"] = (torch.randn(h, 2 * h, generator=gen) * 0.05).to(torch.bfloat16)
    for norm in ("enorm", "hnorm", "shared_head.norm"):
        tensors[f"{mtp}{norm}.weight"] = (torch.randn(h, generator=gen) * 0.1 + 1).to(torch.bfloat16)
    save_file(tensors, file, metadata={"format": "pt"})
    text_cfg["num_nextn_predict_layers"] = 1
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path


def glm5_logits(path: Path) -> torch.Tensor:
    """float64 logits of a GLM-5-Next on a prompt holding a 4-patch image."""
    model = transformers.AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float64).eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    gen = torch.Generator().manual_seed(0)
    v, tok = GLM5_VISION, GLM5_TOKENS
    pixels = torch.randn(16, 3 * 2 * v["patch_size"] ** 2, generator=gen, dtype=torch.float64)
    ids = torch.tensor([[1, 20, tok["image_start_token_id"]] + [tok["image_token_id"]] * 4
                        + [tok["image_end_token_id"], 30, 40, 50, 60, 70, 80, 30, 40, 50, 90]])
    with torch.no_grad():
        return model(input_ids=ids, pixel_values=pixels, image_grid_thw=torch.tensor([[1, 4, 4]]),
                     mm_token_type_ids=(ids == tok["image_token_id"]).long()).logits
