"""A tiny DeepSeek-V4 built with transformers' own class, saved under DeepSeek's PUBLISHED tensor names.

transformers 5.24 saves a V4 under names of its own making (`model.layers.N.attn.norm.weight` for the attention's
kv_norm, `model.embed_tokens.weight`, `model.hc_head.hc_fn`), none of which vLLM's loader reads. The published names
(DeepSeek-V4-Flash's model.safetensors.index.json, as vLLM's deepseek_v4 loader and transformers' own conversion
mapping read them) have no `model.` prefix: `embed.weight`, `head.weight`, `norm.weight`, `hc_head_fn`,
`layers.N.attn.{wq_a,wq_b,wkv,q_norm,kv_norm,wo_a,wo_b,attn_sink}`, `attn.compressor.{wkv,wgate,norm,ape}`,
`attn.indexer.{wq_b,weights_proj}` and `attn.indexer.compressor.*`, `attn_norm`, `ffn_norm`, `hc_attn_*`, `hc_ffn_*`,
`ffn.gate.{weight,bias,tid2eid}`, `ffn.experts.E.w{1,2,3}`, `ffn.shared_experts.w{1,2,3}`, and the MTP block
`mtp.0.*` (the same layer, plus `e_proj`, `h_proj`, `enorm`, `hnorm`, `norm`, `hc_head_*`; transformers ignores it).
`published_state_dict` writes exactly those names; transformers reads them back through its conversion mapping.

The tiny shape fits vLLM's CPU path too (see tests/serve_dsv4.py): 64 routed experts with top-k 6 (the CPU router
takes 64/128/256/384 experts and top-k 6 or 8), o_lora_rank a multiple of 32, bf16 or fp16 for serving.
"""

from __future__ import annotations

import json
import re

import torch

# 4 heads in 2 o_groups (2 heads each): TP 3 pads to 6 heads / 3 groups, TP 6 to 12 heads / 6 groups.
TINY = dict(
    vocab_size=160, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, head_dim=64,
    q_lora_rank=32, o_groups=2, o_lora_rank=32, index_n_heads=2, index_head_dim=32, index_topk=4,
    n_routed_experts=64, num_experts_per_tok=6, n_shared_experts=1, moe_intermediate_size=32,
    sliding_window=8, hc_mult=2, hc_sinkhorn_iters=4, hc_eps=1e-6, max_position_embeddings=256, rms_norm_eps=1e-5,
    tie_word_embeddings=False, num_nextn_predict_layers=1, routed_scaling_factor=1.5, scoring_func="sqrtsoftplus",
    swiglu_limit=10.0, rope_theta=10000.0, compress_rope_theta=160000.0, bos_token_id=0, eos_token_id=1,
)
# Published configs spell these the legacy way (transformers folds them in; vLLM reads compress_ratios): one sliding,
# one CSA (ratio 4, with the indexer), one HCA (ratio 128) layer, then the MTP layer (ratio 0); one hash-routed layer.
LEGACY = dict(compress_ratios=[0, 4, 128, 0], num_hash_layers=1, qk_rope_head_dim=16, topk_method="noaux_tc",
              norm_topk_prob=True, expert_dtype="bf16")
# The serving fixture, at vLLM's CPU limits: its compressor takes head_dim 512 (main) or 128 (indexer) only
# (cpu_compressor.py), its MoE asserts n_routed_experts % tp == 0 (cpu/model.py) and its router takes 64/128/256/384
# experts with top-k 6 or 8, so 384 experts, top-6, serve at TP 1, 3 and 6; rope 64 as published.
# Decisive in bfloat16 (vLLM's CPU path computes and returns logits in bfloat16, where a random tiny model's greedy
# steps tie or nearly tie; measured: such near-ties flip between TP sizes of the unpadded original itself): its three
# layers are hash-routed (a score router's near-ties among 384 experts flip under bfloat16 noise), the attention and
# expert outputs scaled by 0.3 and the head made 5 x a permutation of the embedding, so each step's next token leads
# its runner-up by at least 0.49 in float32 while the layers still move the logits.
SERVE = dict(head_dim=512, qk_rope_head_dim=64, index_head_dim=128, n_routed_experts=384, num_experts_per_tok=6,
             num_hash_layers=3, seed=1, decisive=True)


def config_kwargs(**overrides) -> dict:
    """transformers DeepseekV4Config kwargs of the tiny model."""
    rope = overrides.pop("qk_rope_head_dim", LEGACY["qk_rope_head_dim"])
    hashed = overrides.pop("num_hash_layers", LEGACY["num_hash_layers"])
    kw = dict(TINY, **overrides)
    kw["layer_types"] = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
    kw["mlp_layer_types"] = ["hash_moe"] * hashed + ["moe"] * (3 - hashed)
    kw["compress_rates"] = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
    kw["partial_rotary_factor"] = rope / kw["head_dim"]
    return kw


def published_config(**overrides) -> dict:
    """config.json as DeepSeek publishes it (legacy keys: compress_ratios, num_hash_layers, qk_rope_head_dim)."""
    cfg = dict(TINY)
    cfg.update(LEGACY)
    cfg.update(overrides)
    cfg.update(architectures=["DeepseekV4ForCausalLM"], model_type="deepseek_v4", torch_dtype="bfloat16",
               hidden_act="silu", attention_bias=False, attention_dropout=0.0, initializer_range=0.02, use_cache=True)
    return cfg


def build_model(dtype=torch.float64, seed: int = 0, decisive: bool = False, **overrides):
    """The tiny DeepseekV4ForCausalLM with O(1) random weights (sinks too), in `dtype`, eval mode (`decisive`: SERVE)."""
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.DeepseekV4Config(**config_kwargs(**overrides))
    model = transformers.AutoModelForCausalLM.from_config(cfg, experts_implementation="eager").to(dtype).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(1.0, 0.3)
            elif name.endswith("sinks"):
                p.normal_(0.0, 1.0)
            elif p.ndim >= 2:
                p.normal_(0.0, 0.3)
            else:
                p.normal_(0.0, 0.5)
        for name, buf in model.named_buffers():
            if name.endswith("tid2eid"):  # hash routing: each token its own experts
                g = torch.Generator().manual_seed(3)
                buf.copy_(torch.stack([torch.randperm(cfg.n_routed_experts, generator=g)[:cfg.num_experts_per_tok]
                                       for _ in range(cfg.vocab_size)]))
    if decisive:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith(("o_b_proj.weight", "experts.down_proj", "shared_experts.down_proj.weight")):
                    p.mul_(0.3)
            perm = torch.randperm(cfg.vocab_size, generator=torch.Generator().manual_seed(5))
            model.lm_head.weight.copy_(5.0 * model.model.embed_tokens.weight[perm])
    return model


# transformers module path (after `model.layers.N.`) -> published path (after `layers.N.`)
_LAYER = [
    (r"self_attn\.q_a_proj\.", "attn.wq_a."), (r"self_attn\.q_a_norm\.", "attn.q_norm."),
    (r"self_attn\.q_b_proj\.", "attn.wq_b."), (r"self_attn\.kv_proj\.", "attn.wkv."),
    (r"self_attn\.kv_norm\.", "attn.kv_norm."), (r"self_attn\.o_a_proj\.", "attn.wo_a."),
    (r"self_attn\.o_b_proj\.", "attn.wo_b."), (r"self_attn\.sinks$", "attn.attn_sink"),
    (r"self_attn\.compressor\.indexer\.kv_proj\.", "attn.indexer.compressor.wkv."),
    (r"self_attn\.compressor\.indexer\.gate_proj\.", "attn.indexer.compressor.wgate."),
    (r"self_attn\.compressor\.indexer\.kv_norm\.", "attn.indexer.compressor.norm."),
    (r"self_attn\.compressor\.indexer\.position_bias$", "attn.indexer.compressor.ape"),
    (r"self_attn\.compressor\.indexer\.q_b_proj\.", "attn.indexer.wq_b."),
    (r"self_attn\.compressor\.indexer\.scorer\.weights_proj\.", "attn.indexer.weights_proj."),
    (r"self_attn\.compressor\.kv_proj\.", "attn.compressor.wkv."),
    (r"self_attn\.compressor\.gate_proj\.", "attn.compressor.wgate."),
    (r"self_attn\.compressor\.kv_norm\.", "attn.compressor.norm."),
    (r"self_attn\.compressor\.position_bias$", "attn.compressor.ape"),
    (r"input_layernorm\.", "attn_norm."), (r"post_attention_layernorm\.", "ffn_norm."),
    (r"attn_hc\.(fn|base|scale)$", r"hc_attn_\1"), (r"ffn_hc\.(fn|base|scale)$", r"hc_ffn_\1"),
    (r"mlp\.gate\.e_score_correction_bias$", "ffn.gate.bias"), (r"mlp\.gate\.", "ffn.gate."),
    (r"mlp\.shared_experts\.gate_proj\.", "ffn.shared_experts.w1."),
    (r"mlp\.shared_experts\.up_proj\.", "ffn.shared_experts.w3."),
    (r"mlp\.shared_experts\.down_proj\.", "ffn.shared_experts.w2."),
]
_TOP = {"model.embed_tokens.weight": "embed.weight", "lm_head.weight": "head.weight",
        "model.norm.weight": "norm.weight",
        "model.hc_head.hc_fn": "hc_head_fn", "model.hc_head.hc_base": "hc_head_base",
        "model.hc_head.hc_scale": "hc_head_scale"}


def published_name(name: str) -> str:
    """The published name of one transformers parameter (experts are split separately)."""
    if name in _TOP:
        return _TOP[name]
    m = re.match(r"model\.layers\.(\d+)\.(.*)$", name)
    if not m:
        raise KeyError(name)
    rest = m.group(2)
    for pattern, repl in _LAYER:
        new, n = re.subn("^" + pattern, repl, rest)
        if n:
            return f"layers.{m.group(1)}.{new}"
    raise KeyError(name)


def published_state_dict(model) -> dict[str, torch.Tensor]:
    """Every weight of `model` (the hash router's tid2eid too) under its published name; fused experts split into
    `ffn.experts.E.w1/w3` (gate_up_proj's two halves) and `w2` (down_proj)."""
    cfg = model.config
    out: dict[str, torch.Tensor] = {}
    state = model.state_dict()
    for name, t in state.items():
        if "rotary_emb" in name:
            continue
        m = re.match(r"model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$", name)
        if m:
            i = cfg.moe_intermediate_size
            for e in range(t.shape[0]):
                base = f"layers.{m.group(1)}.ffn.experts.{e}."
                if m.group(2) == "gate_up_proj":
                    out[base + "w1.weight"], out[base + "w3.weight"] = t[e, :i].clone(), t[e, i:].clone()
                else:
                    out[base + "w2.weight"] = t[e].clone()
            continue
        if name.endswith("tid2eid"):
            layer = re.match(r"model\.layers\.(\d+)\.", name).group(1)
            out[f"layers.{layer}.ffn.gate.tid2eid"] = t.to(torch.int64).clone()  # I64, as published
            continue
        out[published_name(name)] = t.clone().contiguous()
    return out


def add_mtp(tensors: dict[str, torch.Tensor], cfg, dtype=torch.float64) -> None:
    """Append DeepSeek-V4's MTP block `mtp.0.*`: the last layer's attention/MoE/hyper-connection tensors as a
    sliding-window layer (no compressor, a score router), plus e_proj, h_proj, enorm, hnorm, norm and hc_head_*."""
    last = cfg.num_hidden_layers - 1
    drop = (".attn.compressor.", ".attn.indexer.", ".ffn.gate.tid2eid")
    for name in list(tensors):
        if name.startswith(f"layers.{last}.") and not any(d in name for d in drop):
            tensors["mtp.0." + name[len(f"layers.{last}."):]] = tensors[name].clone() + 0.25
    if f"mtp.0.ffn.gate.bias" not in tensors:
        tensors["mtp.0.ffn.gate.bias"] = torch.zeros(cfg.n_routed_experts, dtype=dtype)
    g = torch.Generator().manual_seed(11)
    h = cfg.hidden_size
    for name, shape in {"e_proj.weight": (h, h), "h_proj.weight": (h, h), "enorm.weight": (h,),
                        "hnorm.weight": (h,), "norm.weight": (h,), "hc_head_fn": (cfg.hc_mult, cfg.hc_mult * h),
                        "hc_head_base": (cfg.hc_mult,), "hc_head_scale": (1,)}.items():
        tensors["mtp.0." + name] = (torch.randn(shape, generator=g, dtype=torch.float64) * 0.3).to(dtype)


def save_published(model, path, dtype=torch.float64, mtp: bool = True, **config_overrides) -> dict:
    """Write `model` as a published-layout checkpoint (config.json + model.safetensors) at `path`."""
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    tensors = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in published_state_dict(model).items()}
    if mtp:
        add_mtp(tensors, model.config, dtype)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    rope = int(model.config.head_dim * model.config.partial_rotary_factor)
    hashed = model.config.mlp_layer_types.count("hash_moe")
    cfg = published_config(**{k: getattr(model.config, k) for k in TINY}, qk_rope_head_dim=rope, num_hash_layers=hashed,
                           **config_overrides)
    if not mtp:
        cfg["num_nextn_predict_layers"] = 0
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return cfg



def load(path, dtype=torch.float64):
    """A published-layout checkpoint loaded by transformers (its conversion mapping renames the published names),
    then cast whole to `dtype`: the V4 class keeps its norms, sinks, hyper-connections and router bias in float32 at
    load time, which .to() undoes. Every weight must load: a name transformers did not read fails here."""
    import transformers

    model, info = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype, experts_implementation="eager",
                                                                    output_loading_info=True)
    missing = [k for k in info["missing_keys"] if "rotary_emb" not in k]
    assert not missing and not info["mismatched_keys"], f"{path}: {info}"
    unexpected = [k for k in info["unexpected_keys"] if not k.startswith("mtp.")]  # transformers has no MTP module
    assert not unexpected, f"{path}: unexpected {unexpected}"
    return model.to(dtype).eval()

