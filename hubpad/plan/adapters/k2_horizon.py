"""K2-Horizon (`k2_horizon`, K2HorizonForCausalLM; IFM's K2-Horizon-375B-A23B and K2-Horizon-MoVA-36B-A4B): grouped-query
attention with an optional elementwise output gate and, in the MoVA checkpoints, value experts in place of v_proj.

Read in vLLM 0.32 (model_executor/models/k2_horizon.py; transformers 5.24 has no class, the published repos ship
their configuration / modeling code as remote code):

- Heads and kv heads shard as Llama's (QKVParallelLinear; `assert num_heads % tp == 0`, kv heads divided or
  replicated), head_dim from config.json. Padding appends whole GQA groups: zero q/k/v rows, zero o_proj columns.
  The partial RoPE (`rope_head_dim`, a fixed per-head channel permutation folded into q/k at load) works inside each
  head, so a zero head stays zero.
- `self_attn.gate_proj` (attention_gate_func silu or softplus): a ColumnParallelLinear of heads × head_dim rows, so
  zero rows per padded head; its gate multiplies an attention output that is already zero.
- MoVA layers (mova_num_experts > 0, MoE layers only): `self_attn.v_experts.N` are each hidden → kv heads × head_dim,
  ColumnParallelLinear narrowed per rank by kv heads exactly like v_proj (the loader chunks them by kv head, or picks
  the replicated one), so each gets zero rows per padded kv head; silu(0) = 0, so a padded kv head's value is zero
  whatever the value router picks. `v_router` (hidden → value experts, with its selection bias) is replicated: copied.
- The norms (`layernorm_num_groups` groups over the hidden size) see no head: copied. query_key_norm (a per-head
  group norm whose weight spans every head's channels) is refused: no published checkpoint sets it.
- MLPs: dense layers (`mlp_only_layers`, intermediate_size), routed experts (moe_intermediate_size; vLLM refuses a TP
  above num_experts) and one shared MLP of moe_intermediate_size × num_shared_experts (`shared_experts_key`). The
  router `mlp.gate` (weight and selection bias) is copied.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, ROUTERS, SHARED,
                                       Adapter, L, Role)
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape


class K2HorizonAdapter(Adapter):
    """vLLM's k2_horizon tool-call and reasoning parsers; --trust-remote-code, since neither vLLM nor transformers
    has a config class for k2_horizon (the repos' auto_map names their configuration_k2_horizon.py)."""

    def head_shape(self, config: dict) -> HeadShape:
        if config.get("query_key_norm"):
            raise ConfigError("config.json: query_key_norm true is not supported for k2_horizon (its q/k norm weights "
                              "span every head's channels; no published K2-Horizon checkpoint sets it)")
        if config.get("attention_gate_func") not in (None, "silu", "softplus"):
            raise ConfigError(f"config.json: attention_gate_func {config['attention_gate_func']!r} is not one vLLM's "
                              f"k2_horizon knows (silu, softplus or none)")
        return super().head_shape(config)

    def serving(self, config: dict) -> dict:
        return {**serving(tool="k2_horizon", reasoning="k2_horizon", features=("arch:K2HorizonForCausalLM",)),
                "extra_args": ["--trust-remote-code"]}


K2_HORIZON = K2HorizonAdapter(
    name="k2_horizon", model_types=("k2_horizon",),
    linear_patterns=ATTENTION + [(L + r"self_attn\.gate_proj$", Role("q")),
                                 (L + r"self_attn\.v_experts\.\d+$", Role("kv"))] + DENSE_MLP + EXPERTS + SHARED,
    copy_modules=COPY_MODULES + ROUTERS + [L + r"self_attn\.v_router$"], copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    shared_experts_key="num_shared_experts", tp_at_most_experts=True,
)
