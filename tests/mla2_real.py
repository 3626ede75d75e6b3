"""Issue 33's MLA rows of stream mla2: published config.json values and tensor lists, for header-only plans at full
scale (tests/test_registry_rows.py).

Where each figure comes from (huggingface.co cannot be reached offline; the values are public copies of each repo's
config.json found in other projects' sources, not confirmed against the Hub itself):
- openPangu-Ultra-MoE-718B-V1.1 (FreedomIntelligence/openPangu-Ultra-MoE-718B-V1.1): a copy of its config.json in a
  VRAM estimator's examples (hidden 7680, 61 layers, 128 heads, q_lora 1536, kv_lora 512, qk_nope 128, qk_rope 64,
  v 128, 256 experts of 2048 (top 8), one shared, dense 18432 on layers 0-2, sandwich_norm, one MTP layer, vocab
  153600, auto_map naming configuration_openpangu_moe.PanguUltraMoEConfig), BF16. Tensor names: DeepSeek-V3's, the
  sandwich norms `pre_mlp_layernorm` / `post_mlp_layernorm` and the correction bias at `mlp.e_score_correction_bias`
  as vLLM's openpangu loader reads them; the shard index itself was not read.
- Sarvam-105B (sarvamai/sarvam-105b): the values a public write-up reads off its config.json and modeling code
  (hidden 4096, 32 layers, 64 heads, MLA without a q LoRA: kv_lora 512, qk_nope 128, qk_rope 64, v 128, `head_dim`
  576; 128 experts of 2048 (top 8) and one shared under the published names num_experts / num_shared_experts,
  dense 16384 on layer 0, sigmoid routing with a correction bias, routed_scaling_factor 2.5, no n_group /
  topk_group keys, rope_theta 10000 with deepseek_yarn factor 40 over 4096, vocab 262144, untied), BF16. The keys
  transformers' SarvamMLAConfig documents for "the original sarvamai/sarvam-105b config" agree. Tensor names:
  DeepSeek-V3's (`q_proj`, `kv_a_proj_with_mqa`, `kv_b_proj`, `mlp.gate.e_score_correction_bias`, per-expert MLPs,
  `shared_experts`), which vLLM's sarvam loader reads.
- LongCat-Flash-Lite (meituan-longcat/LongCat-Flash-Lite): a public audit of LongCat-Next, whose text tensors it reads
  off the published index and finds "name-for-name" in Flash-Lite (14 layers of two MLA sublayers, hidden 3072, 32
  heads, q_lora 1536, kv_lora 512, qk_nope 128, qk_rope 64, v 128, dense 6144, 256 experts of 1024 beside 128 zero
  experts, top 12, routed_scaling_factor 6.0, 12 n-gram tables `model.ngram_embeddings.embedders.i` of
  [10223616 + 2i + 1, 256] with `post_projs.i` [3072, 256], router classifier [384, 3072] and its correction bias),
  Flash-Lite's 17 `model.mtp.*` tensors (LongCat-Flash's MTP layer), and the n-gram keys a test fixture quotes from
  Lite's config.json (vocab 131072, ngram_vocab_size_ratio 78, emb_neighbor_num 4, emb_split_num 4). Its YaRN
  parameters were not found (they pad nothing). BF16, the router in F32 as LongCat-Flash's.
"""

from __future__ import annotations

from tests.dsa_real import LONGCAT_FLASH_CONFIG, longcat_tensors
from tests.mla_line_real import mla_attention
from tests.moe_real import Tensors, checkpoint

PANGU_ULTRA_MOE_CONFIG = {
    "architectures": ["PanguUltraMoEForCausalLM"], "attention_bias": False,
    "auto_map": {"AutoConfig": "configuration_openpangu_moe.PanguUltraMoEConfig",
                 "AutoModel": "modeling_openpangu_moe.PanguUltraMoEModel",
                 "AutoModelForCausalLM": "modeling_openpangu_moe.PanguUltraMoEForCausalLM"},
    "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7680, "initializer_range": 0.02,
    "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 131072,
    "model_type": "pangu_ultra_moe", "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
    "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-05, "rope_theta": 25600000, "routed_scaling_factor": 2.5,
    "sandwich_norm": True, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.48.2",
    "use_cache": True, "v_head_dim": 128, "vocab_size": 153600,
}


SARVAM_105B_CONFIG = {
    "architectures": ["SarvamMLAForCausalLM"], "model_type": "sarvam_mla", "vocab_size": 262144, "hidden_size": 4096,
    "intermediate_size": 16384, "moe_intermediate_size": 2048, "num_hidden_layers": 32, "num_attention_heads": 64,
    "num_key_value_heads": 64, "kv_lora_rank": 512, "q_lora_rank": None, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "head_dim": 576, "num_experts": 128, "num_shared_experts": 1,
    "num_experts_per_tok": 8, "first_k_dense_replace": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
    "hidden_act": "silu", "rms_norm_eps": 1e-06, "max_position_embeddings": 131072, "rope_theta": 10000.0,
    "rope_scaling": {"type": "deepseek_yarn", "factor": 40, "original_max_position_embeddings": 4096,
                     "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def _bf16(name: str, out_f: int, in_f: int) -> Tensors:
    return [(f"{name}.weight", "BF16", (out_f, in_f))]


def pangu_tensors(cfg: dict) -> Tensors:
    """Every tensor of a BF16 openPangu Ultra-MoE checkpoint, its MTP layer included."""
    h, out = cfg["hidden_size"], []
    for name, dtype, shape in checkpoint(cfg, mla_attention(_bf16), _bf16):
        out.append((name.replace("mlp.gate.e_score_correction_bias", "mlp.e_score_correction_bias"), dtype, shape))
        if name.endswith("post_attention_layernorm.weight"):
            layer = name[:-len("post_attention_layernorm.weight")]
            out += [(layer + "pre_mlp_layernorm.weight", "BF16", (h,)), (layer + "post_mlp_layernorm.weight", "BF16", (h,))]
    return out


def sarvam_tensors(cfg: dict) -> Tensors:
    """Every tensor of a BF16 Sarvam-105B checkpoint (no MTP layer)."""
    names = dict(cfg, n_routed_experts=cfg["num_experts"], n_shared_experts=cfg["num_shared_experts"],
                 num_nextn_predict_layers=0)
    return checkpoint(names, mla_attention(_bf16), _bf16)


LONGCAT_FLASH_LITE_CONFIG = dict(
    LONGCAT_FLASH_CONFIG, architectures=["LongcatFlashNgramForCausalLM"], model_type="longcat_flash_ngram",
    hidden_size=3072, num_layers=14, num_attention_heads=32, num_key_value_heads=32, ffn_hidden_size=6144,
    n_routed_experts=256, zero_expert_num=128, expert_ffn_hidden_size=1024, moe_topk=12, routed_scaling_factor=6.0,
    ngram_vocab_size_ratio=78, emb_neighbor_num=4, emb_split_num=4,
)


def lite_tensors(cfg: dict) -> Tensors:
    """LongCat-Flash's tensors (its MTP layer included) plus the n-gram tables and projections."""
    h, tables = cfg["hidden_size"], cfg["emb_split_num"] * (cfg["emb_neighbor_num"] - 1)
    rows = cfg["ngram_vocab_size_ratio"] * cfg["vocab_size"]
    out = longcat_tensors(cfg)
    for i in range(tables):
        out += [(f"model.ngram_embeddings.embedders.{i}.weight", "BF16", (rows + 2 * i + 1, h // tables)),
                (f"model.ngram_embeddings.post_projs.{i}.weight", "BF16", (h, h // tables))]
    return out
