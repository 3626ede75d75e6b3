"""Falcon-H1 (`falcon_h1`, FalconH1ForCausalLM): every layer runs a GQA attention and a Mamba2 mixer side by side on
the same normed input (their outputs summed), then a gated SiLU MLP, with muP multipliers from config.json.

Published names (transformers' FalconH1ForCausalLM, and vLLM's falcon_h1.py maps `mamba` to `mamba.mamba`):
`model.embed_tokens`, `model.layers.N.{input_layernorm,pre_ff_layernorm}`, `self_attn.{q,k,v,o}_proj` (heads in whole
GQA groups; head_dim is explicit, vLLM and transformers read it), `feed_forward.{gate,up,down}_proj`, the Mamba2 mixer
`mamba.{in_proj,conv1d,A_log,D,dt_bias,norm,out_proj}` (plan/mamba2.py: heads in whole groups; the derivative writes
mamba_n_groups, mamba_n_heads and mamba_d_ssm), `model.final_layernorm`, `lm_head`.

The muP multipliers stay exact under zero padding because each is one scalar per section, never per channel:
`ssm_multipliers` scale in_proj's [z | x | B | C | dt] sections (vLLM's mup_vector, built per rank from the padded
config with the same section bounds MambaMixer2 loads; transformers' compute_mup_vector over the whole width), the MLP's
gate_multiplier scales the gate half of gate_up_proj, and the others (embedding, attention in/out, key, ssm in/out,
down, lm_head) scale whole hidden-size vectors: a zero row times any scalar is zero, and no multiplier depends on a
padded count. config.json's multiplier keys are copied.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_PARAMS, Adapter, L, Role
from hubpad.plan.adapters.vllm import serving


class FalconH1Adapter(Adapter):
    """vLLM has no tool-call or reasoning parser of Falcon-H1's own."""

    def serving(self, config: dict) -> dict:
        return serving(features=("arch:FalconH1ForCausalLM",))


FALCON_H1 = FalconH1Adapter(
    name="falcon_h1", model_types=("falcon_h1",),
    linear_patterns=ATTENTION + [(L + r"feed_forward\.(gate_proj|up_proj)$", Role("rows", "dense")),
                                 (L + r"feed_forward\.down_proj$", Role("cols", "dense"))],
    copy_modules=[r"^model\.embed_tokens$", r"^model\.final_layernorm$", r"^lm_head$",
                  L + r"(input_layernorm|pre_ff_layernorm)$"],
    copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
    linear_attention=[(L + tail, kind) for tail, kind in (
        (r"mamba\.in_proj\.\w+$", "in_proj"), (r"mamba\.conv1d\.\w+$", "conv"), (r"mamba\.(A_log|D|dt_bias)$", "heads"),
        (r"mamba\.norm\.weight$", "norm"), (r"mamba\.out_proj\.\w+$", "out"))],
    linear_attention_family="mamba2", lossless=("mup.sections",),
)
