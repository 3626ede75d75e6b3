"""FLM-2-52B-Instruct-2407's layout (header-only) for plans at the real shape (tests/test_registry_rows.py).

Source: the model card of CofeAI/FLM-2-52B-Instruct-2407 (a stored public copy; huggingface.co could not be read
offline): 64 layers, 64 attention heads, hidden 8192, FFN 21824, vocab 80000, RoPE, RMSNorm, SwiGLU, no linear biases,
untied head, input and output multipliers. Assumed, NOT read: Llama's config keys and tensor names (vLLM's
TeleFLMForCausalLM loads it with its Llama loader), multi-head attention (no kv key; the card states no GQA), BF16,
model_type "TeleFLM" and the muP scalars' values. Tele-FLM-1T's layout was not found.
"""

from __future__ import annotations

from tests.real_models import header_only_tensors

FLM2_52B = {
    "architectures": ["TeleFLMForCausalLM"], "model_type": "TeleFLM", "hidden_size": 8192, "num_attention_heads": 64,
    "num_key_value_heads": 64, "num_hidden_layers": 64, "intermediate_size": 21824, "vocab_size": 80000,
    "hidden_act": "silu", "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "use_mup": True, "torch_dtype": "bfloat16",
}
tensors = header_only_tensors
