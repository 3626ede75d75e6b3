"""tencent Hy4 (`hy_v4`, HYV4ForCausalLM): DSA (dsa.py: MLA heads padded, lightning indexer copied) plus a gated
MLA output, a learned attention sink per head, independent hyper-connections (iHC) and routed experts stored fused.

Read in transformers 5.24 (models/hy_v4) and vLLM 0.32 (vllm/models/hy_v4/nvidia: model.py, attention.py, hc.py,
mtp.py), whose loader names are the published ones:

- `self_attn.linear_gate` (hidden → heads × gate width; transformers' `gate_proj`): vLLM's ColumnParallelLinear,
  `gating_type` "elementwise" (v_head_dim per head, the only kind transformers builds) or "headwise" (1 per head).
  Padded heads get zero rows: their gate is sigmoid(0) = 0.5 times an output that is already exactly zero.
- `self_attn.learnable_sink_param` (one float per head; transformers' `sinks`): vLLM narrows it per rank like the
  heads (`loaded_weight[head_rank_start:head_rank_end]`). A padded head's sink is 0.0: any finite logit is exact,
  since the head's values are zero (zero W_UV) whatever weights its softmax gives them.
- iHC: `hc_attn_layer` / `hc_mlp_layer` (`hc_fn`, `hc_base`, `hc_scale`) per layer and `model.hc_head` (`hc_head_fn`,
  `hc_head_base`, `hc_head_scale`) mix hc_mult copies of the hidden state; vLLM replicates them (hc_fn a
  ReplicatedLinear). Copied. transformers also accepts (and its save writes) a `hc_pre.` prefix vLLM does not read;
  both spellings are copied as they are.
- Routed experts fused as `mlp.experts.gate_up_proj` [E, 2I, H] (gate rows, then up rows) and `mlp.experts.down_proj`
  [E, H, I] (what transformers loads; vLLM chunks gate_up in two along dim -2 and shards each half), or split per
  expert as DeepSeek-V3 stores them (vLLM reads both). The shared expert is one MLP padded with the experts' width.
- The MTP layer at index num_hidden_layers (enorm, hnorm, eh_proj, shared_head.norm, final_layernorm, a decoder block
  with an indexer and no iHC weights) is padded like the others.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import COPY_MODULES, COPY_PARAMS, MTP_MODULES, ROUTERS, FusedExperts, L, Role
from hubpad.plan.adapters.dsa import DSA_COPY, DSA_LINEAR, INDEXER_PARAMS
from hubpad.plan.adapters.deepseek import MlaAdapter
from hubpad.plan.heads import HeadShape

_GATE_WIDTH = {"elementwise": "v_head_dim", "headwise": None}


class Hy4Adapter(MlaAdapter):
    """Hy4's own tool-call and reasoning parsers (hy_v4 in vLLM's registries) and MTP speculative decoding."""

    tool_call_parser = "hy_v4"
    reasoning_parser = "hy_v4"
    vllm_features = ("arch:HYV4ForCausalLM",)
    mtp_features = ("spec:hy_v4_mtp", "spec:mtp")

    def head_shape(self, config: dict) -> HeadShape:
        shape = super().head_shape(config)
        gating = config.get("gating_type", "elementwise")
        if gating not in _GATE_WIDTH:
            raise ConfigError(f"config.json: gating_type {gating!r} is not one vLLM's hy_v4 knows "
                              f"(elementwise or headwise)")
        width = config["v_head_dim"] if _GATE_WIDTH[gating] else 1
        return HeadShape({**shape.widths, "gate": width}, {**shape.labels, "gate": "linear_gate rows"},
                         kv_heads=False, config_head_dim=None, latent_kv=shape.latent_kv)


_HC = [L + r"(hc_pre\.)?hc_(attn|mlp)_layer\.hc_(fn|base|scale)$",
       r"^model\.(hc_pre\.)?hc_head\.hc_head_(fn|base|scale)$"]

HY_V4 = Hy4Adapter(
    name="hy_v4", model_types=("hy_v4",),
    linear_patterns=DSA_LINEAR + [(L + r"self_attn\.linear_gate$", Role("q", "gate"))],
    copy_modules=COPY_MODULES + ROUTERS + DSA_COPY + MTP_MODULES + [L + r"final_layernorm$"],
    copy_params=COPY_PARAMS + INDEXER_PARAMS + _HC,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    head_vectors=[L + r"self_attn\.learnable_sink_param$"], lossless=("heads.indexer",),
    fused_experts=[(L + r"mlp\.experts\.gate_up_proj$", FusedExperts(axis=-2, parts=2)),
                   (L + r"mlp\.experts\.down_proj$", FusedExperts(axis=-1, parts=1))],
)
