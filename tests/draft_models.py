"""Tiny EAGLE-3 draft models in their published layout, and their forward built from transformers' own layers.

A published EAGLE-3 draft (e.g. a `LlamaForCausalLMEagle3` single `model.safetensors`) holds 15 tensors under these
names, which is what vLLM's Eagle3LlamaForCausalLM / Eagle3Qwen3ForCausalLM load (`midlayer.` -> `layers.0.`):
`midlayer.{input_layernorm,hidden_norm,post_attention_layernorm}.weight`, `midlayer.self_attn.{q,k,v,o}_proj.weight`
(q/k/v take 2 x hidden inputs: the token's embedding next to the fused target hidden state), `midlayer.mlp.*`,
`fc.weight` [hidden, 3 x target_hidden], `norm.weight`, `lm_head.weight` [draft_vocab, hidden], `d2t` (I64
[draft_vocab]: target id - draft id) and `t2d` (BOOL [vocab]). Qwen3 drafts add `midlayer.self_attn.{q,k}_norm`.
Multi-layer drafts name their layers `layers.N.` (vLLM: layer 0 takes 2 x hidden, later ones hidden).

`eagle3_forward` is vLLM's Eagle3 draft forward (llama_eagle3.py / qwen3_eagle3.py: `combine_hidden_states`, then
`forward`, then `compute_logits` with the d2t scatter) written around transformers' LlamaDecoderLayer /
Qwen3DecoderLayer modules, whose attention and MLP are the real classes' (q/k/v widened to 2 x hidden for layer 0,
as vLLM does). The padded draft runs through the same code built from its padded config.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

# model_type of the draft's decoder layer -> (config class name, decoder layer class, architecture as published)
KINDS = {
    "llama": ("LlamaConfig", "LlamaDecoderLayer", "LlamaForCausalLMEagle3"),
    "qwen3": ("Qwen3Config", "Qwen3DecoderLayer", "Eagle3Qwen3ForCausalLM"),
}


def eagle3_config(kind: str = "llama", *, hidden: int = 64, heads: int = 4, kv: int = 2, head_dim: int = 16,
                  intermediate: int = 96, layers: int = 1, vocab: int = 96, draft_vocab: int | None = 48,
                  target_hidden: int | None = None, **extra) -> dict:
    """A draft config.json as published (flat, the decoder's model_type, EAGLE-3 keys at top level)."""
    cfg = {"architectures": [KINDS[kind][2]], "model_type": kind, "hidden_size": hidden,
           "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim,
           "intermediate_size": intermediate, "num_hidden_layers": layers, "vocab_size": vocab,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False,
           "rope_theta": 10000.0, "attention_bias": False}
    if draft_vocab is not None:
        cfg["draft_vocab_size"] = draft_vocab
    if target_hidden is not None:
        cfg["target_hidden_size"] = target_hidden
    cfg.update(extra)
    return cfg


def _prefix(i: int, layers: int, tensors: dict | None = None) -> str:
    if tensors is not None:
        return "midlayer." if any(k.startswith("midlayer.") for k in tensors) else f"layers.{i}."
    return "midlayer." if layers == 1 else f"layers.{i}."


def eagle3_tensors(cfg: dict, seed: int = 0, dtype=torch.float64, embed: bool = False) -> dict[str, torch.Tensor]:
    """Random O(0.3) weights (norms around 1) under the published names; d2t/t2d for a draft vocab that is a sorted
    random subset of the target's."""
    g = torch.Generator().manual_seed(seed)
    h, nh, nkv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    inter, layers, vocab = cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    draft_vocab = cfg.get("draft_vocab_size") or vocab
    th = cfg.get("target_hidden_size") or h

    def w(*shape):
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 0.3).to(dtype)

    def norm(n):
        return (1 + torch.randn((n,), generator=g, dtype=torch.float64) * 0.3).to(dtype)

    t: dict[str, torch.Tensor] = {"fc.weight": w(h, 3 * th), "norm.weight": norm(h), "lm_head.weight": w(draft_vocab, h)}
    for i in range(layers):
        p, width = _prefix(i, layers), 2 * h if i == 0 else h
        t.update({p + "input_layernorm.weight": norm(h), p + "post_attention_layernorm.weight": norm(h),
                  p + "self_attn.q_proj.weight": w(nh * hd, width), p + "self_attn.k_proj.weight": w(nkv * hd, width),
                  p + "self_attn.v_proj.weight": w(nkv * hd, width), p + "self_attn.o_proj.weight": w(h, nh * hd),
                  p + "mlp.gate_proj.weight": w(inter, h), p + "mlp.up_proj.weight": w(inter, h),
                  p + "mlp.down_proj.weight": w(h, inter)})
        if i == 0:
            t[p + "hidden_norm.weight"] = norm(h)
        if cfg["model_type"] == "qwen3":
            t[p + "self_attn.q_norm.weight"] = norm(hd)
            t[p + "self_attn.k_norm.weight"] = norm(hd)
    if embed:
        t["embed_tokens.weight"] = w(vocab, h)
    if draft_vocab != vocab:
        ids = torch.sort(torch.randperm(vocab, generator=g)[:draft_vocab]).values
        t["d2t"] = ids - torch.arange(draft_vocab)
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[ids] = True
        t["t2d"] = t2d
    return t


def build_eagle3(path: Path, cfg: dict, seed: int = 0, dtype=torch.float64, embed: bool = False,
                 speculators: bool = False) -> Path:
    """The draft at `path`; `speculators`: in the speculators format (speculators_config(cfg), `layers.0.` names)."""
    path.mkdir(parents=True, exist_ok=True)
    tensors = eagle3_tensors(cfg, seed, dtype, embed)
    if speculators:
        tensors = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v
                   for k, v in tensors.items()}
        cfg = speculators_config(cfg)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path


def _layer_config(cfg: dict):
    """transformers config for the draft's decoder layer. A padded Llama draft relabelled to Mistral (hidden % heads
    != 0) is built with MistralConfig: transformers' Llama and Mistral decoder layers are the same math (so is a
    padded speculators-format Llama draft, which keeps model_type llama in its nested config)."""
    kind = cfg["model_type"]
    if kind == "llama" and cfg["hidden_size"] % cfg["num_attention_heads"]:
        kind = "mistral"  # a padded speculators-format Llama draft keeps model_type llama in its nested config
    keys = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type", "draft_vocab_size",
                                                     "target_hidden_size", "eagle_aux_hidden_state_layer_ids")}
    cls = {"llama": "LlamaConfig", "mistral": "MistralConfig", "qwen3": "Qwen3Config"}[kind]
    c = getattr(transformers, cls)(**keys)
    c._attn_implementation = "eager"
    return c


def speculators_config(cfg: dict, verifier: str = "org/target", tokens: int = 3) -> dict:
    """The same draft in the speculators format (vllm/transformers_utils/configs/speculators): the decoder's config
    under transformer_layer_config, the EAGLE-3 keys and the target (verifier) at top level. Its layers are named
    `layers.N.` even when there is one."""
    layer = {k: v for k, v in cfg.items() if k not in ("architectures", "draft_vocab_size", "target_hidden_size")}
    out = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
           "transformer_layer_config": layer, "draft_vocab_size": cfg.get("draft_vocab_size"),
           "norm_before_residual": False,
           "speculators_config": {"proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": tokens}],
                                  "verifier": {"name_or_path": verifier, "architectures": ["LlamaForCausalLM"]}}}
    if cfg.get("target_hidden_size"):
        out["target_hidden_size"] = cfg["target_hidden_size"]
    return out


def flat_config(cfg: dict) -> dict:
    """A speculators config as the flat draft config vLLM builds from it (update_eagle3); a flat one as it is."""
    if "transformer_layer_config" not in cfg:
        return cfg
    flat = dict(cfg["transformer_layer_config"])
    flat.update({k: cfg[k] for k in ("draft_vocab_size", "target_hidden_size") if cfg.get(k) is not None})
    return flat


def _layers(cfg: dict, tensors: dict[str, torch.Tensor]) -> list:
    kind = cfg["model_type"]
    if kind == "llama" and cfg["hidden_size"] % cfg["num_attention_heads"]:
        kind = "mistral"
    layer_cls = {"llama": transformers.models.llama.modeling_llama.LlamaDecoderLayer,
                 "mistral": transformers.models.mistral.modeling_mistral.MistralDecoderLayer,
                 "qwen3": transformers.models.qwen3.modeling_qwen3.Qwen3DecoderLayer}[kind]
    c = _layer_config(cfg)
    out = []
    for i in range(cfg["num_hidden_layers"]):
        layer = layer_cls(c, layer_idx=i).to(torch.float64).eval()
        p = _prefix(i, cfg["num_hidden_layers"], tensors)
        if i == 0:  # vLLM widens q/k/v of the first layer to [embeds | hidden]
            for proj in ("q_proj", "k_proj", "v_proj"):
                old = getattr(layer.self_attn, proj)
                setattr(layer.self_attn, proj, torch.nn.Linear(2 * c.hidden_size, old.out_features, bias=False,
                                                                dtype=torch.float64))
        state = {k[len(p):]: v.to(torch.float64) for k, v in tensors.items()
                 if k.startswith(p) and not k.startswith(p + "hidden_norm")}
        layer.load_state_dict(state, strict=True)
        out.append(layer)
    return out


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def eagle3_forward(path: Path, embeds: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
    """Target-vocab logits of the draft at `path` in float64, for token embeddings [T, hidden] and the target's
    three aux hidden states concatenated [T, 3 x target_hidden] (vLLM's Eagle3 forward, causal over T)."""
    cfg = flat_config(json.loads((path / "config.json").read_text()))
    tensors = {k: v for f in sorted(path.glob("*.safetensors")) for k, v in load_file(f).items()}
    eps = cfg["rms_norm_eps"]
    layers = _layers(cfg, tensors)
    c = _layer_config(cfg)
    rope = transformers.models.llama.modeling_llama.LlamaRotaryEmbedding(c).to(torch.float64)
    T = embeds.shape[0]
    positions = torch.arange(T)[None]
    x = embeds[None].to(torch.float64)
    pos_emb = rope(x, positions)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    hidden = aux[None].to(torch.float64) @ tensors["fc.weight"].to(torch.float64).T  # combine_hidden_states
    residual = None
    with torch.no_grad():
        for i, layer in enumerate(layers):
            if i == 0:
                p = _prefix(0, len(layers), tensors)
                e = layer.input_layernorm(x)
                residual = hidden  # norm after residual (vLLM's default)
                hidden = torch.cat([e, _rms(hidden, tensors[p + "hidden_norm.weight"].to(torch.float64), eps)], -1)
            else:
                hidden = hidden + residual
                residual = hidden
                hidden = layer.input_layernorm(hidden)
            attn = layer.self_attn(hidden_states=hidden, position_embeddings=pos_emb, attention_mask=mask)[0]
            hidden = attn + residual
            residual = hidden
            hidden = layer.mlp(layer.post_attention_layernorm(hidden))
        out = _rms(hidden + residual, tensors["norm.weight"].to(torch.float64), eps)
        logits = out[0] @ tensors["lm_head.weight"].to(torch.float64).T
    if "d2t" not in tensors:
        return logits
    d2t = tensors["d2t"]
    full = torch.full((T, cfg["vocab_size"]), float("-inf"), dtype=torch.float64)
    full[:, torch.arange(d2t.shape[0]) + d2t] = logits
    return full


# ---------------------------------------------------------------------------------------------------------------------
# The serving tier's pair: a tiny Llama target (tests/serve_models.py "llama", made nearly a bigram model) and an
# EAGLE-3 draft for it that drafts well, both in BF16.

QUIET = 0.03
SERVE_AUX_LAYERS = [0, 1, 2]  # the target's embeddings and its two layers' outputs (vLLM: eagle_aux_hidden_state_layer_ids)


def build_serving_target(path: Path) -> Path:
    """serve_models' tiny Llama (hidden 128, 4 heads / 2 kv of 32, 2 layers, vocab 512) made nearly a bigram model:
    o_proj and down_proj shrink tenfold, embedding and head grow tenfold (as serve_models._drafting_mtp does), so
    what it predicts after a token depends mostly on that token, and a draft can guess it."""
    from tests import serve_models

    serve_models.build("llama", path)
    file = path / "model.safetensors"
    tensors = load_file(file)
    for name, t in tensors.items():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            tensors[name] = (t.float() * QUIET).to(t.dtype)
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            tensors[name] = (t.float() * 10).to(t.dtype)
    save_file(tensors, file, metadata={"format": "pt"})
    return path


def build_serving_draft(path: Path, target: Path, draft_vocab: int = 384, seed: int = 0) -> Path:
    """An EAGLE-3 draft (Llama layer, 4 heads / 2 kv of 64) for `target` whose drafts are often right.

    Its attention attends to the current position only: q and k read the token's normed embedding through the same
    random map per kv head (a position's own score, |W e|^2 / sqrt(64), dwarfs every other position's, and RoPE leaves
    a position's own score as it is), v copies half of that embedding per kv head, and o_proj puts it back (heads 0
    and 2; heads 1 and 3 write nothing). So the draft's hidden state is close to the next token's own normed
    embedding, its final norm is the target's, and its head, the target's head rows for a sorted random half of the
    vocab (d2t), guesses what the bigram-like target says after that token: right often, not always (half the
    tokens are not in its vocab). fc and the MLP are small random maps, so every tensor counts."""
    tcfg = json.loads((target / "config.json").read_text())
    h, vocab = tcfg["hidden_size"], tcfg["vocab_size"]
    hd = h // 2  # two kv heads carry the whole embedding
    cfg = eagle3_config("llama", hidden=h, heads=4, kv=2, head_dim=hd, intermediate=256, vocab=vocab,
                        draft_vocab=draft_vocab, max_position_embeddings=tcfg["max_position_embeddings"],
                        rms_norm_eps=tcfg["rms_norm_eps"], eagle_aux_hidden_state_layer_ids=SERVE_AUX_LAYERS)
    t = eagle3_tensors(cfg, seed=seed, dtype=torch.float32)
    g = torch.Generator().manual_seed(seed + 1)
    small = {"fc.weight": 0.002, "midlayer.mlp.gate_proj.weight": 0.1, "midlayer.mlp.up_proj.weight": 0.1,
             "midlayer.mlp.down_proj.weight": 0.02}
    for name, scale in small.items():
        t[name] = t[name] / 0.3 * scale
    for name in ("midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
                 "midlayer.post_attention_layernorm.weight"):
        t[name] = torch.ones_like(t[name])
    target_tensors = load_file(target / "model.safetensors")
    t["norm.weight"] = target_tensors["model.norm.weight"].float()
    q, k, v = (torch.zeros(n * hd, 2 * h) for n in (4, 2, 2))
    o = torch.zeros(h, 4 * hd)
    for j in range(2):  # kv head j serves q heads 2j and 2j + 1
        w = torch.randn(hd, h, generator=g) * 0.3
        k[j * hd:(j + 1) * hd, :h] = w
        q[2 * j * hd:(2 * j + 1) * hd, :h] = w
        q[(2 * j + 1) * hd:(2 * j + 2) * hd, :h] = w
        v[j * hd:(j + 1) * hd, j * hd:(j + 1) * hd] = torch.eye(hd)  # the embedding's coordinates j*hd ...
        o[j * hd:(j + 1) * hd, 2 * j * hd:(2 * j + 1) * hd] = torch.eye(hd)
    t.update({"midlayer.self_attn.q_proj.weight": q, "midlayer.self_attn.k_proj.weight": k,
              "midlayer.self_attn.v_proj.weight": v, "midlayer.self_attn.o_proj.weight": o})
    head = target_tensors["lm_head.weight"].float()
    ids = torch.arange(draft_vocab) + t["d2t"]
    t["lm_head.weight"] = head[ids]
    path.mkdir(parents=True, exist_ok=True)
    save_file({n: x if x.dtype in (torch.int64, torch.bool) else x.to(torch.bfloat16) for n, x in t.items()},
              path / "model.safetensors", metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path


# ---------------------------------------------------------------------------------------------------------------------
# Qwen3 DSpark drafts (vLLM qwen3_dspark.py over qwen3_dflash.py), in the names vLLM's loader reads: `layers.N.` Qwen3
# decoder layers, fc / hidden_norm over the target's aux hidden states, norm, lm_head, embed_tokens, the Markov head
# (`markov_head.markov_w1` [vocab, r], `markov_head.markov_w2` [draft_vocab, r]), the confidence head
# (`confidence_head.proj`), `mask_embedding` and, with dflash_config.attention_sink_bias, a per-head sink bias per layer.


def dspark_config(*, hidden: int = 64, heads: int = 4, kv: int = 2, head_dim: int = 16, intermediate: int = 96,
                  layers: int = 2, vocab: int = 96, markov_rank: int = 8, block_size: int = 4,
                  sinks: bool = False, architecture: str = "DSparkDraftModel") -> dict:
    return {"architectures": [architecture], "model_type": "qwen3", "hidden_size": hidden,
            "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim,
            "intermediate_size": intermediate, "num_hidden_layers": layers, "vocab_size": vocab,
            "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False,
            "rope_theta": 10000.0, "attention_bias": False, "markov_rank": markov_rank, "block_size": block_size,
            "enable_confidence_head": True, "confidence_head_with_markov": True,
            "dflash_config": {"mask_token_id": vocab - 1, "target_layer_ids": [0, 1, 2], "causal": False,
                              "attention_sink_bias": sinks}}


def dspark_tensors(cfg: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    h, nh, nkv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    inter, vocab, r = cfg["intermediate_size"], cfg["vocab_size"], cfg["markov_rank"]

    def w(*shape):
        return torch.randn(shape, generator=g, dtype=torch.float64) * 0.3

    def norm(n):
        return 1 + torch.randn((n,), generator=g, dtype=torch.float64) * 0.3

    t = {"fc.weight": w(h, 3 * h), "hidden_norm.weight": norm(h), "norm.weight": norm(h), "lm_head.weight": w(vocab, h),
         "embed_tokens.weight": w(vocab, h), "markov_head.markov_w1.weight": w(vocab, r),
         "markov_head.markov_w2.weight": w(vocab, r), "confidence_head.proj.weight": w(1, h + r).float(),
         "confidence_head.proj.bias": w(1).float(), "mask_embedding": w(h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        t.update({p + "input_layernorm.weight": norm(h), p + "post_attention_layernorm.weight": norm(h),
                  p + "self_attn.q_proj.weight": w(nh * hd, h), p + "self_attn.k_proj.weight": w(nkv * hd, h),
                  p + "self_attn.v_proj.weight": w(nkv * hd, h), p + "self_attn.o_proj.weight": w(h, nh * hd),
                  p + "self_attn.q_norm.weight": norm(hd), p + "self_attn.k_norm.weight": norm(hd),
                  p + "mlp.gate_proj.weight": w(inter, h), p + "mlp.up_proj.weight": w(inter, h),
                  p + "mlp.down_proj.weight": w(h, inter)})
        if cfg["dflash_config"].get("attention_sink_bias"):
            t[p + "self_attn.attention_sink_bias"] = w(nh) * 3
    return t


def build_dspark(path: Path, cfg: dict, seed: int = 0) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    save_file(dspark_tensors(cfg, seed), path / "model.safetensors", metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path


def dspark_forward(path: Path, aux: torch.Tensor, block: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """Draft logits (base logits + the Markov bias of `prev` tokens) of the DSpark draft at `path` in float64, as
    vLLM's DFlash backbone computes them: the context's K/V from each layer's k/v_proj over hidden_norm(fc(aux))
    (aux: [C, 3 x hidden], positions 0..C-1), the block's embeddings [B, hidden] (positions C..C+B-1) through the
    Qwen3 layers, each block query attending to every context and block position (no causal mask), with the per-head
    sink bias where the draft has one; transformers' Qwen3DecoderLayer modules do every projection and norm."""
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer, apply_rotary_pos_emb

    cfg = json.loads((path / "config.json").read_text())
    t = {k: v.to(torch.float64) for f in sorted(path.glob("*.safetensors")) for k, v in load_file(f).items()}
    c = _layer_config({k: v for k, v in cfg.items() if k not in ("markov_rank", "block_size", "dflash_config",
                                                                  "enable_confidence_head",
                                                                  "confidence_head_with_markov")})
    eps, hd, nh, nkv = cfg["rms_norm_eps"], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    rope = transformers.models.llama.modeling_llama.LlamaRotaryEmbedding(c).to(torch.float64)
    C, B = aux.shape[0], block.shape[0]
    ctx = _rms(aux.to(torch.float64) @ t["fc.weight"].T, t["hidden_norm.weight"], eps)
    cos, sin = rope(ctx[None], torch.arange(C + B)[None])
    x, residual = block.to(torch.float64), None
    with torch.no_grad():
        for i in range(cfg["num_hidden_layers"]):
            p = f"layers.{i}."
            layer = Qwen3DecoderLayer(c, layer_idx=i).to(torch.float64).eval()
            layer.load_state_dict({k[len(p):]: v for k, v in t.items()
                                   if k.startswith(p) and not k.endswith("attention_sink_bias")}, strict=True)
            if residual is None:
                residual, h = x, layer.input_layernorm(x)
            else:
                residual = x + residual
                h = layer.input_layernorm(residual)
            a = layer.self_attn
            both = torch.cat([ctx, h])  # keys and values: the context's, then the block's
            q = a.q_norm(a.q_proj(h).view(B, nh, hd)).transpose(0, 1)[None]
            k = a.k_norm(a.k_proj(both).view(C + B, nkv, hd)).transpose(0, 1)[None]
            v = a.v_proj(both).view(C + B, nkv, hd).transpose(0, 1)
            q, _ = apply_rotary_pos_emb(q, q, cos[:, C:], sin[:, C:])
            _, k = apply_rotary_pos_emb(k, k, cos, sin)
            k, v = k[0].repeat_interleave(nh // nkv, 0), v.repeat_interleave(nh // nkv, 0)
            scores = q[0] @ k.transpose(1, 2) * hd ** -0.5  # [heads, B, C + B], no mask
            sink = t.get(p + "self_attn.attention_sink_bias")
            if sink is not None:
                scores = torch.cat([scores, sink[:, None, None].expand(nh, B, 1)], -1)
            probs = scores.softmax(-1)[..., :C + B]
            out = a.o_proj((probs @ v).transpose(0, 1).reshape(B, nh * hd))
            residual = out + residual
            x = layer.mlp(layer.post_attention_layernorm(residual))
        final = _rms(x + residual, t["norm.weight"], eps)
    markov = t["markov_head.markov_w1.weight"][prev] @ t["markov_head.markov_w2.weight"].T
    return final @ t["lm_head.weight"].T + markov
