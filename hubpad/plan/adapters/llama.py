"""Llama and Mistral: dense decoders with the Llama tensor names; and the families vLLM builds with its own
LlamaForCausalLM (vllm/model_executor/models/registry.py): IQuest-Coder (`iquestcoder`, IQuestCoderForCausalLM) and
TeleChat3 (`telechat3`, TeleChat3ForCausalLM), Llama's tensors and math under a label of their own.

Their config classes cannot hold padded heads: transformers' IQuestCoderConfig rejects hidden_size % heads != 0, and
TeleChat3's own Telechat3Config (its repo's configuration_telechat3.py, --trust-remote-code) head_dim !=
hidden_size // heads. Their derivatives take a padded Llama's label (plan/relabel.py), which vLLM serves with the
same Llama class.
"""

from __future__ import annotations

import dataclasses

from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, DENSE_MLP, Adapter
from hubpad.plan.adapters.vllm import serving


class LlamaAdapter(Adapter):
    """Llama 3.1+ chat templates (llama3 RoPE scaling) emit JSON tool calls: vLLM's llama3_json parser reads them."""

    def serving(self, config: dict) -> dict:
        llama31 = (config.get("rope_scaling") or {}).get("rope_type") == "llama3"
        return serving(tool="llama3_json" if llama31 else None)


class MistralAdapter(Adapter):
    """Mistral's tool calls use vLLM's mistral parser."""

    def serving(self, config: dict) -> dict:
        return serving(tool="mistral")


LLAMA = LlamaAdapter(
    name="llama", model_types=("llama",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",)}, hidden_must_divide_by_heads=True,
)

MISTRAL = MistralAdapter(
    name="mistral", model_types=("mistral",), linear_patterns=ATTENTION + DENSE_MLP,
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ("intermediate_size",)},
)


# Llama's patterns and rules under their own model_types (plan/relabel.py gives them the padded Llama's label)
IQUESTCODER = dataclasses.replace(LLAMA, name="iquestcoder", model_types=("iquestcoder",))
TELECHAT3 = dataclasses.replace(LLAMA, name="telechat3", model_types=("telechat3",))
