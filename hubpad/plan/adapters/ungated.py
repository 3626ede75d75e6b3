"""Dense decoders whose MLP has no gate, up_proj then down_proj: Apertus (`apertus`) and Nemotron (`nemotron`).

Both are Llama's attention (GQA, q/k/v/o_proj, explicit head_dim, which vLLM's Apertus and Nemotron classes read) with
a two-matrix MLP: a padded intermediate channel has a zero up_proj row and a zero down_proj column, so whatever the
activation gives for 0 (Apertus' xIELU gives a small nonzero value there, Nemotron's relu^2 gives 0), down_proj adds
nothing. Apertus adds per-head q/k RMSNorms (head_dim wide, copied) and xIELU's learned scalars per layer
(mlp.act_fn.alpha_p / alpha_n / beta / eps, copied); its norms are named attention_layernorm / feedforward_layernorm.
Nemotron's LayerNorm1p norms carry biases (copied) and its rotary embedding is partial (partial_rotary_factor of
head_dim, unchanged). Neither config rejects hidden_size % heads != 0.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, Adapter, L, Role
from hubpad.plan.adapters.vllm import serving

_UP_DOWN = [(L + r"mlp\.up_proj$", Role("rows", "dense")), (L + r"mlp\.down_proj$", Role("cols", "dense"))]


class UngatedAdapter(Adapter):
    """Apertus and Nemotron have no tool-call or reasoning parser of their own in vLLM."""

    def serving(self, config: dict) -> dict:
        return serving(features=(f"arch:{(config.get('architectures') or [''])[0]}",))


APERTUS = UngatedAdapter(
    name="apertus", model_types=("apertus",), linear_patterns=ATTENTION + _UP_DOWN,
    copy_modules=COPY_MODULES + [L + r"(attention_layernorm|feedforward_layernorm)$"],
    copy_params=COPY_PARAMS + [L + r"mlp\.act_fn\.(alpha_p|alpha_n|beta|eps)$"],
    intermediate_keys={"dense": ("intermediate_size",)}, per_head_norms=True,
)

NEMOTRON = UngatedAdapter(
    name="nemotron", model_types=("nemotron",), linear_patterns=ATTENTION + _UP_DOWN,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
)
