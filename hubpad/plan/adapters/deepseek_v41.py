"""DeepSeek-V4.1 (`deepseek_v41`, vLLM's DeepseekV41ForCausalLM): DeepSeek-V4's attention, experts and
hyper-connections (plan/adapters/deepseek_v4.py: heads padded in whole o_groups), its dims under `text_config`, plus
Engram layers, compressed attention shared across layers, a 16-head vision tower and DSpark draft stages.

Read in vLLM 0.32.0 (vllm/models/deepseek_v41: attention.py, common/engram.py, nvidia/model.py, nvidia/dspark.py,
nvidia/vl_model.py; deepseek_v4/common/vision.py), per rank:
- attention: as V4 (`wq_b` rows, `wo_a` rows in o_groups, `wo_b` columns, `attn_sink` narrowed to the rank's heads;
  `wq_a` + `wkv` one replicated layer, the compressor, the indexer's `wk` / `wq_b` / `weights_proj` replicated:
  `index_n_heads` never changes), in the backbone layers and in the DSpark stages (`mtp.{0,1,2}.*`, each a full
  decoder layer built from the same config: DSparkDeepseekV4Model), so both are padded alike;
- Engram (`layers.{1,14}.engram.*`): the hash tables `embed` are split over ranks by hash head (any count: cdiv,
  the last rank short), `q_weight` / `k_weight` replicated, and `wkv` a ColumnParallelLinear over hidden_size x
  (hc_mult + 1) outputs (V4.1-Flash: 5120 x 5 = 25600) unless the model runs sequence parallel
  (`_use_sequence_parallel`: PP 1, --enable-expert-parallel, TP > 1, and a mega-MoE backend or DP > 1), where it
  is replicated. Its width is the hidden size, which padding never changes: copied, and at a TP that does not divide
  it the card says which mode serves (vLLM 0.30.0 built it replicated in every mode);
- the experts, the shared expert and the router as V4 (MXFP4 routed experts, FP8 shared expert, 32 x 32 blocks);
- the vision tower (`vision.*`, 16 heads): DeepseekV4ViT asks is_vit_use_data_parallel(vision_n_heads), which
  replicates it on every rank when its heads do not divide the TP (3, 5, 6, 7) and shards it as it is when they do:
  copied, with `aligner.*` and `image_*`;
- the DSpark heads (`mtp.0.main_proj` / `main_norm`, `mtp.2.markov_head.{embed,head}`, `confidence_head.proj`,
  `norm`): replicated (ReplicatedLinear, nn.Embedding, a ParallelLMHead with its TP disabled), copied.
"""

from __future__ import annotations

from hubpad.plan.adapters.deepseek_v4 import _COPY_MODULES, _COPY_PARAMS, _LINEAR, V4L, DeepseekV4Adapter, groups_note
from hubpad.plan.adapters.vllm import serving

_V41_COPY_MODULES = [
    V4L + r"attn\.indexer\.(wk|k_norm)$",
    V4L + r"engram\.(embed|wkv)$",
    r"^mtp\.(\d+)\.(main_proj|main_norm|markov_head\.embed|markov_head\.head|confidence_head\.proj)$",
]
_V41_COPY_PARAMS = [V4L + r"engram\.(q_weight|k_weight)$"]


class DeepseekV41Adapter(DeepseekV4Adapter):
    """V4's heads in whole o_groups; DSpark drafting and the Engram wkv's serving mode."""

    def serving(self, config: dict) -> dict:
        """The deepseek_v41 parsers and DSpark drafting (method "dspark": vLLM maps a V4.1 target to
        DSparkV41DraftModel, which loads the `mtp.*` stages from the target itself; "mtp" is refused for V4.1), its
        default number of draft tokens dspark_block_size (speculative.py). First releases (vllm.py): all 0.30.0."""
        text = self.dims_config(config)
        block = text.get("dspark_block_size")
        spec = ({"method": "dspark", "num_speculative_tokens": int(block)}
                if text.get("num_nextn_predict_layers") and text.get("dspark_target_layer_ids") and block else None)
        features = ("arch:DeepseekV41ForCausalLM",) + (("spec:dspark", "arch:DSparkV41DraftModel") if spec else ())
        out = serving(tool="deepseek_v41", reasoning="deepseek_v41", spec=spec, features=features)
        return {**out, "extra_args": [], "notes": [groups_note(int(text.get("o_groups") or 0))]}

    def tp_notes(self, config: dict, tp: int) -> list[str]:
        text = self.dims_config(config)
        width = int(text.get("hidden_size") or 0) * (int(text.get("hc_mult") or 1) + 1)
        if tp == 1 or not text.get("engram_layer_ids") or not width or width % tp == 0:
            return []
        return [f"vLLM 0.31.0 and later build each Engram layer's wkv column-parallel over hidden_size x (hc_mult + "
                f"1) = {width} outputs unless the model runs sequence parallel, and {width} % {tp} != 0: at "
                f"--tensor-parallel-size {tp} serve with --enable-expert-parallel and either --data-parallel-size 2 "
                f"or more ({2 * tp}+ GPUs) or a mega-MoE backend (--moe-backend deep_gemm_mega_moe, "
                f"flashinfer_moe_ep_cutedsl or flashinfer_moe_ep_mega_deep_gemm: SM100 / SM103 GPUs only); without "
                f"one vLLM stops with `AssertionError: {width} is not divisible by {tp}`. vLLM 0.30.0 builds wkv "
                f"replicated and serves the derivative at TP {tp} as it is. On GPUs with neither mode (three DGX "
                f"Sparks) and vLLM 0.31.0 or later, serve the original checkpoint data-parallel instead: "
                f"--data-parallel-size {tp} --enable-expert-parallel (attention replicated, experts split)"]


DEEPSEEK_V41 = DeepseekV41Adapter(
    name="deepseek_v41", model_types=("deepseek_v41",), text_config="text_config",
    linear_patterns=list(_LINEAR), copy_modules=_COPY_MODULES + _V41_COPY_MODULES,
    copy_params=_COPY_PARAMS + _V41_COPY_PARAMS, head_vectors=[V4L + r"attn\.attn_sink$"],
    intermediate_keys={"expert": ("moe_intermediate_size",)}, layers=V4L,
    lossless=("heads.indexer",),  # as V4: the compressor and the indexer copied, replicated
)
