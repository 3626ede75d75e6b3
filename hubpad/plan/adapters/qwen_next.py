"""Hybrid linear attention, Qwen3.5 (`qwen3_5`, `qwen3_5_moe`: multimodal, the language model in text_config, plus
their text-only `qwen3_5_text` / `qwen3_5_moe_text`) and Qwen3-Next (`qwen3_next`): Gated DeltaNet layers
(plan/gdn.py) between gated full-attention layers, dense or MoE MLPs, an MTP layer (`mtp.*`), and for Qwen3.5 a
vision tower (`model.visual.*`) copied byte for byte and served data-parallel.

Full attention is gated: q_proj holds, per head, the query and then its output gate (head_dim rows each), so a head
is 2 x head_dim rows of q_proj; whole GQA groups are appended as for Qwen3 (zero query and gate rows, zero k/v rows,
zero o_proj columns; the (1 + w) q/k norms keep a zero head zero). Routed experts: Qwen3.5 stores them fused
([E, 2I, H] gate then up, [E, H, I]), its MTP layer and Qwen3-Next per expert; the shared expert has its own width.

vLLM's MTP layer for these models projects [embedding | hidden] to the hidden size with a column-parallel `fc`, so
MTP speculative decoding needs hidden_size % TP == 0, which no padding can give (the RMSNorms average over hidden):
at a TP that does not divide it the card leaves MTP out and says why.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, LANGUAGE_MODEL, ROUTERS,
                                       SHARED, VISION_TOWER, Adapter, FusedExperts, L, under)
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

_MTP = "mtp."
_MTP_OWN = [r"^mtp\.(fc|pre_fc_norm_embedding|pre_fc_norm_hidden|norm)$"]

# (pattern tail after the layer prefix, plan/gdn.py kind)
_GDN_QWEN35 = [(r"linear_attn\.in_proj_qkv\.(weight|weight_scale_inv)$", "qkv"),
               (r"linear_attn\.in_proj_z\.(weight|weight_scale_inv)$", "z"),
               (r"linear_attn\.in_proj_[ba]\.(weight|weight_scale_inv)$", "b")]
_GDN_NEXT = [(r"linear_attn\.in_proj_qkvz\.(weight|weight_scale_inv)$", "qkvz"),
             (r"linear_attn\.in_proj_ba\.(weight|weight_scale_inv)$", "ba")]
_GDN_BOTH = [(r"linear_attn\.conv1d\.weight$", "conv"), (r"linear_attn\.(A_log|dt_bias)$", "heads"),
             (r"linear_attn\.out_proj\.(weight|weight_scale_inv)$", "out")]
_GDN_NORM = [L + r"linear_attn\.norm$"]


class HybridAdapter(Adapter):
    """Gated attention's head geometry; the Qwen3 parsers (Qwen3.5: XML tool calls); MTP when the hidden size
    shards; a vision tower replicated on every rank."""

    tool_call_parser = "hermes"
    multimodal = False

    def head_shape(self, config: dict) -> HeadShape:
        hd = int(config.get("head_dim") or int(config.get("hidden_size") or 0) // int(config.get("num_attention_heads") or 1))
        return HeadShape({"q": 2 * hd, "kv": hd, "o": hd},
                         {"q": "q_proj rows (query and gate)", "kv": "k/v_proj rows", "o": "o_proj columns"},
                         kv_heads=True, config_head_dim=hd)

    def serving(self, config: dict) -> dict:
        arch = (config.get("architectures") or [""])[0]
        text = self.dims_config(config)
        layers = text.get("mtp_num_hidden_layers") or text.get("num_nextn_predict_layers")
        spec = {"method": "mtp", "num_speculative_tokens": int(layers)} if layers else None
        mtp_feature = "spec:qwen3_next_mtp" if self.name == "qwen3_next" else "spec:qwen3_5_mtp"
        features = (f"arch:{arch}",) + (("spec:mtp", mtp_feature) if spec else ())
        if self.multimodal:
            features += ("flag:mm-encoder-tp-mode", f"encoder-dp:{arch}")
        out = serving(tool=self.tool_call_parser, reasoning="qwen3", spec=spec, features=features)
        return {**out, "mm_encoder_tp_mode": "data"} if self.multimodal else out


class Qwen35Adapter(HybridAdapter):
    tool_call_parser = "qwen3_coder"


class Qwen35VlAdapter(Qwen35Adapter):
    multimodal = True


def _layers_for(prefix: str | None) -> str:
    return under(prefix, [L])[0] if prefix else L


def _family(name, model_types, cls, prefix, gdn, moe: bool, fused: bool):
    """One family's adapter: its language model under `prefix` (None: `model.`), its GDN layout, dense or MoE."""
    lm = (lambda patterns: under(prefix, patterns)) if prefix else (lambda patterns: list(patterns))
    layers = _layers_for(prefix)
    mtp_layers = under(_MTP, [L])[0]
    mlp = (EXPERTS + [(p, r) for p, r in _SHARED_ONE] if moe else DENSE_MLP)
    linear = lm(ATTENTION + DENSE_MLP + (EXPERTS + _SHARED_ONE if moe else [])) + under(_MTP, ATTENTION + mlp)
    copy_modules = (lm(COPY_MODULES + ROUTERS + _GDN_NORM) + under(_MTP, COPY_MODULES + ROUTERS) + _MTP_OWN
                    + (VISION_TOWER if cls is Qwen35VlAdapter else []))
    return cls(
        name=name, model_types=model_types, linear_patterns=linear, copy_modules=copy_modules,
        copy_params=lm(COPY_PARAMS), per_head_norms=True, layers=f"^(?:{layers[1:]}|{mtp_layers[1:]})",
        intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",),
                           "shared": ("shared_expert_intermediate_size",)} if moe
        else {"dense": ("intermediate_size",)},
        fused_experts=[(layers + r"mlp\.experts\.gate_up_proj$", FusedExperts(axis=-2, parts=2)),
                       (layers + r"mlp\.experts\.down_proj$", FusedExperts(axis=-1, parts=1))] if fused else [],
        linear_attention=[(layers + tail, kind) for tail, kind in gdn + _GDN_BOTH],
        text_config="text_config" if cls is Qwen35VlAdapter else None,
        mtp_fc_shards_hidden=True, tp_at_most_experts=moe,
    )


_SHARED_ONE = [(p, r) for p, r in SHARED]  # Qwen's shared_expert, with its own width

QWEN3_5 = _family("qwen3_5", ("qwen3_5",), Qwen35VlAdapter, LANGUAGE_MODEL, _GDN_QWEN35, moe=False, fused=False)
QWEN3_5_MOE = _family("qwen3_5_moe", ("qwen3_5_moe",), Qwen35VlAdapter, LANGUAGE_MODEL, _GDN_QWEN35, moe=True,
                      fused=True)
QWEN3_5_TEXT = _family("qwen3_5_text", ("qwen3_5_text",), Qwen35Adapter, None, _GDN_QWEN35, moe=False, fused=False)
QWEN3_5_MOE_TEXT = _family("qwen3_5_moe_text", ("qwen3_5_moe_text",), Qwen35Adapter, None, _GDN_QWEN35, moe=True,
                           fused=True)
QWEN3_NEXT = _family("qwen3_next", ("qwen3_next",), HybridAdapter, None, _GDN_NEXT, moe=True, fused=False)
