"""Helpers for tiny MoE models with an MTP block (DeepSeek-V3, Kimi-K2, GLM-4.x): random weights, the MTP layer."""

from __future__ import annotations

import torch
from safetensors.torch import load_file, save_file


def randomize(model) -> None:
    """O(1) random weights, norms around 1 and router correction biases, so padding errors would show."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(1.0, 0.3)
            elif p.ndim >= 2:
                p.normal_(0.0, 0.3)
            else:
                p.normal_(0.0, 0.5)  # biases
        for name, module in model.named_modules():
            if not name.endswith(".mlp"):
                continue
            gate = getattr(module, "gate", None)
            if getattr(gate, "e_score_correction_bias", None) is not None:
                gate.e_score_correction_bias.normal_(0.0, 0.1)


def randomize_seeded(model, seed: int, leaves: dict | None = None) -> None:
    """randomize()'s kind of values from a seeded generator: O(0.3) weights, norms and scales (`*global_scale`) around
    1, router correction biases O(0.1); `leaves` (a parameter's last name -> fn(shape, generator)) sets others."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaves and leaf in leaves:
                p.copy_(leaves[leaf](p.shape, g))
            elif "norm" in name or leaf.endswith("global_scale"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
        for m in model.modules():
            bias = getattr(m, "e_score_correction_bias", None)
            if bias is not None:
                bias.copy_(0.1 * torch.randn(bias.shape, generator=g))

# The MTP block's own modules besides its decoder layer: DeepSeek-V3 and GLM-4.x ship these; Hy3 has no embedding or
# shared head of its own (it uses the main model's) and a final_layernorm instead.
MTP_EXTRAS = ("enorm", "hnorm", "eh_proj", "embed_tokens", "shared_head.norm", "shared_head.head")
HY3_MTP_EXTRAS = ("enorm", "hnorm", "eh_proj", "final_layernorm")


def add_mtp_layer(path, cfg, dtype=torch.float64, extras=MTP_EXTRAS) -> None:
    """Append an MTP block at index num_hidden_layers, as DeepSeek-V3 and GLM-4.x ship it (transformers skips it)."""
    tensors = load_file(path / "model.safetensors")
    n, last = cfg.num_hidden_layers, cfg.num_hidden_layers - 1
    for name in list(tensors):
        if name.startswith(f"model.layers.{last}."):
            tensors[name.replace(f".{last}.", f".{n}.", 1)] = tensors[name].clone() + 0.5
    gen = torch.Generator().manual_seed(7)
    h, v = cfg.hidden_size, cfg.vocab_size
    shapes = {"enorm": (h,), "hnorm": (h,), "eh_proj": (h, 2 * h), "embed_tokens": (v, h), "shared_head.norm": (h,),
              "shared_head.head": (v, h), "final_layernorm": (h,)}
    for module in extras:
        tensors[f"model.layers.{n}.{module}.weight"] = torch.randn(shapes[module], generator=gen,
                                                                   dtype=torch.float64).to(dtype)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})


def build_with_mtp(tmp_path, model_type: str, kwargs: dict):
    """A tiny float64 `model_type` (transformers' own class, random O(1) weights) saved under `tmp_path/upstream` with an
    MTP layer appended: (model, path)."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.CONFIG_MAPPING[model_type](**kwargs)
    model = transformers.AutoModelForCausalLM.from_config(cfg, experts_implementation="eager").double().eval()
    randomize(model)
    path = tmp_path / "upstream"
    model.save_pretrained(path)
    add_mtp_layer(path, cfg)
    return model, path


def assert_same_logits(model, padded_path, label: str, vocab: int, rel_tol: float = 1e-12) -> float:
    """Load the padded checkpoint in float64 and compare its logits with `model`'s; returns max |Δ|.

    torch's grouped_mm has no float64 kernel, so experts run eagerly."""
    import transformers

    padded = transformers.AutoModelForCausalLM.from_pretrained(padded_path, dtype=torch.float64,
                                                              experts_implementation="eager").eval()
    ids = torch.randint(0, vocab, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = model(ids).logits, padded(ids).logits
    delta = (a - b).abs().max().item()
    print(f"{label}: max |Δ| = {delta}")
    assert delta <= rel_tol * a.abs().max().item(), f"{label}: max |Δ| = {delta}"
    return delta
