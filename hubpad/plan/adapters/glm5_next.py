"""GLM-5-Next (`glm5_next`, Glm5NextForConditionalGeneration; GLM-5.3-Flash): Kimi Delta Attention layers (three in
four: plan/kda.py, kimi_linear.py's tensor patterns) and DeepSeek-sparse-attention MLA layers (dsa.py: MLA heads
padded, the lightning indexer replicated), mHC hyper-connections, DeepSeek-style MoE with one shared expert, an MTP
layer at index num_hidden_layers, and a vision tower (`model.visual.*`) served data-parallel. The language model sits
under `model.language_model.`, its dims in text_config.

Read in transformers' modeling_glm5_next.py and vLLM's vllm/models/glm5next/common:
- KDA (Glm5NextKimiDeltaAttention): q/k/v/b of `in_proj_qkvbfg_a` sharded per segment with f_a and g_a replicated,
  q/k/v_conv1d, f_b_proj / g_b_proj column-parallel, dt_bias sharded_weight_loader(0), A_log stored [H] and loaded
  into a [1, 1, H/tp, 1] parameter narrowed on its head axis, o_proj row-parallel: the plan/kda.py rule. The gate is
  lower_bound x sigmoid(...), finite, so a padded head is inert. Which layers are KDA: `layer_types` (vLLM's
  `_is_kda_layer`; the MTP layer never is).
- MLA layers are NoPE (qk_rope_head_dim 0): heads of q_b_proj (qk_nope rows), kv_b_proj (qk_nope + v rows), o_proj
  (v columns); the indexer (wq_b, wk, k_norm, weights_proj, and GLM-5-Next's k-pool compression parameters
  `index_kpool_compress_ape` / `index_kpool_compress_gate`: plain nn.Parameters, whole on every rank) reads the q
  latent and the hidden state, never the heads, and is copied.
- mHC (`hc_attn_*`, `hc_ffn_*` per layer, `hc_head_*` at the top): plain nn.Parameters over hc_mult x hidden, whole
  on every rank: copied.
- MTP: `eh_proj` is an nn.Linear (replicated) in vLLM's Glm5NextMTP, so MTP works at any TP.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import (COPY_MODULES, COPY_PARAMS, LANGUAGE_MODEL, MTP_MODULES, ROUTERS, VISION_TOWER, L,
                                       under)
from hubpad.plan.adapters.dsa import DSA_COPY, DSA_LINEAR, INDEXER_PARAMS, GlmDsaAdapter
from hubpad.plan.adapters.kimi_linear import KDA, KDA_SHARED
from hubpad.plan.heads import HeadShape

_HC = [L + r"hc_(attn|ffn)_(fn|base|scale)$", L + r"self_attn\.indexer\.index_kpool_compress_(ape|gate)$"]
_TOP = [r"^model\.language_model\.hc_head_(fn|base|scale)$"]


class Glm5NextAdapter(GlmDsaAdapter):
    """GLM's parsers (glm47 tool calls, glm45 reasoning), MTP, the vision tower data-parallel; NoPE MLA heads."""

    vllm_features: tuple[str, ...] = ("arch:Glm5NextForConditionalGeneration", "flag:mm-encoder-tp-mode",
                                      "encoder-dp:Glm5NextForConditionalGeneration")
    mtp_features: tuple[str, ...] = ("spec:glm5_next_mtp", "spec:mtp")

    def head_shape(self, config: dict) -> HeadShape:
        keys = ("qk_nope_head_dim", "v_head_dim", "kv_lora_rank")
        bad = [k for k in keys if not isinstance(config.get(k), int) or config[k] <= 0]
        rope = config.get("qk_rope_head_dim", 0)
        if bad or not isinstance(rope, int) or rope < 0:
            raise ConfigError(f"config.json: {(bad or ['qk_rope_head_dim'])[0]} missing or not a valid integer "
                              f"(needed for MLA)")
        heads, kv = config.get("num_attention_heads"), config.get("num_key_value_heads")
        if kv is not None and kv != heads:
            raise ConfigError(f"config.json: num_key_value_heads {kv} differs from num_attention_heads {heads}; "
                              f"MLA has no kv heads")
        nope, v = config["qk_nope_head_dim"], config["v_head_dim"]
        return HeadShape({"q": nope + rope, "o": v, "kv_b": nope + v},
                         {"q": "q_b_proj rows", "o": "o_proj columns", "kv_b": "kv_b_proj rows"},
                         kv_heads=False, config_head_dim=None, latent_kv=config["kv_lora_rank"] + rope)

    def serving(self, config: dict) -> dict:
        return {**super().serving(self.dims_config(config)), "mm_encoder_tp_mode": "data"}


_LM = LANGUAGE_MODEL
GLM5_NEXT = Glm5NextAdapter(
    name="glm5_next", model_types=("glm5_next",), vllm_reads={},
    linear_patterns=under(_LM, DSA_LINEAR),
    copy_modules=under(_LM, COPY_MODULES + ROUTERS + DSA_COPY + MTP_MODULES + KDA_SHARED) + VISION_TOWER,
    copy_params=under(_LM, COPY_PARAMS + INDEXER_PARAMS + _HC) + _TOP,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    linear_attention=under(_LM, KDA), linear_attention_family="kda", text_config="text_config",
    layers=under(_LM, [L])[0], lossless=("heads.indexer",),
)
