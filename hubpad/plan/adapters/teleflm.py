"""Tele-FLM / FLM-2 (`TeleFLMForCausalLM`: CofeAI/FLM-2-52B-Instruct-2407, Tele-FLM, Tele-FLM-1T): Llama's decoder with
muP multipliers. vLLM 0.32's teleflm.py is its LlamaForCausalLM with the logits scaled by output_mult /
mup_scale_factor (input_mult is not applied there); padding touches neither scalar, so the original and the derivative
are served alike. Heads move in whole GQA groups (MHA: one head each), head_dim is written (vLLM's LlamaAttention
reads it, else hidden_size // heads). The config class is the checkpoint's remote code (`--trust-remote-code`);
the published config keeps the architecture as its identity, so the adapter answers only to it.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, Adapter
from hubpad.plan.adapters.vllm import serving


class TeleFlmAdapter(Adapter):
    """No parsers of its own in vLLM; its config class is remote code."""

    def serving(self, config: dict) -> dict:
        return {**serving(features=("arch:TeleFLMForCausalLM",)), "extra_args": ["--trust-remote-code"]}


TELEFLM = TeleFlmAdapter(
    name="teleflm", model_types=("TeleFLM", "teleflm"), architectures=("TeleFLMForCausalLM",),
    linear_patterns=ATTENTION + DENSE_MLP, copy_modules=COPY_MODULES, copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",)},
)
