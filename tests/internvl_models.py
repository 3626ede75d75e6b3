"""Tiny InternViT-family models (float32, random O(0.3) weights) for the float64 proofs (test_internvl.py).

- `build_internvl`: transformers' InternVLForConditionalGeneration (`internvl`; the same layout is Intern-S1's,
  `interns1`, which vLLM serves with the same class) over a Qwen2 or Qwen3-MoE language model. Its tower's MLP is
  40 wide (3 and 6 divide neither), its 2 heads are never padded.
- `chat_checkpoint`: the same weights renamed to InternVL-Chat's layout (`internvl_chat` / `NVLM_D` / `skywork_chat`:
  `language_model.model.*`, `vision_model.*`, `mlp1.*`, dims in `llm_config`), planned header-only alike.
"""

from __future__ import annotations

import json

import torch
import transformers
from safetensors.torch import load_file, save_file

from tests.tiny_moe import randomize

QWEN2 = dict(model_type="qwen2", vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6,
             tie_word_embeddings=False, rope_theta=10000.0)
QWEN3_MOE = dict(model_type="qwen3_moe", vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                 rms_norm_eps=1e-6, tie_word_embeddings=False, moe_intermediate_size=40, num_experts=6,
                 num_experts_per_tok=2, decoder_sparse_step=1, norm_topk_prob=True)
VISION = dict(hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=2, image_size=[56, 56],
              patch_size=[14, 14], use_qk_norm=True, norm_type="rms_norm", attention_bias=True,
              layer_scale_init_value=0.5)
IMAGE_TOKEN = 5
IMAGE_TOKENS = 4  # 4 x 4 patches, pixel-shuffled by 0.5


def build_internvl(path, text: dict = QWEN2):
    torch.manual_seed(0)
    cfg = transformers.InternVLConfig(text_config=dict(text), vision_config=dict(VISION), image_token_id=IMAGE_TOKEN,
                                      downsample_ratio=0.5, image_seq_length=IMAGE_TOKENS, tie_word_embeddings=False)
    model = transformers.InternVLForConditionalGeneration(cfg).eval()
    randomize(model)
    model.save_pretrained(path)
    # transformers 5.24 saves `language_model.model.*`, `vision_tower.*`: back to the names the hub's -hf and
    # Intern-S1 checkpoints use and vLLM's InternS1ForConditionalGeneration maps (its hf_to_vllm_mapper)
    rename = [("language_model.model.", "model.language_model."), ("language_model.lm_head.", "lm_head."),
              ("vision_tower.", "model.vision_tower."), ("multi_modal_projector.", "model.multi_modal_projector.")]
    tensors = {next((new + k[len(old):] for old, new in rename if k.startswith(old)), k): t
               for k, t in load_file(path / "model.safetensors").items()}
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    return path


_CHAT_NAMES = [  # transformers' layout -> InternVL-Chat's (its remote code's module names; transformers' converter)
    ("model.language_model.", "language_model.model."), ("lm_head.", "language_model.lm_head."),
    ("model.vision_tower.embeddings.cls_token", "vision_model.embeddings.class_embedding"),
    ("model.vision_tower.embeddings.patch_embeddings.projection.", "vision_model.embeddings.patch_embedding."),
    ("model.vision_tower.embeddings.position_embeddings", "vision_model.embeddings.position_embedding"),
    ("model.vision_tower.encoder.layer.", "vision_model.encoder.layers."),
    ("model.multi_modal_projector.layer_norm.", "mlp1.0."), ("model.multi_modal_projector.linear_1.", "mlp1.1."),
    ("model.multi_modal_projector.linear_2.", "mlp1.3.")]
_LAYER_NAMES = [("attention.projection_layer.", "attn.proj."), ("attention.q_norm.", "attn.q_norm."),
                ("attention.k_norm.", "attn.k_norm."), ("lambda_1", "ls1"), ("lambda_2", "ls2"),
                ("layernorm_before.", "norm1."), ("layernorm_after.", "norm2.")]


def _rename(name: str, pairs, back: bool) -> str:
    for old, new in pairs:
        old, new = (new, old) if back else (old, new)
        if name.startswith(old):
            return new + name[len(old):]
    return name


def to_chat(tensors: dict) -> dict:
    """transformers' InternVL tensors in InternVL-Chat's names, q/k/v fused into `attn.qkv` (its layout)."""
    out = {}
    for name, t in tensors.items():
        new = _rename(name, _CHAT_NAMES, back=False)
        if new.startswith("vision_model.encoder.layers."):
            layer, _, rest = new[len("vision_model.encoder.layers."):].partition(".")
            p = f"vision_model.encoder.layers.{layer}."
            if rest.startswith("attention.") and rest.split(".")[1] in ("q_proj", "k_proj", "v_proj"):
                if rest.startswith("attention.q_proj."):
                    suffix = rest.rsplit(".", 1)[1]
                    out[p + "attn.qkv." + suffix] = torch.cat(
                        [tensors[f"model.vision_tower.encoder.layer.{layer}.attention.{x}_proj.{suffix}"]
                         for x in "qkv"])
                continue
            new = p + _rename(rest, _LAYER_NAMES, back=False)
        out[new] = t
    return out


def from_chat(tensors: dict) -> dict:
    """InternVL-Chat's tensors back in transformers' names (the proof loads them in its InternVL class)."""
    out = {}
    for name, t in tensors.items():
        if name.startswith("vision_model.encoder.layers."):
            layer, _, rest = name[len("vision_model.encoder.layers."):].partition(".")
            p = f"model.vision_tower.encoder.layer.{layer}."
            if rest.startswith("attn.qkv."):
                for x, part in zip("qkv", t.chunk(3)):
                    out[f"{p}attention.{x}_proj.{rest.rsplit('.', 1)[1]}"] = part
                continue
            out[p + _rename(rest, _LAYER_NAMES, back=True)] = t
        else:
            out[_rename(name, _CHAT_NAMES, back=True)] = t
    return out


def chat_checkpoint(hf_path, path, model_type: str = "internvl_chat", arch: str = "InternVLChatModel"):
    """The transformers-layout checkpoint at `hf_path` in InternVL-Chat's layout (`model_type` / `arch`: also
    NVLM-D's and Skywork-R1V's, which share it); transformers cannot load it (its modelling code is the
    checkpoint's own), `hf_from_chat` turns it back."""
    cfg = json.loads((hf_path / "config.json").read_text())
    path.mkdir(parents=True, exist_ok=True)
    save_file(to_chat(load_file(hf_path / "model.safetensors")), path / "model.safetensors", metadata={"format": "pt"})
    config = {"architectures": [arch], "model_type": model_type, "llm_config": cfg["text_config"],
              "vision_config": cfg["vision_config"], "downsample_ratio": 0.5, "select_layer": -1,
              "ps_version": "v2", "template": "internvl2_5", "torch_dtype": "float32"}
    (path / "config.json").write_text(json.dumps(config, indent=2))
    (path / "hf_config.json").write_text(json.dumps(cfg))  # what hf_from_chat rebuilds the transformers config from
    return path


def hf_from_chat(chat_path, path):
    """A chat-layout checkpoint (upstream or padded) as transformers' InternVL: its tensors renamed back, its
    llm_config / vision_config under transformers' keys."""
    chat = json.loads((chat_path / "config.json").read_text())
    cfg = json.loads((chat_path / "hf_config.json").read_text())
    cfg.update(text_config=chat["llm_config"], vision_config=chat["vision_config"])
    path.mkdir(parents=True, exist_ok=True)
    tensors = {k: v for f in sorted(chat_path.glob("*.safetensors")) for k, v in load_file(f).items()}
    save_file(from_chat(tensors), path / "model.safetensors", metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(cfg))
    return path


# InternVL-Chat's config.json names its own config class (auto_map; vLLM loads it with --trust-remote-code). A minimal
# stand-in with the published class's attributes: the language model's config built from `llm_config` by its
# model_type, the tower's kept as a plain config.
REMOTE_CONFIG = '''from transformers import AutoConfig, PretrainedConfig


class InternVLChatConfig(PretrainedConfig):
    model_type = "internvl_chat"
    is_composition = True

    def __init__(self, vision_config=None, llm_config=None, **kwargs):
        super().__init__(**kwargs)
        self.vision_config = PretrainedConfig(**(vision_config or {}))
        llm = dict(llm_config or {"model_type": "qwen2"})
        self.llm_config = AutoConfig.for_model(llm.pop("model_type"), **llm)
'''


def add_remote_config(path) -> None:
    """The stand-in config class and its auto_map entry, so vLLM's --trust-remote-code can read config.json."""
    (path / "configuration_internvl_chat.py").write_text(REMOTE_CONFIG)
    config = json.loads((path / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig"}
    (path / "config.json").write_text(json.dumps(config, indent=2))
