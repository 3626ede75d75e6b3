"""Vision-language families hubpad knows and refuses, each with the reason a user can check in vLLM's source.

Llama 4 (`llama4`): vLLM's Llama4ForConditionalGeneration projects the vision features into the language model with
`multi_modal_projector.linear_1`, a column-parallel layer over the text hidden size (5120 for Scout and Maverick;
mllama4.py), whatever --mm-encoder-tp-mode says, and a column-parallel layer needs its output size to divide by TP.
5120 divides by 2, 4, 5 and 8, where the 40 attention / 8 kv heads already divide too, so the upstream serves as it
is there; at TP 3 and 6 no head padding helps, and padding the hidden size would not be exact (every RMSNorm
averages over it).

Qwen2-VL / Qwen2.5-VL (`qwen2_vl`, `qwen2_5_vl`): vLLM builds their language model with its Qwen2 class
(qwen2_5_vl.py), which computes head_dim = hidden_size // heads and ignores config.head_dim; --hf-overrides reaches
the outer config, not that nested class, and transformers' own Qwen2.5-VL text attention (the Transformers-backend
route Qwen2-MoE takes) refuses hidden_size % heads != 0. So no padded head count can be served; the 72B's 64 heads /
8 kv serve as they are at TP 2, 4 and 8.
"""

LLAMA4_REFUSAL = (
    "Llama 4 (model_type 'llama4') is not supported: vLLM's multi_modal_projector.linear_1 is column-parallel over "
    "the text hidden size (5120), which TP 3 and 6 do not divide and padding cannot change exactly; at TP 2, 4, 5 "
    "and 8 the upstream serves as it is")
QWEN2_VL_REFUSAL = (
    "Qwen2-VL / Qwen2.5-VL heads cannot be padded: vLLM builds their language model with its Qwen2 class, which "
    "computes head_dim = hidden_size // heads and ignores config.head_dim, no --hf-overrides reaches that nested "
    "class, and transformers' Qwen2.5-VL attention refuses hidden_size % heads != 0; the 72B (64 heads / 8 kv) "
    "serves as it is at TP 2, 4 and 8")
