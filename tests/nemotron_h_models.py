"""Tiny Nemotron-H / Nemotron 3 checkpoints in the published layout, built with transformers' NemotronHForCausalLM.

transformers saves NemotronH under the published names already (`backbone.*`, per-expert `experts.E.up_proj`,
`lm_head`); `build_nemotron_h` adds what published configs state besides (`hybrid_override_pattern`,
`num_hidden_layers`, and with `mtp` the MTP block: `num_nextn_predict_layers`, `mtp_hybrid_override_pattern` and
`mtp.layers.{0,1}.*`, an attention layer then an MoE layer as Nemotron 3 Super ships them, which transformers skips on
load). Every parameter is random, the Mamba2 ones included (A_log, D, dt_bias, the gated norm's weight), so a padded
value in the wrong place changes the logits.
"""

from __future__ import annotations

import json

import torch
import transformers
from safetensors.torch import load_file, save_file

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


def _mtp_block(tensors: dict, pattern: str, dtype) -> dict:
    """Nemotron 3 Super's MTP block: `mtp.layers.0` an attention layer (enorm, hnorm, eh_proj, norm), `mtp.layers.1`
    an MoE layer (norm, final_layernorm), copies of the first such decoder layers' mixers."""
    h = next(t for n, t in tensors.items() if n == "backbone.norm_f.weight").shape[0]
    g = torch.Generator().manual_seed(11)
    attn, moe = (f"backbone.layers.{pattern.index(c)}." for c in "*E")
    out = {f"mtp.layers.0.{n}.weight": (1.0 + 0.3 * torch.randn(h, generator=g)).to(dtype)
           for n in ("enorm", "hnorm", "norm")}
    out["mtp.layers.0.eh_proj.weight"] = (0.3 * torch.randn(h, 2 * h, generator=g)).to(dtype)
    out["mtp.layers.1.norm.weight"] = (1.0 + 0.3 * torch.randn(h, generator=g)).to(dtype)
    out["mtp.layers.1.final_layernorm.weight"] = (1.0 + 0.3 * torch.randn(h, generator=g)).to(dtype)
    for name, t in tensors.items():
        for src, dst in ((attn, "mtp.layers.0."), (moe, "mtp.layers.1.")):
            if name.startswith(src + "mixer."):
                out[dst + name[len(src):]] = t.clone()
    return out
