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

from hubpad.plan.adapters.base import COPY_MODULES, COPY_PARAMS, L, Role
from hubpad.plan.adapters.deepseek import _LATENT, _MLA, KimiK2Adapter
from hubpad.plan.adapters.vllm import serving

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
        out = serving(tool=self.tool_call_parser, features=())
        return {**out, "extra_args": list(self.extra_args)}


KIMI_LINEAR = KimiLinearAdapter(
    name="kimi_linear", model_types=("kimi_linear",), vllm_reads={},
    linear_patterns=_MLA + MOE, copy_modules=COPY_MODULES + ROUTER + _LATENT + KDA_SHARED,
    copy_params=COPY_PARAMS + ROUTER_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    linear_attention=KDA, linear_attention_family="kda",
)
