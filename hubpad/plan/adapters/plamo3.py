"""PLaMo 3 (`plamo3`, Plamo3ForCausalLM: pfnet/plamo-3-nict-2b / 8b / 31b-base): Gemma-3-like full and sliding attention
layers with per-head q/k RMSNorms and sandwich norms, as vLLM 0.32's plamo3.py builds them. The checkpoint stores the
projections fused as vLLM loads them (`model.layers.layers.N.mixer.qkv_proj`, `mlp.gate_up_proj`): QKVParallelLinear
splits [q | k | v] by the config's head counts, MergedColumnParallelLinear [gate | up] in two halves of
intermediate_size, each part sharded on its own, so each section is padded at its own end (plan/sections.py).

Heads move in whole GQA groups (heads % TP asserted, kv heads divide or are divided by TP), head_dim is config.json's
(vLLM reads it); a zero head's q and k stay zero through the q/k RMSNorms (head_dim wide, shared by every head: copied),
its o_proj columns are zero. The norms are stored as offsets (vLLM adds 1, 1/5, 1/5**1.5 at load): copied as they
are. The config class is the checkpoint's remote code (`--trust-remote-code`; transformers has none).
"""

from __future__ import annotations

from hubpad.plan.adapters.base import Adapter, Role
from hubpad.plan.adapters.vllm import serving

_L = r"^model\.layers\.layers\.(\d+)\."


class Plamo3Adapter(Adapter):
    """No parsers of its own in vLLM; its config class is remote code."""

    def serving(self, config: dict) -> dict:
        return {**serving(features=("arch:Plamo3ForCausalLM",)), "extra_args": ["--trust-remote-code"]}


PLAMO3 = Plamo3Adapter(
    name="plamo3", model_types=("plamo3",), layers=_L,
    linear_patterns=[(_L + r"mixer\.qkv_proj$", Role("qkv")), (_L + r"mixer\.o_proj$", Role("o")),
                     (_L + r"mlp\.gate_up_proj$", Role("gate_up", "dense")),
                     (_L + r"mlp\.down_proj$", Role("cols", "dense"))],
    copy_modules=[r"^model\.embed_tokens$", r"^model\.norm$", r"^lm_head$",
                  _L + r"(pre_mixer_norm|post_mixer_norm|pre_mlp_norm|post_mlp_norm)$", _L + r"mixer\.(q_norm|k_norm)$"],
    intermediate_keys={"dense": ("intermediate_size",)},
)
