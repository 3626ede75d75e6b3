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

Encoders vLLM shards by heads (`sharded_tower_refusal`: LLaVA, LLaVA-NeXT(-Video), LLaVA-OneVision, PaliGemma, Aria,
Mistral 3, Command A Vision, Ultravox, Voxtral, Ling V3 VL): their classes have no data-parallel encoder mode, and the
CLIP / SigLIP / Pixtral / Whisper / Qwen3 ViT attention derives head_dim from hidden_size // heads, so 16 or 20 heads
cannot become a count that divides 3 or 6 (the reason multimodal Gemma 3 is refused, adapters/gemma.py).
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


def sharded_tower_refusal(family: str, model_type: str, cls: str, tower: str, heads: int, width: int) -> str:
    """The reason for a vision-language (or audio) family whose encoder vLLM shards by heads: its class sets no
    supports_encoder_tp_data, so --mm-encoder-tp-mode data falls back to weights (config/model.py), and the encoder's
    attention divides its heads by TP and derives head_dim = hidden_size // heads (clip.py, siglip.py, pixtral.py,
    idefics2_vision_model.py, whisper.py). A head count that divides 3 or 6 would change head_dim; padding the
    encoder's hidden size would change its LayerNorms."""
    return (f"{family} (model_type '{model_type}') is not supported: vLLM's {cls} shards its {tower} by heads "
            f"({heads} heads of {width}, head_dim = hidden_size // heads) and has no data-parallel encoder mode, so no "
            f"head count that divides TP 3 or 6 keeps head_dim {width}; it serves as it is at a TP that divides {heads}")


# The families of vLLM 0.32's registry with such an encoder (docs/families.md's registry table): the tower every
# published checkpoint of 20B or more has (CLIP ViT-L/14-336 and Pixtral's: 16 heads of 64; SigLIP so400m and
# SigLIP2 so400m: 16 of 72; Whisper large-v3 (turbo)'s encoder: 20 of 64).
SHARDED_TOWER_REFUSALS: dict[str, str] = {
    "llava": sharded_tower_refusal("LLaVA / Pixtral-Large (HF format)", "llava", "LlavaForConditionalGeneration",
                                   "CLIP or Pixtral vision tower", 16, 64),
    "llava_next": sharded_tower_refusal("LLaVA-NeXT", "llava_next", "LlavaNextForConditionalGeneration",
                                        "CLIP vision tower", 16, 64),
    "llava_next_video": sharded_tower_refusal("LLaVA-NeXT-Video", "llava_next_video",
                                              "LlavaNextVideoForConditionalGeneration", "CLIP vision tower", 16, 64),
    "llava_onevision": sharded_tower_refusal("LLaVA-OneVision", "llava_onevision",
                                             "LlavaOnevisionForConditionalGeneration", "SigLIP vision tower", 16, 72),
    "paligemma": sharded_tower_refusal("PaliGemma", "paligemma", "PaliGemmaForConditionalGeneration",
                                       "SigLIP vision tower", 16, 72),
    "aria": sharded_tower_refusal("Aria", "aria", "AriaForConditionalGeneration", "SigLIP (Idefics3) vision tower",
                                  16, 72),
    "mistral3": sharded_tower_refusal("Mistral 3 (Mistral Small 3.x, Magistral)", "mistral3",
                                      "Mistral3ForConditionalGeneration", "Pixtral vision tower", 16, 64),
    "cohere2_vision": sharded_tower_refusal("Command A Vision", "cohere2_vision",
                                            "Cohere2VisionForConditionalGeneration", "SigLIP2 vision tower", 16, 72),
    # Ling-3.0-flash-VL: a Qwen3 ViT (vLLM's Qwen3_VisionTransformer: head_dim = hidden_size // num_heads, 1152 / 16)
    # whose class sets no supports_encoder_tp_data (bailing_moe_v3_vl.py), whatever its Ling 3 language model allows
    "bailing_moe_v3_vl": sharded_tower_refusal("Ling V3 VL", "bailing_moe_v3_vl",
                                               "BailingMoeV3VLForConditionalGeneration", "Qwen3 ViT vision tower",
                                               16, 72),
    "ultravox": sharded_tower_refusal("Ultravox", "ultravox", "UltravoxModel", "Whisper audio encoder", 20, 64),
    "voxtral": sharded_tower_refusal("Voxtral", "voxtral", "VoxtralForConditionalGeneration", "Whisper audio encoder",
                                     20, 64),
}
# Qwen3-Omni (Qwen/Qwen3-Omni-30B-A3B-Instruct): vLLM serves only its thinker (qwen3_omni_moe_thinker.py drops the
# `talker.` and `code2wav.` weights). The audio encoder (20 heads) replicates itself where its heads do not divide TP,
# but the vision encoder (Qwen2_5_VisionAttention: 16 heads of 72, head_dim = hidden // heads; its MLP of 4304
# column-parallel) is sharded by TP, and the class sets no supports_encoder_tp_data.
SHARDED_TOWER_REFUSALS["qwen3_omni_moe"] = sharded_tower_refusal(
    "Qwen3-Omni", "qwen3_omni_moe", "Qwen3OmniMoeThinkerForConditionalGeneration", "vision encoder", 16, 72)

# Nemotron 3 Omni (NemotronH_Nano_VL_V2 in nano_nemotron_vl.py): the language model is nemotron_h (padded as text),
# but the RADIO vision tower's MLP (intern_vit.py InternMLP: fc1 column-parallel, fc2 row-parallel) is sharded by TP
# unless the encoder runs data-parallel, which the class does not support (--mm-encoder-tp-mode data falls back to
# weights), and vLLM's RadioConfig takes the tower's widths from the model name (vit_huge_patch16_224: hidden 1280,
# 16 heads, MLP 5120), not from config.json: 5120 divides neither 3 nor 6 and no padding can reach it.
NEMOTRON_OMNI_REFUSAL = (
    "Nemotron 3 Omni (model_type {mt!r}) is not supported: vLLM's NemotronH_Nano_VL_V2 shards the RADIO vision "
    "tower's MLP by TP (intern_vit.py InternMLP) and has no data-parallel encoder mode, and vLLM's RadioConfig takes "
    "that MLP's width from the model name (vit_huge_patch16_224: 5120, which divides neither 3 nor 6), not from "
    "config.json, so no padding reaches it; it serves as it is at TP 2, 4 and 8, and the text-only Nemotron 3 "
    "checkpoints (model_type 'nemotron_h') pad at TP 3 and 6")
NEMOTRON_OMNI_REFUSALS: dict[str, str] = {
    mt: NEMOTRON_OMNI_REFUSAL.format(mt=mt)
    for mt in ("NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Super_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3",
               "nemotron_h_omni")}
