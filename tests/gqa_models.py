"""Tiny checkpoints of the GQA families with config quirks (issue 33), built with transformers' own classes in float64.

Each family's transformers save writes its published tensor names (checked against the published layouts in
tests/gqa_real.py): per-expert `mlp.experts.N.*`, the routers and their biases under the published names, the
attention gates, q/k norms and sandwich norms. `build(family, path)` writes a random model (every parameter drawn,
norms around 1, router biases non-zero) and the config.json the published checkpoints carry for that family: the
keys vLLM reads, and none that transformers would not (so both engines read one model).

Geometry: heads 4 / kv 2 (group 2), head_dim 8, hidden 32 (Cohere2 keeps hidden // heads = head_dim, as Command A
does): TP 3 and 6 pad to 6 / 3 (the kv heads replicated twice at TP 6). Experts 6 of width 16 (vLLM's MoE blocks refuse TP > experts).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import torch
import transformers

ATTN = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8, vocab_size=128,
            max_position_embeddings=256, rms_norm_eps=1e-5)
MOE = dict(moe_intermediate_size=16, num_experts=6, num_experts_per_tok=2)

# family -> (transformers class prefix, config kwargs, keys written to config.json beside transformers' own)
FAMILIES: dict[str, tuple[str, dict, dict]] = {
    "ernie4_5_moe": ("Ernie4_5_Moe", dict(ATTN, num_hidden_layers=3, intermediate_size=48, moe_intermediate_size=16,
                                          moe_num_experts=6, moe_k=2, moe_num_shared_experts=2,
                                          moe_layer_start_index=1, use_bias=False, tie_word_embeddings=False), {}),
    "exaone4": ("Exaone4", dict(ATTN, num_hidden_layers=4, intermediate_size=48, sliding_window=4,
                                layer_types=["sliding_attention", "sliding_attention", "sliding_attention",
                                             "full_attention"]), {}),
    "exaone_moe": ("ExaoneMoe", dict(ATTN, **MOE, num_hidden_layers=3, intermediate_size=48, num_shared_experts=1,
                                     sliding_window=4, first_k_dense_replace=1,
                                     layer_types=["sliding_attention", "sliding_attention", "full_attention"]), {}),
    "cohere2": ("Cohere2", dict(ATTN, num_hidden_layers=4, intermediate_size=48, sliding_window=4,
                                layer_norm_eps=1e-5, logit_scale=0.25), {}),
    "cohere": ("Cohere", dict(ATTN, num_hidden_layers=2, intermediate_size=48, use_qk_norm=True, layer_norm_eps=1e-5,
                              logit_scale=0.25), {}),
    "cohere2_moe": ("Cohere2Moe", dict(ATTN, num_hidden_layers=3, intermediate_size=16, num_experts=6,
                                       num_experts_per_tok=2, num_shared_experts=1, sliding_window=4,
                                       shared_expert_combination_strategy="sum",
                                       mlp_layer_types=["dense", "sparse", "sparse"],
                                       prefix_dense_intermediate_size=48), {}),
    "afmoe": ("Afmoe", dict(ATTN, **MOE, num_hidden_layers=3, intermediate_size=48, num_shared_experts=1,
                            num_dense_layers=1, sliding_window=4, global_attn_every_n_layers=2, mup_enabled=True,
                            route_scale=2.0, score_func="sigmoid", route_norm=True, n_group=1, topk_group=1),
              {"score_func": "sigmoid", "route_norm": True, "n_group": 1, "topk_group": 1}),
    "laguna": ("Laguna", dict(ATTN, **MOE, num_hidden_layers=3, intermediate_size=48, shared_expert_intermediate_size=24,
                              sliding_window=4, num_attention_heads_per_layer=[4, 6, 4],
                              layer_types=["full_attention", "sliding_attention", "sliding_attention"],
                              mlp_layer_types=["dense", "sparse", "sparse"]), {}),
}


def build(family: str, path, seed: int = 0, dtype=torch.float64, **over) -> dict:
    """Write a tiny random checkpoint of `family` to `path` in its published form; returns its config.json."""
    prefix, kwargs, extra = FAMILIES[family]
    config = getattr(transformers, prefix + "Config")(**{**kwargs, **over})
    torch.manual_seed(seed)
    model = getattr(transformers, prefix + "ForCausalLM")(config).to(dtype).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if "norm" in name else 0.0, 0.3)
        for name, b in model.named_buffers():
            if b.is_floating_point() and ("bias" in name or "statics" in name):
                b.normal_(0.0, 0.3)
    model.save_pretrained(path)
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(extra)
    cfg.pop("transformers_version", None)
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return cfg


@contextmanager
def float64_throughout(family: str):
    """transformers' Laguna rounds its RMSNorm inputs, router logits and output gate through float32. A float64
    matmul's last bit depends on the matrix's width (BLAS blocking: q_proj with 48 rows vs 32 differs by ~1e-15 in the
    same rows), and a float32 rounding turns that into ~1e-7: the comparison keeps those steps in float64 (the same
    computation, without the narrowing), in the original and the derivative alike."""
    if family != "laguna":
        yield
        return
    from transformers.models.laguna import modeling_laguna

    def rms_norm(self, h):
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    widen = torch.Tensor.float
    with mock.patch.object(modeling_laguna.LagunaRMSNorm, "forward", rms_norm), \
            mock.patch.object(torch.Tensor, "float", lambda t: t if t.dtype == torch.float64 else widen(t)):
        yield


def build_with_mtp(family: str, path, seed: int = 0) -> Path:
    """`build`, plus one MTP layer in the family's published names (transformers does not save one): ERNIE-4.5's
    `model.mtp_block.0.*` with `mtp_emb_norm.0`, `mtp_hidden_norm.0`, `mtp_linear_proj.0`; EXAONE MoE's
    `mtp.layers.0.*` with `mtp.fc`, `mtp.norm` and its two pre-fc norms. The block is a dense decoder layer of random
    weights (layer 0's names: both families' first layer is dense)."""
    from safetensors.torch import load_file, save_file

    build(family, path, seed)
    file = path / "model.safetensors"
    tensors = load_file(file)
    h = tensors["model.embed_tokens.weight"].shape[1]
    g = torch.Generator().manual_seed(seed + 7)
    block = "model.mtp_block.0." if family == "ernie4_5_moe" else "mtp.layers.0."
    for name, t in list(tensors.items()):
        if name.startswith("model.layers.0."):
            noise = torch.randn(t.shape, generator=g, dtype=torch.float64).to(t.dtype) * 0.3
            tensors[block + name.removeprefix("model.layers.0.")] = (t + noise).contiguous()
    norms = (["model.mtp_emb_norm.0", "model.mtp_hidden_norm.0"] if family == "ernie4_5_moe"
             else ["mtp.norm", "mtp.pre_fc_norm_hidden", "mtp.pre_fc_norm_embedding"])
    for name in norms:
        tensors[name + ".weight"] = 1 + 0.3 * torch.randn(h, generator=g, dtype=torch.float64).to(tensors[block + "post_attention_layernorm.weight"].dtype)
    proj = "model.mtp_linear_proj.0.weight" if family == "ernie4_5_moe" else "mtp.fc.weight"
    tensors[proj] = (0.3 * torch.randn(h, 2 * h, generator=g, dtype=torch.float64)).to(tensors[block + "self_attn.q_proj.weight"].dtype)
    save_file(tensors, file, metadata={"format": "pt"})
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, "num_nextn_predict_layers": 1}, indent=2))
    return path


def logits(path, family: str, ids=None):
    """float64 logits of the checkpoint at `path` through transformers' class for `family` (sdpa attention: eager
    takes its softmax in float32)."""
    prefix = FAMILIES[family][0]
    model = getattr(transformers, prefix + "ForCausalLM").from_pretrained(path, dtype=torch.float64,
                                                                          attn_implementation="sdpa").eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    if ids is None:
        ids = torch.randint(0, 128, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), float64_throughout(family):
        return model(input_ids=ids).logits, model
