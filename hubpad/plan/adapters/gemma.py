"""Gemma 2 (`gemma2`) and Gemma 3 text (`gemma3_text`). Gemma 3: GQA with per-head q/k norms, (1 + w) RMSNorms around attention and MLP,
alternating sliding and global layers, and an explicit `query_pre_attn_scalar`.

transformers' Gemma3TextConfig rejects hidden_size % num_attention_heads != 0 (like LlamaConfig) and there is
no Mistral-like twin to relabel to, so the head search keeps hidden % heads == 0: Gemma-3-27B (hidden 5376,
32 heads / 16 kv) at TP=3 skips 36/18 (5376 % 36 != 0) and lands on 42/21. The attention scale comes from
query_pre_attn_scalar, which the derivative keeps, so padded heads change no real head's softmax.

Gemma 2 is the same decoder without the q/k norms (sliding and global layers alternate, attention and final logits
are soft-capped, the attention scale comes from query_pre_attn_scalar): transformers' Gemma2Config rejects
hidden_size % heads != 0 too, and vLLM's Gemma2ForCausalLM reads config.head_dim. Gemma-2-27B (hidden 4608, 32 heads
/ 16 kv of 128) pads to 36 / 18 at TP 3 and 6 (4608 = 36 x 128).

Multimodal `gemma3` checkpoints are refused: their SigLIP tower has 16 heads of 72 (hidden 1152), and vLLM's
SiglipAttention derives head_dim = hidden_size // num_attention_heads and shards heads over TP (Gemma 3 does not
support the data-parallel encoder mode), so no head count that shards at TP=3 keeps head_dim 72 (18 heads would
be read as 64 wide), and padding the tower's hidden size would change its LayerNorms.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, Adapter
from hubpad.plan.adapters.vllm import serving


class Gemma3TextAdapter(Adapter):
    """vLLM serves gemma3_text with Gemma3ForCausalLM; the family has no tool-call or reasoning parser of its own."""

    def serving(self, config: dict) -> dict:
        return serving(features=("arch:Gemma3ForCausalLM",))


class Gemma2Adapter(Adapter):
    """vLLM serves gemma2 with Gemma2ForCausalLM; no tool-call or reasoning parser of its own."""

    def serving(self, config: dict) -> dict:
        return serving(features=("arch:Gemma2ForCausalLM",))


GEMMA2 = Gemma2Adapter(
    name="gemma2", model_types=("gemma2",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
    hidden_must_divide_by_heads=True,
)

GEMMA3_TEXT = Gemma3TextAdapter(
    name="gemma3_text", model_types=("gemma3_text",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
    per_head_norms=True, hidden_must_divide_by_heads=True,
)

GEMMA3_MULTIMODAL_REFUSAL = (
    "multimodal Gemma 3 (model_type 'gemma3') is not supported: vLLM shards its SigLIP vision tower by heads and "
    "derives head_dim = hidden_size // num_attention_heads, so 16 heads of 72 cannot be padded exactly to a count "
    "that divides TP; pad the text-only checkpoint (model_type 'gemma3_text') instead")
