"""Tiny hybrid linear-attention checkpoints (Qwen3.5 dense / MoE, multimodal or text-only, and Qwen3-Next), built with
transformers, plus the MTP layer their releases ship and transformers drops (`mtp.*`: fc, three norms and one
full-attention decoder layer, experts stored per expert).

GDN heads are 64 wide (vLLM's CPU prefill kernel takes key and value head sizes 64 or 128, equal), 2 key heads with
2 value heads each; gated full attention has 4 heads / 2 kv of 32; vocab 512. Four layers: three GDN, one full.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

from tests.tiny_moe import randomize

TEXT = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, linear_key_head_dim=64, linear_value_head_dim=64,
            linear_num_key_heads=2, linear_num_value_heads=4, linear_conv_kernel_dim=4, max_position_embeddings=256,
            tie_word_embeddings=False)
# 8 experts: vLLM's MoE block for these models refuses a TP larger than the number of experts
MOE = dict(moe_intermediate_size=96, shared_expert_intermediate_size=64, num_experts=8, num_experts_per_tok=2)
VISION = dict(depth=1, hidden_size=32, intermediate_size=48, num_heads=2, out_hidden_size=128,
              num_position_embeddings=16, patch_size=4)
TOKENS = dict(image_token_id=5, video_token_id=6, vision_start_token_id=7, vision_end_token_id=8)

# kind: (what it is, multimodal)
KINDS = {"qwen3_5": ("Qwen3.5 dense, multimodal", True), "qwen3_5_moe": ("Qwen3.5 MoE, multimodal", True),
         "qwen3_5_text": ("Qwen3.5 dense, text only", False), "qwen3_5_moe_text": ("Qwen3.5 MoE, text only", False),
         "qwen3_next": ("Qwen3-Next", False)}


def build(kind: str, path: Path, seed: int = 0, text: dict | None = None) -> Path:
    """Save a tiny model of `kind` under `path` (with its MTP layer)."""
    torch.manual_seed(seed)
    t = {**TEXT, **(text or {})}
    moe = "moe" in kind or kind == "qwen3_next"
    if moe:
        t = {**t, **MOE}
        if kind != "qwen3_next":
            t.pop("intermediate_size")
    T = transformers
    if kind == "qwen3_5":
        model = T.Qwen3_5ForConditionalGeneration(T.Qwen3_5Config(text_config=t, vision_config=VISION, **TOKENS))
    elif kind == "qwen3_5_moe":
        model = T.Qwen3_5MoeForConditionalGeneration(T.Qwen3_5MoeConfig(text_config=t, vision_config=VISION, **TOKENS))
    elif kind == "qwen3_5_text":
        model = T.Qwen3_5ForCausalLM(T.Qwen3_5TextConfig(**t))
    elif kind == "qwen3_5_moe_text":
        model = T.Qwen3_5MoeForCausalLM(T.Qwen3_5MoeTextConfig(**t))
    else:
        model = T.Qwen3NextForCausalLM(T.Qwen3NextConfig(**t))
    model.eval()
    randomize(model)
    model.to(torch.bfloat16).save_pretrained(path)
    add_mtp(path, kind)
    return path


def add_mtp(path: Path, kind: str) -> None:
    """The MTP layer as the releases store it: a copy of the last (full-attention) layer under `mtp.layers.0.`, experts
    split per expert, plus `mtp.fc` [H, 2H] and its norms; config.json says there is one."""
    file = path / "model.safetensors"
    tensors = load_file(file)
    config = json.loads((path / "config.json").read_text())
    text = config.get("text_config", config)
    prefix = "model.language_model." if "text_config" in config else "model."
    last = f"{prefix}layers.{text['num_hidden_layers'] - 1}."
    h = text["hidden_size"]
    gen = torch.Generator().manual_seed(11)
    for name in [n for n in tensors if n.startswith(last)]:
        rest, t = name.removeprefix(last), tensors[name]
        if rest in ("mlp.experts.gate_up_proj", "mlp.experts.down_proj"):  # per expert in the MTP layer
            for e in range(t.shape[0]):
                if rest.endswith("gate_up_proj"):
                    gate, up = t[e].chunk(2, dim=0)
                    tensors[f"mtp.layers.0.mlp.experts.{e}.gate_proj.weight"] = gate.contiguous()
                    tensors[f"mtp.layers.0.mlp.experts.{e}.up_proj.weight"] = up.contiguous()
                else:
                    tensors[f"mtp.layers.0.mlp.experts.{e}.down_proj.weight"] = t[e].contiguous()
        else:
            tensors["mtp.layers.0." + rest] = t.clone()
    tensors["mtp.fc.weight"] = (torch.randn(h, 2 * h, generator=gen) * 0.05).to(torch.bfloat16)
    for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        tensors[f"mtp.{norm}.weight"] = (torch.randn(h, generator=gen) * 0.1).to(torch.bfloat16)
    save_file(tensors, file, metadata={"format": "pt"})
    text["mtp_num_hidden_layers" if kind != "qwen3_next" else "num_nextn_predict_layers"] = 1
    (path / "config.json").write_text(json.dumps(config, indent=2))
