"""LongCat-Flash (`longcat_flash`, LongcatFlashForCausalLM): MLA (DeepSeek-V3's rule, deepseek.py), two attention and
two dense MLP sublayers per layer, routed experts next to zero-computation experts, and an MTP layer under
`model.mtp.`.

Read in transformers 5.24 (models/longcat_flash) and vLLM 0.32 (longcat_flash.py, longcat_flash_mtp.py), whose
loader names are the published ones:

- `model.layers.N.self_attn.0|1`: two MLA blocks, each vLLM's DeepseekV2MLAAttention (q_b_proj / kv_b_proj rows and
  o_proj columns per head; latent projections replicated), padded as DeepSeek-V3. Their LoRA scales
  (`mla_scale_q_lora`, `mla_scale_kv_lora`: sqrt(hidden / rank), folded into the q/kv_a_layernorm weights by vLLM,
  applied to q / k in transformers) do not depend on the heads.
- `mlps.0|1`: two dense MLPs of `ffn_hidden_size` (vLLM's intermediate_size), column / row parallel.
- `mlp.experts.N`: `n_routed_experts` experts of `expert_ffn_hidden_size` (vLLM's moe_intermediate_size), sharded
  by vLLM's FusedMoE on that width, padded with it. The `zero_expert_num` zero-computation experts have no weights:
  the router (`mlp.router.classifier`, E + Z outputs, and its `e_score_correction_bias`) may send a token to one,
  which returns it as it is (`zero_expert_type` identity), computed by vLLM apart from the sharded experts.
  Nothing of theirs is padded, and the router is copied.
- `model.mtp.layers.0`: one MLA block (`self_attn`, padded), one dense MLP (`transformer_layer.mlp`, the dense width),
  `enorm.m`, `hnorm.m`, `eh_proj`, its norms; `model.mtp.embed_tokens` and `model.mtp.norm`. transformers ignores it.

LongCat-Flash-Lite (LongcatFlashNgramForCausalLM; vLLM 0.32 longcat_flash_ngram.py) is this model (vLLM's FlashModel)
plus an n-gram input embedding: `model.ngram_embeddings.embedders.i` (k·(n−1) hash tables of hidden / (k·(n−1))
columns, concatenated by vLLM into one VocabParallelEmbedding split over rows, any row count) and
`model.ngram_embeddings.post_projs.i` (each back to hidden, held whole on every rank). Neither reads a head count or an
intermediate width, and the hidden size stays: both are copied, and the embedding is the mean of the token embedding
and the projected n-gram ones as before. vLLM's Lite class drops `model.mtp.` (its MTP layer is copied, padded as
LongCat-Flash's, but the card states no MTP drafting for it: not read for Lite). vLLM runs the class only in its V2
model runner (it raises otherwise; the CPU build, without Triton, takes the V1 runner). Its config.json may carry no
model_type (vLLM then takes longcat_flash from the architecture).
"""

from __future__ import annotations

from hubpad.plan.adapters.base import EXPERTS, L, Role, mtp_speculative
from hubpad.plan.adapters.deepseek import MlaAdapter
from hubpad.plan.adapters.vllm import serving

_MTP = r"^model\.mtp\.layers\.(\d+)\."
_HEADS = [(r"self_attn\.(q_b_proj|q_proj)$", Role("q")), (r"self_attn\.kv_b_proj$", Role("q", "kv_b")),
          (r"self_attn\.o_proj$", Role("o"))]
_LATENT = r"(q_a_proj|kv_a_proj_with_mqa|q_a_layernorm|kv_a_layernorm)$"


class LongcatAdapter(MlaAdapter):
    """vLLM's longcat tool-call parser (no LongCat reasoning parser in vLLM 0.32) and its MTP model."""

    def serving(self, config: dict) -> dict:
        spec = mtp_speculative(config)
        return {**serving(tool="longcat", spec=spec, features=("arch:LongcatFlashForCausalLM",) + (
            ("spec:longcat_flash_mtp", "spec:mtp") if spec else ())), "extra_args": []}


class LongcatNgramAdapter(LongcatAdapter):
    """LongCat-Flash-Lite: the longcat tool-call parser; no MTP drafting stated (vLLM's Lite class drops model.mtp)."""

    def serving(self, config: dict) -> dict:
        return {**serving(tool="longcat", features=("arch:LongcatFlashNgramForCausalLM",)), "extra_args": []}


def _longcat(cls: type[LongcatAdapter], name: str, model_types: tuple[str, ...], architectures: tuple[str, ...] = (),
             more_copies: tuple[str, ...] = ()) -> LongcatAdapter:
    return cls(
        name=name, model_types=model_types, architectures=architectures,
        linear_patterns=[(L + r"self_attn\.\d+\." + tail[len(r"self_attn\."):], role) for tail, role in _HEADS]
        + [(_MTP + tail, role) for tail, role in _HEADS]
        + [(L + r"mlps\.\d+\.(gate_proj|up_proj)$", Role("rows", "dense")),
           (L + r"mlps\.\d+\.down_proj$", Role("cols", "dense")),
           (_MTP + r"transformer_layer\.mlp\.(gate_proj|up_proj)$", Role("rows", "dense")),
           (_MTP + r"transformer_layer\.mlp\.down_proj$", Role("cols", "dense"))]
        + EXPERTS,
        copy_modules=[r"^model\.embed_tokens$", r"^model\.norm$", r"^lm_head$",
                      L + r"(input_layernorm|post_attention_layernorm)\.\d+$", L + r"self_attn\.\d+\." + _LATENT,
                      L + r"mlp\.router\.classifier$",
                      r"^model\.mtp\.(embed_tokens|norm)$",
                      _MTP + r"(enorm\.m|hnorm\.m|eh_proj|input_layernorm|post_attention_layernorm|final_layernorm)$",
                      _MTP + r"self_attn\." + _LATENT, *more_copies],
        copy_params=[L + r"mlp\.router\.e_score_correction_bias$", L + r"self_attn\.\d+\.rotary_emb\.inv_freq$",
                     r"^model\.rotary_emb\.inv_freq$"],
        intermediate_keys={"dense": ("ffn_hidden_size", "intermediate_size"),
                           "expert": ("expert_ffn_hidden_size", "moe_intermediate_size")},
        vllm_reads={"mla_scale_q_lora": "vLLM's longcat_flash model reads without a default (it stops at load)",
                    "mla_scale_kv_lora": "vLLM's longcat_flash model reads without a default (it stops at load)",
                    "zero_expert_type": "vLLM's longcat_flash model asserts is set"},
    )


LONGCAT_FLASH = _longcat(LongcatAdapter, "longcat_flash", ("longcat_flash",))
# Listed before LONGCAT_FLASH in ADAPTERS: told apart by its architecture (its model_type may be longcat_flash).
LONGCAT_FLASH_NGRAM = _longcat(LongcatNgramAdapter, "longcat_flash_ngram", ("longcat_flash_ngram", "longcat_flash"),
                               architectures=("LongcatFlashNgramForCausalLM",),
                               more_copies=(r"^model\.ngram_embeddings\.(embedders|post_projs)\.\d+$",))
