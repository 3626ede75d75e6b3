"""Tensor lists shared by the header-only copies of DeepSeek-V3-style MoE checkpoints (DeepSeek-V3, Kimi-K2, GLM-4.x):
dense-or-MoE MLP blocks, the MTP layer's extra modules, and the whole checkpoint around per-layer attention."""

from __future__ import annotations

from typing import Callable

Tensors = list[tuple[str, str, tuple[int, ...]]]
Linear = Callable[[str, int, int], Tensors]  # (module name, out features, in features) -> its tensors


def mlp_block(cfg: dict, i: int, linear: Linear) -> Tensors:
    """Layer i's MLP: dense below first_k_dense_replace, else router + routed experts + the shared experts as one MLP
    of moe_intermediate_size × n_shared_experts; the router's correction bias unless the config routes without one
    (DeepSeek-V2's greedy / group_limited_greedy)."""
    h, p = cfg["hidden_size"], f"model.layers.{i}.mlp."
    if i < cfg["first_k_dense_replace"]:
        inter = cfg["intermediate_size"]
        return linear(p + "gate_proj", inter, h) + linear(p + "up_proj", inter, h) + linear(p + "down_proj", h, inter)
    moe, n_exp = cfg["moe_intermediate_size"], cfg["n_routed_experts"]
    out = [(p + "gate.weight", "BF16", (n_exp, h))]
    if cfg.get("topk_method") not in ("greedy", "group_limited_greedy"):
        out += [(p + "gate.e_score_correction_bias", "F32", (n_exp,))]
    for e, width in [(f"experts.{j}", moe) for j in range(n_exp)] + [
            ("shared_experts", moe * (cfg.get("n_shared_experts") or 1))]:
        out += linear(p + f"{e}.gate_proj", width, h) + linear(p + f"{e}.up_proj", width, h) + linear(
            p + f"{e}.down_proj", h, width)
    return out


def checkpoint(cfg: dict, attention: Callable[[dict, int], Tensors], linear: Linear) -> Tensors:
    """Every tensor: embeddings, each layer's norms, attention and MLP, the MTP layers' own modules, head."""
    h, vocab, n = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    out = [("model.embed_tokens.weight", "BF16", (vocab, h))]
    for i in range(n + cfg["num_nextn_predict_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", "BF16", (h,)), (p + "post_attention_layernorm.weight", "BF16", (h,))]
        out += attention(cfg, i) + mlp_block(cfg, i, linear)
        if i >= n:
            out += [(p + "embed_tokens.weight", "BF16", (vocab, h)), (p + "enorm.weight", "BF16", (h,)),
                    (p + "hnorm.weight", "BF16", (h,)), (p + "eh_proj.weight", "BF16", (h, 2 * h)),
                    (p + "shared_head.norm.weight", "BF16", (h,)), (p + "shared_head.head.weight", "BF16", (vocab, h))]
    return out + [("model.norm.weight", "BF16", (h,)), ("lm_head.weight", "BF16", (vocab, h))]
