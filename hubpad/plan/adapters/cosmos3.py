"""Cosmos3 (`cosmos3_omni`, Cosmos3ForConditionalGeneration): a unified Diffusers repo whose reasoner vLLM serves.

vLLM's class is Qwen3-VL's (cosmos3.py): it reads the root config.json (Cosmos3OmniConfig, the reasoner's dims in
`text_config`), loads `transformer/` and `vision_encoder/` (`allow_patterns_overrides = ["[tv]*er/*.safetensors"]`)
and maps their flat names onto Qwen3-VL's (`layers.N.self_attn.to_q` -> q_proj, `norm_q` -> q_norm, `blocks.*` ->
the tower), dropping the generator's weights. The reasoner is padded with Qwen3-VL's rules, its vision tower copied
and run data-parallel. The generator shares each layer's joint attention (diffusers' Cosmos3PackedMoTAttention: the
same head counts, `add_q/k/v_proj`, `to_add_out`, `norm_added_q/k`) and has an MLP of the same width
(`mlp_moe_gen`): they are padded alike, so the derivative stays one checkpoint (zero query rows and output columns;
whole zero kv groups, whose keys and values are zero). Everything else (the generator's norms and projections, the
sound and action projections, the VAE and the other pipeline folders) is copied as it is.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import Adapter, Role
from hubpad.plan.adapters.vllm import encoder_data_parallel

_L = r"^layers\.(\d+)\."


class Cosmos3Adapter(Adapter):
    """Qwen3's parsers (Hermes tool calls, <think> reasoning), the vision tower replicated on every rank."""

    def serving(self, config: dict) -> dict:
        return encoder_data_parallel("Cosmos3ForConditionalGeneration", tool="hermes", reasoning="qwen3")


COSMOS3 = Cosmos3Adapter(
    name="cosmos3_omni", model_types=("cosmos3_omni",), text_config="text_config", layers=_L,
    weight_folders=("transformer", "vision_encoder"), keep_files=("*/*.safetensors",),
    intermediate_keys={"dense": ("intermediate_size",)},
    linear_patterns=[
        (_L + r"self_attn\.(to_q|add_q_proj)$", Role("q")),
        (_L + r"self_attn\.(to_k|to_v|add_k_proj|add_v_proj)$", Role("kv")),
        (_L + r"self_attn\.(to_out|to_add_out)$", Role("o")),
        (_L + r"(mlp|mlp_moe_gen)\.(gate_proj|up_proj)$", Role("rows", "dense")),
        (_L + r"(mlp|mlp_moe_gen)\.down_proj$", Role("cols", "dense")),
    ],
    copy_modules=[
        r"^embed_tokens$", r"^norm$", r"^norm_moe_gen$", r"^lm_head$",
        _L + r"(input_layernorm|post_attention_layernorm)(_moe_gen)?$",
        _L + r"self_attn\.(norm_q|norm_k|norm_added_q|norm_added_k)$",  # per head, over head_dim
        r"^(proj_in|proj_out|time_embedder|audio_proj_in|audio_proj_out|action_proj_in|action_proj_out)(\.|$)",
        r"^(blocks|merger|patch_embed|pos_embed|deepstack_merger_list)(\.|$)",  # the vision tower (vision_encoder/)
    ],
    copy_params=[r"^(audio|action)_modality_embed$"],
)
