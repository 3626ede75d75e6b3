"""Step-3 (`step3_text`, Step3TextForCausalLM; inside `step3_vl`, Step3VLForConditionalGeneration: stepfun-ai/step3,
321B): multi-query attention with a low-rank query. vLLM's Step3TextAttention keeps `q_proj` (hidden -> share_q_dim),
`k_proj` and `v_proj` (one kv head each) replicated on every rank, normalizes q with `inter_norm` over share_q_dim, and
shards the heads only through `wq` (share_q_dim -> heads x head_dim, column-parallel) and `o_proj` (row-parallel): so
only those two are padded (whole heads; every head reads the one kv head), and vLLM raises unless
num_attention_groups == 1. Step-3.5's MLP names (tests and vLLM alike): dense `mlp.*`, the shared expert
`share_expert.*` (share_expert_dim), routed experts stacked per layer `moe.{gate,up,down}_proj.weight` and the router
`moe.gate`. The multimodal checkpoint keeps the language model at `model.` / `lm_head` and its tower `vision_model.*`,
`vit_large_projector` beside it, copied and run data-parallel (Step3VL sets supports_encoder_tp_data).

There is no transformers class for Step-3: its proof is a reference written after vLLM's step3_text.py
(tests/step3_models.py).
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import COPY_MODULES, COPY_PARAMS, Adapter, L, Role
from hubpad.plan.adapters.step3p7 import STEP_INTER, STEP_MLP, STEP_TOWER
from hubpad.plan.adapters.vllm import encoder_data_parallel, serving

_ATTENTION = [(L + r"self_attn\.wq$", Role("q")), (L + r"self_attn\.o_proj$", Role("o"))]
_REPLICATED = [L + r"self_attn\.(q_proj|k_proj|v_proj|inter_norm)$", L + r"moe\.gate$"]


class Step3Adapter(Adapter):
    """One kv head (num_attention_groups), never padded; the step3 parsers; the tower data-parallel."""

    def dims_config(self, config: dict) -> dict:
        text = dict(super().dims_config(config))
        groups = text.get("num_attention_groups", text.get("num_key_value_heads", 1))
        if groups != 1:
            raise ConfigError(f"config.json: num_attention_groups {groups}: vLLM's Step3TextAttention raises unless "
                              f"it is 1 (its k/v projections are replicated, one kv head)")
        text.setdefault("num_key_value_heads", 1)
        text.setdefault("n_routed_experts", text.get("moe_num_experts"))  # vLLM's FusedMoEBlock refuses TP > it
        return text

    def padded_config(self, upstream: dict, config: dict, heads: int, kv: int) -> dict:
        text = dict(super().dims_config(config))
        if "num_key_value_heads" not in super().dims_config(upstream):
            text.pop("num_key_value_heads", None)  # the kv heads never change: keep the config as published
        return {**config, self.text_config: text} if self.text_config else text

    def serving(self, config: dict) -> dict:
        if self.text_config is None:
            return serving(tool="step3", reasoning="step3", features=("arch:Step3TextForCausalLM",))
        return encoder_data_parallel("Step3VLForConditionalGeneration", tool="step3", reasoning="step3")


def _step3(name: str, multimodal: bool) -> Step3Adapter:
    return Step3Adapter(
        name=name, model_types=(name,), linear_patterns=_ATTENTION + STEP_MLP,
        copy_modules=COPY_MODULES + _REPLICATED + ([STEP_TOWER] if multimodal else []),
        copy_params=COPY_PARAMS + ([r"^vision_model\..*$"] if multimodal else []), intermediate_keys=STEP_INTER,
        text_config="text_config" if multimodal else None, tp_at_most_experts=True,
    )


STEP3_TEXT = _step3("step3_text", multimodal=False)
STEP3_VL = _step3("step3_vl", multimodal=True)
