"""Gemma 4: multimodal `gemma4` (the language model under `model.language_model.`, its dims in `text_config`, vision
and audio towers beside it) and text-only `gemma4_text`.

Two attention layer types share num_attention_heads: sliding layers (head_dim, num_key_value_heads) and global
("full_attention") layers with their own head_dim and kv heads. Published configs state the global ones as
`global_head_dim` / `num_global_key_value_heads` (the latter used only with `attention_k_eq_v`: global layers then
have no v_proj and take V from k_proj); transformers 5.x turns them into `per_layer_config` (layer index ->
overrides) and writes only that; vLLM's Gemma4 classes read `config.per_layer_config[layer]` from the same
transformers config. The derivative states the padded global kv heads in whichever of the two forms upstream has
(both when it has both; transformers then reads per_layer_config and ignores the global keys).

Padding: whole GQA groups of every layer type. Query head i attends sliding kv head i // (H / KV) and global kv head
i // (H / KV_global), so the padded head count is a multiple of both groups and shards at TP (and each layer type's
kv heads divide TP or are divided by it, as vLLM's Gemma4Attention asserts). Gemma-4-31B: 32 heads, 16 sliding kv
(group 2), 4 global kv (group 8) -> 48 / 24 / 6 at TP 3 and 6. The new heads are zero: q_norm / k_norm are RMSNorms
over each head's own head_dim (a zero head stays zero), v_norm has no weight, the attention scale is 1.0 (no
head-count term), and o_proj's new columns are zero. KV-shared layers (the last num_kv_shared_layers) have only
q_proj in both engines; the k/v tensors some checkpoints still ship for them are padded like any other (both engines
drop them).

The MoE (26B-A4B) runs a dense MLP and 128 routed experts side by side: fused 3-D experts `experts.gate_up_proj`
[E, 2I, H] (gate, then up) and `experts.down_proj` [E, H, I], padded along I (704 -> 768 at TP 3 and 6: each rank's
slice a multiple of 64, what fused-MoE kernels need); the router (`router.proj`, `scale`, `per_expert_scale`) is
copied. vLLM builds the vision and audio towers with transformers' own classes (AutoModel.from_config, never
sharded) and their embedders as ReplicatedLinear: every rank holds them whole, so they are copied byte for byte.

Not covered, refused with the reason: `use_double_wide_mlp` (the KV-shared layers' MLP is twice intermediate_size,
a second width this adapter does not pad).
"""

from __future__ import annotations

import dataclasses

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import (COPY_MODULES, COPY_PARAMS, LANGUAGE_MODEL, Adapter, FusedExperts, L, Role,
                                       layers_pattern, under)
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

_MM_LAYERS = under(LANGUAGE_MODEL, [L])[0]
_TOWERS = r"^model\.(vision_tower|embed_vision|audio_tower|embed_audio)\."
# Per-layer embeddings (PLE: the small Gemma 4 models), the layer scalar, the MoE block's router and norms, and the
# per-head q/k norms (sized by each layer type's own head_dim, so they are listed here rather than checked against
# one head_dim): none is sharded along a padded dim.
_OWN_MODULES = [r"^model\.(embed_tokens_per_layer|per_layer_model_projection|per_layer_projection_norm)$",
                L + r"(per_layer_input_gate|per_layer_projection|post_per_layer_input_norm)$",
                L + r"(post_feedforward_layernorm_1|post_feedforward_layernorm_2|pre_feedforward_layernorm_2)$",
                L + r"router\.proj$", L + r"self_attn\.(q_norm|k_norm)$"]
_OWN_PARAMS = [L + r"layer_scalar$", L + r"router\.(scale|per_expert_scale)$"]
_MLP = [(L + r"mlp\.(gate_proj|up_proj)$", Role("rows", "dense")), (L + r"mlp\.down_proj$", Role("cols", "dense"))]

_SLIDING = {"q": Role("q"), "kv": Role("kv"), "o": Role("o")}
_GLOBAL = {"q": Role("q", "q_global"), "kv": Role("kv", "kv_global"), "o": Role("o", "o_global")}


def layer_attention(text: dict) -> list[tuple[str, int, int]]:
    """(layer type, head_dim, kv heads) of every decoder layer, as transformers' Gemma4TextConfig reads them:
    per_layer_config when present, else global_head_dim (default 512) and num_global_key_value_heads (only with
    attention_k_eq_v) on the full-attention layers."""
    n = int(text.get("num_hidden_layers") or 0)
    types = text.get("layer_types") or ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
    head_dim, kv = int(text.get("head_dim") or 256), int(text.get("num_key_value_heads") or 0)
    per_layer = text.get("per_layer_config")
    out = []
    for i, kind in enumerate(types):
        if isinstance(per_layer, dict):
            over = per_layer.get(str(i)) or per_layer.get(i) or {}
            out.append((kind, int(over.get("head_dim", head_dim)), int(over.get("num_key_value_heads", kv))))
        elif kind == "full_attention":
            g = text.get("num_global_key_value_heads") if text.get("attention_k_eq_v") else None
            out.append((kind, int(text.get("global_head_dim") or 512), int(g if g is not None else kv)))
        else:
            out.append((kind, head_dim, kv))
    return out


def _attention_types(text: dict) -> dict[str, tuple[int, int]]:
    """{"sliding": (head_dim, kv), "global": (head_dim, kv)} (layer types present only), refusing layers of one type
    that differ among themselves."""
    seen: dict[str, tuple[int, int]] = {}
    for kind, hd, kv in layer_attention(text):
        key = "sliding" if kind == "sliding_attention" else "global"
        if seen.setdefault(key, (hd, kv)) != (hd, kv):
            raise ConfigError(f"config.json: Gemma 4 {key} layers differ in head_dim / kv heads ({seen[key]} and "
                              f"{(hd, kv)}); hubpad pads one geometry per layer type")
    return seen


class Gemma4Adapter(Adapter):
    """Gemma 4: sliding and global attention geometries, the Gemma 4 parsers, towers replicated."""

    def for_config(self, config: dict) -> "Gemma4Adapter":
        text = self.dims_config(config)
        if text.get("use_double_wide_mlp") and int(text.get("num_kv_shared_layers") or 0):
            raise ConfigError("config.json: Gemma 4 use_double_wide_mlp is not supported (the KV-shared layers' MLP "
                              "is twice intermediate_size, a second width hubpad does not pad)")
        types = [kind for kind, _, _ in layer_attention(text)]
        prefix = self.layers
        patterns = []
        for roles, want in ((_SLIDING, "sliding_attention"), (_GLOBAL, "full_attention")):
            idx = [str(i) for i, kind in enumerate(types) if (kind == "sliding_attention") == (want == "sliding_attention")]
            if not idx:
                continue
            layer = layers_pattern(idx, prefix)
            patterns += [(layer + r"self_attn\.q_proj$", roles["q"]), (layer + r"self_attn\.[kv]_proj$", roles["kv"]),
                         (layer + r"self_attn\.o_proj$", roles["o"])]
        patterns += [(p, r) for p, r in self.linear_patterns if "self_attn" not in p]
        return dataclasses.replace(self, linear_patterns=patterns)

    def head_shape(self, config: dict) -> HeadShape:
        types = _attention_types(config)
        heads = int(config.get("num_attention_heads") or 1)
        shd, skv = types.get("sliding", (int(config.get("head_dim") or 256), int(config.get("num_key_value_heads") or 1)))
        ghd, gkv = types.get("global", (shd, skv))
        if skv != int(config.get("num_key_value_heads") or skv):
            raise ConfigError("config.json: Gemma 4 sliding layers' kv heads differ from num_key_value_heads")
        for what, kv in (("sliding", skv), ("global", gkv)):
            if heads % kv:
                raise ConfigError(f"config.json: {heads} attention heads are not a multiple of the {what} layers' "
                                  f"{kv} kv heads")
        widths = {"q": shd, "kv": shd, "o": shd, "q_global": ghd, "kv_global": ghd, "o_global": ghd}
        labels = {"q": "q_proj rows (sliding)", "kv": "k/v_proj rows (sliding)", "o": "o_proj columns (sliding)",
                  "q_global": "q_proj rows (global)", "kv_global": "k/v_proj rows (global)",
                  "o_global": "o_proj columns (global)"}
        groups = {"kv_global": heads // gkv} if gkv != skv else {}
        return HeadShape(widths, labels, kv_heads=True, config_head_dim=shd, kv_groups=groups)

    def kv_group_keys(self, config: dict) -> dict[str, tuple[str, ...]]:
        keys = tuple(k for k in ("num_global_key_value_heads",) if config.get(k) is not None)
        if isinstance(config.get("per_layer_config"), dict):
            keys += ("per_layer_config.num_key_value_heads",)
        return {"kv_global": keys}

    def padded_config(self, upstream: dict, config: dict, heads: int, kv: int) -> dict:
        text = dict(self.dims_config(config))
        shape = self.head_shape(self.dims_config(upstream))  # the padded global kv heads: heads // upstream's group
        gkv = shape.kv_count("kv_global", heads, kv)
        if text.get("num_global_key_value_heads") is not None and text.get("attention_k_eq_v"):
            text["num_global_key_value_heads"] = gkv  # without attention_k_eq_v neither engine reads it: as it is
        per_layer = text.get("per_layer_config")
        if isinstance(per_layer, dict):
            kinds = _types_of(text, per_layer)
            text["per_layer_config"] = {
                i: {**over, "num_key_value_heads": kv if kind == "sliding_attention" else gkv}
                if isinstance(over, dict) and "num_key_value_heads" in over else over
                for (i, over), kind in zip(per_layer.items(), kinds)}
        return {**config, self.text_config: text} if self.text_config else text

    def serving(self, config: dict) -> dict:
        arch = (config.get("architectures") or ["Gemma4ForConditionalGeneration"])[0]
        return serving(tool="gemma4", reasoning="gemma4", features=(f"arch:{arch}",))


def _types_of(text: dict, per_layer: dict) -> list[str]:
    """The layer type of each per_layer_config entry, in its order."""
    n = int(text.get("num_hidden_layers") or 0)
    types = text.get("layer_types") or ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
    return [types[int(i)] if str(i).isdigit() and int(i) < len(types) else "full_attention" for i in per_layer]


_EXPERTS = [(L + r"experts\.gate_up_proj$", FusedExperts(axis=-2, parts=2)),
            (L + r"experts\.down_proj$", FusedExperts(axis=-1, parts=1))]
_INTER = {"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)}

GEMMA4_TEXT = Gemma4Adapter(
    name="gemma4_text", model_types=("gemma4_text",), linear_patterns=list(_MLP),
    copy_modules=COPY_MODULES + _OWN_MODULES, copy_params=COPY_PARAMS + _OWN_PARAMS, intermediate_keys=_INTER,
    fused_experts=_EXPERTS, tp_at_most_experts=False,
)

GEMMA4 = Gemma4Adapter(
    name="gemma4", model_types=("gemma4",), linear_patterns=under(LANGUAGE_MODEL, _MLP),
    copy_modules=under(LANGUAGE_MODEL, COPY_MODULES + _OWN_MODULES) + [_TOWERS],
    copy_params=under(LANGUAGE_MODEL, COPY_PARAMS + _OWN_PARAMS) + [_TOWERS + r".*$"], intermediate_keys=_INTER,
    fused_experts=[(p.replace(L, _MM_LAYERS, 1), f) for p, f in _EXPERTS], text_config="text_config",
    layers=_MM_LAYERS,
)

# DiffusionGemma (`diffusion_gemma`, DiffusionGemmaForBlockDiffusion: google/diffusiongemma-26B-A4B-it): one Gemma 4
# backbone run as a causal encoder over the prompt and a bidirectional decoder over the canvas, with the same weights.
# The hub layout stores the shared language model once under `model.decoder.` (transformers ties the encoder's to it;
# only each encoder layer's `layer_scalar` buffer is saved there too), the tower and its embedder under
# `model.encoder.`. The decoder's self-conditioning MLP (`model.decoder.self_conditioning.*`) is
# intermediate_size wide in transformers, and in vLLM unless config.json states self_conditioning_size: it is padded
# with the dense MLP (zero gate/up rows and down columns; gelu_tanh(0) x 0 = 0), a replicated nn.Linear in vLLM.
_DECODER = "model.decoder."
_SELF_CONDITIONING = [(r"^model\.decoder\.self_conditioning\.(gate_proj|up_proj)$", Role("rows", "dense")),
                      (r"^model\.decoder\.self_conditioning\.down_proj$", Role("cols", "dense"))]
_ENCODER = r"^model\.encoder\.(vision_tower|embed_vision)\."


class DiffusionGemmaAdapter(Gemma4Adapter):
    """Global layers always k = v: the published text_config omits attention_k_eq_v, which transformers'
    DiffusionGemmaTextConfig does not have (its global kv override is ungated) and vLLM sets itself, so the global
    kv heads are num_global_key_value_heads. A self_conditioning_size that config.json states follows the padded
    dense width (vLLM builds the MLP with it)."""

    def dims_config(self, config: dict) -> dict:
        return {"attention_k_eq_v": True, **super().dims_config(config)}

    def padded_config(self, upstream: dict, config: dict, heads: int, kv: int) -> dict:
        out = super().padded_config(upstream, config, heads, kv)
        if "attention_k_eq_v" not in super().dims_config(upstream):  # as published: the key stays out
            out = {**out, self.text_config: {k: v for k, v in out[self.text_config].items() if k != "attention_k_eq_v"}}
        if upstream.get("self_conditioning_size") is not None:
            if upstream["self_conditioning_size"] != self.dims_config(upstream).get("intermediate_size"):
                raise ConfigError("config.json: self_conditioning_size differs from text_config.intermediate_size; "
                                  "hubpad pads the self-conditioning MLP with the dense MLP's width")
            out = {**out, "self_conditioning_size": self.dims_config(out)["intermediate_size"]}
        return out

    def serving(self, config: dict) -> dict:
        """Only the class: Gemma 4's parsers were not checked against DiffusionGemma's block-diffusion outputs."""
        return serving(features=("arch:DiffusionGemmaForBlockDiffusion",))


DIFFUSION_GEMMA = DiffusionGemmaAdapter(
    name="diffusion_gemma", model_types=("diffusion_gemma",),
    linear_patterns=under(_DECODER, _MLP) + _SELF_CONDITIONING,
    copy_modules=under(_DECODER, COPY_MODULES + _OWN_MODULES) + [r"^model\.decoder\.self_conditioning\.pre_norm$",
                                                                 _ENCODER],
    copy_params=under(_DECODER, COPY_PARAMS + _OWN_PARAMS) + [_ENCODER + r".*$",
                                                              r"^model\.encoder\.language_model\.layers\.\d+\.layer_scalar$"],
    intermediate_keys=_INTER, fused_experts=[(p.replace(L, under(_DECODER, [L])[0], 1), f) for p, f in _EXPERTS],
    text_config="text_config", layers=under(_DECODER, [L])[0],
)
