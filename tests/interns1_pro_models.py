"""A tiny Intern-S1-Pro (`interns1_pro`) in the published layout, and a float64 reference of its language model.

transformers 5.24 has no Intern-S1-Pro class. Its checkpoint is Qwen3-VL-MoE's layout (`model.visual.*`,
`model.language_model.*`, `lm_head`; routed experts fused as [E, 2I, H] / [E, H, I], the orientation vLLM's
interns1_pro.py reads) plus the FoPE coefficients `model.language_model.rotary_emb.sin_coef` / `cos_coef`
[kv heads, freqs, freqs] (the names vLLM's load_weights maps). The reference is transformers' Qwen3-VL-MoE with its
text rotary replaced by `FourierRope`, written after vLLM 0.32's rotary_embedding/fope.py (FourierRotaryEmbedding,
fope_sep_head): per kv head, cos = cos(t·f) @ cos_coef and sin = sin(t·f) @ sin_coef over the kept frequencies f, the
rest of the half head filled with 1, duplicated to the whole head, applied neox-style to the queries of each kv head's
group and to that key. Positions are 1-D (0..T-1): vLLM's class has no mrope_section. The router is transformers'
plain top-k (the tiny config sets no router_n_groups); padding never changes the router or the expert count.
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from torch import nn

from tests.tiny_moe import randomize

TEXT = dict(vocab_size=256, hidden_size=64, intermediate_size=80, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, max_position_embeddings=256, rms_norm_eps=1e-6,
            tie_word_embeddings=False, moe_intermediate_size=40, num_experts=6, num_experts_per_tok=2,
            decoder_sparse_step=1, mlp_only_layers=[1], norm_topk_prob=True, rope_theta=10000.0)
VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=8, spatial_merge_size=2,
              temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=64, deepstack_visual_indexes=[0])
TOKENS = dict(image_token_id=5, video_token_id=6, vision_start_token_id=7, vision_end_token_id=8)
# the published rope_scaling (internlm/Intern-S1-Pro's config.json): FoPE per kv head, frequencies chosen by
# max_position_embeddings (num_inv_freq null)
FOPE = {"rope_type": "default", "fope_init_factor": 0.5, "fope_sep_head": True, "num_inv_freq": None}
FOPE_NAMES = ("model.language_model.rotary_emb.sin_coef", "model.language_model.rotary_emb.cos_coef")


def kept_frequencies(head_dim: int, base: float, max_position: int, num_inv_freq: int | None) -> torch.Tensor:
    """fope.py `_compute_inv_freq`: the first num_inv_freq inverse frequencies, or those above 2π / max_position."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if num_inv_freq is not None:
        return inv_freq[:num_inv_freq]
    return inv_freq[inv_freq > 2.0 * math.pi / max_position]


class FourierRope(nn.Module):
    """The FoPE rotary of one language model (fope.py, fope_sep_head): returns cos and sin [B, kv heads, T, head_dim]
    for `apply_fope`."""

    def __init__(self, text: dict):
        super().__init__()
        rope = text["rope_scaling"]
        assert rope.get("fope_sep_head"), "fope.py's per-head coefficients (fope_sep_head) only"
        self.head_dim = text["head_dim"]
        self.register_buffer("inv_freq", kept_frequencies(self.head_dim, text["rope_theta"],
                                                          text["max_position_embeddings"], rope.get("num_inv_freq")))
        n, kv = self.inv_freq.numel(), text["num_key_value_heads"]
        self.sin_coef = nn.Parameter(torch.zeros(kv, n, n, dtype=torch.float64), requires_grad=False)
        self.cos_coef = nn.Parameter(torch.zeros(kv, n, n, dtype=torch.float64), requires_grad=False)

    def forward(self, x, position_ids):
        t = torch.arange(x.shape[1], dtype=torch.float64)  # 1-D positions, as vLLM gives this class
        freqs = t[:, None] * self.inv_freq[None, :]  # [T, n]
        out = []
        for part, coef in ((freqs.cos(), self.cos_coef), (freqs.sin(), self.sin_coef)):
            v = torch.einsum("tD,hDd->htd", part, coef.to(torch.float64))
            v = nn.functional.pad(v, (0, self.head_dim // 2 - v.shape[-1]), value=1.0)
            out.append(torch.cat((v, v), dim=-1)[None].expand(x.shape[0], -1, -1, -1).to(x.dtype))
        return out[0], out[1]


def apply_fope(q, k, cos, sin, unsqueeze_dim=1):
    """q [B, H, T, D], k [B, kv, T, D]; cos / sin per kv head, each query head taking its kv head's (GQA groups)."""
    group = q.shape[1] // k.shape[1]
    rotate = transformers.models.qwen3_vl_moe.modeling_qwen3_vl_moe.rotate_half
    cq, sq = cos.repeat_interleave(group, dim=1), sin.repeat_interleave(group, dim=1)
    return q * cq + rotate(q) * sq, k * cos + rotate(k) * sin


@contextmanager
def fope_attention():
    """transformers' Qwen3-VL-MoE attention applying FoPE's per-kv-head cos / sin while the block runs."""
    module = transformers.models.qwen3_vl_moe.modeling_qwen3_vl_moe
    saved = module.apply_rotary_pos_emb
    module.apply_rotary_pos_emb = apply_fope
    try:
        yield
    finally:
        module.apply_rotary_pos_emb = saved


def build(path: Path, seed: int = 0) -> Path:
    """The tiny checkpoint: transformers' Qwen3-VL-MoE saved, relabelled interns1_pro, its FoPE coefficients added."""
    torch.manual_seed(seed)
    text = {k: v for k, v in TEXT.items() if k != "rope_theta"}
    cfg = transformers.Qwen3VLMoeConfig(
        text_config={**text, "rope_parameters": {"rope_type": "default", "rope_theta": TEXT["rope_theta"]}},
        vision_config=VISION, **TOKENS)
    model = transformers.Qwen3VLMoeForConditionalGeneration(cfg).eval()
    randomize(model)
    model.save_pretrained(path)
    tensors = load_file(path / "model.safetensors")
    n = kept_frequencies(TEXT["head_dim"], TEXT["rope_theta"], TEXT["max_position_embeddings"], None).numel()
    g = torch.Generator().manual_seed(seed + 1)
    for name in FOPE_NAMES:  # O(0.3) like the rest, so every row moves the logits
        tensors[name] = (torch.randn(TEXT["num_key_value_heads"], n, n, generator=g) * 0.3).to(torch.float32)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((path / "config.json").read_text())
    text_cfg = {k: v for k, v in config["text_config"].items() if k != "rope_parameters"}
    text_cfg["num_experts"] = text_cfg.pop("num_local_experts")  # the published key (transformers 5.24 renames it)
    text_cfg.update(model_type="interns1_pro_text", rope_scaling=FOPE, rope_theta=TEXT["rope_theta"])
    config.update(model_type="interns1_pro", architectures=["InternS1ProForConditionalGeneration"],
                  text_config=text_cfg)
    config["vision_config"]["model_type"] = "interns1_pro_vision"
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


def per_expert(path: Path) -> Path:
    """The checkpoint at `path` rewritten with its routed experts one module each (`mlp.experts.E.{gate,up,down}_proj`,
    the other layout vLLM's interns1_pro.py loads)."""
    tensors = load_file(path / "model.safetensors")
    for name in [n for n in tensors if n.endswith("mlp.experts.gate_up_proj")]:
        prefix, gate_up, down = name[:-len("gate_up_proj")], tensors.pop(name), tensors.pop(name[:-12] + "down_proj")
        for e in range(gate_up.shape[0]):
            gate, up = gate_up[e].chunk(2, dim=0)
            tensors.update({f"{prefix}{e}.gate_proj.weight": gate.contiguous(),
                            f"{prefix}{e}.up_proj.weight": up.contiguous(),
                            f"{prefix}{e}.down_proj.weight": down[e].contiguous()})
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    return path


def _fused(tensors: dict) -> dict:
    """Per-expert tensors stacked back into transformers' fused [E, 2I, H] / [E, H, I] (as vLLM fuses them)."""
    out = {k: v for k, v in tensors.items() if ".mlp.experts." not in k or k.endswith(("gate_up_proj", "down_proj"))}
    for name in [n for n in tensors if n.endswith(".mlp.experts.0.gate_proj.weight")]:
        prefix = name[:-len("0.gate_proj.weight")]
        count = sum(1 for n in tensors if n.startswith(prefix) and n.endswith(".gate_proj.weight"))
        out[prefix + "gate_up_proj"] = torch.stack([torch.cat((tensors[f"{prefix}{e}.gate_proj.weight"],
                                                               tensors[f"{prefix}{e}.up_proj.weight"]))
                                                    for e in range(count)])
        out[prefix + "down_proj"] = torch.stack([tensors[f"{prefix}{e}.down_proj.weight"] for e in range(count)])
    return out


def reference(path: Path):
    """The checkpoint at `path` as transformers' Qwen3-VL-MoE (float64, eager experts) with FourierRope in place of
    its text rotary, the coefficients loaded from the checkpoint."""
    import tempfile

    config = json.loads((path / "config.json").read_text())
    text = config["text_config"]
    hf = {**config, "model_type": "qwen3_vl_moe", "architectures": ["Qwen3VLMoeForConditionalGeneration"],
          "text_config": {**{k: v for k, v in text.items() if k not in ("rope_scaling", "rope_theta")},
                          "model_type": "qwen3_vl_moe_text",
                          "rope_parameters": {"rope_type": "default", "rope_theta": text["rope_theta"]}},
          "vision_config": {**config["vision_config"], "model_type": "qwen3_vl_moe"}}
    tensors = {}
    for f in sorted(path.glob("*.safetensors")):
        tensors.update(load_file(f))
    tensors = _fused(tensors)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "config.json").write_text(json.dumps(hf))
        save_file({k: v for k, v in tensors.items() if k not in FOPE_NAMES}, tmp / "model.safetensors",
                  metadata={"format": "pt"})
        model = transformers.Qwen3VLMoeForConditionalGeneration.from_pretrained(tmp, dtype=torch.float64).eval()
    model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    rope = FourierRope(text)
    rope.sin_coef.copy_(tensors[FOPE_NAMES[0]].to(torch.float64))
    rope.cos_coef.copy_(tensors[FOPE_NAMES[1]].to(torch.float64))
    model.model.language_model.rotary_emb = rope
    return model


def logits(path: Path, ids: torch.Tensor) -> torch.Tensor:
    model = reference(path)
    with torch.no_grad(), fope_attention():
        return model(input_ids=ids).logits
