"""MLA-line families hubpad knows and refuses, each with the reason a user can check in vLLM 0.32's source.

Mistral 4 (`mistral4`, Mistral Small 4's language model; its published repos wrap it in `mistral3`): vLLM has no class
for a Hugging Face-format mistral4 (no Mistral4 anywhere in its model registry or configs); it serves Mistral Small 4
from Mistral's own format, params.json + consolidated*.safetensors, as MistralLarge3ForCausalLM (DeepSeek-V3's
MLA class; transformers_utils/configs/mistral.py), and picks that format by itself whenever a repo has
consolidated*.safetensors (transformers_utils/config.py, `config_format="auto"`). hubpad pads config.json and the
Hugging Face safetensors only, so a derivative would be served from its unpadded Mistral-format files.

Hy4-VL (`hy_v4_vl`): transformers has the class, vLLM 0.32 has none (its registry knows HYV4ForCausalLM only). The
text model alone pads as `hy_v4` (adapters/hy4.py).
"""

MISTRAL4_REFUSAL = (
    "Mistral 4 (model_type 'mistral4') is not supported: vLLM 0.32 has no class for its Hugging Face format and "
    "serves Mistral Small 4 from Mistral's params.json + consolidated*.safetensors (MistralLarge3ForCausalLM, picked "
    "automatically when a repo has them), files hubpad does not pad")
HY_V4_VL_REFUSAL = (
    "Hy4-VL (model_type 'hy_v4_vl') is not supported: vLLM 0.32 has no class for it (only HYV4ForCausalLM, the text "
    "model, which hubpad pads as hy_v4)")
