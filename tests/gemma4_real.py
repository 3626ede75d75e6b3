"""Gemma 4 31B and 26B-A4B as published (google/gemma-4-31B-it, google/gemma-4-26B-A4B-it): config.json values and
tensor lists, for header-only plans of the real layouts at TP 3 and 6.

Where the facts come from (stored public copies only, nothing fetched from the Hub; the Hub files themselves could
not be read offline):

- Text configs: the values below agree across several independent public copies of the two config.json files
  (MLX and Rust loaders' test fixtures, a KV-cache sizing tool's traced 31B config): 31B hidden 5376, 60 layers
  (5 sliding : 1 global), 32 heads, 16 kv heads of 256, 4 global kv heads of 512, attention_k_eq_v, intermediate
  21504, sliding window 1024, vocab 262144, final_logit_softcapping 30; 26B-A4B hidden 2816, 30 layers, 16 heads,
  8 kv of 256, 2 global kv of 512, attention_k_eq_v, dense intermediate 2112, 128 experts top-8 of width 704.
  max_position_embeddings is 262144 in most copies (one says 131072); it plays no part in padding.
- Vision config (both): hidden 1152, 16 heads of 72, 27 layers, intermediate 4304 (vLLM's gemma4_mm.py names 4304),
  patch 16, pooling 3, standardize: from one third-party reconstruction of the official sizes, unconfirmed. The
  tower is copied whatever its sizes; they only set the tensor count.
- Tensor names and shapes: transformers' own Gemma4ForConditionalGeneration built on the meta device from these
  configs (Gemma 4 has no checkpoint conversion mapping in transformers, and vLLM's Gemma4 loader reads the same
  names: `model.language_model.*`, `model.vision_tower.*`, `model.embed_vision.*`, fused experts
  `experts.gate_up_proj` [E, 2I, H] / `experts.down_proj` [E, H, I], `router.{proj.weight,scale,per_expert_scale}`,
  `layer_scalar`). Independent copies of the 26B index confirm the expert, router and layer_scalar names. The real
  shard counts are unknown: tests choose their own. dtype BF16 throughout (unconfirmed for the buffers).
"""

from __future__ import annotations

_LAYERS = lambda n: (["sliding_attention"] * 5 + ["full_attention"]) * (n // 6)  # noqa: E731
_ROPE = {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
         "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}
_VISION = {"model_type": "gemma4_vision", "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
           "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 72, "patch_size": 16,
           "pooling_kernel_size": 3, "position_embedding_size": 10240, "standardize": True,
           "use_clipped_linears": False, "rms_norm_eps": 1e-06}
_TEXT = {"model_type": "gemma4_text", "attention_bias": False, "attention_k_eq_v": True, "final_logit_softcapping": 30.0,
         "head_dim": 256, "global_head_dim": 512, "hidden_activation": "gelu_pytorch_tanh",
         "hidden_size_per_layer_input": 0, "max_position_embeddings": 262144, "num_kv_shared_layers": 0,
         "rms_norm_eps": 1e-06, "rope_parameters": _ROPE, "sliding_window": 1024, "tie_word_embeddings": True,
         "use_double_wide_mlp": False, "vocab_size": 262144, "vocab_size_per_layer_input": 262144,
         "enable_moe_block": False}


def _config(**text) -> dict:
    return {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "tie_word_embeddings": True,
            "boi_token_id": 255999, "eoi_token_id": 258882, "image_token_id": 258880, "video_token_id": 258884,
            "audio_token_id": 258881, "text_config": {**_TEXT, **text}, "vision_config": dict(_VISION),
            "audio_config": None}


GEMMA4_31B = _config(hidden_size=5376, intermediate_size=21504, num_hidden_layers=60, num_attention_heads=32,
                     num_key_value_heads=16, num_global_key_value_heads=4, layer_types=_LAYERS(60))
GEMMA4_26B_A4B = _config(hidden_size=2816, intermediate_size=2112, num_hidden_layers=30, num_attention_heads=16,
                         num_key_value_heads=8, num_global_key_value_heads=2, layer_types=_LAYERS(30),
                         enable_moe_block=True, num_experts=128, top_k_experts=8, moe_intermediate_size=704)


def tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, dtype, shape) of every saved tensor: transformers' model on the meta device (no memory)."""
    import torch
    import transformers

    with torch.device("meta"):
        model = transformers.Gemma4ForConditionalGeneration(transformers.Gemma4Config(**{
            k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}))
    state = model.state_dict()
    tied = set(getattr(model, "_tied_weights_keys", None) or {})
    return [(name, "BF16", tuple(t.shape)) for name, t in state.items() if name not in tied]


REAL_GEMMA4 = {"google/gemma-4-31B-it": GEMMA4_31B, "google/gemma-4-26B-A4B-it": GEMMA4_26B_A4B}
