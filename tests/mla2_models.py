"""Tiny checkpoints of stream mla2's MLA families at the names vLLM's loaders read: openPangu Ultra-MoE with a float64
reference written after vLLM 0.32's openpangu.py, and Sarvam-105B (transformers' SarvamMLAConfig).

openPangu Ultra-MoE (`pangu_ultra_moe`):

transformers has no openPangu class. vLLM's OpenPanguMLAAttention is DeepSeek-V3's MLA (q LoRA, kv_b_proj, o_proj per
head; scale (qk_nope + qk_rope) ** -0.5; deepseek_yarn RoPE of factor 1, i.e. plain interleaved RoPE), its MoE
DeepSeek-V3's sigmoid router over one group with the correction bias: transformers' DeepseekV3 modules compute the
same. What differs is the decoder layer's sandwich norm, written here as vLLM's OpenPanguDecoderLayer runs it:
h += post_attention_layernorm(attn(input_layernorm(h))); h += post_mlp_layernorm(mlp(pre_mlp_layernorm(h))).
vLLM's loader maps `mlp.e_score_correction_bias` to the gate's bias, so the checkpoint stores it there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from torch import nn
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds

from tests.tiny_moe import add_mtp_layer, randomize

BIAS_VLLM, BIAS_HF = "mlp.e_score_correction_bias", "mlp.gate.e_score_correction_bias"
# What vLLM's openpangu.py reads and the published config.json states, beyond DeepSeek-V3's keys.
PANGU_KEYS = {"model_type": "pangu_ultra_moe", "architectures": ["PanguUltraMoEForCausalLM"], "sandwich_norm": True,
              "router_enable_expert_bias": True}


class SandwichLayer(ds.DeepseekV3DecoderLayer):
    """DeepSeek-V3's layer with openPangu's pre/post-MLP norms (vLLM's OpenPanguDecoderLayer, sandwich_norm)."""

    def __init__(self, config, layer_idx: int):
        super().__init__(config, layer_idx)
        self.pre_mlp_layernorm = ds.DeepseekV3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_mlp_layernorm = ds.DeepseekV3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, **kwargs):
        attn, _ = self.self_attn(hidden_states=self.input_layernorm(hidden_states), **kwargs)
        hidden_states = hidden_states + self.post_attention_layernorm(attn)
        return hidden_states + self.post_mlp_layernorm(self.mlp(self.pre_mlp_layernorm(hidden_states)))


class PanguReference(ds.DeepseekV3ForCausalLM):
    """DeepseekV3ForCausalLM with sandwich layers: openPangu Ultra-MoE's main model."""

    def __init__(self, config):
        super().__init__(config)
        self.model.layers = nn.ModuleList(SandwichLayer(config, i) for i in range(config.num_hidden_layers))
        self.post_init()


def reference_config(**kwargs):
    """The DeepSeek-V3 config that computes openPangu's model: one expert group, interleaved RoPE."""
    return transformers.DeepseekV3Config(**{**kwargs, "n_group": 1, "topk_group": 1, "rope_interleave": True})


def build_pangu(path: Path, kwargs: dict, dtype=torch.float64, seed: int = 0):
    """A tiny openPangu (random O(1) weights, correction biases, MTP layer) saved at `path`: (model, path)."""
    torch.manual_seed(seed)
    cfg = reference_config(**kwargs)
    model = PanguReference._from_config(cfg, experts_implementation="eager").double().eval()
    randomize(model)
    model.to(dtype).save_pretrained(path)
    add_mtp_layer(path, cfg, dtype=dtype)
    _rename(path / "model.safetensors", BIAS_HF, BIAS_VLLM)
    data = json.loads((path / "config.json").read_text())
    for key in ("n_group", "topk_group", "rope_interleave", "topk_method", "scoring_func"):
        data.pop(key, None)  # vLLM's openpangu reads none of these (one group, sigmoid: fixed)
    (path / "config.json").write_text(json.dumps({**data, **PANGU_KEYS}, indent=2))
    return model.double(), path


def load_reference(path: Path, work: Path) -> PanguReference:
    """A pangu_ultra_moe checkpoint (e.g. a derivative) in the float64 reference: a copy under `work` renamed back."""
    shutil.copytree(path, work)
    for shard in work.glob("*.safetensors"):
        _rename(shard, BIAS_VLLM, BIAS_HF)
    data = json.loads((work / "config.json").read_text())
    index = work / "model.safetensors.index.json"
    if index.exists():
        idx = json.loads(index.read_text())
        idx["weight_map"] = {k.replace(BIAS_VLLM, BIAS_HF): v for k, v in idx["weight_map"].items()}
        index.write_text(json.dumps(idx))
    data = {k: v for k, v in data.items() if k not in PANGU_KEYS}
    reference_config(**data).save_pretrained(work)
    return PanguReference.from_pretrained(work, dtype=torch.float64, experts_implementation="eager").eval()


def _rename(shard: Path, old: str, new: str) -> None:
    tensors = load_file(shard)
    save_file({k.replace(old, new): v for k, v in tensors.items()}, shard, metadata={"format": "pt"})


# Sarvam-105B's layout in small: no q LoRA, a dense first layer, routed experts plus one shared expert.
SARVAM_PUBLISHED = {"n_routed_experts": "num_experts", "n_shared_experts": "num_shared_experts"}


def build_sarvam(path: Path, kwargs: dict, dtype=torch.float64, seed: int = 0):
    """A tiny Sarvam-105B (transformers' SarvamMLAConfig, computed by DeepseekV3ForCausalLM) at `path`, config.json
    with the published key names num_experts / num_shared_experts (vLLM's sarvam reads those) and head_dim
    kv_lora_rank + qk_rope_head_dim (transformers saves qk_rope_head_dim there): (model, path)."""
    torch.manual_seed(seed)
    cfg = transformers.CONFIG_MAPPING["sarvam_mla"](**kwargs)
    model = transformers.AutoModelForCausalLM.from_config(cfg, experts_implementation="eager").double().eval()
    randomize(model)
    model.to(dtype).save_pretrained(path)
    data = json.loads((path / "config.json").read_text())
    for saved, published in SARVAM_PUBLISHED.items():
        data[published] = data.pop(saved)
    data["head_dim"] = data["kv_lora_rank"] + data["qk_rope_head_dim"]  # as published: vLLM's MLA cache width
    (path / "config.json").write_text(json.dumps({**data, "architectures": ["SarvamMLAForCausalLM"]}, indent=2))
    return model.double(), path


# LongCat-Flash-Lite (LongcatFlashNgramForCausalLM): LongCat-Flash (transformers' LongcatFlashForCausalLM) plus the
# n-gram input embedding of vLLM's longcat_flash_ngram.py, written here after it.
LITE_NGRAM = {"ngram_vocab_size_ratio": 2, "emb_neighbor_num": 3, "emb_split_num": 2}  # 4 tables of 16 columns
LITE_KEYS = {"architectures": ["LongcatFlashNgramForCausalLM"], "model_type": "longcat_flash_ngram", **LITE_NGRAM}


def ngram_ids(ids: torch.Tensor, vocab: int, m: int, n: int, k: int) -> torch.Tensor:
    """[batch, seq, k·(n−1)] table ids: embedder e = i·k + j hashes the (i+2)-gram ending at each position as
    Σ_δ token[pos−δ]·vocab^δ mod (m + 2e + 1) (vLLM's ne_weights / ne_mods), stopping at the sequence start."""
    b, s = ids.shape
    out = torch.zeros(b, s, k * (n - 1), dtype=torch.long)
    for i in range(n - 1):
        for j in range(k):
            e, mod = i * k + j, m + 2 * (i * k + j) + 1
            for pos in range(s):
                acc = torch.zeros(b, dtype=torch.long)
                for delta in range(min(i + 2, pos + 1)):
                    acc = (acc + ids[:, pos - delta] * pow(vocab, delta, mod)) % mod
                out[:, pos, e] = acc
    return out


class LiteReference(nn.Module):
    """LongcatFlashForCausalLM fed vLLM's NgramEmbedding: the mean of the token embedding and every table's row
    projected back to hidden (`embed_batched`)."""

    def __init__(self, lm, config: dict):
        super().__init__()
        self.lm = lm
        self.vocab, h = config["vocab_size"], config["hidden_size"]
        self.m = config["ngram_vocab_size_ratio"] * self.vocab
        self.n, self.k = config["emb_neighbor_num"], config["emb_split_num"]
        count = self.k * (self.n - 1)
        self.embedders = nn.ModuleList(nn.Embedding(self.m + 2 * e + 1, h // count) for e in range(count))
        self.post_projs = nn.ModuleList(nn.Linear(h // count, h, bias=False) for _ in range(count))

    def forward(self, ids: torch.Tensor):
        table = ngram_ids(ids, self.vocab, self.m, self.n, self.k)
        parts = [self.lm.get_input_embeddings()(ids)] + [
            proj(emb(table[..., e])) for e, (emb, proj) in enumerate(zip(self.embedders, self.post_projs))]
        return self.lm(inputs_embeds=torch.stack(parts).mean(0))

    def load_ngram(self, tensors: dict) -> None:
        with torch.no_grad():
            for e, (emb, proj) in enumerate(zip(self.embedders, self.post_projs)):
                emb.weight.copy_(tensors[f"model.ngram_embeddings.embedders.{e}.weight"])
                proj.weight.copy_(tensors[f"model.ngram_embeddings.post_projs.{e}.weight"])


def build_lite(root: Path, **overrides):
    """A tiny LongCat-Flash-Lite: tests/test_longcat.py's LongCat-Flash (its MTP layer, published names) plus random
    n-gram tables and projections at their published names: (reference model, path)."""
    from tests.test_longcat import build_longcat

    lm, path = build_longcat(root, **overrides)
    config = {**json.loads((path / "config.json").read_text()), **LITE_KEYS}
    model = LiteReference(lm, config).double()
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for p in list(model.embedders.parameters()) + list(model.post_projs.parameters()):
            p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    tensors = load_file(path / "model.safetensors")
    for e, (emb, proj) in enumerate(zip(model.embedders, model.post_projs)):
        tensors[f"model.ngram_embeddings.embedders.{e}.weight"] = emb.weight.detach().clone()
        tensors[f"model.ngram_embeddings.post_projs.{e}.weight"] = proj.weight.detach().clone()
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return model.eval(), path


def load_lite(path: Path, work: Path) -> LiteReference:
    """A Lite checkpoint (e.g. a derivative) in the float64 reference: transformers reads a copy as longcat_flash."""
    shutil.copytree(path, work)
    config = json.loads((work / "config.json").read_text())
    (work / "config.json").write_text(json.dumps({**config, "model_type": "longcat_flash",
                                                  "architectures": ["LongcatFlashForCausalLM"]}))
    lm = transformers.AutoModelForCausalLM.from_pretrained(work, dtype=torch.float64,
                                                           experts_implementation="eager").eval()
    model = LiteReference(lm, config).double().eval()
    tensors = {}
    for shard in work.glob("*.safetensors"):
        tensors.update(load_file(shard))
    model.load_ngram(tensors)
    return model
