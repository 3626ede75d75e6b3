"""tencent/Hy3 (HYV3): dense layer 0, MoE after, per-head q/k norms, an MTP block at layer N."""

from __future__ import annotations

from hubpad.plan.adapters.base import (
    ATTENTION,
    COPY_MODULES,
    COPY_PARAMS,
    DENSE_MLP,
    EXPERTS,
    ROUTERS,
    SHARED,
    Adapter,
    L,
    Role,
)
from hubpad.plan.adapters.vllm import serving


class Hy3Adapter(Adapter):
    """Hy3 serves with its own tool-call and reasoning parsers, and MTP speculative decoding when it has the layer."""

    def serving(self, config: dict) -> dict:
        spec = None
        if config.get("num_nextn_predict_layers"):
            spec = {"method": "mtp", "num_speculative_tokens": int(config["num_nextn_predict_layers"])}
        return serving(tool="hy_v3", reasoning="hy_v3", spec=spec,
                       features=("arch:HYV3ForCausalLM",) + (("spec:hy_v3_mtp",) if spec else ()))


HY3 = Hy3Adapter(
    name="hy_v3", model_types=("hy_v3",),
    linear_patterns=ATTENTION + DENSE_MLP + EXPERTS + [
        (p, Role(r.kind, "expert")) for p, r in SHARED  # shared expert width = expert width (1 shared expert)
    ],
    copy_modules=COPY_MODULES + ROUTERS + [
        L + r"(enorm|hnorm|eh_proj|final_layernorm|embed_tokens|shared_head\.norm|shared_head\.head)$",
    ],
    copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("expert_hidden_dim", "moe_intermediate_size")},
    per_head_norms=True, tp_at_most_experts=True,
    vllm_reads={"route_norm": "vLLM's hy_v3 model reads without a default (it stops at load)",
                "expert_hidden_dim": "vLLM's hy_v3 model reads without a default (it stops at load)",
                "qk_norm": "vLLM's hy_v3 model takes as false, dropping the q/k norms the checkpoint has"},
)
