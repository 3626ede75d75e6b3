"""Tiny Step-3 text checkpoints (`step3_text`) in the published layout, and a float64 reference forward written after
vLLM 0.32's step3_text.py (transformers has no Step-3 class; vLLM registers its own Step3TextConfig).

The reference follows Step3TextModel: embedding; per layer RMSNorm, the replicated `q_proj` / `k_proj` / `v_proj`
(share_q_dim, and head_dim for the one kv head each), `inter_norm` (RMSNorm over share_q_dim) then `wq` (heads x
head_dim), neox RoPE on q and k, causal multi-query attention scaled by head_dim ** -0.5, `o_proj`; RMSNorm, then on
the layers `moe_layers_enum` names the shared expert plus the routed experts (router `moe.gate`, softmax, top-k,
renormalized when norm_expert_weight; experts stacked `moe.{gate,up,down}_proj.weight`), elsewhere the dense MLP;
final RMSNorm, lm_head.
"""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from tests.bailing_models import _mlp, _rms, _rope, random_tensors, save

CONFIG = dict(architectures=["Step3TextForCausalLM"], model_type="step3_text", hidden_size=32, intermediate_size=48,
              num_attention_heads=4, num_attention_groups=1, num_hidden_layers=3, vocab_size=128, head_dim=8,
              share_q_dim=16, moe_intermediate_size=16, moe_num_experts=6, moe_top_k=2, share_expert_dim=24,
              norm_expert_weight=True, moe_layers_enum="1,2", rms_norm_eps=1e-5, rope_theta=10000.0,
              max_position_embedding=256, max_seq_len=256, tie_word_embeddings=False)


def build(path, seed: int = 0, dtype=torch.float64, **over) -> dict:
    """Write a random tiny Step-3 text checkpoint (published names) to `path`; returns its config.json."""
    cfg = {**CONFIG, **over}
    rand = random_tensors(seed, dtype)
    h, hd, heads, sq = cfg["hidden_size"], cfg["head_dim"], cfg["num_attention_heads"], cfg["share_q_dim"]
    e, moe = cfg["moe_num_experts"], cfg["moe_intermediate_size"]
    moe_layers = {int(i) for i in cfg["moe_layers_enum"].split(",")}

    t = {"model.embed_tokens.weight": rand(cfg["vocab_size"], h), "model.norm.weight": rand(h, mean=1.0),
         "lm_head.weight": rand(cfg["vocab_size"], h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t.update({p + "input_layernorm.weight": rand(h, mean=1.0), p + "post_attention_layernorm.weight": rand(h, mean=1.0),
                  p + "self_attn.q_proj.weight": rand(sq, h), p + "self_attn.k_proj.weight": rand(hd, h),
                  p + "self_attn.v_proj.weight": rand(hd, h), p + "self_attn.inter_norm.weight": rand(sq, mean=1.0),
                  p + "self_attn.wq.weight": rand(heads * hd, sq), p + "self_attn.o_proj.weight": rand(h, heads * hd)})
        if i in moe_layers:
            s = cfg["share_expert_dim"]
            t.update({p + "moe.gate.weight": rand(e, h), p + "moe.gate_proj.weight": rand(e, moe, h),
                      p + "moe.up_proj.weight": rand(e, moe, h), p + "moe.down_proj.weight": rand(e, h, moe),
                      p + "share_expert.gate_proj.weight": rand(s, h), p + "share_expert.up_proj.weight": rand(s, h),
                      p + "share_expert.down_proj.weight": rand(h, s)})
        else:
            w = cfg["intermediate_size"]
            t.update({p + "mlp.gate_proj.weight": rand(w, h), p + "mlp.up_proj.weight": rand(w, h),
                      p + "mlp.down_proj.weight": rand(h, w)})
    return save(path, t, cfg)


def logits(path, ids: torch.Tensor) -> torch.Tensor:
    """float64 logits of the Step-3 text checkpoint at `path` for one sequence of token ids."""
    cfg = json.loads((path / "config.json").read_text())
    cfg = cfg.get("text_config", cfg)
    t = {}
    for f in sorted(path.glob("*.safetensors")):
        t.update({k: v.double() for k, v in load_file(f).items()})
    heads, hd, eps = cfg["num_attention_heads"], cfg["head_dim"], cfg["rms_norm_eps"]
    moe_layers = {int(i) for i in cfg["moe_layers_enum"].split(",")}
    pos = torch.arange(len(ids))
    mask = torch.full((len(ids), len(ids)), float("-inf"), dtype=torch.float64).triu(1)
    x = t["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = _rms(x, t[p + "input_layernorm.weight"], eps)
        q = _rms(a @ t[p + "self_attn.q_proj.weight"].T, t[p + "self_attn.inter_norm.weight"], eps)
        q = (q @ t[p + "self_attn.wq.weight"].T).view(-1, heads, hd)
        k = (a @ t[p + "self_attn.k_proj.weight"].T).view(-1, 1, hd)
        v = (a @ t[p + "self_attn.v_proj.weight"].T).view(-1, 1, hd)
        q, k = _rope(q, pos, hd, cfg["rope_theta"]), _rope(k, pos, hd, cfg["rope_theta"])
        s = torch.einsum("qhd,khd->hqk", q, k.expand(-1, heads, -1)) * hd ** -0.5 + mask
        o = torch.einsum("hqk,khd->qhd", s.softmax(-1), v.expand(-1, heads, -1)).reshape(len(ids), heads * hd)
        x = x + o @ t[p + "self_attn.o_proj.weight"].T
        a = _rms(x, t[p + "post_attention_layernorm.weight"], eps)
        if i not in moe_layers:
            x = x + _mlp(a, t, p + "mlp.")
            continue
        probs = (a @ t[p + "moe.gate.weight"].T).softmax(-1)
        w, top = probs.topk(cfg["moe_top_k"], -1)
        if cfg.get("norm_expert_weight"):
            w = w / w.sum(-1, keepdim=True)
        out = _mlp(a, t, p + "share_expert.")
        for n in range(len(ids)):
            for j in range(top.shape[1]):
                e = int(top[n, j])
                gate, up, down = (t[p + f"moe.{m}_proj.weight"][e] for m in ("gate", "up", "down"))
                out[n] += w[n, j] * ((torch.nn.functional.silu(a[n] @ gate.T) * (a[n] @ up.T)) @ down.T)
        x = x + out
    return _rms(x, t["model.norm.weight"], eps) @ t["lm_head.weight"].T
