"""Llama, Mistral and Qwen2: dense decoders with the Llama tensor names."""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, Adapter

LLAMA = Adapter(
    name="llama", model_types=("llama",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",)}, hidden_must_divide_by_heads=True,
)

MISTRAL = Adapter(
    name="mistral", model_types=("mistral", "qwen2"), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
)
