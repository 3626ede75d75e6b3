"""DeepSeek-V4.1-Flash as published (deepseek-ai/DeepSeek-V4.1-Flash): config.json and every tensor's name, dtype and
shape, for header-only plans at TP 3 and 6; the same schema at tiny dims for the tests' own checkpoints.

Where the facts come from (stored public copies only; the Hub files could not be read offline):
- config.json: text_config, vision_config and quantization_config as two independent public loaders transcribe the
  official config (one pins deepseek-ai/DeepSeek-V4.1-Flash@dba1be0a40aa45a94ad051997016db3960a90277 and asserts its
  43-entry compress_ratios in full): hidden 5120, 40 layers, 64 heads of 512 in 8 o_groups (o_lora_rank 1024),
  q_lora_rank 1280, 384 routed experts of 2304 (+1 shared), hc_mult 4, Engram on layers 1 and 14, three DSpark stages
  (128 experts each), a 32-layer 16-head vision tower; FP8 e4m3 with e8m0 (`ue8m0`) scales in 32 x 32 blocks and
  MXFP4 routed experts. vLLM's DeepseekV41Config flattens text_config onto the top level (transformers_utils/configs/
  deepseek_v41.py), which is how every engine reads it.
- the tensors: `v41_tensors` follows, key for key, the checkpoint schema of AMD's ATOM engine
  (atom/models/deepseek_v41/weights.py `checkpoint_schema` with config.py `build_attention_topology`), which its
  authors check against the published headers (96,085 tensors; that test is reproduced here:
  tests/test_deepseek_v41.py). No published total size was found, so the byte count is this schema's.
"""

from __future__ import annotations

# text_config of DeepSeek-V4.1-Flash
TEXT = {
    "model_type": "deepseek_v41_text", "vocab_size": 129280, "hidden_size": 5120, "moe_intermediate_size": 2304,
    "num_hidden_layers": 40, "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
    "qk_rope_head_dim": 64, "q_lora_rank": 1280, "o_lora_rank": 1024, "o_groups": 8, "hidden_act": "silu",
    "swiglu_limit": 10.0, "rms_norm_eps": 1e-20, "attention_bias": False, "max_position_embeddings": 1048576,
    "rope_theta": 10000,
    "rope_scaling": {"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 65536},
    "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 6, "scoring_func": "sqrtsoftplus",
    "topk_method": "noaux_tc", "norm_topk_prob": True, "routed_scaling_factor": 1.5, "sliding_window": 128,
    "compress_ratios": [0, 0] + [2] * 18 + [1] * 20 + [0, 0, 0], "compress_rope_theta": 160000,
    "kv_source_layer_ids": [2, 8, 14, 20], "index_source_layer_ids": [2, 8, 14, 20, 24, 28, 32, 36],
    "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512, "candidate_source_layer_id": 20,
    "candidate_topk_blocks": 2048, "candidate_block_size": 8, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-06,
    "engram_layer_ids": [1, 14], "engram_num_embeddings": [384006168, 384016682], "engram_max_ngram_size": 4,
    "engram_vocab_size": 16000000, "engram_n_heads": 8, "engram_head_dim": 256, "engram_pad_token_id": 2,
    "engram_compressed_vocab_size": 99092, "num_nextn_predict_layers": 3, "dspark_block_size": 5,
    "dspark_noise_token_id": 128799, "dspark_target_layer_ids": [37, 38, 39], "dspark_markov_rank": 256,
    "dspark_n_routed_experts": 128, "dspark_num_experts_per_tok": 3,
}
VISION = {"model_type": "deepseek_v41_vision", "num_hidden_layers": 32, "hidden_size": 1024, "num_attention_heads": 16,
          "intermediate_size": 2816, "patch_size": 14, "rope_theta": 10000, "downsample_ratio": 3,
          "max_image_tokens": 1024, "min_pixels": 295936, "max_wh_ratio": None}
QUANT = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [32, 32], "scale_fmt": "ue8m0",
         "expert_dtype": "fp4"}
FLASH = {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41", "dtype": "bfloat16",
         "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "image_token_id": 129264,
         "quantization_config": QUANT, "text_config": TEXT, "vision_config": VISION}
FLASH_COUNT = 96085  # tensors in the published checkpoint (ATOM's header check)

Tensors = list[tuple[str, str, tuple[int, ...]]]


def topology(t: dict) -> list[tuple[int, int, str]]:
    """(layer, compress ratio, mode) of every backbone layer and DSpark stage, as ATOM's build_attention_topology
    resolves them: "window" (ratio 0), "full" (a kv source: compressor and indexer K), "reindex" (an index source
    reusing its kv source's keys: indexer queries only), "reuse" (neither)."""
    out, kv_owner, topk_owner = [], None, None
    for layer, ratio in enumerate(t["compress_ratios"]):
        if ratio == 0:
            out.append((layer, ratio, "window"))
            continue
        kv_owner = layer if layer in t["kv_source_layer_ids"] else kv_owner
        topk_owner = layer if layer in t["index_source_layer_ids"] else topk_owner
        out.append((layer, ratio, "full" if layer == kv_owner else "reindex" if layer == topk_owner else "reuse"))
    return out


def v41_tensors(cfg: dict, quantized: bool = True) -> Tensors:
    """Every tensor of a DeepSeek-V4.1 checkpoint with `cfg`'s dims (ATOM's checkpoint_schema); `quantized` False:
    every linear layer F32 without scales (the tiny float64 fixtures)."""
    t, v = cfg["text_config"], cfg["vision_config"]
    out: Tensors = []

    def add(name: str, shape: tuple, dtype: str = "BF16") -> None:
        out.append((name, dtype if quantized or dtype != "BF16" else "F32", tuple(shape)))

    def linear(name: str, n: int, k: int, quant: bool = True, fp4: bool = False) -> None:
        if not (quantized and quant):
            return add(name + ".weight", (n, k))
        bn = 1 if fp4 else 32
        out.append((name + ".weight", "I8" if fp4 else "F8_E4M3", (n, k // 2 if fp4 else k)))
        out.append((name + ".scale", "F8_E8M0", (-(-n // bn), -(-k // 32))))

    d, h, hd, hc, mid = t["hidden_size"], t["num_attention_heads"], t["head_dim"], t["hc_mult"], \
        t["moe_intermediate_size"]
    for name in ("embed", "head"):
        linear(name, t["vocab_size"], d, quant=False)
    add("norm.weight", (d,))
    layers = t["num_hidden_layers"]
    for layer, ratio, mode in topology(t):
        draft = layer >= layers
        stage = layer - layers if draft else layer
        p = f"{'mtp' if draft else 'layers'}.{stage}"
        for sub in ("attn", "ffn"):
            add(f"{p}.{sub}_norm.weight", (d,))
            mixes = hc * (hc + 2)
            for suffix, shape in (("fn", (mixes, hc * d)), ("base", (mixes,)), ("scale", (3,))):
                add(f"{p}.hc_{sub}_{suffix}", shape, "F32")
        a = p + ".attn"
        add(a + ".attn_sink", (h,), "F32")
        add(a + ".q_norm.weight", (t["q_lora_rank"],))
        add(a + ".kv_norm.weight", (hd,))
        linear(a + ".wq_a", t["q_lora_rank"], d)
        linear(a + ".wq_b", h * hd, t["q_lora_rank"])
        linear(a + ".wkv", hd, d)
        linear(a + ".wo_a", t["o_groups"] * t["o_lora_rank"], h * hd // t["o_groups"])
        linear(a + ".wo_b", d, t["o_groups"] * t["o_lora_rank"])
        if mode == "full":
            linear(a + ".compressor.wkv", hd, d, quant=False)
            if ratio == 2:
                linear(a + ".compressor.wgate", hd, d, quant=False)
            add(a + ".compressor.norm.weight", (hd,))
            linear(a + ".indexer.wk", t["index_head_dim"], hd, quant=False)
            add(a + ".indexer.k_norm.weight", (t["index_head_dim"],))
        if mode in ("full", "reindex"):
            linear(a + ".indexer.wq_b", t["index_n_heads"] * t["index_head_dim"], t["q_lora_rank"])
            linear(a + ".indexer.weights_proj", t["index_n_heads"], d, quant=False)
        experts = t["dspark_n_routed_experts"] if draft else t["n_routed_experts"]
        f = p + ".ffn"
        linear(f + ".gate", experts, d, quant=False)
        for bias in ("bias", "bias_vl"):
            add(f + ".gate." + bias, (experts,), "F32")
        for e in range(experts):
            for proj, n, k in (("w1", mid, d), ("w3", mid, d), ("w2", d, mid)):
                linear(f"{f}.experts.{e}.{proj}", n, k, fp4=True)
        for proj, n, k in (("w1", mid, d), ("w3", mid, d), ("w2", d, mid)):
            linear(f"{f}.shared_experts.{proj}", n, k)
        if draft and stage == t["num_nextn_predict_layers"] - 1:
            r = t["dspark_markov_rank"]
            for name in ("embed", "head"):
                linear(f"{p}.markov_head.{name}", t["vocab_size"], r, quant=False)
            linear(p + ".confidence_head.proj", 1, d + r, quant=False)
            add(p + ".norm.weight", (d,))
        if draft and stage == 0:
            linear(p + ".main_proj", d, d * len(t["dspark_target_layer_ids"]))
            add(p + ".main_norm.weight", (d,))
    width = (t["engram_max_ngram_size"] - 1) * t["engram_n_heads"] * t["engram_head_dim"]
    for layer, rows in zip(t["engram_layer_ids"], t["engram_num_embeddings"]):
        p = f"layers.{layer}.engram"
        if quantized:
            out += [(p + ".embed.weight", "F8_E4M3", (rows, t["engram_head_dim"])),
                    (p + ".embed.scale", "F8_E8M0", (rows, t["engram_head_dim"] // 32))]
        else:
            add(p + ".embed.weight", (rows, t["engram_head_dim"]))
        linear(p + ".wkv", (hc + 1) * d, width)
        for name in ("k_weight", "q_weight"):
            add(p + "." + name, (hc, d))
    vd, vi = v["hidden_size"], v["intermediate_size"]
    for name in ("image_start", "image_end", "image_newline"):
        add(name, (d,))
    for name, n, k in (("aligner.w1", d, vd * v["downsample_ratio"] ** 2), ("aligner.w2", d, d),
                       ("vision.patch_embed.proj", vd, 3 * v["patch_size"] ** 2)):
        linear(name, n, k, quant=False)
        add(name + ".bias", (n,))
    add("vision.norm.weight", (vd,))
    for i in range(v["num_hidden_layers"]):
        p = f"vision.blocks.{i}"
        for name in ("norm1", "norm2"):
            add(f"{p}.{name}.weight", (vd,))
        for name, n, k in (("attn.wqkv", 3 * vd, vd), ("attn.wo", vd, vd), ("mlp.w1", 2 * vi, vd),
                           ("mlp.w2", vd, vi)):
            linear(f"{p}.{name}", n, k, quant=False)
            if name.startswith("attn."):
                add(f"{p}.{name}.bias", (n,))
    return out


# A tiny V4.1 with every kind of layer: window (0, 4), a ratio-2 kv source (1, Engram), a ratio-1 kv source (2) and
# a ratio-1 index source reusing it (3), three DSpark stages; 4 heads in 2 o_groups (TP 3: 6 / 3, TP 6: 12 / 6);
# experts 384 wide (128 / 64 a rank at TP 3 / 6, as V4.1-Flash's 2304 shards as it is); the Engram wkv
# 64 x (4 + 1) = 320 outputs, which divides neither 3 nor 6 (V4.1-Flash: 25600).
TINY_TEXT = dict(TEXT, vocab_size=160, hidden_size=64, moe_intermediate_size=384, num_hidden_layers=5,
                 num_attention_heads=4, head_dim=32, qk_rope_head_dim=16, q_lora_rank=32, o_lora_rank=32, o_groups=2,
                 rms_norm_eps=1e-6, n_routed_experts=8, num_experts_per_tok=2, sliding_window=8,
                 compress_ratios=[0, 2, 1, 1, 0, 0, 0, 0], kv_source_layer_ids=[1, 2], index_source_layer_ids=[1, 2, 3],
                 index_n_heads=2, index_head_dim=16, index_topk=4, candidate_source_layer_id=-1, candidate_topk_blocks=0,
                 candidate_block_size=0, hc_mult=4, hc_sinkhorn_iters=4, engram_layer_ids=[1],
                 engram_num_embeddings=[200], engram_vocab_size=64, engram_n_heads=2, engram_head_dim=32,
                 engram_compressed_vocab_size=16, dspark_target_layer_ids=[2, 3, 4], dspark_markov_rank=16,
                 dspark_n_routed_experts=4, dspark_num_experts_per_tok=2, max_position_embeddings=256,
                 rope_scaling=None)
TINY_VISION = dict(VISION, num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=16,
                   patch_size=2, downsample_ratio=2)
TINY = {**FLASH, "text_config": TINY_TEXT, "vision_config": TINY_VISION}


def build_tiny(path, quantized: bool = False, seed: int = 0):
    """The tiny V4.1 under the published names in `path`: float32 values (norms around 1, sinks around 0) when not
    `quantized`, else DeepSeek's FP8 / MXFP4 formats with random bytes (hubpad.testing)."""
    import json

    import torch
    from safetensors.torch import save_file

    from hubpad.testing import write_checkpoint

    cfg = dict(TINY)
    if quantized:
        return write_checkpoint(path, cfg, v41_tensors(cfg), n_shards=2, seed=seed)
    cfg = {k: v for k, v in cfg.items() if k != "quantization_config"}
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, _, shape in v41_tensors(cfg, quantized=False):
        if name.endswith("attn_sink"):
            t = torch.randn(shape, generator=g)
        elif "norm" in name:
            t = 1.0 + 0.3 * torch.randn(shape, generator=g)
        else:
            t = 0.3 * torch.randn(shape, generator=g)
        tensors[name] = t.to(torch.float32)
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path
