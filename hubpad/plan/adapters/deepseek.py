"""DeepSeek-V3 / R1 and Kimi-K2 (`deepseek_v3`, `kimi_k2`): multi-head latent attention (MLA) plus routed experts.

MLA has no kv heads to pad: the latent KV (kv_a_proj_with_mqa, kv_a_layernorm) is shared by every head and
replicated on every rank. vLLM (deepseek_v2.py `DeepseekV2MLAAttention`) shards per head: q_b_proj (q_proj without
a q LoRA) rows of qk_nope + qk_rope, kv_b_proj rows of qk_nope + v, o_proj columns of v. Padded heads get zero
rows there and zero o_proj columns. Through vLLM's weight absorption (W_UK / W_UV split per head out of
kv_b_proj) a padded head has zero q, zero W_UK and zero W_UV, so its output is exactly zero. With FP8 block 128,
each rank's q_b_proj rows (heads/rank × 192) must be whole blocks, so heads/rank is even: Kimi-K2's 64 heads
become 66 at TP=3 and 72 at TP=6, DeepSeek-V3's 128 become 132 at TP=3. The shared expert is padded with the
routed experts' width; the MTP layer at index num_hidden_layers is padded like every other layer.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import (COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, MTP_MODULES, ROUTERS, SHARED,
                                       Adapter, L, Role, mtp_speculative, one_shared_expert, under)
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

_MLA = [
    (L + r"self_attn\.(q_b_proj|q_proj)$", Role("q")),
    (L + r"self_attn\.kv_b_proj$", Role("q", "kv_b")),  # heads × (qk_nope + v) rows
    (L + r"self_attn\.o_proj$", Role("o")),
]
# Replicated on every rank (vLLM fuses q_a_proj and kv_a_proj_with_mqa into one ReplicatedLinear).
_LATENT = [L + r"self_attn\.(q_a_proj|kv_a_proj_with_mqa|q_a_layernorm|kv_a_layernorm)$"]
_MLA_KEYS = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank")


class MlaAdapter(Adapter):
    """Heads carry three widths (q, kv_b, o) and no kv heads; the shared expert must be one expert wide."""

    tool_call_parser = "deepseek_v3"
    reasoning_parser = "deepseek_v3"  # separates thinking only when a request asks for it (else identity)
    extra_args: tuple[str, ...] = ()
    vllm_features: tuple[str, ...] = ("arch:DeepseekV3ForCausalLM",)  # vLLM's class for both model types
    mtp_features: tuple[str, ...] = ("spec:deepseek_mtp", "spec:mtp")  # what MTP speculative decoding adds

    def head_shape(self, config: dict) -> HeadShape:
        bad = [k for k in _MLA_KEYS if not isinstance(config.get(k), int) or config[k] <= 0]
        if bad:
            raise ConfigError(f"config.json: {bad[0]} missing or not a positive integer (needed for MLA)")
        heads, kv = config.get("num_attention_heads"), config.get("num_key_value_heads")
        if kv is not None and kv != heads:
            raise ConfigError(f"config.json: num_key_value_heads {kv} differs from num_attention_heads {heads}; "
                              f"MLA has no kv heads and hubpad only knows checkpoints that set them equal")
        nope, rope, v = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
        q_label = "q_b_proj rows" if config.get("q_lora_rank") else "q_proj rows"
        return HeadShape({"q": nope + rope, "o": v, "kv_b": nope + v},
                         {"q": q_label, "o": "o_proj columns", "kv_b": "kv_b_proj rows"},
                         kv_heads=False, config_head_dim=None, latent_kv=config["kv_lora_rank"] + rope)

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        one_shared_expert(config)
        return super().intermediate_sizes(config)

    def serving(self, config: dict) -> dict:
        spec = mtp_speculative(config)
        out = serving(tool=self.tool_call_parser, reasoning=self.reasoning_parser, spec=spec,
                      features=self.vllm_features + (self.mtp_features if spec else ()))
        return {**out, "extra_args": list(self.extra_args)}


class KimiK2Adapter(MlaAdapter):
    """Kimi-K2 ships its tokenizer as remote code (tiktoken), so vLLM needs --trust-remote-code."""

    tool_call_parser = "kimi_k2"
    reasoning_parser = "kimi_k2"
    extra_args = ("--trust-remote-code",)
    vllm_features = ("arch:DeepseekV3ForCausalLM", "mla:kimi_k2")


# DeepSeek-V3's router as its published configs state it; vLLM's defaults differ silently (no bias, softmax).
_ROUTER_KEYS = {"topk_method": "vLLM defaults to no e_score_correction_bias routing ('greedy'), another function",
                "scoring_func": "vLLM defaults to 'softmax', another routing function than DeepSeek-V3's sigmoid"}


# Public names for the DSA families (dsa.py), which are MLA plus an indexer.
MLA_HEADS, MLA_LATENT, ROUTER_KEYS = _MLA, _LATENT, _ROUTER_KEYS


def mla_adapter(cls: type[MlaAdapter], model_type: str, vllm_reads: dict[str, str] | None = None,
                more_copies: tuple[str, ...] = (), expert_keys: tuple[str, ...] = ("moe_intermediate_size",),
                **extra) -> MlaAdapter:
    """An MLA family's adapter: MLA heads, dense MLP, routed experts and one shared expert padded; latent projections,
    routers, the MTP layer's own modules and `more_copies` (the family's other replicated modules) copied (its
    decoder block padded like the others). `vllm_reads` defaults to DeepSeek-V3's router keys, which vLLM's
    deepseek_v2.py reads with other defaults; `expert_keys`: the config keys that hold the experts' width."""
    return cls(
        vllm_reads=_ROUTER_KEYS if vllm_reads is None else vllm_reads,
        name=model_type, model_types=(model_type,),
        linear_patterns=_MLA + DENSE_MLP + EXPERTS + [(p, Role(r.kind, "expert")) for p, r in SHARED],
        copy_modules=COPY_MODULES + ROUTERS + _LATENT + MTP_MODULES + list(more_copies), copy_params=COPY_PARAMS,
        intermediate_keys={"dense": ("intermediate_size",), "expert": expert_keys}, **extra,
    )


class KimiK25Adapter(KimiK2Adapter):
    """Kimi-K2.5 (`kimi_k25`): Kimi-K2's MLA language model under `language_model.model.` (its lm_head at
    `language_model.lm_head`, its dims and int4 quantization_config in text_config), a MoonViT vision tower
    (`vision_tower.*`) and projector (`mm_projector.*`) copied byte for byte and replicated on every rank
    (--mm-encoder-tp-mode data; vLLM's KimiK25ForConditionalGeneration has supports_encoder_tp_data)."""

    vllm_features = ("arch:KimiK25ForConditionalGeneration", "flag:mm-encoder-tp-mode",
                     "encoder-dp:KimiK25ForConditionalGeneration")

    def serving(self, config: dict) -> dict:
        return {**super().serving(self.dims_config(config)), "mm_encoder_tp_mode": "data"}


DEEPSEEK_V3 = mla_adapter(MlaAdapter, "deepseek_v3")
KIMI_K2 = mla_adapter(KimiK2Adapter, "kimi_k2")
_KIMI_LM = "language_model.model."
KIMI_K25 = KimiK25Adapter(
    name="kimi_k25", model_types=("kimi_k25",), vllm_reads=_ROUTER_KEYS,
    linear_patterns=under(_KIMI_LM, _MLA + DENSE_MLP + EXPERTS + [(p, Role(r.kind, "expert")) for p, r in SHARED]),
    copy_modules=under(_KIMI_LM, COPY_MODULES + ROUTERS + _LATENT + MTP_MODULES)
    + [r"^language_model\.lm_head$", r"^vision_tower\.", r"^mm_projector\."],
    copy_params=under(_KIMI_LM, COPY_PARAMS),
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    text_config="text_config", layers=under(_KIMI_LM, [L])[0],
)
