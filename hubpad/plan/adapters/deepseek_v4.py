"""DeepSeek-V4 (`deepseek_v4`: V4-Flash, V4-Pro, and the vision variant): shared-KV multi-query attention with
per-head sinks, a grouped low-rank output projection (`o_groups`), compressed sparse attention (compressor and
lightning indexer), hyper-connections, hash-routed and routed experts plus one shared expert, and MTP layers.

Tensor names are DeepSeek's published ones (what vLLM's loader reads): `layers.N.attn.wq_b`, `attn.wo_a`, `attn.wo_b`,
`attn.attn_sink`, `ffn.experts.E.w1/w2/w3`, `mtp.N.*`, `embed`, `head`, `hc_head_*`; FP8 weights carry a `.scale`
(e8m0, 128×128 blocks) and the routed experts of V4-Flash are MXFP4 (`I8` e2m1 pairs, e8m0 scale per 32).

vLLM (vllm/models/deepseek_v4/attention.py, read in 0.32.0) shards per rank: `wq_b` ColumnParallel over heads ×
head_dim rows; `wo_a` ColumnParallel over o_groups × o_lora_rank rows, run as a bmm over n_local_groups = o_groups //
tp groups, each eating heads / o_groups consecutive heads of that rank; `wo_b` RowParallel over the same
o_groups × o_lora_rank columns; `attn_sink` narrowed to the rank's heads. `wq_a`, `wkv` (fused ReplicatedLinear),
`q_norm`, `kv_norm`, the compressor, the indexer (its `wq_b` is a ReplicatedLinear: index_n_heads stays), the router,
`hc_*` and the MTP projections are replicated. transformers (DeepseekV4GroupedLinear) reshapes the attention output
into o_groups groups the same way.

So heads are padded in whole groups appended at the end: zero `wq_b` rows for the new heads, zero `wo_a` rows for the
new groups (group-major: group g's o_lora_rank rows follow group g-1's), zero `wo_b` columns, `num_attention_heads`
and `o_groups` raised together (V4-Flash at TP 3: 64/8 → 72/9; TP 6: 96/12). A padded head's query is zero, so it
attends uniformly and its output is not zero, but it only meets its group's `wo_a` rows, which are zero. Its sink is
0.0: any finite value (or −inf) is exact; +inf or NaN would poison the softmax into NaN, and NaN × 0 is NaN.
Appending zero heads while keeping o_groups would regroup every head (wrong, yet fluent); one zero head per group is
exact in transformers but splits a rank's heads differently from its groups in vLLM. vLLM never checks that o_groups
divides the TP, so a checkpoint whose heads divide the TP but whose groups do not (a heads-only hand padding) is
refused, here and by `hubpad verify`. The MTP layers (`mtp.N.*`) are padded like the others. The shared expert is
padded with the routed experts' width; MXFP4 experts per rank in whole 128-wide tiles (vLLM rounds an MXFP4 expert
slice up to 128 in its kernels): V4-Flash 2048 → 2304 at TP 3 and 6. The vision variant's tower (`vision.*`,
`aligner.*`, `image_*`) is copied: vLLM falls back to a data-parallel (replicated) encoder when its heads do not
divide the TP and shards it as it is when they do.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import Adapter, Role, mtp_speculative, one_shared_expert
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

# Main layers and MTP layers share one layout (published names carry no `model.` prefix).
V4L = r"^(?:layers|mtp)\.(\d+)\."

_LINEAR = [
    (V4L + r"attn\.wq_b$", Role("q")),  # heads × head_dim rows
    (V4L + r"attn\.wo_a$", Role("q", "wo_a")),  # o_groups × o_lora_rank rows (o_lora_rank / heads-per-group a head)
    (V4L + r"attn\.wo_b$", Role("o", "wo_b")),  # o_groups × o_lora_rank columns
    (V4L + r"ffn\.experts\.\d+\.(w1|w3)$", Role("rows", "expert")),
    (V4L + r"ffn\.experts\.\d+\.w2$", Role("cols", "expert")),
    (V4L + r"ffn\.shared_experts\.(w1|w3)$", Role("rows", "expert")),  # one shared expert, the routed width
    (V4L + r"ffn\.shared_experts\.w2$", Role("cols", "expert")),
]
_COPY_MODULES = [
    r"^embed$", r"^head$", r"^norm$",
    V4L + r"(attn_norm|ffn_norm)$",
    V4L + r"attn\.(wq_a|wkv|q_norm|kv_norm)$",
    V4L + r"attn\.(indexer\.)?compressor\.(wkv|wgate|norm)$",
    V4L + r"attn\.indexer\.(wq_b|weights_proj)$",
    V4L + r"ffn\.gate$",
    r"^mtp\.(\d+)\.(e_proj|h_proj|enorm|hnorm|norm|emb|head)$",
    r"^vision\.", r"^aligner\.",  # the vision variant's tower, replicated
]
_COPY_PARAMS = [
    V4L + r"attn\.(indexer\.)?compressor\.ape$",
    V4L + r"hc_(attn|ffn)_(fn|base|scale)$",
    r"^hc_head_(fn|base|scale)$", r"^mtp\.(\d+)\.hc_head_(fn|base|scale)$",
    V4L + r"ffn\.gate\.(tid2eid|bias_vl)$",
    r"^image_(start|pad|newline|end)$",
]
_KEYS = ("num_attention_heads", "head_dim", "o_groups", "o_lora_rank")


class DeepseekV4Adapter(Adapter):
    """Heads move in whole o_groups; the groups must shard by the TP as well."""

    def head_shape(self, config: dict) -> HeadShape:
        bad = [k for k in _KEYS if not isinstance(config.get(k), int) or config[k] <= 0]
        if bad:
            raise ConfigError(f"config.json: {bad[0]} missing or not a positive integer (needed for DeepSeek-V4)")
        heads, head_dim, groups, rank = (config[k] for k in _KEYS)
        kv = config.get("num_key_value_heads")
        if kv not in (None, 1):
            raise ConfigError(f"config.json: num_key_value_heads {kv}; DeepSeek-V4 attention has one shared KV head")
        if heads % groups:
            raise ConfigError(f"config.json: {heads} attention heads are not a multiple of o_groups {groups} "
                              f"(wo_a projects whole groups of heads)")
        per_group = heads // groups
        if rank % per_group:  # V4-Flash's 64 heads / 8 groups padded by hand to 72 / 8 is such a checkpoint
            raise ConfigError(f"config.json: {heads} attention heads in {groups} o_groups ({per_group} a group) and "
                              f"o_lora_rank {rank} is not a multiple of {per_group}, which hubpad's per-head "
                              f"accounting of wo_a / wo_b needs; published DeepSeek-V4 checkpoints have 8 heads a "
                              f"group, and one "
                              f"padded by heads only (not whole groups) serves wrong in vLLM at any TP its o_groups "
                              f"do not divide: pad the original checkpoint instead")
        share = rank // per_group
        return HeadShape({"q": head_dim, "wo_a": share, "wo_b": share},
                         {"q": "wq_b rows", "wo_a": "wo_a rows", "wo_b": "wo_b columns"},
                         kv_heads=False, config_head_dim=head_dim, latent_kv=head_dim,
                         group=per_group, group_key="o_groups")

    def check_tp(self, config: dict, tp: int) -> None:
        """Refuse a checkpoint whose heads divide the TP while its o_groups do not: vLLM would serve it (n_local_groups
        = o_groups // tp, never checked) with each rank's heads regrouped into the wrong wo_a groups."""
        super().check_tp(config, tp)
        heads, groups = config.get("num_attention_heads"), config.get("o_groups")
        if isinstance(heads, int) and isinstance(groups, int) and groups > 0 and heads % tp == 0 and groups % tp:
            raise ConfigError(f"config.json: o_groups {groups} % tp {tp} != 0 while its {heads} attention heads divide "
                              f"tp {tp}: vLLM computes n_local_groups = o_groups // tp without checking, so every "
                              f"rank would mix its heads through the wrong wo_a groups (a heads-only padding serves "
                              f"fluent garbage); pad the original checkpoint in whole groups instead")

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        one_shared_expert(config)
        return super().intermediate_sizes(config)

    def serving(self, config: dict) -> dict:
        """Parsers and MTP from vLLM 0.32.0's source (tool_parsers/ and reasoning/ register `deepseek_v4`; the
        registry maps DeepSeekV4MTPModel to method "mtp"). The first releases (vllm.py): DeepseekV4ForCausalLM, both
        parsers and DeepSeekV4MTPModel 0.20.0, DeepseekV4ForConditionalGeneration 0.30.0."""
        spec = mtp_speculative(config)
        groups = int(config.get("o_groups") or 0)
        vision = int(config.get("vision_n_layers") or 0) > 0
        arch = "DeepseekV4ForConditionalGeneration" if vision else "DeepseekV4ForCausalLM"
        notes = [groups_note(groups)]
        features = (f"arch:{arch}",) + (("spec:deepseek_v4_mtp", "spec:mtp") if spec else ())
        out = serving(tool="deepseek_v4", reasoning="deepseek_v4", spec=spec, features=features)
        return {**out, "extra_args": [], "notes": notes}


def groups_note(groups: int) -> str:
    """The card's note for a derivative whose heads move in o_groups: the TP sizes it serves at."""
    return (f"Serve this checkpoint only at a --tensor-parallel-size that divides its o_groups ({groups}): vLLM "
            f"computes n_local_groups = o_groups // tp without checking, and at any other TP it serves wrong output "
            f"that still reads fluently")


DEEPSEEK_V4 = DeepseekV4Adapter(
    name="deepseek_v4", model_types=("deepseek_v4",),
    linear_patterns=_LINEAR, copy_modules=_COPY_MODULES, copy_params=_COPY_PARAMS,
    head_vectors=[V4L + r"attn\.attn_sink$"],
    intermediate_keys={"expert": ("moe_intermediate_size",)},
    layers=V4L, lossless=("heads.indexer",),  # the compressor and the indexer: copied, replicated
)
