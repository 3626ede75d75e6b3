"""Qwen2/2.5 and Qwen3 (dense; Qwen3 with per-head q/k norms) and their MoE models (routed plus shared experts)."""

from __future__ import annotations

from hubpad.plan.adapters.base import (ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, ROUTERS, SHARED, Adapter,
                                       VllmRoute)
from hubpad.plan.adapters.vllm import serving


class QwenAdapter(Adapter):
    """Qwen3 (dense and MoE) templates: Hermes-style tool calls and <think> reasoning (vLLM's qwen3 parser);
    Qwen2-MoE: Hermes tool calls, no reasoning."""

    def serving(self, config: dict) -> dict:
        arch = (config.get("architectures") or [""])[0]
        if config.get("model_type") in ("qwen3", "qwen3_moe"):
            return serving(tool="hermes", reasoning="qwen3", features=(f"arch:{arch}",))
        return serving(tool="hermes")


QWEN3 = QwenAdapter(
    name="qwen3", model_types=("qwen3",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
    per_head_norms=True,
)

_DERIVES_HEAD_DIM = ("vLLM's {cls} computes head_dim = hidden_size // heads ({hidden} // {heads} = {wrong}) and ignores "
                     "config.json's head_dim ({head_dim})")
_WITHOUT = ("Without it vLLM builds the attention with head_dim {wrong} while the weights hold {head_dim}-wide heads, "
            "and its weight loader narrows each larger tensor to the size it expects without an error. Where no "
            "attention backend takes head_dim {wrong}, vLLM stops at startup (its CPU backend: \"Unsupported CPU "
            "attention configuration: head_dim={wrong}\"); where one does (vLLM's Triton attention takes any size "
            "from 32 up), the model loads and gives wrong outputs without a warning, as hubpad's serving tests "
            "measure on the CPU backend with a head_dim it takes. Never serve this derivative without the flag")

# Qwen2 has q/k/v biases (no o_proj bias); vLLM's Qwen2 class derives head_dim from hidden_size // heads. Its Llama
# class reads config.head_dim, and config.qkv_bias puts biases on q/k/v only (vllm/model_executor/models/llama.py:
# qkv_bias and bias_o_proj): the same attention, and the same RMSNorm, SwiGLU, RoPE (and scaling) and embeddings.
QWEN2 = QwenAdapter(
    name="qwen2", model_types=("qwen2",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
    vllm_head_dim_from_hidden=True,
    vllm_route=VllmRoute(
        why=_DERIVES_HEAD_DIM.replace("{cls}", "Qwen2ForCausalLM"),
        route=("vLLM serves it with its LlamaForCausalLM instead, named by --hf-overrides: that class reads head_dim from "
               "config.json, and qkv_bias puts biases on q, k and v and none on o_proj, which is Qwen2's attention; "
               "the rest (RMSNorm, SwiGLU, RoPE and its scaling, embeddings) is the same code. config.json keeps "
               "Qwen2ForCausalLM, so transformers and other engines load it as Qwen2"),
        without=_WITHOUT,
        hf_overrides={"architectures": ["LlamaForCausalLM"], "qkv_bias": True},
        features=("flag:hf-overrides", "llama:qkv_bias"),
    ),
)

_MOE = dict(
    linear_patterns=ATTENTION + DENSE_MLP + EXPERTS + SHARED,
    copy_modules=COPY_MODULES + ROUTERS, copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",),
                       "shared": ("shared_expert_intermediate_size",)},
)

QWEN_MOE = QwenAdapter(name="qwen_moe", model_types=("qwen3_moe",), per_head_norms=True, tp_at_most_experts=True,
                       **_MOE)

# Qwen2-MoE: no native vLLM class reads head_dim and has its layer (vLLM's Qwen3-MoE adds per-head q/k norms, which
# no weights can turn off), so a head-padded Qwen2-MoE runs in vLLM's Transformers backend: transformers' module reads
# head_dim, vLLM supplies attention, parallel linear layers and fused-MoE kernels (shared expert and gate included).
QWEN2_MOE = QwenAdapter(
    name="qwen2_moe", model_types=("qwen2_moe",), vllm_head_dim_from_hidden=True, tp_at_most_experts=True,
    vllm_route=VllmRoute(
        why=_DERIVES_HEAD_DIM.replace("{cls}", "Qwen2MoeForCausalLM"),
        route=("vLLM serves it with its Transformers backend instead (--model-impl transformers): transformers' "
               "Qwen2-MoE attention reads head_dim from config.json, and vLLM runs that model with its own attention, "
               "tensor-parallel layers and fused-MoE kernels, shared expert and gate included. No native vLLM class "
               "fits: its Qwen3-MoE class adds per-head q/k norms that a Qwen2-MoE checkpoint has no weights for"),
        without=_WITHOUT.replace("its weight loader", "its Qwen2-MoE weight loader"),
        model_impl="transformers",
        features=("impl:transformers-moe",),
    ),
    **_MOE)
