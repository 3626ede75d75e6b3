"""gpt-oss (`gpt_oss`): GQA with q/k/v/o biases and per-head attention sinks, alternating sliding/full layers,
and routed experts stored as MXFP4 (`mlp.experts.{gate_up,down}_proj_{blocks,scales}` plus BF16 `_bias`).

Heads are padded like Llama's (whole GQA groups, zero q/k/v rows and biases, zero o_proj columns); each padded
head's sink is 0.0 (any finite value works: the head's V is zero, so its output is zero whatever its softmax).
The experts are never padded: vLLM (gpt_oss.py, read in 0.20.0) asserts intermediate_size % tp == 0 and slices
the MXFP4 tensors per rank in whole 32-wide blocks, ceil(blocks / tp) per rank with the last rank taking the rest,
so any TP dividing I serves as is: 2880 at TP 3, 4, 5, 6 and 8. A TP that does not divide I is refused (padding
MXFP4 experts is not implemented), so an expert tensor is never copied where it should have grown.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import ATTENTION, COPY_MODULES, COPY_PARAMS, Adapter, L
from hubpad.plan.adapters.vllm import serving

# Routed experts: MXFP4 (blocks, e8m0 scales) or dequantized BF16 (fused 3-D tensors), each with a bias.
_EXPERTS = [L + r"mlp\.experts\.(gate_up_proj|down_proj)(_blocks|_scales|_bias)?$"]


class GptOssAdapter(Adapter):
    """Experts stay as they are; a TP that would need them padded is refused."""

    def check_tp(self, config: dict, tp: int) -> None:
        inter = int(config.get("intermediate_size") or 0)
        if inter % tp:
            raise ConfigError(f"config.json: intermediate_size {inter} % tp {tp} != 0, which vLLM's gpt-oss refuses, "
                              f"and padding its MXFP4 experts is not implemented")

    def serving(self, config: dict) -> dict:
        return serving(tool="openai", reasoning="openai_gptoss", features=("arch:GptOssForCausalLM",))


GPT_OSS = GptOssAdapter(
    name="gpt_oss", model_types=("gpt_oss",), linear_patterns=ATTENTION,
    copy_modules=COPY_MODULES + [L + r"mlp\.router$"], copy_params=COPY_PARAMS + _EXPERTS,
    head_vectors=[L + r"self_attn\.sinks$"],
)
