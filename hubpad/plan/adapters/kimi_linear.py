"""Kimi-Linear (`kimi_linear`, KimiLinearForCausalLM): Kimi Delta Attention layers (plan/kda.py) between MLA layers
(the DeepSeek-V3 rules of adapters/deepseek.py), a dense first MLP and DeepSeek-style MoE (`block_sparse_moe`:
experts `w1`/`w3` rows and `w2` columns of moe_intermediate_size, a router with its correction bias, one shared
expert of moe_intermediate_size x n_shared_experts).

KDA and MLA layers both name their projections `self_attn.q_proj` / `self_attn.o_proj`: which layers are KDA comes
from `linear_attn_config.kda_layers` (1-based, as vLLM and transformers read it), and only those layers' tensors
take the KDA rules. KDA pads H heads to H' (H' % tp == 0, vLLM's assert) and MLA pads its own heads; the two counts
are independent (`linear_attn_config.num_heads`, `num_attention_heads`).

vLLM's class (vllm/models/kimi_k3: KimiLinearForCausalLM, the KDA layer KimiGatedDeltaNetAttention) stacks q/k/v/b
and the replicated f_a into one in_proj, q/k/v_conv1d into one conv1d, and loads A_log [1, 1, H, 1] or [H]; see
plan/kda.py for why every per-head tensor may grow at its end.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import COPY_MODULES, COPY_PARAMS, Adapter, L, Role, under
from hubpad.plan.adapters.deepseek import _LATENT, _MLA, KimiK2Adapter
from hubpad.plan.adapters.vllm import encoder_data_parallel, serving
from hubpad.plan.dims import EXPERT_TILE

# (pattern, plan/kda.py kind); the layer filter keeps them to the KDA layers
KDA = [(L + r"self_attn\.(q_proj|k_proj|v_proj|f_b_proj|g_b_proj|g_proj)\.weight$", "head_rows"),
       (L + r"self_attn\.b_proj\.weight$", "beta"),
       (L + r"self_attn\.[qkv]_conv1d\.weight$", "conv"),
       (L + r"self_attn\.conv1d\.weight$", "conv3"),
       (L + r"self_attn\.dt_bias$", "dt_bias"),
       (L + r"self_attn\.A_log$", "heads"),
       (L + r"self_attn\.o_proj\.weight$", "out")]
KDA_SHARED = [L + r"self_attn\.(f_a_proj|g_a_proj|o_norm)$"]  # one per layer, every head reads it: replicated
MOE = [(L + r"block_sparse_moe\.experts\.\d+\.(w1|w3)$", Role("rows", "expert")),
       (L + r"block_sparse_moe\.experts\.\d+\.w2$", Role("cols", "expert")),
       (L + r"block_sparse_moe\.shared_experts\.(gate_proj|up_proj)$", Role("rows", "expert")),
       (L + r"block_sparse_moe\.shared_experts\.down_proj$", Role("cols", "expert")),
       (L + r"mlp\.(gate_proj|up_proj)$", Role("rows", "dense")),
       (L + r"mlp\.down_proj$", Role("cols", "dense"))]
ROUTER = [L + r"block_sparse_moe\.gate$"]
ROUTER_PARAMS = [L + r"block_sparse_moe\.gate\.e_score_correction_bias$"]


class KimiLinearAdapter(KimiK2Adapter):
    """Kimi-K2's parsers and remote-code tokenizer; no MTP."""

    reasoning_parser = None

    def serving(self, config: dict) -> dict:
        out = serving(tool=self.tool_call_parser, features=("arch:KimiLinearForCausalLM",))
        return {**out, "extra_args": list(self.extra_args)}

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        """The shared expert is padded with the routed experts' width: exact only for one shared expert (vLLM builds
        moe_intermediate_size x num_shared_experts)."""
        shared = config.get("num_shared_experts", config.get("n_shared_experts"))
        if shared not in (None, 0, 1):
            raise ConfigError(f"config.json: num_shared_experts {shared} is not supported (the shared expert is padded "
                              f"with the routed experts' width, which needs exactly one shared expert)")
        return Adapter.intermediate_sizes(self, config)


KIMI_LINEAR = KimiLinearAdapter(
    name="kimi_linear", model_types=("kimi_linear",), vllm_reads={},
    linear_patterns=_MLA + MOE, copy_modules=COPY_MODULES + ROUTER + _LATENT + KDA_SHARED,
    copy_params=COPY_PARAMS + ROUTER_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    linear_attention=KDA, linear_attention_family="kda",
)


# ---------------------------------------------------------------------------------------------------------------------
# Kimi-K3 (`kimi_k3`, KimiK3ForConditionalGeneration; vLLM only, no transformers class): the Kimi-Linear language
# model (text_config, model_type kimi_linear) under `language_model.model.` with its head at `language_model.lm_head`
# (Kimi-K2.5's layout; vLLM also maps a `language_model.layers.` spelling there), a MoonViT tower and projector
# (`vision_tower.*`, `mm_projector.*`) replicated.
# Parts beyond Kimi-Linear, each read in vllm/models/kimi_k3/nvidia:
# - KDA with a full-rank output gate `g_proj` [H d, hidden] (a fourth per-head segment of in_proj_qkvgfab) and
#   gate_lower_bound (a bound on g: finite, so a padded head stays inert): same per-head rule.
# - MLA with q LoRA and a sigmoid output gate `g_proj` [heads x v_head_dim, hidden] (ColumnParallelLinear, or the
#   per-head part of fused_qkv_a_g_proj): heads x v rows, padded with the heads.
# - Attention residuals (`self_attention_res_*`, `mlp_res_*`, `output_attn_res_*`: ReplicatedLinear and norms) and
#   the latent MoE's `routed_expert_down_proj` / `routed_expert_up_proj` / `routed_expert_norm` (ReplicatedLinear):
#   hidden- or latent-wide, copied.
# - Two shared experts, one MLP of moe_intermediate_size x num_shared_experts in vLLM: growing the expert width
#   would have to grow that MLP to twice the new width, which hubpad does not do, so a TP that needs expert padding
#   is refused (at TP 3 and 6 the published width, 3072, needs none).

_K3 = "language_model.model."
_MLA_GATE = [(L + r"self_attn\.g_proj$", Role("q", "o"))]  # MLA layers only: KDA's g_proj is taken first
K3_RES = [L + r"(self_attention_res_proj|self_attention_res_norm|mlp_res_proj|mlp_res_norm)$",
          L + r"block_sparse_moe\.(routed_expert_down_proj|routed_expert_up_proj|routed_expert_norm)$"]
K3_TOP = [r"^language_model\.model\.(output_attn_res_proj|output_attn_res_norm)$",
          r"^language_model\.lm_head$", r"^vision_tower\.", r"^mm_projector\."]
K3_SHARED = [(L + r"block_sparse_moe\.shared_experts\.(gate_proj|up_proj)$", Role("rows", "shared")),
             (L + r"block_sparse_moe\.shared_experts\.down_proj$", Role("cols", "shared"))]


class KimiK3Adapter(KimiLinearAdapter):
    """Kimi-K3's parsers (kimi_k3, vLLM's tool_parsers and reasoning registries), the tower data-parallel."""

    tool_call_parser = "kimi_k3"
    reasoning_parser = "kimi_k3"

    def serving(self, config: dict) -> dict:
        out = encoder_data_parallel("KimiK3ForConditionalGeneration", tool=self.tool_call_parser,
                                    reasoning=self.reasoning_parser)
        return {**out, "extra_args": list(self.extra_args)}

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        out = Adapter.intermediate_sizes(self, config)
        shared = int(config.get("num_shared_experts") or config.get("n_shared_experts") or 0)
        if shared and "expert" in out:
            out["shared"] = ((), out["expert"][1] * shared)  # vLLM: moe_intermediate_size x num_shared_experts
        return out

    def check_tp(self, config: dict, tp: int) -> None:
        super().check_tp(config, tp)
        shared = int(config.get("num_shared_experts") or config.get("n_shared_experts") or 0)
        width = int(config.get("moe_intermediate_size") or 0)
        if shared > 1 and width % (tp * EXPERT_TILE):
            raise ConfigError(f"config.json: moe_intermediate_size {width} needs padding at tp {tp}, and vLLM builds "
                              f"the {shared} shared experts as one MLP of {shared} x moe_intermediate_size, which "
                              f"hubpad cannot pad to match; Kimi-K3 needs no padding at TP 1, 2, 3, 4, 6 and 8")


KIMI_K3 = KimiK3Adapter(
    name="kimi_k3", model_types=("kimi_k3",), vllm_reads={},
    linear_patterns=under(_K3, _MLA + _MLA_GATE + MOE[:2] + K3_SHARED + MOE[4:]),
    copy_modules=under(_K3, COPY_MODULES + ROUTER + _LATENT + KDA_SHARED + K3_RES) + K3_TOP,
    copy_params=under(_K3, COPY_PARAMS + ROUTER_PARAMS),
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    linear_attention=under(_K3, KDA), linear_attention_family="kda", text_config="text_config",
    layers=under(_K3, [L])[0],
)
