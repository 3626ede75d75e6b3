"""Tiny Intern-S2-Mobius checkpoints in the layout vLLM's interns2_mobius.py loads, and a float64 reference after it.

transformers has no Intern-S2-Mobius class. vLLM's (InternS2MobiusForConditionalGeneration) is Qwen3.5-MoE's model
with one change in each decoder layer: the routed experts and their router are bank `layer % num_blocks` of
`model.language_model.meta_mlp.{b}.{gate,experts}` (InternS2MobiusMetaMoeBlock, Qwen3.5-MoE's softmax top-k block),
beside the layer's own sigmoid-gated shared expert; with `layer_scale`, the mixer's and the MLP's outputs are each
multiplied by (1 + attn_layer_scale / ffn_layer_scale) before their residual add.

`build` turns a tiny transformers Qwen3.5-MoE (tests/gdn_models.py, with its MTP layer) into that layout: the routed
block of layer b becomes bank b, and every layer's own routed block is dropped. `to_qwen35` writes the reference:
the same checkpoint as transformers' Qwen3.5-MoE, each layer's routed block a copy of its bank, and `prepare` hooks
the layer scales in, so transformers' Qwen3.5-MoE computes what vLLM's module does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from tests import gdn_models

LM = "model.language_model."
ARCH = "InternS2MobiusForConditionalGeneration"
BANK = re.compile(r"^model\.language_model\.meta_mlp\.(\d+)\.(.+)$")
LAYER_MOE = re.compile(r"^model\.language_model\.layers\.(\d+)\.mlp\.(gate\.weight|experts\.\d+\..+)$")
SCALE = re.compile(r"^model\.language_model\.layers\.(\d+)\.(attn|ffn)_layer_scale$")


def build(path: Path, num_blocks: int = 2, fused: bool = True, layer_scale: bool = True) -> Path:
    """A tiny Intern-S2-Mobius under `path`: 4 layers sharing `num_blocks` banks of 8 experts (fused [E, 2I, H] /
    [E, H, I] tensors, or one per expert), per-layer scales, the MTP layer of Qwen3.5-MoE with 8 experts."""
    gdn_models.build("qwen3_5_moe", path)
    file = path / "model.safetensors"
    tensors, config = load_file(file), json.loads((path / "config.json").read_text())
    text = config["text_config"]
    out, banks = {}, {}
    for name, t in tensors.items():
        m = LAYER_MOE.match(name)
        if m is None:
            out[name] = t
        elif int(m[1]) < num_blocks:  # layer b's routed block becomes bank b
            banks.setdefault(int(m[1]), {})[m[2]] = t
    for b, bank in banks.items():
        out.update({f"{LM}meta_mlp.{b}.{rest}": t for rest, t in (_fused(bank) if fused else bank).items()})
    gen = torch.Generator().manual_seed(5)
    for i in range(text["num_hidden_layers"] if layer_scale else 0):
        for which in ("attn", "ffn"):
            out[f"{LM}layers.{i}.{which}_layer_scale"] = (torch.randn(1, 1, text["hidden_size"], generator=gen)
                                                          * 0.2).to(torch.bfloat16)
    save_file(out, file, metadata={"format": "pt"})
    text.update(num_blocks=num_blocks, layer_scale=layer_scale, mtp_num_experts=text["num_experts"],
                mtp_num_experts_per_tok=text["num_experts_per_tok"])
    config.update(model_type="interns2_mobius", architectures=[ARCH])
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


def to_qwen35(src: Path, dst: Path) -> Path:
    """The Mobius checkpoint at `src` as transformers' Qwen3.5-MoE at `dst`: each layer's gate and experts copied from
    bank layer % num_blocks (per expert, as transformers saves them), the layer scales and the MTP layer left out."""
    dst.mkdir(parents=True)
    config = json.loads((src / "config.json").read_text())
    text = config["text_config"]
    tensors = {k: v for f in sorted(src.glob("*.safetensors")) for k, v in load_file(f).items()}
    banks: dict[int, dict[str, torch.Tensor]] = {}
    out = {}
    for name, t in tensors.items():
        if (m := BANK.match(name)) is not None:
            banks.setdefault(int(m[1]), {})[m[2]] = t
        elif not SCALE.match(name) and not name.startswith("mtp."):
            out[name] = t
    for i in range(text["num_hidden_layers"]):
        for rest, t in _per_expert(banks[i % text["num_blocks"]]).items():
            out[f"{LM}layers.{i}.mlp.{rest}"] = t.clone()  # a copy per layer (safetensors stores no aliases)
    save_file(out, dst / "model.safetensors", metadata={"format": "pt"})
    config.update(model_type="qwen3_5_moe", architectures=["Qwen3_5MoeForConditionalGeneration"])
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    return dst


def _fused(bank: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A bank's per-expert tensors as Qwen3.5-MoE's fused ones: gate_up_proj [E, 2I, H] (gate then up), down_proj
    [E, H, I]."""
    n = len([k for k in bank if k.endswith(".down_proj.weight")])
    each = lambda proj: [bank[f"experts.{e}.{proj}.weight"] for e in range(n)]  # noqa: E731
    return {"gate.weight": bank["gate.weight"],
            "experts.gate_up_proj": torch.stack([torch.cat([g, u]) for g, u in zip(each("gate_proj"), each("up_proj"))]),
            "experts.down_proj": torch.stack(each("down_proj"))}


def _per_expert(bank: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    if "experts.gate_up_proj" not in bank:
        return bank
    out = {"gate.weight": bank["gate.weight"]}
    for e, (gate_up, down) in enumerate(zip(bank["experts.gate_up_proj"], bank["experts.down_proj"])):
        gate, up = gate_up.chunk(2, dim=0)
        out.update({f"experts.{e}.gate_proj.weight": gate.contiguous(), f"experts.{e}.up_proj.weight": up.contiguous(),
                    f"experts.{e}.down_proj.weight": down.contiguous()})
    return out


def layer_scales(src: Path):
    """`prepare` for tests/test_gdn.py's _logits: multiplies each layer's mixer and MLP outputs by (1 + scale), as
    vLLM's InternS2MobiusDecoderLayer does with `layer_scale` (no-op without it)."""
    tensors = {k: v for f in sorted(src.glob("*.safetensors")) for k, v in load_file(f).items()}
    scales = {(int(m[1]), m[2]): t.to(torch.float64) for k, t in tensors.items() if (m := SCALE.match(k))}

    def scaled(s):
        def hook(module, args, output):
            if isinstance(output, tuple):
                return (output[0] * (1 + s), *output[1:])
            return output * (1 + s)
        return hook

    def prepare(model) -> None:
        for i, layer in enumerate(model.model.language_model.layers):
            if (i, "attn") in scales:
                mixer = layer.linear_attn if layer.block_type == "linear_attention" else layer.self_attn
                mixer.register_forward_hook(scaled(scales[i, "attn"]))
                layer.mlp.register_forward_hook(scaled(scales[i, "ffn"]))
    return prepare


# A stand-in for the checkpoint's own config class (vLLM and transformers have none for interns2_mobius), so vLLM's
# --trust-remote-code can read config.json: Qwen3.5-MoE's, under Mobius's model_type.
REMOTE_CONFIG = '''from transformers import Qwen3_5MoeConfig


class InternS2MobiusConfig(Qwen3_5MoeConfig):
    model_type = "interns2_mobius"
'''


def add_remote_config(path: Path) -> None:
    (path / "configuration_interns2_mobius.py").write_text(REMOTE_CONFIG)
    config = json.loads((path / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_interns2_mobius.InternS2MobiusConfig"}
    (path / "config.json").write_text(json.dumps(config, indent=2))
