"""DeepSeek Sparse Attention (DSA): MLA plus a lightning indexer — DeepSeek-V3.2 (`deepseek_v32`), GLM-5
(`glm_moe_dsa`). The one place that says how a DSA layer pads; later DSA families (GLM-5-Next) import from here.

A DSA attention layer is DeepSeek-V3's MLA (deepseek.py: `MLA_HEADS` padded per head — zero q_b_proj and kv_b_proj
rows, zero o_proj columns; `MLA_LATENT` replicated) plus an indexer under `self_attn.indexer.` that picks the top-k
tokens each query attends to. The indexer never sees the attention heads:

- `wq_b` reads the q latent (q_a_layernorm's output, q_lora_rank wide) and writes index_n_heads × index_head_dim;
  `wk` (hidden → index_head_dim), `k_norm` (a LayerNorm: weight and bias) and `weights_proj` (hidden →
  index_n_heads) read the hidden state. Its head count is `index_n_heads`, its own key, which padding never changes.
- vLLM replicates all of it on every rank (model_executor/models/deepseek_v2.py `Indexer`: wq_b a ReplicatedLinear,
  wk and weights_proj fused into `wk_weights_proj`, a MergedColumnParallelLinear with disable_tp=True, k_norm a
  LayerNorm; the same in vllm/models/hy_v4), and so does transformers (DeepseekV32Indexer): the published tensors
  are copied byte for byte, FP8 `weight_scale_inv` blocks included.
- The top-k indices it returns select key positions, shared by every head; padded heads (zero q, zero W_UK/W_UV)
  attend over the same positions and still output exactly zero.

`INDEXER` lists the published indexer modules (`INDEXER_PARAMS` its loose parameters, none today); `DSA_COPY`
is everything a DSA layer replicates (MLA latent + indexer). An adapter for a DSA family takes `DSA_LINEAR` /
`DSA_COPY` and deepseek.py's `MlaAdapter` geometry. GLM-5 ships indexer tensors for every layer, also those its
`index_topk_freq` makes share the previous layer's top-k (vLLM's loader drops them, transformers ignores them):
they are copied like the rest. The MTP layer at index num_hidden_layers carries its own indexer, copied too.

Block-FP8 releases (128×128 `weight_scale_inv`) need whole blocks per rank in every head-sharded tensor, which
choose_heads finds from the widths: DeepSeek-V3.2 (q 192, kv_b 256, o 128 per head) takes 128 → 132 heads at TP 3
(44/rank); GLM-5 (q 256, kv_b 448, o 256 per head: kv_b needs an even count per rank) 64 → 66 at TP 3 and 72 at
TP 6 (66/6 = 11 is odd).
"""

from __future__ import annotations

from hubpad.plan.adapters.base import (COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, MTP_MODULES, ROUTERS, SHARED, L,
                                       Role)
from hubpad.plan.adapters.deepseek import MLA_HEADS, MLA_LATENT, ROUTER_KEYS, MlaAdapter

# The lightning indexer's modules, as the published checkpoints and vLLM's loader name them (replicated, copied).
INDEXER = [L + r"self_attn\.indexer\.(wq_b|wk|weights_proj|k_norm)$"]
INDEXER_PARAMS: list[str] = []
# What a DSA layer shares across ranks: MLA's latent projections and norms, and the indexer.
DSA_COPY = MLA_LATENT + INDEXER
# A DSA family's sharded linear layers: MLA heads, dense MLP, routed experts, one shared expert (expert width).
DSA_LINEAR = MLA_HEADS + DENSE_MLP + EXPERTS + [(p, Role(r.kind, "expert")) for p, r in SHARED]


class DsaAdapter(MlaAdapter):
    """DeepSeek-V3.2: vLLM's deepseek_v32 tool-call parser and deepseek_v3 reasoning parser (DeepSeek's own vLLM
    recipe for V3.2); vLLM picks the deepseek_v32 tokenizer mode itself for DeepseekV32ForCausalLM (config/model.py)."""

    tool_call_parser = "deepseek_v32"
    reasoning_parser = "deepseek_v3"
    vllm_features: tuple[str, ...] = ("arch:DeepseekV32ForCausalLM",)
    mtp_features: tuple[str, ...] = ("spec:deepseek_v32_mtp", "spec:mtp")


class GlmDsaAdapter(DsaAdapter):
    """GLM-5 (`glm_moe_dsa`): GLM-4.7's tool-call format (parser glm47) and GLM's reasoning parser (glm45)."""

    tool_call_parser = "glm47"
    reasoning_parser = "glm45"
    vllm_features = ("arch:GlmMoeDsaForCausalLM",)


def dsa_adapter(cls: type[MlaAdapter], model_type: str, **extra) -> MlaAdapter:
    """A DSA family's adapter: MLA heads and experts padded, latent and indexer copied, MTP layers padded alike."""
    return cls(
        vllm_reads=ROUTER_KEYS,
        name=model_type, model_types=(model_type,),
        linear_patterns=DSA_LINEAR,
        copy_modules=COPY_MODULES + ROUTERS + DSA_COPY + MTP_MODULES, copy_params=COPY_PARAMS + INDEXER_PARAMS,
        intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
        lossless=("heads.indexer",), **extra,
    )


DEEPSEEK_V32 = dsa_adapter(DsaAdapter, "deepseek_v32")
GLM_MOE_DSA = dsa_adapter(GlmDsaAdapter, "glm_moe_dsa")
