"""Tiny MiMo-V2-Flash checkpoints in the published layout, built with transformers' MiMoV2FlashForCausalLM.

transformers saves fused experts (`mlp.experts.gate_up_proj`) and `self_attn.sinks`; MiMo-V2-Flash as published
(and as vLLM's MiMoV2 loader reads it) has per-expert `mlp.experts.<e>.{gate,up,down}_proj.weight` and
`self_attn.attention_sink_bias`, which transformers' conversion mapping turns back on load. `build_mimo` rewrites the
saved file to the published names, adds the config keys vLLM reads (hybrid_layer_pattern, swa_*, moe_layer_freq,
add_swa_attention_sink_bias, sliding_window_size, num_nextn_predict_layers) and one MTP layer (`model.mtp.layers.0.*`:
enorm, hnorm, eh_proj, SWA attention with sinks, dense MLP, its norms), which transformers ignores on load.
"""

from __future__ import annotations

import json

import torch
import transformers
from safetensors.torch import load_file, save_file

LAYER_TYPES = ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]
TEXT = dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=40, num_hidden_layers=4,
            num_attention_heads=8, num_key_value_heads=2, head_dim=16, v_head_dim=8, vocab_size=256,
            max_position_embeddings=256, sliding_window=6, n_routed_experts=8, num_experts_per_tok=2,
            layer_types=LAYER_TYPES, mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
            attention_value_scale=0.707, rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 5_000_000.0, "partial_rotary_factor": 0.334},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.334}})


def vllm_keys(cfg: dict) -> dict:
    """The keys MiMo-V2-Flash's published config.json sets for vLLM's MiMoV2 classes (same values transformers reads)."""
    return {"hybrid_layer_pattern": [int(t == "sliding_attention") for t in cfg["layer_types"]],
            "moe_layer_freq": [int(t == "sparse") for t in cfg["mlp_layer_types"]],
            "swa_num_attention_heads": cfg["num_attention_heads"],
            "swa_num_key_value_heads": 2 * cfg["num_key_value_heads"], "swa_head_dim": cfg["head_dim"],
            "swa_v_head_dim": cfg["v_head_dim"], "add_swa_attention_sink_bias": True,
            "add_full_attention_sink_bias": False, "sliding_window_size": cfg["sliding_window"] - 1,
            "layernorm_epsilon": 1e-5, "num_nextn_predict_layers": 1, "scoring_func": "sigmoid",
            "topk_method": "noaux_tc", "swa_rope_theta": 10000.0, "rope_theta": 5000000.0,
            "partial_rotary_factor": 0.334}


def build_mimo(path, seed: int = 0, dtype=torch.float64, mtp: bool = True, **over) -> dict:
    """Save a tiny MiMo-V2-Flash in the published layout under `path`; returns its config.json."""
    torch.manual_seed(seed)
    text = {**TEXT, **over}
    cfg = transformers.MiMoV2FlashConfig(**text)
    cfg.architectures = ["MiMoV2FlashForCausalLM"]
    model = transformers.MiMoV2FlashForCausalLM(cfg).to(dtype).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(1.0, 0.3)
            elif name.endswith("sinks"):
                p.normal_(0.0, 1.0)
            else:
                p.normal_(0.0, 0.3)
        for m in model.modules():
            if getattr(m, "e_score_correction_bias", None) is not None:
                m.e_score_correction_bias.normal_(0.0, 0.1)
    model.save_pretrained(path)
    file = path / "model.safetensors"
    saved = load_file(file)
    out = {}
    for name, t in saved.items():
        if name.endswith("mlp.experts.gate_up_proj"):
            half = t.shape[1] // 2
            for e in range(t.shape[0]):
                out[name.replace("gate_up_proj", f"{e}.gate_proj.weight")] = t[e, :half].contiguous()
                out[name.replace("gate_up_proj", f"{e}.up_proj.weight")] = t[e, half:].contiguous()
        elif name.endswith("mlp.experts.down_proj"):
            for e in range(t.shape[0]):
                out[name.replace("down_proj", f"{e}.down_proj.weight")] = t[e].contiguous()
        elif name.endswith("self_attn.sinks"):
            out[name.replace("sinks", "attention_sink_bias")] = t
        else:
            out[name] = t
    if mtp:
        out.update(_mtp_layer(out, text, dtype))
    save_file(out, file, metadata={"format": "pt"})
    config = json.loads((path / "config.json").read_text())
    config.update(vllm_keys(text))
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return config


def _mtp_layer(tensors: dict, text: dict, dtype) -> dict:
    """One MTP layer in vLLM's MiMoV2MTP layout: SWA attention like layer 1's, a dense MLP like layer 0's."""
    h, p = text["hidden_size"], "model.mtp.layers.0."
    g = torch.Generator().manual_seed(7)
    out = {p + n: (1.0 + 0.3 * torch.randn(h, generator=g)).to(dtype)
           for n in ("enorm.weight", "hnorm.weight", "input_layernorm.weight", "pre_mlp_layernorm.weight",
                     "final_layernorm.weight")}
    out[p + "eh_proj.weight"] = (0.3 * torch.randn(h, 2 * h, generator=g)).to(dtype)
    for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
        out[p + f"self_attn.{n}.weight"] = tensors[f"model.layers.1.self_attn.{n}.weight"].clone()
    out[p + "self_attn.attention_sink_bias"] = tensors["model.layers.1.self_attn.attention_sink_bias"].clone()
    for n in ("gate_proj", "up_proj", "down_proj"):
        out[p + f"mlp.{n}.weight"] = tensors[f"model.layers.0.mlp.{n}.weight"].clone()
    return out
