"""Step-3.5 (`step3p5`, Step3p5ForCausalLM): Step-3.7's language model on its own, its dims at the top of config.json
and its tensors under `model.` (the names vLLM's Step3p5Model loads, the same as Step-3.7's language model).

vLLM 0.32's step3p5.py is the module Step-3.7 builds its language model with, so every rule is Step-3.7's
(adapters/step3p7.py: full and sliding layers with their own query head counts padded in whole kv groups, the
head-wise gate, stacked routed experts, the shared expert and the dense MLPs padded with zeros). Only the serving
differs: vLLM registers its own Step3p5Config for `step3p5`, so the derivative needs no remote code and no
data-parallel encoder.
"""

from __future__ import annotations

from hubpad.plan.adapters.base import COPY_MODULES, COPY_PARAMS, mtp_speculative
from hubpad.plan.adapters.step3p7 import OWN_MODULES, OWN_PARAMS, STEP_INTER, STEP_MLP, Step3p7Adapter
from hubpad.plan.adapters.vllm import serving


class Step3p5Adapter(Step3p7Adapter):
    """Step-3.5: Step-3.7's language model rules, served by vLLM's own Step3p5 classes."""

    def serving(self, config: dict) -> dict:
        """vLLM's step3p5 parsers and MTP drafter (Step3p5MTP: one draft step per MTP layer)."""
        spec = mtp_speculative(config)
        return serving(tool="step3p5", reasoning="step3p5", spec=spec,
                       features=("arch:Step3p5ForCausalLM",) + (("spec:mtp", "spec:step3p5_mtp") if spec else ()))


STEP3P5 = Step3p5Adapter(
    name="step3p5", model_types=("step3p5",), linear_patterns=STEP_MLP,
    copy_modules=COPY_MODULES + OWN_MODULES, copy_params=COPY_PARAMS + OWN_PARAMS, intermediate_keys=STEP_INTER,
    tp_at_most_experts=True,
)
