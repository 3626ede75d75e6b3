"""The InternViT family's published checkpoints, for header-only plans (tests/test_registry_rows.py).

NOT read offline: the Hub was not reachable and no stored copy of these config.json files was found, so every
config here is RECONSTRUCTED from the models' stated parts (their cards name the language model and the tower) and
the published configs of those parts; docs/families.md marks the rows †. The parts:
- InternViT-6B-448px-V2.5 / V1.5 (InternVL3-78B, NVLM-D-72B, Skywork-R1V-38B, Intern-S1): hidden 3200, 25 heads,
  MLP 12800, 45 layers, qk-norm, patch 14 at 448 px (1025 positions), no qkv bias; the projector `mlp1` is a
  LayerNorm over 3200 x 4 = 12800 and two linears into the language model's hidden size.
- Qwen2.5-72B (InternVL3-78B) and Qwen2-72B (NVLM-D-72B): 64 / 8 heads, hidden 8192, MLP 29568, 80 layers;
  DeepSeek-R1-Distill-Qwen-32B (Skywork-R1V-38B; its verbatim config is tests/vlm_real.py's); Qwen3-235B-A22B
  (Intern-S1): 64 / 4 heads, head_dim 128, 94 layers, 128 experts x 1536.
Vocabulary sizes are the parts' own (InternVL and Intern-S1 add tokens; the padding never touches the vocabulary).
"""

from __future__ import annotations

from tests.moe_real import Tensors
from tests.vlm_real import BF16, R1_DISTILL_QWEN_32B, _linear, _norm, _swiglu, qwen2_tensors

VIT_6B = {"model_type": "intern_vit_6b", "architectures": ["InternVisionModel"], "hidden_size": 3200,
          "intermediate_size": 12800, "num_attention_heads": 25, "num_hidden_layers": 45, "image_size": 448,
          "patch_size": 14, "qk_normalization": True, "qkv_bias": False, "norm_type": "rms_norm",
          "hidden_act": "gelu", "layer_norm_eps": 1e-6, "num_channels": 3, "drop_path_rate": 0.0,
          "initializer_factor": 0.1, "use_flash_attn": True}
QWEN25_72B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8192,
              "intermediate_size": 29568, "num_attention_heads": 64, "num_key_value_heads": 8,
              "num_hidden_layers": 80, "vocab_size": 151674, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
              "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
              "use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 70}
QWEN3_235B = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 4096,
              "intermediate_size": 12288, "moe_intermediate_size": 1536, "num_experts": 128,
              "num_experts_per_tok": 8, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
              "num_hidden_layers": 94, "vocab_size": 153216, "decoder_sparse_step": 1, "mlp_only_layers": [],
              "norm_topk_prob": True, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
              "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def _chat(arch: str, model_type: str, llm: dict) -> dict:
    return {"architectures": [arch], "model_type": model_type, "llm_config": llm, "vision_config": VIT_6B,
            "downsample_ratio": 0.5, "select_layer": -1, "ps_version": "v2", "force_image_size": 448,
            "template": "internvl2_5", "torch_dtype": "bfloat16", "dynamic_image_size": True, "max_dynamic_patch": 12}


INTERNVL3_78B = _chat("InternVLChatModel", "internvl_chat", QWEN25_72B)
NVLM_D_72B = _chat("NVLM_D", "NVLM_D", {**QWEN25_72B, "vocab_size": 151674})
SKYWORK_R1V_38B = _chat("SkyworkR1VChatModel", "skywork_chat", R1_DISTILL_QWEN_32B)
INTERNVL3_78B_HF = {"architectures": ["InternVLForConditionalGeneration"], "model_type": "internvl",
                    "text_config": QWEN25_72B, "downsample_ratio": 0.5, "image_token_id": 151667,
                    "image_seq_length": 256, "projector_hidden_act": "gelu", "vision_feature_layer": -1,
                    "vision_feature_select_strategy": "default", "torch_dtype": "bfloat16",
                    "vision_config": {"model_type": "internvl_vision", "hidden_size": 3200, "intermediate_size": 12800,
                                      "num_attention_heads": 25, "num_hidden_layers": 45, "image_size": [448, 448],
                                      "patch_size": [14, 14], "use_qk_norm": True, "attention_bias": False,
                                      "norm_type": "rms_norm", "hidden_act": "gelu", "layer_norm_eps": 1e-6}}
INTERN_S1 = {**INTERNVL3_78B_HF, "architectures": ["InternS1ForConditionalGeneration"], "model_type": "interns1",
             "text_config": QWEN3_235B,
             "vision_config": {**INTERNVL3_78B_HF["vision_config"], "model_type": "interns1_vision"}}


def _vit(p: str, layer: str, names: dict[str, str], fused_qkv: bool) -> Tensors:
    """InternViT-6B's 45 layers under `p` (`layer`: their list's name), in one layout's module names."""
    h, inter = VIT_6B["hidden_size"], VIT_6B["intermediate_size"]
    out = []
    for i in range(VIT_6B["num_hidden_layers"]):
        q = f"{p}encoder.{layer}.{i}."
        qkv = _linear(q + names["qkv"], 3 * h, h) if fused_qkv else sum(
            (_linear(f"{q}{names['attn']}.{x}_proj", h, h) for x in "qkv"), [])
        out += qkv + _norm(f"{q}{names['attn']}.q_norm", h) + _norm(f"{q}{names['attn']}.k_norm", h)
        out += _linear(q + names["proj"], h, h, True) + _linear(q + "mlp.fc1", inter, h, True)
        out += _linear(q + "mlp.fc2", h, inter, True) + _norm(q + names["norm1"], h) + _norm(q + names["norm2"], h)
        out += [(q + names["ls1"], BF16, (h,)), (q + names["ls2"], BF16, (h,))]
    return out


def _embeddings(p: str, cls: str, patch: str, pos: str) -> Tensors:
    h = VIT_6B["hidden_size"]
    return [(p + cls, BF16, (1, 1, h)), (p + patch + ".weight", BF16, (h, 3, 14, 14)), (p + patch + ".bias", BF16, (h,)),
            (p + pos, BF16, (1, 1025, h))]


def _projector(p: str, names: tuple[str, str, str], hidden: int) -> Tensors:
    wide = VIT_6B["hidden_size"] * 4
    return _norm(p + names[0], wide, True) + _linear(p + names[1], hidden, wide, True) + _linear(
        p + names[2], hidden, hidden, True)


def chat_tensors(cfg: dict) -> Tensors:
    """InternVL-Chat's layout: `vision_model.*` (fused `attn.qkv`), `mlp1.{0,1,3}`, `language_model.model.*` and
    `language_model.lm_head`."""
    llm = cfg["llm_config"]
    names = {"qkv": "attn.qkv", "attn": "attn", "proj": "attn.proj", "norm1": "norm1", "norm2": "norm2",
             "ls1": "ls1", "ls2": "ls2"}
    tower = _embeddings("vision_model.embeddings.", "class_embedding", "patch_embedding", "position_embedding")
    tower += _vit("vision_model.", "layers", names, fused_qkv=True)
    text = [("language_model." + n, d, s) for n, d, s in qwen2_tensors(llm)]
    return tower + _projector("mlp1.", ("0", "1", "3"), llm["hidden_size"]) + text


def _qwen3_moe(cfg: dict) -> Tensors:
    h, vocab, hd = cfg["hidden_size"], cfg["vocab_size"], cfg["head_dim"]
    out = [("model.embed_tokens.weight", BF16, (vocab, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += _norm(p + "input_layernorm", h) + _norm(p + "post_attention_layernorm", h)
        out += _linear(p + "self_attn.q_proj", cfg["num_attention_heads"] * hd, h)
        out += _linear(p + "self_attn.k_proj", cfg["num_key_value_heads"] * hd, h)
        out += _linear(p + "self_attn.v_proj", cfg["num_key_value_heads"] * hd, h)
        out += _linear(p + "self_attn.o_proj", h, cfg["num_attention_heads"] * hd)
        out += _norm(p + "self_attn.q_norm", hd) + _norm(p + "self_attn.k_norm", hd)
        out += _linear(p + "mlp.gate", cfg["num_experts"], h)
        for e in range(cfg["num_experts"]):
            out += _swiglu(f"{p}mlp.experts.{e}", cfg["moe_intermediate_size"], h)
    return out + _norm("model.norm", h) + _linear("lm_head", vocab, h)


def hf_tensors(cfg: dict) -> Tensors:
    """transformers' layout (InternVL3-78B-hf, Intern-S1): `model.vision_tower.*` (separate q/k/v),
    `model.multi_modal_projector.*`, `model.language_model.*`, `lm_head`."""
    text = cfg["text_config"]
    names = {"attn": "attention", "proj": "attention.projection_layer", "norm1": "layernorm_before",
             "norm2": "layernorm_after", "ls1": "lambda_1", "ls2": "lambda_2"}
    tower = _embeddings("model.vision_tower.embeddings.", "cls_token", "patch_embeddings.projection",
                        "position_embeddings")
    tower += _vit("model.vision_tower.", "layer", names, fused_qkv=False)
    lm = _qwen3_moe(text) if text["model_type"] == "qwen3_moe" else qwen2_tensors(text)
    lm = [(("model.language_model." + n[len("model."):]) if n.startswith("model.") else n, d, s) for n, d, s in lm]
    return tower + _projector("model.multi_modal_projector.", ("layer_norm", "linear_1", "linear_2"),
                              text["hidden_size"]) + lm


# hub name -> (config, tensors function)
MODELS = {
    "OpenGVLab/InternVL3-78B": (INTERNVL3_78B, chat_tensors),
    "OpenGVLab/InternVL3-78B-hf": (INTERNVL3_78B_HF, hf_tensors),
    "nvidia/NVLM-D-72B": (NVLM_D_72B, chat_tensors),
    "Skywork/Skywork-R1V-38B": (SKYWORK_R1V_38B, chat_tensors),
    "internlm/Intern-S1": (INTERN_S1, hf_tensors),
}


# internlm/Intern-S2-Preview (35B): NOT read offline either. A quantized copy's card (saintlits/Intern-S2-Preview-oQ4-mtp)
# states the Qwen3.5-MoE backbone's values: hidden 2048, 40 layers (3 GDN : 1 full), 16 / 2 heads of 256, 256
# experts top-8, one MTP layer, vocab 251392, partial rotary 0.25, mrope 11/11/10; a vision encoder of 17 layers,
# width 768, 8 heads. Reconstructed from Qwen3.5-35B-A3B (whose backbone it states): 16 key / 32 value GDN heads of
# 128, expert and shared width 512; the vision MLP width (3072) and every other key from tests/qwen35_real.py's
# Qwen3.5 file. The time-series tensors (511 on that card) are left out: their names and shapes are unknown.
def _interns2_preview() -> dict:
    from tests.qwen35_real import QWEN35_397B_CONFIG, layer_types

    base = QWEN35_397B_CONFIG
    return {**base, "architectures": ["InternS2PreviewForConditionalGeneration"], "model_type": "interns2_preview",
            "text_config": {**base["text_config"], "hidden_size": 2048, "num_hidden_layers": 40,
                            "layer_types": layer_types(40), "num_attention_heads": 16, "num_key_value_heads": 2,
                            "linear_num_key_heads": 16, "linear_num_value_heads": 32, "num_experts": 256,
                            "num_experts_per_tok": 8, "moe_intermediate_size": 512,
                            "shared_expert_intermediate_size": 512, "vocab_size": 251392},
            "vision_config": {**base["vision_config"], "depth": 17, "hidden_size": 768, "num_heads": 8,
                              "intermediate_size": 3072, "out_hidden_size": 2048}}


def _interns2_tensors(cfg: dict) -> Tensors:
    from tests.qwen35_real import qwen35_tensors

    return qwen35_tensors(cfg)


INTERNS2_PREVIEW = _interns2_preview()
MODELS["internlm/Intern-S2-Preview"] = (INTERNS2_PREVIEW, _interns2_tensors)
