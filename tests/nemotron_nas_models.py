"""Tiny Nemotron-NAS (`nemotron-nas`, DeciLMForCausalLM) checkpoints and a float64 reference written after vLLM 0.32's
nemotron_nas.py (transformers has no class for it; the checkpoints' own modeling code is remote code, not read here).

The reference builds layer i from block_configs[i] as vLLM's DeciLMDecoderLayer does: no attention (`no_op`) or
transformers' LlamaAttention with num_attention_heads // n_heads_in_group kv heads; no FFN or a LlamaMLP of
find_multiple(int(2 * ffn_mult * hidden / 3), 256); pre-norm residuals. head_dim is config.json's, else hidden // heads
(vLLM's LlamaAttention). The published tensor names are Llama's.
"""

from __future__ import annotations

import copy
import json

import torch
import transformers
from safetensors.torch import load_file
from transformers.models.llama import modeling_llama

from hubpad.plan.adapters.nemotron_nas import ffn_width
from tests.helpers import save_tiny

# layer blocks: (n_heads_in_group or None for no attention, ffn_mult or None for no FFN); two group sizes, both no-ops
BLOCKS = [(2, 6.0), (None, 24.0), (4, None), (2, 6.0)]
TINY = dict(hidden_size=64, num_attention_heads=8, vocab_size=160, max_position_embeddings=64, rms_norm_eps=1e-5,
            hidden_act="silu", rope_theta=10000.0, tie_word_embeddings=False)


def blocks(spec=BLOCKS) -> list[dict]:
    """block_configs as published (every key NVIDIA's configs state) for (group, ffn_mult) pairs."""
    return [{"attention": {"n_heads_in_group": g, "no_op": g is None, "num_sink_tokens": None,
                           "replace_with_linear": False, "sparsify": None, "unshifted_sink": False,
                           "use_prefill_window_in_sink_attention": False, "window_length": None},
             "ffn": {"ffn_mult": m, "no_op": m is None, "replace_with_linear": False, "sparsify": None}}
            for g, m in spec]


def config_json(spec=BLOCKS, **over) -> dict:
    b = blocks(spec)
    return {**TINY, **over, "architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas",
            "block_configs": b, "num_hidden_layers": len(b), "num_key_value_heads": None,
            "intermediate_size": None, "attention_bias": False, "mlp_bias": False}


class _Layer(torch.nn.Module):
    """vLLM's DeciLMDecoderLayer: attention and FFN each present or not (no norm either where absent)."""

    def __init__(self, cfg, block: dict, i: int):
        super().__init__()
        self.attn = not block["attention"]["no_op"]
        self.ffn = not block["ffn"]["no_op"]
        if self.attn:
            layer = copy.deepcopy(cfg)
            layer.num_key_value_heads = cfg.num_attention_heads // block["attention"]["n_heads_in_group"]
            self.input_layernorm = modeling_llama.LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
            self.self_attn = modeling_llama.LlamaAttention(layer, i)
        if self.ffn:
            layer = copy.deepcopy(cfg)
            layer.intermediate_size = ffn_width(block["ffn"]["ffn_mult"], cfg.hidden_size)
            self.post_attention_layernorm = modeling_llama.LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
            self.mlp = modeling_llama.LlamaMLP(layer)

    def forward(self, x, embeddings, mask):
        if self.attn:
            x = x + self.self_attn(self.input_layernorm(x), position_embeddings=embeddings, attention_mask=mask)[0]
        if self.ffn:
            x = x + self.mlp(self.post_attention_layernorm(x))
        return x


class _Model(torch.nn.Module):
    def __init__(self, cfg, block_list: list[dict]):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = torch.nn.ModuleList(_Layer(cfg, b, i) for i, b in enumerate(block_list))
        self.norm = modeling_llama.LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary_emb = modeling_llama.LlamaRotaryEmbedding(cfg)


class DeciLM(torch.nn.Module):
    """The reference: `model.*` and `lm_head` as the published checkpoints name them."""

    def __init__(self, cj: dict):
        super().__init__()
        heads = cj["num_attention_heads"]
        values = {k: cj[k] for k in TINY if k in cj and k != "num_attention_heads"}
        cfg = transformers.LlamaConfig(**values, num_attention_heads=1, num_key_value_heads=1,
                                       head_dim=cj.get("head_dim") or cj["hidden_size"] // heads,
                                       intermediate_size=1, num_hidden_layers=len(cj["block_configs"]),
                                       attention_bias=False, mlp_bias=False)
        # set after: LlamaConfig rejects hidden % heads != 0, which vLLM's module (head_dim given) does not need
        cfg.num_attention_heads = cfg.num_key_value_heads = heads
        cfg._attn_implementation = "eager"
        self.model = _Model(cfg, cj["block_configs"])
        self.lm_head = torch.nn.Linear(cj["hidden_size"], cj["vocab_size"], bias=False)

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        pos = torch.arange(ids.shape[1])[None].expand(ids.shape[0], -1)
        embeddings = self.model.rotary_emb(x, pos)
        n = ids.shape[1]
        mask = torch.full((n, n), float("-inf"), dtype=x.dtype).triu(1)[None, None]
        for layer in self.model.layers:
            x = layer(x, embeddings, mask)
        return self.lm_head(self.model.norm(x))


# A stand-in for the checkpoints' configuration_decilm.py (remote code; NVIDIA's file is not copied): what vLLM reads of
# it, block_configs as objects with attributes (block.attention.no_op, .n_heads_in_group, block.ffn.ffn_mult, ...), and
# num_key_value_heads / intermediate_size kept null as NVIDIA's class keeps them. A PretrainedConfig, not transformers'
# LlamaConfig, as NVIDIA's subclasses its own copy of transformers 4.44's, which has no hidden % heads rule.
DECILM_CONFIG_CLASS = '''from types import SimpleNamespace

from transformers import PretrainedConfig


class DeciLMConfig(PretrainedConfig):
    model_type = "nemotron-nas"

    def __init__(self, block_configs=None, **kwargs):
        kwargs.pop("num_key_value_heads", None)
        kwargs.pop("intermediate_size", None)
        super().__init__(**kwargs)
        self.num_key_value_heads = None
        self.intermediate_size = None
        self.block_configs = [b if not isinstance(b, dict) else SimpleNamespace(
            attention=SimpleNamespace(**b["attention"]), ffn=SimpleNamespace(**b["ffn"])) for b in block_configs or []]

    def to_dict(self):
        out = super().to_dict()
        out["block_configs"] = [{"attention": vars(b.attention), "ffn": vars(b.ffn)} for b in self.block_configs]
        return out
'''


def build(path, seed: int = 0, dtype=torch.float64, spec=BLOCKS, remote_code: bool = False, **over) -> dict:
    """Save a tiny checkpoint under `path` (random weights everywhere, norms too); returns config.json."""
    cj = config_json(spec, **over)
    torch.manual_seed(seed)
    model = DeciLM(cj).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return save_tiny(path, model.state_dict(), cj, dtype,
                     ("configuration_decilm", DECILM_CONFIG_CLASS) if remote_code else None)


def logits(path, ids: torch.Tensor) -> torch.Tensor:
    """Float64 logits of the checkpoint at `path` through the reference (every tensor must be one it holds)."""
    cj = json.loads((path / "config.json").read_text())
    model = DeciLM(cj).double()
    tensors = {k: v.double() for f in sorted(path.glob("*.safetensors")) for k, v in load_file(f).items()}
    model.load_state_dict(tensors, strict=True)
    with torch.no_grad():
        return model.eval()(ids)
