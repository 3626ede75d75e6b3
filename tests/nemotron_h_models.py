"""Tiny Nemotron-H / Nemotron 3 checkpoints in the published layout, built with transformers' NemotronHForCausalLM.

transformers saves NemotronH under the published names already (`backbone.*`, per-expert `experts.E.up_proj`,
`lm_head`); `build_nemotron_h` adds what published configs state besides (`hybrid_override_pattern`,
`num_hidden_layers`, and with `mtp` the MTP block: `num_nextn_predict_layers`, `mtp_hybrid_override_pattern` and
`mtp.layers.{0,1}.*`, an attention layer then an MoE layer as Nemotron 3 Super ships them, which transformers skips on
load). Every parameter is random, the Mamba2 ones included (A_log, D, dt_bias, the gated norm's weight), so a padded
value in the wrong place changes the logits.
"""

from __future__ import annotations

import copy
import json

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers.models.nemotron_h import modeling_nemotron_h

from tests.tiny_moe import randomize_seeded

LETTERS = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}
# 8 Mamba2 heads of 8 channels in 2 groups (state 16), attention 4 heads / 2 kv of 16, a latent MoE of 8 experts
TINY = dict(vocab_size=256, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            intermediate_size=96, mamba_num_heads=8, mamba_head_dim=8, n_groups=2, ssm_state_size=16, conv_kernel=4,
            chunk_size=8, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=40,
            moe_shared_expert_intermediate_size=48, moe_latent_size=32, n_group=1, topk_group=1,
            max_position_embeddings=128, routed_scaling_factor=2.5, time_step_min=0.001)


def config(pattern: str = "ME*M-E", **over) -> transformers.NemotronHConfig:
    return transformers.NemotronHConfig(**{**TINY, "layers_block_type": [LETTERS[c] for c in pattern], **over})


# the SSM's per-head parameters at realistic values: A = -exp(A_log) in [-4, -1], dt_bias around softplus^-1 of
# 0.01..0.1, D around 1 (every other parameter as tiny_moe.randomize_seeded gives it)
SSM_LEAVES = {"A_log": lambda shape, g: torch.rand(shape, generator=g) * 1.4,
              "dt_bias": lambda shape, g: torch.rand(shape, generator=g) * 2.0 - 4.5,
              "D": lambda shape, g: 1.0 + 0.3 * torch.randn(shape, generator=g)}


def build_nemotron_h(path, pattern: str = "ME*M-E", seed: int = 0, dtype=torch.float64, mtp: bool = False,
                     **over) -> dict:
    """Save a tiny NemotronH in the published layout under `path`; returns its config.json."""
    cfg = config(pattern, **over)
    cfg.architectures = ["NemotronHForCausalLM"]
    torch.manual_seed(seed)
    model = transformers.NemotronHForCausalLM(cfg).to(dtype).eval()
    randomize_seeded(model, seed, SSM_LEAVES)
    model.save_pretrained(path)
    config_json = json.loads((path / "config.json").read_text())
    config_json.update(hybrid_override_pattern=pattern, num_hidden_layers=len(pattern))
    if mtp:
        file = path / "model.safetensors"
        tensors = load_file(file)
        tensors.update(_mtp_block(tensors, pattern, dtype))
        save_file(tensors, file, metadata={"format": "pt"})
        config_json.update(num_nextn_predict_layers=1, mtp_hybrid_override_pattern="*E")
    (path / "config.json").write_text(json.dumps(config_json, indent=2))
    return config_json


def _mtp_block(tensors: dict, pattern: str, dtype, top: str = "backbone", moe: dict | None = None) -> dict:
    """Nemotron 3 Super's MTP block: `mtp.layers.0` an attention layer (enorm, hnorm, eh_proj, norm), `mtp.layers.1`
    an MoE layer (norm, final_layernorm), copies of the first such decoder layers' mixers (the decoder under `top`),
    or the MoE mixer's tensors `moe` (names from `mixer.`)."""
    h = tensors[f"{top}.norm_f.weight"].shape[0]
    g = torch.Generator().manual_seed(11)
    attn, first_moe = (f"{top}.layers.{pattern.index(c)}." for c in "*E")
    out = {f"mtp.layers.0.{n}.weight": (1.0 + 0.3 * torch.randn(h, generator=g)).to(dtype)
           for n in ("enorm", "hnorm", "norm")}
    out["mtp.layers.0.eh_proj.weight"] = (0.3 * torch.randn(h, 2 * h, generator=g)).to(dtype)
    out["mtp.layers.1.norm.weight"] = (1.0 + 0.3 * torch.randn(h, generator=g)).to(dtype)
    out["mtp.layers.1.final_layernorm.weight"] = (1.0 + 0.3 * torch.randn(h, generator=g)).to(dtype)
    sources = {**tensors, **{first_moe + k: v for k, v in moe.items()}} if moe else tensors
    for name, t in sources.items():
        for src, dst in ((attn, "mtp.layers.0."), (first_moe, "mtp.layers.1.")):
            if name.startswith(src + "mixer.") and (moe is None or src == attn or name[len(src):] in moe):
                out[dst + name[len(src):]] = t.clone()
    return out


# A tiny Puzzle (nemotron_h_puzzle): Super-like blocks whose MoE and MLP layers have widths (and top-k) of their own,
# and the MTP block's MoE its own too. Layer letters as `config`'s pattern; each block's overrides by layer index.
PUZZLE_PATTERN = "ME*M-E"
PUZZLE_BLOCKS = {1: {"moe_intermediate_size": 40, "num_experts_per_tok": 2}, 4: {"intermediate_size": 80},
                 5: {"moe_intermediate_size": 72, "num_experts_per_tok": 3}}
PUZZLE_MTP_MOE = {"moe_intermediate_size": 56, "num_experts_per_tok": 2}
BLOCK_TYPES = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}


def puzzle_blocks(pattern: str = PUZZLE_PATTERN, overrides: dict | None = None) -> list[dict]:
    overrides = PUZZLE_BLOCKS if overrides is None else overrides
    return [{"block_type": BLOCK_TYPES[c], **overrides.get(i, {})} for i, c in enumerate(pattern)]


def puzzle_model(config_json: dict, dtype=torch.float64) -> transformers.NemotronHForCausalLM:
    """A reference for a Puzzle config.json, written after vLLM's NemotronH classes: transformers' NemotronH model
    with each layer's mixer built from its own config, config.json overlaid with its block (what vLLM builds from the
    checkpoint's get_nemotron_h_config_for_layer; Mamba2 layers from config.json itself). Random weights."""
    blocks = config_json["block_configs"]
    keys = set(TINY) | {"mlp_bias", "use_bias", "layer_norm_epsilon", "mlp_hidden_act"}
    base = {k: v for k, v in config_json.items() if k in keys}
    cfg = config("".join({v: k for k, v in BLOCK_TYPES.items()}[b["block_type"]] for b in blocks), **base)
    model = transformers.NemotronHForCausalLM(cfg).to(dtype)
    model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64 (the layers' configs copy it)
    for i, block in enumerate(blocks):
        if block["block_type"] in ("moe", "mlp"):
            layer_cfg = copy.deepcopy(cfg)
            for key, value in block.items():
                if key != "block_type":
                    setattr(layer_cfg, key, value)
            mixer = modeling_nemotron_h.MIXER_TYPES[LETTERS["E" if block["block_type"] == "moe" else "-"]]
            model.model.layers[i].mixer = mixer(layer_cfg, layer_idx=i).to(dtype)
    return model.eval()


# A stand-in for a Puzzle checkpoint's configuration_nemotron_h_puzzle.py (its remote code; the published file was not
# read offline): what vLLM uses of it, the layer types from block_configs and get_nemotron_h_config_for_layer, a copy
# of the config with the layer's block (decoder blocks, then the MTP's) laid over it.
PUZZLE_CONFIG_CLASS = """import copy

from transformers import NemotronHConfig


class NemotronHPuzzleConfig(NemotronHConfig):
    model_type = "nemotron_h_puzzle"

    def __init__(self, block_configs=None, mtp_block_configs=None, **kwargs):
        self.block_configs = list(block_configs or [])
        self.mtp_block_configs = list(mtp_block_configs or [])
        if self.block_configs:
            kwargs["layers_block_type"] = [b["block_type"] for b in self.block_configs]
        if self.mtp_block_configs:
            kwargs["mtp_layers_block_type"] = [b["block_type"] for b in self.mtp_block_configs]
        super().__init__(**kwargs)

    def get_nemotron_h_config_for_layer(self, layer_idx):
        layer = copy.copy(self)
        for key, value in (self.block_configs + self.mtp_block_configs)[layer_idx].items():
            if key != "block_type":
                setattr(layer, key, value)
        return layer
"""


def build_puzzle(path, seed: int = 0, dtype=torch.float64, mtp: bool = False, blocks: list[dict] | None = None,
                 remote_code: bool = False, **over) -> dict:
    """Save a tiny Puzzle in the published layout under `path` (`model.*` names, per-expert experts, block_configs
    and, with `mtp`, mtp_block_configs and `mtp.layers.{0,1}.*` with the MTP MoE's own width; with `remote_code`, the
    config class vLLM loads with --trust-remote-code, PUZZLE_CONFIG_CLASS); returns config.json."""
    blocks = blocks or puzzle_blocks()
    pattern = "".join({v: k for k, v in BLOCK_TYPES.items()}[b["block_type"]] for b in blocks)
    config_json = {**TINY, **over, "architectures": ["NemotronHPuzzleForCausalLM"], "model_type": "nemotron_h_puzzle",
                   "block_configs": blocks, "num_hidden_layers": len(blocks), "mlp_bias": False, "use_bias": False,
                   "layer_norm_epsilon": 1e-5, "mlp_hidden_act": "relu2", "n_shared_experts": 1,
                   "tie_word_embeddings": False, "dtype": str(dtype).removeprefix("torch.")}
    torch.manual_seed(seed)
    model = puzzle_model(config_json, dtype)
    randomize_seeded(model, seed, SSM_LEAVES)
    tensors = _split_experts(model.state_dict())
    if mtp:  # its MoE of its own width: a reference MoE layer's mixer
        moe_layer = puzzle_model({**config_json, "block_configs": [{"block_type": "moe", **PUZZLE_MTP_MOE}]}, dtype)
        randomize_seeded(moe_layer, seed + 1)
        moe = {k.split(".", 3)[3]: v for k, v in _split_experts(moe_layer.state_dict()).items()
               if k.startswith("model.layers.0.mixer.")}
        tensors.update(_mtp_block(tensors, pattern, dtype, top="model", moe=moe))
        config_json.update(num_nextn_predict_layers=1,
                           mtp_block_configs=[{"block_type": "attention"}, {"block_type": "moe", **PUZZLE_MTP_MOE}])
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    if remote_code:
        (path / "configuration_nemotron_h_puzzle.py").write_text(PUZZLE_CONFIG_CLASS)
        config_json["auto_map"] = {"AutoConfig": "configuration_nemotron_h_puzzle.NemotronHPuzzleConfig"}
    (path / "config.json").write_text(json.dumps(config_json, indent=2))
    return config_json


def _split_experts(state: dict) -> dict:
    out = {}
    for name, t in state.items():
        if name.endswith(("experts.up_proj", "experts.down_proj")):
            stem, leaf = name.rsplit(".", 1)
            out.update({f"{stem}.{e}.{leaf}.weight": t[e].clone() for e in range(t.shape[0])})
        else:
            out[name] = t.contiguous()
    return out


def puzzle_logits(path, ids: torch.Tensor) -> torch.Tensor:
    """Float64 logits of the Puzzle checkpoint at `path` through `puzzle_model` (the published names are the model's
    own, the per-expert tensors stacked back)."""
    config_json = json.loads((path / "config.json").read_text())
    model = puzzle_model(config_json)
    tensors = {}
    for f in sorted(path.glob("*.safetensors")):
        tensors.update({k: v for k, v in load_file(f).items() if not k.startswith("mtp.")})
    state = {}
    for name in model.state_dict():
        if name.endswith(("experts.up_proj", "experts.down_proj")):
            stem, leaf = name.rsplit(".", 1)
            state[name] = torch.stack([tensors.pop(f"{stem}.{e}.{leaf}.weight")
                                       for e in range(config_json["n_routed_experts"])])
        else:
            state[name] = tensors.pop(name)
    assert not tensors, f"tensors the reference does not hold: {sorted(tensors)[:3]}"
    model.load_state_dict(state)
    with torch.no_grad():
        return model(input_ids=ids).logits


def mamba2_rank_slice(state: dict, heads: int, groups: int, head_dim: int, n: int, tp: int, rank: int) -> dict:
    """What vLLM's MambaMixer2 loads on `rank` (n_groups % tp == 0): in_proj as MergedColumnParallelLinear of
    [z | x | B | C | dt], conv1d as one of [x | B | C] (each section narrowed to its rank's share), A_log, D, dt_bias and
    the norm's weight by sharded_weight_loader(0), out_proj's columns by RowParallelLinear."""

    def sections(t, sizes):
        parts, start = [], 0
        for size in sizes:
            parts.append(t[start + rank * size // tp:start + (rank + 1) * size // tp])
            start += size
        return torch.cat(parts)

    def chunk(t, dim=0):
        size = t.shape[dim] // tp
        return t.narrow(dim, rank * size, size)

    width, bc = heads * head_dim, groups * n
    return {"in_proj.weight": sections(state["in_proj.weight"], [width, width, bc, bc, heads]),
            "conv1d.weight": sections(state["conv1d.weight"], [width, bc, bc]),
            "conv1d.bias": sections(state["conv1d.bias"], [width, bc, bc]),
            "A_log": chunk(state["A_log"]), "D": chunk(state["D"]), "dt_bias": chunk(state["dt_bias"]),
            "norm.weight": chunk(state["norm.weight"]), "out_proj.weight": chunk(state["out_proj.weight"], 1)}
