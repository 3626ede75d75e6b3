"""Tiny Tele-FLM (`TeleFLMForCausalLM`) checkpoints and their float64 reference, written after vLLM 0.32's teleflm.py:
transformers' LlamaForCausalLM (vLLM's class is its Llama) with the logits scaled by output_mult / mup_scale_factor.
The published config keeps Llama's keys and names, plus the muP scalars; its config class is remote code, for which
TELEFLM_CONFIG_CLASS stands in (the checkpoints' file was not read offline).
"""

from __future__ import annotations

import json

import torch
import transformers
from safetensors.torch import load_file

from tests.helpers import save_tiny

TINY = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, head_dim=16, intermediate_size=100,
            vocab_size=160, num_hidden_layers=2, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
            hidden_act="silu", tie_word_embeddings=False)
MUP = dict(use_mup=True, input_mult=1.0, output_mult=3.0, mup_scale_factor=2.0)
_LLAMA = set(TINY) | {"attention_bias", "mlp_bias"}

TELEFLM_CONFIG_CLASS = '''from transformers import PretrainedConfig


class TeleFLMConfig(PretrainedConfig):
    model_type = "TeleFLM"

    def __init__(self, use_mup=False, input_mult=1.0, output_mult=1.0, mup_scale_factor=1.0, **kwargs):
        self.use_mup, self.input_mult = use_mup, input_mult
        self.output_mult, self.mup_scale_factor = output_mult, mup_scale_factor
        super().__init__(**kwargs)
'''


def reference(cj: dict) -> transformers.LlamaForCausalLM:
    """transformers' Llama for a Tele-FLM config.json (heads set after: LlamaConfig rejects hidden % heads != 0, which
    vLLM's LlamaAttention, head_dim given, does not need)."""
    values = {k: v for k, v in cj.items() if k in _LLAMA and k not in ("num_attention_heads", "num_key_value_heads")}
    cfg = transformers.LlamaConfig(**values, num_attention_heads=1, num_key_value_heads=1)
    cfg.num_attention_heads, cfg.num_key_value_heads = cj["num_attention_heads"], cj["num_key_value_heads"]
    cfg._attn_implementation = "eager"
    return transformers.LlamaForCausalLM(cfg)


def build(path, seed: int = 0, dtype=torch.float64, remote_code: bool = False, **over) -> dict:
    """Save a tiny Tele-FLM under `path` (random weights everywhere, norms too); returns config.json."""
    cj = {**TINY, **MUP, **over, "architectures": ["TeleFLMForCausalLM"], "model_type": "TeleFLM"}
    torch.manual_seed(seed)
    model = reference(cj).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return save_tiny(path, model.state_dict(), cj, dtype,
                     ("configuration_teleflm", TELEFLM_CONFIG_CLASS) if remote_code else None)


def logits(path, ids: torch.Tensor) -> torch.Tensor:
    """Float64 logits of the checkpoint at `path` as vLLM's TeleFLMForCausalLM computes them."""
    cj = json.loads((path / "config.json").read_text())
    model = reference(cj).double()
    model.load_state_dict({k: v.double() for f in sorted(path.glob("*.safetensors")) for k, v in load_file(f).items()})
    with torch.no_grad():
        out = model.eval()(ids).logits
    return out * (cj["output_mult"] / cj["mup_scale_factor"] if cj.get("use_mup") else 1.0)
