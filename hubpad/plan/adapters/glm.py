"""GLM-4-0414 (`glm4`, dense) and GLM-4.5 / 4.6 / 4.5-Air (`glm4_moe`).

GLM-4-0414 / GLM-Z1 (`glm4`): GQA with q/k/v biases, partial rotary, sandwich RMSNorms (post_self_attn_layernorm,
post_mlp_layernorm, copied) and a fused `mlp.gate_up_proj` [gate; up]. Heads are padded like Llama's (vLLM's
glm4.py reads config.head_dim; transformers' Glm4Config does not require hidden % heads == 0). hubpad has no
two-section dense MLP role, so the fused MLP is copied whole and a TP where it would need padding (each rank's share
not whole 128-wide tiles, the dense rule) is refused: GLM-4-32B's 23040 is 7680 per rank at TP 3, 3840 at TP 6.

GLM-4.5 / 4.6 / 4.5-Air (`glm4_moe`): GQA with q/k/v biases, optional per-head q/k norms, partial rotary,
dense first layers, routed plus one shared expert with `e_score_correction_bias`, and an MTP layer.

vLLM (glm4_moe.py) shards heads and kv heads like Llama (QKVParallelLinear / RowParallelLinear); its q/k norms
are per head (head_dim wide), so zero heads stay zero, and partial rotary rotates part of each head, which keeps
zero heads zero too. The shared expert is one MLP of moe_intermediate_size × n_shared_experts, padded with the
routed experts' width (Air: 1408 → 1536 at TP=3). The MTP block (num_nextn_predict_layers) sits at index
num_hidden_layers and is padded like the other layers.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, MTP_MODULES, ROUTERS,
                                       SHARED, Adapter, L, Role, inside_vlm, mtp_speculative, one_shared_expert)
from hubpad.plan.adapters.vllm import encoder_data_parallel, serving
from hubpad.plan.dims import MLP_TILE


class Glm4Adapter(Adapter):
    """GLM-4-0414's fused gate_up_proj is copied whole: a TP whose per-rank share it would need padded is refused."""

    def check_tp(self, config: dict, tp: int) -> None:
        inter = int(config.get("intermediate_size") or 0)
        if inter % (tp * MLP_TILE):
            raise ConfigError(f"config.json: intermediate_size {inter} is not whole {MLP_TILE}-wide tiles per rank at "
                              f"tp {tp}, and padding GLM-4's fused mlp.gate_up_proj is not implemented")

    def serving(self, config: dict) -> dict:
        return serving(features=("arch:Glm4ForCausalLM",))


class GlmMoeAdapter(Adapter):
    """GLM-4.5/4.6 serve with vLLM's glm45 tool-call and reasoning parsers, and MTP speculative decoding."""

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        one_shared_expert(config)
        return super().intermediate_sizes(config)

    def serving(self, config: dict) -> dict:
        spec = mtp_speculative(config)
        return serving(tool="glm45", reasoning="glm45", spec=spec, features=("arch:Glm4MoeForCausalLM",) + (
            ("spec:glm4_moe_mtp", "spec:mtp") if spec else ()))


class Glm4vMoeAdapter(GlmMoeAdapter):
    """GLM-4.5V / 4.6V (`glm4v_moe`): the same language model under `model.language_model.` (dims in text_config),
    a vision tower under `model.visual.` copied byte for byte and replicated on every rank (--mm-encoder-tp-mode data:
    vLLM's Glm4vMoeForConditionalGeneration inherits supports_encoder_tp_data from Glm4vForConditionalGeneration).
    vLLM builds the language model with its Glm4Moe class, which reads text_config's head_dim and use_qk_norm."""

    def serving(self, config: dict) -> dict:
        text = self.dims_config(config)
        spec = mtp_speculative(text)
        return encoder_data_parallel("Glm4vMoeForConditionalGeneration", tool="glm45", reasoning="glm45", spec=spec,
                                     features=("spec:glm4_moe_mtp", "spec:mtp") if spec else ())


_GLM = dict(linear_patterns=ATTENTION + DENSE_MLP + EXPERTS + [(p, Role(r.kind, "expert")) for p, r in SHARED],
            copy_modules=COPY_MODULES + ROUTERS + MTP_MODULES, copy_params=COPY_PARAMS)

GLM4 = Glm4Adapter(
    name="glm4", model_types=("glm4",), linear_patterns=ATTENTION,
    copy_modules=COPY_MODULES + [L + r"(post_self_attn_layernorm|post_mlp_layernorm|mlp\.gate_up_proj|mlp\.down_proj)$"],
    copy_params=COPY_PARAMS,
)

GLM4_MOE = GlmMoeAdapter(
    name="glm4_moe", model_types=("glm4_moe",), **_GLM,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    per_head_norms=True,
)

GLM4V_MOE = Glm4vMoeAdapter(
    name="glm4v_moe", model_types=("glm4v_moe",),
    **inside_vlm(**_GLM), intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    per_head_norms=True,
    vllm_reads={"use_qk_norm": "vLLM's Glm4Moe model reads from text_config without a default (it stops at load)"},
)
