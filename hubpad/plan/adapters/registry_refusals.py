"""Families of vLLM 0.32's registry that hubpad knows and refuses, each with the reason a user can check in vLLM's
source (vllm/model_executor/models/<file>.py, 0.32.0). docs/families.md's registry table lists them.

- Heads that cannot be padded because vLLM derives head_dim = hidden_size // heads and reads no head_dim from
  config.json, in a model whose heads or kv heads do not divide TP 3 and 6: BLOOM (bloom.py; 176B: 112 heads; its
  ALiBi slopes are also computed from the total head count, so added heads would change every head's bias),
  Falcon (falcon.py; 180B: 232 heads / 8 kv, 40B: 128 / 8), DBRX (dbrx.py, d_model // n_heads; 48 heads / 8 kv),
  InternLM2 (internlm2.py; 20B: 48 heads / 8 kv), TeleChat2 (telechat2.py splits the per-head key_value with
  hidden_size // n_head; 115B: 64 heads), Molmo (molmo.py, in the language model and the vision transformer alike;
  72B: 64 heads / 8 kv), IQuest-Coder's Loop variant (iquest_loopcoder.py, its per-head loop gates too; 40B: 40 / 8),
  and OpenCUA (opencua.py builds its language model as vLLM's Qwen2ForCausalLM whatever config.json says, and
  qwen2.py computes head_dim likewise; 32B: 40 / 8), Granite 4.0-H (granitemoehybrid.py's attention layers; H-Small:
  32 / 8; its one-group Mamba2 layers alone would pad by plan/mamba2.py's whole-group rule). Growing the heads would change head_dim; no --hf-overrides
  reaches a class that reads head_dim with these tensor names.
- Jamba (jamba.py): its Mamba layers are mamba_expand x hidden_size channels wide (1.5-Large: 2 x 8192 = 16384,
  1.5-Mini: 8192), which vLLM's MambaMixer splits evenly over TP; neither divides by 3, and the config states the
  width as an integer multiple of hidden_size, so a padded width cannot be written (padding hidden_size is not exact).
"""

from __future__ import annotations

_HEAD_DIM = ("{name} (model_type '{mt}') cannot be padded: vLLM's {cls} computes head_dim = hidden_size // heads "
             "and ignores config.json's head_dim, so padded heads would change head_dim; {why}")

REGISTRY_REFUSALS: dict[str, str] = {
    "bloom": _HEAD_DIM.format(name="BLOOM", mt="bloom", cls="BloomForCausalLM", why=(
        "its ALiBi slopes also depend on the total head count. BLOOM-176B's 112 heads serve as they are at TP 2, 4 "
        "and 8")),
    "falcon": _HEAD_DIM.format(name="Falcon", mt="falcon", cls="FalconForCausalLM", why=(
        "Falcon-180B (232 heads / 8 kv) and Falcon-40B (128 / 8) serve as they are at TP 2, 4 and 8")),
    "dbrx": _HEAD_DIM.format(name="DBRX", mt="dbrx", cls="DbrxForCausalLM", why=(
        "its 48 heads / 8 kv heads serve as they are at TP 2, 4 and 8")),
    "internlm2": _HEAD_DIM.format(name="InternLM2", mt="internlm2", cls="InternLM2ForCausalLM", why=(
        "InternLM2-20B's 48 heads / 8 kv heads serve as they are at TP 2, 4 and 8")),
    "telechat": _HEAD_DIM.format(name="TeleChat2", mt="telechat", cls="TeleChat2ForCausalLM", why=(
        "TeleChat2-115B's 64 heads serve as they are at TP 2, 4 and 8")),
    "molmo": _HEAD_DIM.format(name="Molmo", mt="molmo", cls="MolmoForCausalLM", why=(
        "so does its vision transformer (16 heads of 64). Molmo-72B's 64 heads / 8 kv heads serve as they are at TP 2, 4 "
        "and 8")),
    "iquestloopcoder": _HEAD_DIM.format(name="IQuest-Coder Loop", mt="iquestloopcoder",
                                        cls="IQuestLoopCoderForCausalLM", why=(
        "so do its per-head loop gates. IQuest-Coder-V1-40B-Loop's 40 heads / 8 kv heads serve as they are at TP 2, 4 "
        "and 8")),
    "opencua": _HEAD_DIM.format(name="OpenCUA", mt="opencua", cls="Qwen2ForCausalLM (the language model "
                                "OpenCUAForConditionalGeneration always builds)", why=(
        "OpenCUA-32B's 40 heads / 8 kv heads serve as they are at TP 2, 4 and 8")),
    "granitemoehybrid": _HEAD_DIM.format(name="Granite 4.0-H", mt="granitemoehybrid",
                                         cls="GraniteMoeHybridForCausalLM", why=(
        "its one-group Mamba2 layers alone could be padded (whole groups), its attention layers cannot. "
        "Granite-4.0-H-Small's 32 heads / 8 kv heads serve as they are at TP 2, 4 and 8")),
    "jamba": (
        "Jamba (model_type 'jamba') cannot be padded: vLLM splits its Mamba layers' mamba_expand x hidden_size "
        "channels (16384 in Jamba-1.5-Large, 8192 in Mini) evenly over TP, neither divides by 3, and config.json "
        "states that width as an integer multiple of hidden_size, so no padded width can be written; it serves as "
        "it is at TP 2, 4 and 8"),
}
# Falcon's older configs name the same model RefinedWeb / RefinedWebModel (vLLM's RWConfig); TeleChat2's repos say
# telechat (their remote code), transformers' own class telechat2
REGISTRY_REFUSALS.update({alias: REGISTRY_REFUSALS["falcon"] for alias in ("RefinedWeb", "RefinedWebModel")})
REGISTRY_REFUSALS["telechat2"] = REGISTRY_REFUSALS["telechat"]
