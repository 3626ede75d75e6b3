"""The InternViT family of VLMs: an InternViT tower, a projector and a Qwen2 / Qwen3 / Qwen3-MoE / Llama language
model (adapters/nested_lm.py pads it by its own family's rules).

As vLLM 0.32.0 builds the tower:
- InternVL-Chat (`internvl_chat`, InternVLChatModel) and NVLM-D (`NVLM_D`, NVLM_D_Model, its subclass) set
  supports_encoder_tp_data: served with --mm-encoder-tp-mode data, every rank holds the whole tower, which is copied
  with the projector `mlp1`. Keys: `language_model.model.*`, `language_model.lm_head`, `vision_model.*`, `mlp1.*`;
  dims in `llm_config`.
- Skywork-R1V (`skywork_chat`, SkyworkR1VChatModel) has no data-parallel encoder: intern_vit.py keeps the attention
  whole where its heads do not divide TP, but shards the MLP (fc1 column-, fc2 row-parallel over intermediate_size,
  12800 in InternViT-6B): plan/tower.py pads that MLP alone. Same keys as InternVL-Chat.
- InternVL in transformers' layout (`internvl`, InternVLForConditionalGeneration) and Intern-S1 (`interns1`) are both
  served by vLLM's InternS1ForConditionalGeneration (no data-parallel encoder): interns1_vit.py builds the tower's
  attention as plain nn.Linear (whole on every rank) and its MLP column / row parallel, padded as Skywork's. Keys:
  `model.language_model.*`, `lm_head`, `model.vision_tower.*`, `model.multi_modal_projector.*`; dims in
  `text_config`.
Every one but `internvl` (transformers' own) serves with --trust-remote-code: neither vLLM nor transformers has a
config class for it, so vLLM reads the checkpoint's own (configuration_*.py, copied with the checkpoint).
"""

from __future__ import annotations

from hubpad.plan.adapters.base import VisionTower
from hubpad.plan.adapters.llama import LLAMA
from hubpad.plan.adapters.nested_lm import VLM, vlm_adapter
from hubpad.plan.adapters.qwen import QWEN2, QWEN3, QWEN_MOE
from hubpad.plan.adapters.registry_refusals import REGISTRY_REFUSALS

_TEXT = {"qwen2": QWEN2, "qwen3": QWEN3, "qwen3_moe": QWEN_MOE, "llama": LLAMA}
_REFUSED = {"internlm2": REGISTRY_REFUSALS["internlm2"]}


def _mlp_tower(layers: str) -> VisionTower:
    """An InternViT tower of which vLLM shards only the MLP (`layers`: its layers' name pattern)."""
    return VisionTower(node="vision_config", shards=("inter",),
                       keys={"heads": "num_attention_heads", "kv": "num_attention_heads",
                             "inter": "intermediate_size", "hidden": "hidden_size"}, defaults={},
                       patterns=((layers + r"mlp\.fc1\.(weight|bias)$", "mlp_in"),
                                 (layers + r"mlp\.fc2\.(weight|bias)$", "mlp_out")))


def _chat(arch: str, encoder_dp: bool) -> VLM:
    tower = None if encoder_dp else _mlp_tower(r"^vision_model\.encoder\.layers\.\d+\.")
    return VLM(arch=arch, text_config="llm_config", lm_prefix="language_model.model.", head_prefix="language_model.",
               copy_modules=(r"^vision_model\.", r"^mlp1\."), copy_params=(r"^vision_model\.", r"^mlp1\."),
               text_families=_TEXT, text_refusals=_REFUSED, tower=tower, encoder_dp=encoder_dp, remote_config=True)


def _hf(arch: str, remote_config: bool) -> VLM:
    return VLM(arch=arch, text_config="text_config", lm_prefix="model.language_model.", head_prefix="",
               remote_config=remote_config,
               copy_modules=(r"^model\.vision_tower\.", r"^model\.multi_modal_projector\."),
               copy_params=(r"^model\.vision_tower\.", r"^model\.multi_modal_projector\."),
               text_families=_TEXT, text_refusals=_REFUSED,
               tower=_mlp_tower(r"^model\.vision_tower\.encoder\.layer\.\d+\."))


INTERNVL_CHAT = vlm_adapter("internvl_chat", ("internvl_chat",), _chat("InternVLChatModel", encoder_dp=True))
NVLM_D = vlm_adapter("nvlm_d", ("NVLM_D",), _chat("NVLM_D", encoder_dp=True))
SKYWORK_CHAT = vlm_adapter("skywork_chat", ("skywork_chat",), _chat("SkyworkR1VChatModel", encoder_dp=False))
INTERNVL = vlm_adapter("internvl", ("internvl",), _hf("InternVLForConditionalGeneration", remote_config=False))
INTERNS1 = vlm_adapter("interns1", ("interns1",), _hf("InternS1ForConditionalGeneration", remote_config=True))
