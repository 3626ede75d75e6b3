"""Architecture adapters, one module per family, and the registry that picks one for a config.json.

A new family is a new module here plus one line in ADAPTERS.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.util.text import short
from hubpad.plan.adapters.afmoe import AFMOE
from hubpad.plan.adapters.axk1 import AXK1
from hubpad.plan.adapters.bailing import BAILING_MOE
from hubpad.plan.adapters.base import COPY, Adapter, Role
from hubpad.plan.adapters.cohere import COHERE, COHERE2, COHERE2_MOE
from hubpad.plan.adapters.cosmos3 import COSMOS3
from hubpad.plan.adapters.dots3_note import DOTS3_NOTE
from hubpad.plan.adapters.drafts import EAGLE3_LLAMA, EAGLE3_QWEN3, QWEN3_DSPARK, refused_draft, speculators_adapter
from hubpad.plan.adapters.deepseek import DEEPSEEK_V3, KIMI_K2, KIMI_K25
from hubpad.plan.adapters.dsa import DEEPSEEK_V32, GLM_MOE_DSA
from hubpad.plan.adapters.deepseek_v2 import DEEPSEEK_V2
from hubpad.plan.adapters.ernie import ERNIE45_MOE
from hubpad.plan.adapters.exaone import EXAONE, EXAONE4, EXAONE4_5, EXAONE_MOE
from hubpad.plan.adapters.deepseek_v4 import DEEPSEEK_V4
from hubpad.plan.adapters.deepseek_v41 import DEEPSEEK_V41
from hubpad.plan.adapters.falcon_h1 import FALCON_H1
from hubpad.plan.adapters.gemma import GEMMA2, GEMMA3_MULTIMODAL_REFUSAL, GEMMA3_TEXT
from hubpad.plan.adapters.gemma4 import DIFFUSION_GEMMA, GEMMA4, GEMMA4_TEXT
from hubpad.plan.adapters.glm import GLM4, GLM4_MOE, GLM4V_MOE
from hubpad.plan.adapters.glm5_next import GLM5_NEXT
from hubpad.plan.adapters.glm_lite import GLM4_MOE_LITE
from hubpad.plan.adapters.gpt_oss import GPT_OSS
from hubpad.plan.adapters.hy3 import HY3
from hubpad.plan.adapters.hy4 import HY_V4
from hubpad.plan.adapters.internvl import INTERNS1, INTERNVL, INTERNVL_CHAT, NVLM_D, SKYWORK_CHAT
from hubpad.plan.adapters.interns1_pro import INTERNS1_PRO
from hubpad.plan.adapters.interns2 import INTERNS2_MOBIUS, INTERNS2_PREVIEW
from hubpad.plan.adapters.inkling import INKLING, INKLING_MODEL, INKLING_TEXT_REFUSAL
from hubpad.plan.adapters.k2_horizon import K2_HORIZON
from hubpad.plan.adapters.kimi_linear import KIMI_K3, KIMI_LINEAR
from hubpad.plan.adapters.laguna import LAGUNA
from hubpad.plan.adapters.ling25 import LING25
from hubpad.plan.adapters.ling3 import LING3
from hubpad.plan.adapters.llama import IQUESTCODER, LLAMA, MISTRAL, TELECHAT3
from hubpad.plan.adapters.longcat import LONGCAT_FLASH, LONGCAT_FLASH_NGRAM
from hubpad.plan.adapters.mimo import MIMO_V2
from hubpad.plan.adapters.minimax import MINIMAX_M2, MINIMAX_M3, MINIMAX_M3_TEXT
from hubpad.plan.adapters.mla_refusals import HY_V4_VL_REFUSAL, MISTRAL4_REFUSAL, mistral_format_refusal
from hubpad.plan.adapters.refusals import (DEEPSEEK_VL2_REFUSAL, LLAMA4_REFUSAL, NEMOTRON_OMNI_REFUSALS,
                                           QWEN2_VL_REFUSAL, REFUSED_ARCHITECTURES, SHARDED_TOWER_REFUSALS)
from hubpad.plan.adapters.registry_refusals import REGISTRY_REFUSALS
from hubpad.plan.adapters.mixtral import MIXTRAL, PHIMOE
from hubpad.plan.adapters.muse_glimmer import MUSE_GLIMMER, MUSE_GLIMMER_TEXT
from hubpad.plan.adapters.nemotron_h import NEMOTRON_H, NEMOTRON_H_PUZZLE
from hubpad.plan.adapters.nemotron_nas import NEMOTRON_NAS
from hubpad.plan.adapters.plamo3 import PLAMO3
from hubpad.plan.adapters.openpangu import PANGU_ULTRA_MOE
from hubpad.plan.adapters.param2 import PARAM2_MOE
from hubpad.plan.adapters.sarvam import SARVAM_MLA
from hubpad.plan.adapters.qwen import QWEN2, QWEN2_MOE, QWEN3, QWEN_MOE
from hubpad.plan.adapters.qwen4_exp import QWEN4_EXP, QWEN4_EXP_TEXT
from hubpad.plan.adapters.qwen_next import QWEN3_5, QWEN3_5_MOE, QWEN3_5_MOE_TEXT, QWEN3_5_TEXT, QWEN3_NEXT
from hubpad.plan.adapters.qwen_vl import QWEN3_VL, QWEN3_VL_MOE
from hubpad.plan.adapters.sarvam_moe import SARVAM_MOE
from hubpad.plan.adapters.solar import SOLAR
from hubpad.plan.adapters.step3 import STEP3_TEXT, STEP3_VL
from hubpad.plan.adapters.step3p5 import STEP3P5
from hubpad.plan.adapters.step3p7 import STEP3P7
from hubpad.plan.adapters.teleflm import TELEFLM
from hubpad.plan.adapters.ungated import APERTUS, NEMOTRON

__all__ = ["ADAPTERS", "COPY", "REFUSED", "Adapter", "Role", "adapter_for", "check_config_values", "check_refused",
           "mistral_format_refusal"]

# Drafts first: they share their decoder's model_type and are told apart by their architectures.
ADAPTERS: list[Adapter] = [EAGLE3_LLAMA, EAGLE3_QWEN3, QWEN3_DSPARK, HY3, LLAMA, MISTRAL, QWEN2, QWEN3, MIXTRAL,
                           QWEN_MOE, QWEN2_MOE, DEEPSEEK_V3, KIMI_K2, GLM4_MOE, GEMMA3_TEXT, GPT_OSS, QWEN3_VL,
                           QWEN3_VL_MOE, QWEN3_5, QWEN3_5_MOE, QWEN3_5_TEXT, QWEN3_5_MOE_TEXT, QWEN3_NEXT, KIMI_K25,
                           GLM4V_MOE, DEEPSEEK_V32, GLM_MOE_DSA, HY_V4, LONGCAT_FLASH_NGRAM, LONGCAT_FLASH, GEMMA4,
                           GEMMA4_TEXT, MIMO_V2, QWEN4_EXP, KIMI_LINEAR, KIMI_K3, GLM5_NEXT, MINIMAX_M2, MINIMAX_M3,
                           DEEPSEEK_V4, DEEPSEEK_V41, STEP3P7, STEP3P5, NEMOTRON_H, NEMOTRON_H_PUZZLE, INKLING,
                           INKLING_MODEL, ERNIE45_MOE, EXAONE4, EXAONE4_5, EXAONE_MOE, COHERE, COHERE2, COHERE2_MOE,
                           AFMOE, LAGUNA, MINIMAX_M3_TEXT, QWEN4_EXP_TEXT, BAILING_MOE, SARVAM_MOE, AXK1, PARAM2_MOE,
                           STEP3_TEXT, STEP3_VL, GLM4_MOE_LITE, DEEPSEEK_V2, K2_HORIZON, DOTS3_NOTE, GEMMA2, PHIMOE,
                           APERTUS, NEMOTRON, GLM4, MUSE_GLIMMER, MUSE_GLIMMER_TEXT, DIFFUSION_GEMMA, IQUESTCODER,
                           TELECHAT3, SOLAR, EXAONE, INTERNVL_CHAT, NVLM_D, SKYWORK_CHAT, INTERNVL, INTERNS1,
                           INTERNS2_PREVIEW, PANGU_ULTRA_MOE, SARVAM_MLA, FALCON_H1, LING3, NEMOTRON_NAS, TELEFLM,
                           PLAMO3, LING25, INTERNS1_PRO, INTERNS2_MOBIUS, COSMOS3]
# Families hubpad knows and refuses, with the reason (checked before anything else about the checkpoint).
REFUSED: dict[str, str] = {"gemma3": GEMMA3_MULTIMODAL_REFUSAL,
                           "llama4": LLAMA4_REFUSAL, "qwen2_vl": QWEN2_VL_REFUSAL, "qwen2_5_vl": QWEN2_VL_REFUSAL,
                           "mistral4": MISTRAL4_REFUSAL, "hy_v4_vl": HY_V4_VL_REFUSAL,
                           "inkling_text": INKLING_TEXT_REFUSAL, "deepseek_vl_v2": DEEPSEEK_VL2_REFUSAL,
                           **REGISTRY_REFUSALS, **SHARDED_TOWER_REFUSALS, **NEMOTRON_OMNI_REFUSALS}


def adapter_for(config: dict) -> Adapter:
    """Pick the adapter for a config.json, or fail naming the model type."""
    speculators = speculators_adapter(config)  # a speculators-format draft: its decoder's config is nested
    if speculators is not None:
        return speculators
    model_type = config.get("model_type")
    archs = set(config.get("architectures") or [])
    for adapter in ADAPTERS:
        # a config.json without model_type (LongCat-Flash-Lite's: remote code only) is known by its architecture
        by_arch = model_type is None and archs & set(adapter.architectures)
        if by_arch or (model_type in adapter.model_types
                       and (not adapter.architectures or archs & set(adapter.architectures))):
            return adapter.for_config(config)
    known = sorted({t for a in ADAPTERS for t in a.model_types})
    raise ConfigError(f"config.json: model_type {model_type!r} is not supported (known: {', '.join(known)})")


def check_refused(config: dict) -> None:
    """Fail with the reason when config.json is a family hubpad knows it cannot pad exactly."""
    archs = config.get("architectures") if isinstance(config.get("architectures"), list) else []
    reason = (refused_draft(config) or REFUSED.get(config.get("model_type"))
              or next((REFUSED_ARCHITECTURES[a] for a in archs if isinstance(a, str) and a in REFUSED_ARCHITECTURES),
                      None))
    if reason:
        raise ConfigError(f"config.json: {reason}")


# config.json values the adapters read as integers (with every adapter's intermediate keys): anything but an integer
# or null there is refused up front, naming the key, instead of failing somewhere inside planning.
_INTEGER_KEYS = frozenset({
    "num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim", "num_hidden_layers", "vocab_size",
    "num_nextn_predict_layers", "num_local_experts", "num_experts", "n_routed_experts", "n_shared_experts",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "o_groups", "o_lora_rank",
    "global_head_dim", "num_global_key_value_heads", "swa_num_attention_heads", "swa_num_key_value_heads",
    "swa_head_dim", "swa_v_head_dim", "moe_num_experts",
}) | {a.shared_experts_key for a in ADAPTERS if a.shared_experts_key} | {key for a in ADAPTERS for keys in a.intermediate_keys.values() for key in keys}


def check_config_values(config: dict, where: str = "config.json") -> None:
    """config.json's values that planning reads have the JSON types it expects (one ConfigError otherwise)."""
    if not isinstance(config.get("model_type"), (str, type(None))):
        raise ConfigError(f"{where}: model_type must be a string, got {short(config['model_type'])}")
    architectures = config.get("architectures")
    if architectures is not None and not (isinstance(architectures, list)
                                          and all(isinstance(a, str) for a in architectures)):
        raise ConfigError(f"{where}: architectures must be a list of strings, got {short(architectures)}")
    for key in sorted(_INTEGER_KEYS & config.keys()):
        value = config[key]
        if value is not None and type(value) is not int:
            raise ConfigError(f"{where}: {key} must be an integer, got {short(value)}")
    quantization = config.get("quantization_config")
    if quantization is not None and not isinstance(quantization, dict):
        raise ConfigError(f"{where}: quantization_config must be an object, got {short(quantization)}")

