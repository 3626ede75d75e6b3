"""Solar Pro (`solar`, SolarForCausalLM: upstage/solar-pro-preview-instruct): Llama's layers and tensor names, plus
skip connections (config.json's bskcn_1..4 and bskcn_tv) that blend the residual stream of earlier layers into later
ones. The blend is over the hidden size, which padding leaves alone, so the heads and the MLP pad as a Llama's do.

head_dim: vLLM's SolarAttention takes `getattr(config, "head_dim", None)` and falls back to hidden_size // heads; the
published config has none and the derivative writes it (5120 // 48 would be 106, not 128). The config class is the
repo's configuration_solar.py (auto_map; transformers has no `solar`), which keeps every key it is given and checks no
head count, so vLLM serves the derivative with --trust-remote-code, as it does the original.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, Adapter
from hubpad.plan.adapters.vllm import serving


class SolarAdapter(Adapter):
    """No tool-call or reasoning parser in vLLM; --trust-remote-code for the repo's config class."""

    def serving(self, config: dict) -> dict:
        return {**serving(features=("arch:SolarForCausalLM",)), "extra_args": ["--trust-remote-code"]}


SOLAR = SolarAdapter(
    name="solar", model_types=("solar",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
)
