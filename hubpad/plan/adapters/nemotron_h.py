"""Nemotron-H and Nemotron 3 (`nemotron_h`, NemotronHForCausalLM): a stack of single-mixer blocks, each a Mamba2 layer
("M", plan/mamba2.py), a GQA attention layer ("*"), a dense relu2 MLP ("-") or a latent MoE ("E"), as
`hybrid_override_pattern` (or transformers' `layers_block_type`) lists them; Nemotron 3 Super and Ultra add an MTP
block (`mtp.layers.N.*`: an attention layer with enorm/hnorm/eh_proj, then an MoE layer with final_layernorm).

Published names (transformers writes and reads them, and vLLM maps `backbone.` to `model.`): `backbone.embeddings`,
`backbone.layers.N.norm`, `backbone.layers.N.mixer.*`, `backbone.norm_f`, `lm_head`. The mixers' tensors:
- Mamba2: in_proj, conv1d, A_log, D, dt_bias, norm, out_proj: heads padded in whole groups (plan/mamba2.py).
- attention: q/k/v/o_proj, heads padded in whole GQA groups (Super: 32 heads / 2 kv -> 48 / 3 at TP 3 and 6).
- MLP: up_proj rows / down_proj columns of intermediate_size (non-gated).
- latent MoE: gate (router, with e_score_correction_bias) and the replicated fc1_latent_proj / fc2_latent_proj
  (vLLM: ReplicatedLinear, hidden <-> moe_latent_size) copied; routed experts `experts.E.up_proj` / `down_proj` of
  moe_intermediate_size over the latent; the shared expert `shared_experts.up_proj` / `down_proj` of
  moe_shared_expert_intermediate_size over hidden (vLLM builds it x n_shared_experts, transformers once: exactly one
  is accepted).

vLLM's NemotronHMTP projects [embedding | hidden] with a ColumnParallelLinear eh_proj to the hidden size, so MTP
speculative decoding needs hidden_size % TP == 0 (Super: 4096, not at TP 3 or 6): the card leaves it out there.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import Adapter, Role, one_shared_expert
from hubpad.plan.adapters.vllm import serving

_LAYERS = (r"^backbone\.layers\.(\d+)\.", r"^mtp\.layers\.(\d+)\.")


def _each(tails: list) -> list:
    """The patterns (or (pattern, role) pairs) of `tails` under the decoder layers and the MTP layers."""
    return [(p + t[0], *t[1:]) if isinstance(t, tuple) else p + t for p in _LAYERS for t in tails]


_LINEAR = _each([
    (r"mixer\.q_proj$", Role("q")), (r"mixer\.[kv]_proj$", Role("kv")), (r"mixer\.o_proj$", Role("o")),
    (r"mixer\.up_proj$", Role("rows", "dense")), (r"mixer\.down_proj$", Role("cols", "dense")),
    (r"mixer\.experts\.\d+\.up_proj$", Role("rows", "expert")),
    (r"mixer\.experts\.\d+\.down_proj$", Role("cols", "expert")),
    (r"mixer\.shared_experts\.up_proj$", Role("rows", "shared")),
    (r"mixer\.shared_experts\.down_proj$", Role("cols", "shared")),
])
_COPY_MODULES = [r"^backbone\.embeddings$", r"^backbone\.norm_f$", r"^lm_head$"] + _each(
    [r"norm$", r"mixer\.(gate|fc1_latent_proj|fc2_latent_proj)$", r"(enorm|hnorm|eh_proj|final_layernorm)$"])
_COPY_PARAMS = _each([r"mixer\.gate\.e_score_correction_bias$"])
# (pattern, plan/mamba2.py kind)
_MAMBA2 = [(p + tail, kind) for p in _LAYERS[:1] for tail, kind in (
    (r"mixer\.in_proj\.\w+$", "in_proj"), (r"mixer\.conv1d\.\w+$", "conv"),
    (r"mixer\.(A_log|D|dt_bias)$", "heads"), (r"mixer\.norm\.weight$", "norm"), (r"mixer\.out_proj\.\w+$", "out"))]


class NemotronHAdapter(Adapter):
    """Nemotron 3's parsers (an MoE stack: qwen3_coder tool calls, nemotron_v3 reasoning) and its MTP drafter; the
    dense Nemotron-H base models have neither."""

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        one_shared_expert(config)
        return super().intermediate_sizes(config)

    def serving(self, config: dict) -> dict:
        moe = "E" in _pattern(config)
        layers = int(config.get("num_nextn_predict_layers") or 0)
        spec = {"method": "mtp", "num_speculative_tokens": layers} if layers else None
        features = ("arch:NemotronHForCausalLM",) + (("moe:nemotron_h_latent",) if config.get("moe_latent_size")
                                                     else ()) + (("spec:mtp", "spec:nemotron_h_mtp") if spec else ())
        return serving(tool="qwen3_coder" if moe else None, reasoning="nemotron_v3" if moe else None, spec=spec,
                       features=features)


def _pattern(config: dict) -> str:
    """The layer types as vLLM reads them (hybrid_override_pattern; transformers' layers_block_type otherwise)."""
    pattern = config.get("hybrid_override_pattern")
    if isinstance(pattern, str):
        return pattern
    letters = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*", "mlp": "-", "moe": "E"}
    return "".join(letters.get(t, "?") for t in config.get("layers_block_type") or [])


NEMOTRON_H = NemotronHAdapter(
    name="nemotron_h", model_types=("nemotron_h",), linear_patterns=_LINEAR, copy_modules=_COPY_MODULES,
    copy_params=_COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",),
                       "shared": ("moe_shared_expert_intermediate_size",)},
    linear_attention=_MAMBA2, linear_attention_family="mamba2", mtp_fc_shards_hidden=True,
    layers=f"^(?:{_LAYERS[0][1:]}|{_LAYERS[1][1:]})",
)
