"""MLA-line families hubpad knows and refuses, each with the reason a user can check in vLLM 0.32's source.

Mistral 4 (`mistral4`, Mistral Small 4's language model; its published repos wrap it in `mistral3`): vLLM has no class
for a Hugging Face-format mistral4 (no Mistral4 anywhere in its model registry or configs); it serves Mistral Small 4
from Mistral's own format, params.json + consolidated*.safetensors, as MistralLarge3ForCausalLM (DeepSeek-V3's
MLA class; transformers_utils/configs/mistral.py), and picks that format by itself whenever a repo has
consolidated*.safetensors (transformers_utils/config.py, `config_format="auto"`). hubpad pads config.json and the
Hugging Face safetensors only, so a derivative would be served from its unpadded Mistral-format files.

Mistral Large 3 (vLLM's MistralLarge3ForCausalLM, DeepSeek-V3's MLA class with Mistral's weight names): no
model_type reaches it. vLLM builds it only from Mistral's own format: transformers_utils/configs/mistral.py turns a
params.json whose `moe` has shared experts (and `llama_4_scaling`) into model_type deepseek_v3 with architectures
MistralLarge3ForCausalLM, whose loader maps the consolidated names (layers.N.attention.wq_a, ...). Its repos ship
params.json + consolidated*.safetensors; hubpad reads config.json and Hugging Face safetensors only, so such a repo is
refused by what it holds (params.json without config.json), naming the class when params.json describes it.

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

MISTRAL_LARGE3_REFUSAL = (
    "Mistral Large 3 (params.json: MLA with shared experts) is not supported: vLLM builds MistralLarge3ForCausalLM "
    "only from Mistral's own params.json + consolidated*.safetensors (transformers_utils/configs/mistral.py), and "
    "hubpad pads a Hugging Face config.json and its safetensors only; there is no Hugging Face-format class for it")
MISTRAL_FORMAT_REFUSAL = (
    "this is a checkpoint in Mistral's own format (params.json + consolidated*.safetensors, no config.json), which "
    "hubpad does not pad: it pads a Hugging Face config.json and its safetensors")


def mistral_format_refusal(params: dict) -> str:
    """Why a repo with Mistral's params.json and no config.json is refused (Mistral Large 3 named when it is one, as
    vLLM recognizes it: MLA keys and a `moe` with shared experts)."""
    if not isinstance(params, dict):
        return MISTRAL_FORMAT_REFUSAL
    moe = params.get("moe") if isinstance(params.get("moe"), dict) else {}
    shared = moe.get("num_shared_experts")
    if params.get("qk_nope_head_dim") and isinstance(shared, int) and shared > 0:
        return MISTRAL_LARGE3_REFUSAL
    return MISTRAL_FORMAT_REFUSAL
