"""Tiny Cosmos3 unified checkpoints (`cosmos3_omni`) in the published Diffusers layout, and the reasoner's float64
logits as vLLM reads it.

The reasoner is built with transformers' Cosmos3OmniForConditionalGeneration (Qwen3-VL's class) and written in the
unified repo's flat names: the language model in `transformer/` (`layers.N.self_attn.to_q`, `norm_q`, ...; two
shards and an index, as diffusers saves a large model), the vision tower in `vision_encoder/` (`blocks.*`,
`merger.*`; one file, no index). Beside it in `transformer/` sit the generator's mixture-of-transformers weights
(diffusers' Cosmos3OmniTransformer: `add_q/k/v_proj`, `to_add_out`, `norm_added_q/k`, `mlp_moe_gen`, the `_moe_gen`
norms, `proj_in/out`, `time_embedder`, the sound and action projections), and the pipeline's other folders (a VAE
with its own safetensors, a tokenizer) and root files. `logits` loads `transformer/` and `vision_encoder/` as vLLM
0.32 does: every `*.safetensors` of both folders, each name passed through Cosmos3ForConditionalGeneration's
hf_to_vllm_mapper (the rule tables below are its own), which drops the generator; the result must fill transformers'
model exactly (strict).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

from tests.tiny_moe import randomize
from tests.vlm_models import TEXT, TOKENS, VISION

CONFIG = dict(architectures=["Cosmos3ForConditionalGeneration"], model_type="cosmos3_omni", tie_word_embeddings=False,
              **TOKENS)
INDEX = "diffusion_pytorch_model.safetensors.index.json"

# vLLM 0.32's Cosmos3ForConditionalGeneration.hf_to_vllm_mapper (model_executor/models/cosmos3.py), applied in
# WeightsMapper's order: regex, substrings, prefixes; None drops the weight.
_REGEX = [(r"^(layers\.|embed_tokens\.|norm\.)(.+)$", r"language_model.model.\1\2"),
          (r"^(blocks\.|merger\.|patch_embed\.|pos_embed\.|deepstack_merger_list\.)", r"visual.\1"),
          (r"^audio_modality_embed(?:\..*)?$", None), (r"^action_modality_embed(?:\..*)?$", None)]
_SUBSTR = {"_moe_gen": None, ".add_q_proj.": None, ".add_k_proj.": None, ".add_v_proj.": None, ".to_add_out.": None,
           ".norm_added_q.": None, ".norm_added_k.": None, ".to_q.": ".q_proj.", ".to_k.": ".k_proj.",
           ".to_v.": ".v_proj.", ".to_out.": ".o_proj.", ".norm_q.": ".q_norm.", ".norm_k.": ".k_norm.",
           ".input_quantizer.": None, ".weight_quantizer.": None, ".output_quantizer.": None}
_PREFIX = {"proj_in.": None, "proj_out.": None, "time_embedder.": None, "audio_proj_in.": None,
           "audio_proj_out.": None, "action_proj_in.": None, "action_proj_out.": None,
           "lm_head.": "language_model.lm_head."}


def vllm_name(name: str) -> str | None:
    """The name vLLM's Cosmos3 mapper gives a checkpoint tensor, or None where it drops it."""
    for pattern, new in _REGEX:
        if re.search(pattern, name):
            if new is None:
                return None
            name = re.sub(pattern, new, name)
    for substr, new in _SUBSTR.items():
        if substr in name:
            if new is None:
                return None
            name = name.replace(substr, new, 1)
    for prefix, new in _PREFIX.items():
        if name.startswith(prefix):
            if new is None:
                return None
            name = name.replace(prefix, new, 1)
    return name


def _transformers_name(vllm: str) -> str:
    """vLLM's Qwen3-VL module name -> transformers' (language_model.model. / visual. / language_model.lm_head.)."""
    for a, b in (("language_model.model.", "model.language_model."), ("visual.", "model.visual."),
                 ("language_model.lm_head.", "lm_head.")):
        if vllm.startswith(a):
            return b + vllm[len(a):]
    raise AssertionError(f"vLLM name {vllm!r} is neither the language model nor the tower")


def _flat(name: str) -> str:
    """transformers' Qwen3-VL name -> the unified repo's flat, Diffusers-style one (vLLM's mapper read backwards)."""
    name = name.removeprefix("model.language_model.").removeprefix("model.visual.")
    for a, b in ((".q_proj.", ".to_q."), (".k_proj.", ".to_k."), (".v_proj.", ".to_v."), (".o_proj.", ".to_out."),
                 (".q_norm.", ".norm_q."), (".k_norm.", ".norm_k.")):
        name = name.replace(a, b)
    return name


def _model(cfg: dict):
    """transformers' Cosmos3 (Qwen3-VL) in float64 for a root config.json (its Qwen3VLTextConfig, as vLLM's, takes
    padded head counts that do not divide hidden_size: the modeling code reads head_dim)."""
    return transformers.Cosmos3OmniForConditionalGeneration(transformers.Cosmos3OmniConfig(**cfg)).to(
        torch.float64).eval()


def _generator(text: dict, g: torch.Generator) -> dict[str, torch.Tensor]:
    """The generator's tensors of diffusers' Cosmos3OmniTransformer (same heads, head_dim and MLP width per layer)."""
    h, d, heads, kv, inter = (text[k] for k in ("hidden_size", "head_dim", "num_attention_heads",
                                                "num_key_value_heads", "intermediate_size"))
    shapes = {"norm_moe_gen.weight": (h,), "proj_in.weight": (h, 16), "proj_in.bias": (h,),
              "proj_out.weight": (16, h), "proj_out.bias": (16,), "time_embedder.linear_1.weight": (h, 256),
              "time_embedder.linear_1.bias": (h,), "time_embedder.linear_2.weight": (h, h),
              "time_embedder.linear_2.bias": (h,), "audio_proj_in.weight": (h, 8), "audio_proj_in.bias": (h,),
              "audio_modality_embed": (h,), "action_proj_in.fc.weight": (2, 4 * h),
              "action_proj_in.bias.weight": (2, h),
              "action_modality_embed": (h,)}
    for i in range(text["num_hidden_layers"]):
        a, m = f"layers.{i}.self_attn.", f"layers.{i}.mlp_moe_gen."
        shapes |= {a + "add_q_proj.weight": (heads * d, h), a + "add_k_proj.weight": (kv * d, h),
                   a + "add_v_proj.weight": (kv * d, h), a + "to_add_out.weight": (h, heads * d),
                   a + "norm_added_q.weight": (d,), a + "norm_added_k.weight": (d,),
                   m + "gate_proj.weight": (inter, h), m + "up_proj.weight": (inter, h),
                   m + "down_proj.weight": (h, inter),
                   f"layers.{i}.input_layernorm_moe_gen.weight": (h,),
                   f"layers.{i}.post_attention_layernorm_moe_gen.weight": (h,)}
    return {k: (torch.randn(s, generator=g, dtype=torch.float64) * 0.3 + ("norm" in k)) for k, s in shapes.items()}


def build(path: Path, seed: int = 0) -> dict:
    """Write a random tiny unified Cosmos3 repo (float64) to `path`; returns its root config.json."""
    cfg = {**CONFIG, "text_config": {"model_type": "qwen3_vl_text", **TEXT},
           "vision_config": {"model_type": "qwen3_vl_vision", **VISION}}
    torch.manual_seed(seed)
    model = _model(cfg)
    randomize(model)
    state = {_flat(k): v.detach().clone() for k, v in model.state_dict().items()}
    reasoner = {k: v for k, v in state.items() if not k.startswith(_TOWER)}
    tower = {k: v for k, v in state.items() if k.startswith(_TOWER)}
    transformer = {**reasoner, **_generator(cfg["text_config"], torch.Generator().manual_seed(seed + 1))}
    (path / "transformer").mkdir(parents=True)
    (path / "vision_encoder").mkdir()
    (path / "vae").mkdir()
    (path / "tokenizer").mkdir()
    names = sorted(transformer)
    half = {"diffusion_pytorch_model-00001-of-00002.safetensors": names[: len(names) // 2],
            "diffusion_pytorch_model-00002-of-00002.safetensors": names[len(names) // 2:]}
    for file, part in half.items():
        save_file({k: transformer[k].contiguous() for k in part}, str(path / "transformer" / file),
                  metadata={"format": "pt"})
    total = sum(v.nbytes for v in transformer.values())
    (path / "transformer" / INDEX).write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": {k: f for f, part in half.items() for k in part}}))
    t = cfg["text_config"]
    (path / "transformer" / "config.json").write_text(json.dumps(
        {"_class_name": "Cosmos3OmniTransformer", "_diffusers_version": "0.38.0", "head_dim": t["head_dim"],
         "hidden_size": t["hidden_size"], "intermediate_size": t["intermediate_size"],
         "num_attention_heads": t["num_attention_heads"], "num_hidden_layers": t["num_hidden_layers"],
         "num_key_value_heads": t["num_key_value_heads"], "patch_latent_dim": 16, "vocab_size": t["vocab_size"]},
        indent=2))
    save_file({k: v.contiguous() for k, v in tower.items()}, str(path / "vision_encoder" / "model.safetensors"),
              metadata={"format": "pt"})
    (path / "vision_encoder" / "config.json").write_text(json.dumps({"model_type": "qwen3_vl", **VISION}))
    g = torch.Generator().manual_seed(seed + 2)
    save_file({"decoder.conv_in.weight": torch.randn(4, 4, 3, 3, generator=g)},
              str(path / "vae" / "diffusion_pytorch_model.safetensors"))
    (path / "vae" / "config.json").write_text(json.dumps({"_class_name": "AutoencoderKLWan", "z_dim": 4}))
    (path / "tokenizer" / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 256}))
    (path / "model_index.json").write_text(json.dumps(
        {"_class_name": "Cosmos3OmniPipeline", "transformer": ["diffusers", "Cosmos3OmniTransformer"],
         "vae": ["diffusers", "AutoencoderKLWan"], "tokenizer": ["transformers", "Qwen2Tokenizer"]}))
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return cfg


_TOWER = ("blocks.", "merger.", "patch_embed.", "pos_embed.", "deepstack_merger_list.")


def vllm_weights(path: Path) -> dict[str, torch.Tensor]:
    """What vLLM 0.32 loads from a unified repo: `[tv]*er/*.safetensors` (no index read), mapped by the Cosmos3
    mapper, generator weights dropped; keyed by transformers' Qwen3-VL names."""
    out = {}
    for f in sorted(path.glob("[tv]*er/*.safetensors")):
        for name, tensor in load_file(f).items():
            mapped = vllm_name(name)
            if mapped is not None:
                assert _transformers_name(mapped) not in out, mapped
                out[_transformers_name(mapped)] = tensor
    return out


def logits(path: Path, ids: torch.Tensor, pixels: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """float64 logits of the reasoner at `path` (its root config.json, its weights as vLLM reads them) on a prompt
    that holds an image."""
    model = _model(json.loads((path / "config.json").read_text()))
    model.load_state_dict(vllm_weights(path), strict=True)
    with torch.no_grad():
        return model(input_ids=ids, pixel_values=pixels, image_grid_thw=grid,
                     mm_token_type_ids=(ids == TOKENS["image_token_id"]).long()).logits


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """[seq, heads, d] queries over [keys, kv, d]: query head i reads kv head i // (heads / kv) (SDPA's enable_gqa)."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) / q.shape[-1] ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores[0], dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).flatten(1)


def generator_hidden(path: Path, ids: torch.Tensor, gen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 (reasoner, generator) final hidden states of the mixture-of-transformers backbone in `transformer/`,
    a reference written after diffusers' Cosmos3OmniTransformer: per layer, the understanding tokens attend causally
    among themselves (to_q/k/v, norm_q/k, to_out), the generation tokens `gen` attend to every key and value
    (add_q/k/v_proj, norm_added_q/k, to_add_out), each pathway with its own norms and MLP (mlp / mlp_moe_gen), then
    norm / norm_moe_gen. Positions: plain 1-D RoPE (the mRoPE sections only change which angles each pair gets)."""
    cfg = json.loads((path / "transformer" / "config.json").read_text())
    w = {k: v for f in sorted((path / "transformer").glob("*.safetensors")) for k, v in load_file(f).items()}
    heads, kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    und, n = w["embed_tokens.weight"][ids], ids.shape[0]
    angles = torch.arange(n + gen.shape[0], dtype=torch.float64)[:, None] * \
        (1e4 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d))[None]
    cos, sin = (f(torch.cat((angles, angles), -1))[:, None] for f in (torch.cos, torch.sin))
    pos = {"und": (cos[:n], sin[:n]), "gen": (cos[n:], sin[n:])}

    def heads_of(x, proj, norm, count, where):
        y = _linear(x, w[proj + ".weight"]).view(x.shape[0], count, d)
        return _rotate(_rms(y, w[norm + ".weight"]), *pos[where]) if norm else y

    def mlp(x, prefix):
        return _linear(_silu(_linear(x, w[prefix + "gate_proj.weight"])) * _linear(x, w[prefix + "up_proj.weight"]),
                       w[prefix + "down_proj.weight"])

    for i in range(cfg["num_hidden_layers"]):
        p, a = f"layers.{i}.", f"layers.{i}.self_attn."
        xu, xg = _rms(und, w[p + "input_layernorm.weight"]), _rms(gen, w[p + "input_layernorm_moe_gen.weight"])
        qu, ku = heads_of(xu, a + "to_q", a + "norm_q", heads, "und"), heads_of(xu, a + "to_k", a + "norm_k", kv, "und")
        vu = heads_of(xu, a + "to_v", None, kv, "und")
        qg = heads_of(xg, a + "add_q_proj", a + "norm_added_q", heads, "gen")
        kg = heads_of(xg, a + "add_k_proj", a + "norm_added_k", kv, "gen")
        vg = heads_of(xg, a + "add_v_proj", None, kv, "gen")
        und = und + _linear(_attend(qu, ku, vu, causal=True), w[a + "to_out.weight"])
        gen = gen + _linear(_attend(qg, torch.cat((ku, kg)), torch.cat((vu, vg)), causal=False),
                            w[a + "to_add_out.weight"])
        und = und + mlp(_rms(und, w[p + "post_attention_layernorm.weight"]), p + "mlp.")
        gen = gen + mlp(_rms(gen, w[p + "post_attention_layernorm_moe_gen.weight"]), p + "mlp_moe_gen.")
    return _rms(und, w["norm.weight"]), _rms(gen, w["norm_moe_gen.weight"])


_linear, _silu = torch.nn.functional.linear, torch.nn.functional.silu
