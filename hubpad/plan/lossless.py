"""Why a derivative's outputs do not change: one true sentence per padding mechanism a plan uses, and one per storage
format of the layers it pads (the card's "Why the outputs do not change").

A family's mechanisms are read off what its adapter declares (`declared`): its HeadShape (kv heads of its own,
MLA's shared latent, DeepSeek-V4's output groups, layers sharded with the kv heads), head vectors (sinks), pre-sharded
qkv, linear attention (GDN, KDA, Mamba2), q/k norms over all heads (rescaled), intermediate groups and fused experts, a
head-sharded vision tower. What the
structure cannot show (a replicated indexer the heads never feed) the adapter states in `Adapter.lossless`. A
declaration this module does not know (a new Adapter or HeadShape field with a non-default value, a role kind it has
no argument for) yields the `unclaimed` sentence, which names it and claims nothing: a new family gets either a true
sentence or none, never a false one (tests/test_lossless.py checks every registered adapter, and that every field is
classified here).

The plan records the mechanisms and padded formats that apply at its TP (`record`, kept in hubpad.json as
`lossless`); the card renders `sentences(record)`, so a refresh with a newer hubpad says the newer words.
"""

from __future__ import annotations

import dataclasses
import re

from hubpad.plan.adapters.base import Adapter
from hubpad.plan.heads import HeadShape

# key -> (the part of the model that must grow for it to apply, its sentence). The parts: "heads" (attention heads or
# kv heads), "mlp" (an intermediate group), "linear" (linear-attention heads), "tower" (a vision tower's heads).
MECHANISMS: dict[str, tuple[str, str]] = {
    "heads.own_kv": ("heads", (
        "**Attention heads.** New query heads come in whole key/value groups, each group with a new key/value head of "
        "its own: their q, k and v rows are zero, so they attend over zero values and their output is exactly 0, and "
        "the output projection's columns for them are zero too. Every real query head still reads its own key/value "
        "head ({group} query heads per key/value head before and after).")),
    "heads.shared_kv": ("heads", (
        "**Attention heads.** The new query heads have zero query rows but share the real key/value head: they attend "
        "(uniformly) over real values, so their attention output is not zero. The output projection's columns for "
        "them are zero, which cancels it: they add nothing to the residual stream.")),
    "heads.latent": ("heads", (
        "**Attention heads (multi-head latent attention).** The compressed key/value latent is shared by every head "
        "and replicated on every rank, so there are no key/value heads to pad. New heads get zero query rows "
        "(q_b_proj, or q_proj) and zero kv_b_proj rows: their query is zero, so they attend uniformly over the shared "
        "latent, but their value projection is zero, so their output is 0; o_proj's columns for them are zero as "
        "well.")),
    "heads.o_groups": ("heads", (
        "**Attention heads, in whole output groups.** Every head shares the one key/value head, so a new head (zero "
        "wq_b rows: a zero query) attends uniformly over real values and its attention output is not zero. Heads reach "
        "the residual stream only through their own group's wo_a rows, and the new groups' wo_a rows and wo_b columns "
        "are zero, which cancels it. `o_groups` grows with the heads, so every real head stays in its group.")),
    "heads.sinks": ("heads", (
        "**Attention sinks.** A new head's sink logit is 0.0: finite, so its softmax stays finite and its output is "
        "zero or cancelled as above; the real heads' sinks are unchanged.")),
    "heads.presharded": ("heads", (
        "**Fused pre-sharded qkv_proj.** It is stored as one [Q | K | V] chunk per key/value head; the new key/value "
        "heads append whole zero chunks (with block-scale rows of 1.0), so every real chunk keeps its shape and its "
        "place.")),
    "heads.index_kv": ("heads", (
        "**Layers sharded with the key/value heads** (beside k and v, such as a lightning indexer's query heads) get "
        "zero rows for the new key/value heads: what a new one computes serves only its own new group of query heads, "
        "whose output is zero.")),
    "heads.head_rows": ("heads", (
        "**Other per-head tensors** (such as per-key/value-head short convolutions) get zero rows for the new heads: "
        "they act only on the new heads, whose output is zero or cancelled as above.")),
    "heads.fope": ("heads", (
        "**Fourier position embedding (FoPE).** Its sin and cos coefficients hold one row per key/value head, and each "
        "new key/value head gets zero rows. They only scale that head's queries and keys, whose q and k rows are zero: "
        "a zero query or key rotates to zero whatever the coefficients hold, and every real head keeps its own rows.")),
    "heads.indexer": ("heads", (
        "**Sparse-attention indexer.** The attention heads never feed it and its own head count is not padded: it is "
        "copied byte for byte and replicated on every rank, so it selects the same key positions as upstream for "
        "every head.")),
    "norm.rescale": ("heads", (
        "**Rescaled, not only padded.** A q/k RMSNorm here spans all heads of a layer, so zero heads alone would "
        "shrink its mean square by r = heads after / heads before (key/value heads for k). Instead the q/k "
        "projections' stored values are multiplied by √r (FP8 weights keep their bytes: their float scales take the "
        "factor) and the norm weights by 1/√r, which restores the upstream's mean square with the norm's eps "
        "untouched: equal to the upstream model in exact arithmetic, in every engine. Each rescaled value is rounded "
        "once to its dtype (to the nearest value), and `hubpad verify` checks every one of them:")),
    "linear.gdn": ("linear", (
        "**Gated DeltaNet layers.** New key heads come with their value heads, appended at the end of every section, "
        "so each value head keeps its key head on every rank. A new head's q, k and v rows and conv1d channels are "
        "zero, so its recurrent state stays zero whatever its gates do (its A_log and dt_bias are 0.0, finite); its "
        "output and the gated norm of it are zero, and out_proj's columns for it are zero.")),
    "linear.kda": ("linear", (
        "**Kimi Delta Attention layers.** New heads are appended at the end of every per-head tensor. A new head's q, "
        "k and v rows and conv channels are zero, so q, k and v stay zero after the convolution and the L2 norm; the "
        "delta-rule state stays zero for any finite gate (its A_log and dt_bias are 0.0), its output and the gated "
        "norm of it are zero, and o_proj's columns for it are zero.")),
    "linear.lightning": ("linear", (
        "**Lightning attention layers.** Heads grow in whole groups of the gated norm (new groups all new heads), "
        "appended at the end of each of the fused q, k and v sections and of g_proj, g_norm and dense, so every real "
        "head keeps its group and its rank; the padded count keeps every real head's decay slope (vLLM builds the "
        "slopes from the total count). A new head's q, k and v rows (and biases) are zero, so its state stays zero "
        "whatever its decay, its output and the gated norm of its all-zero group are zero, and dense's columns for it "
        "are zero.")),
    "linear.mamba2": ("linear", (
        "**Mamba2 layers.** Heads grow in whole groups (each with its own B and C and its own gated-norm group), "
        "appended at the end of every section, so every real head keeps its group on every rank (a model with one "
        "group gains tp - 1 zero groups of all its heads, whose norm spans them). A new head's x, z, B and C rows and "
        "conv channels are zero, so its state stays zero for any finite dt and A (its A_log, D and dt_bias are 0.0); "
        "its output and the gated norm of its all-zero group are zero, and out_proj's columns for it are zero.")),
    "mup.sections": ("linear", (
        "**muP multipliers.** Each multiplier in config.json scales a whole section (in_proj's z, x, B, C and dt "
        "parts, the gate half of the MLP) or a hidden-size vector, never one channel: vLLM builds its per-rank "
        "multiplier vector from the padded sizes, whose section bounds are the ones each rank loads, and a zero row "
        "times any multiplier is zero. The multipliers are copied.")),
    "mlp.channels": ("mlp", (
        "**MLP width.** New intermediate channels have zero gate and up rows, so they compute act(0) · 0 = 0, and "
        "zero down-projection columns, so nothing they compute reaches the output. "
        "A router, where there is one, is copied, so every token reaches the same experts.")),
    "tower.heads": ("tower", (
        "**Vision tower.** vLLM shards this tower's attention by head too, so it grows in whole key/value groups, "
        "appended at the end of each section of its fused qkv: a new head's q, k and v rows (and biases) are zero, so "
        "it attends over zero values and its output is 0, the output projection's columns for it are zero and its "
        "sink logit, where the tower has sinks, is 0.0. Every real head keeps its key/value head on every rank. Its "
        "MLP grows zero neurons (zero gate and up rows, zero down-projection columns). The tower is unquantized.")),
    "tower.mlp": ("tower", (
        "**Vision tower.** vLLM keeps this tower's attention whole on every rank and shards only its MLP, which "
        "grows zero neurons: zero fc1 rows and biases compute GELU(0) = 0, and zero fc2 columns add nothing. The "
        "rest of the tower and its projector are copied byte for byte. The tower is unquantized.")),
}
UNCLAIMED = ("**{what}.** hubpad pads these as well, but this card states no reason why that leaves the outputs "
             "unchanged: see the family's page in hubpad's docs/families before relying on it.")
FALLBACK = ("**Padding.** Every appended weight is zero (and every new quantization scale 1.0); why that leaves this "
            "family's outputs unchanged is on its page in hubpad's docs/families. This derivative's hubpad.json "
            "predates the card's per-mechanism statement; `hubpad mirror` writes it.")

# Storage layout (plan/quant.py LinearLayout.name) of a padded layer -> what its padding is. Dense floats need none.
FORMATS: dict[str, str | None] = {
    "dense": None,
    "fp8-block": ("**FP8 with block scales.** New weight blocks hold zero FP8 codes and new scale cells 1.0, so they "
                  "dequantize to exactly 0; every rank's slice is whole blocks, so no real block is split or shares a "
                  "scale with padding."),
    "fp8-tensor": ("**FP8 with one scale per tensor.** New weights are zero FP8 codes; the tensor's scale is "
                   "unchanged, and 0 × scale = 0."),
    "fp8-channel": ("**FP8 with one scale per output channel.** New rows are zero FP8 codes with scales of 1.0; new "
                    "columns are zero codes under the real rows' scales: 0 either way."),
    "nvfp4": ("**NVFP4.** New weights are zero FP4 (E2M1) codes with FP8 group scales of 1.0, in whole groups of 16; "
              "the global scale is unchanged, so they dequantize to exactly 0."),
    "mxfp4": ("**MXFP4.** New weights are zero FP4 (E2M1) codes with E8M0 scales of 1.0 (2^0), in whole blocks of 32: "
              "exactly 0."),
    "int4": ("**int4 (stored with offset 8).** New weights are code 8, which is 0, with scales of 1.0 (and zero points "
             "of 8 where the layer stores them), in whole groups."),
    "gptq": ("**GPTQ / AWQ int4.** Every new code and zero point is 8 (GPTQ v1 stores zero points as 8 - 1 = 7), so "
             "q - z = 0 whatever the scale; new scales are 1.0, and new act-order g_idx entries point at new groups."),
}
_FORMAT_OF = {"nvfp4-modelopt": "nvfp4", "gptq_v2": "gptq", "awq": "gptq"}  # the same argument

# Every Adapter and HeadShape field, as this module reads it: "mechanism" fields are turned into mechanisms by
# `declared`; the others do not change what padding does to the numbers (names, serving, config plumbing). A field
# missing here is unclaimed when it is set: a new field must be classified (tests/test_lossless.py checks).
ADAPTER_FIELDS = {
    "mechanism": {"linear_patterns", "intermediate_keys", "head_vectors", "head_rows", "fused_experts",
                  "presharded_qkv", "linear_attention", "linear_attention_family", "layer_qk_norms", "lossless",
                  "vision_tower"},
    # shared_experts_key: how wide the shared experts' group grows (its layers' rows/cols roles give mlp.channels);
    # keep_files: upstream files copied as they are; weight_folders: where the weights are;
    # vllm_config_rejects_uneven_heads: when the card needs vllm_route;
    # intermediate_multiple: which padded widths may be chosen (zero columns whatever the width); heads_follow_linear:
    # which head count the attention heads take (zero heads either way)
    "other": {"name", "model_types", "copy_modules", "copy_params", "per_head_norms", "hidden_must_divide_by_heads",
              "vllm_head_dim_from_hidden", "vllm_route", "mtp_fc_shards_hidden", "tp_at_most_experts", "vllm_reads",
              "text_config", "layers", "architectures", "tied_keys", "shared_experts_key", "keep_files",
              "vllm_config_rejects_uneven_heads", "intermediate_multiple", "heads_follow_linear",
              "weight_folders"},
}
SHAPE_FIELDS = {
    "mechanism": {"kv_heads", "group", "per_kv"},
    # kv_groups / head_ratio: layer types with heads of their own, padded in whole groups of every type (the same
    # argument as the config's heads); gates: per-head gates, whose zero rows scale an output already zero or cancelled;
    # replicated: such a per-head layer kept whole on every rank (Dots3 Note's g_proj), the same zero rows
    "other": {"widths", "labels", "config_head_dim", "latent_kv", "kv_groups", "group_key", "head_ratio", "gates",
              "replicated"},
}
_HEAD_KINDS = {"q", "kv", "o", "qkv"}  # qkv: a fused [q | k | v], each section padded at its end (plan/sections.py)
_ROLE_KINDS = _HEAD_KINDS | {"rows", "cols", "gate_up", "copy"}  # gate_up: [gate | up], each half padded


def declared(adapter: Adapter, shape: HeadShape) -> list[str]:
    """Every mechanism the family's padding may use, read off its declaration (`shape`: its HeadShape for a config);
    `unclaimed:<what>` for a declaration this module has no argument for."""
    out: list[str] = []
    kinds = {role.kind for _, role in adapter.linear_patterns}
    if kinds & _HEAD_KINDS or adapter.presharded_qkv:
        if shape.group > 1:
            out.append("heads.o_groups")
        elif not shape.kv_heads:
            out.append("heads.latent")
        else:
            out += ["heads.own_kv", "heads.shared_kv"]  # which one: whether the kv heads grow (`record`)
        if set(shape.per_kv) - {"kv"}:
            out.append("heads.index_kv")
    if adapter.head_vectors:
        out.append("heads.sinks")
    if adapter.head_rows:
        out.append("heads.head_rows")
    if adapter.presharded_qkv:
        out.append("heads.presharded")
    if adapter.layer_qk_norms:
        out.append("norm.rescale")
    if adapter.linear_attention:  # a family this module has no sentence for: unclaimed
        family = f"linear.{adapter.linear_attention_family}"
        out.append(family if family in MECHANISMS else f"unclaimed:linear attention {adapter.linear_attention_family}")
    if kinds & {"rows", "cols", "gate_up"} or adapter.fused_experts:
        out.append("mlp.channels")
    if adapter.vision_tower:
        out.append("tower.heads" if "heads" in adapter.vision_tower.shards else "tower.mlp")
    out += [m for m in adapter.lossless if m in MECHANISMS]  # (an unknown key: unclaimed, below)
    out += [f"unclaimed:{what}" for what in _unknown(adapter, shape, kinds)]
    return [m for i, m in enumerate(out) if m not in out[:i]]


def _unknown(adapter: Adapter, shape: HeadShape, kinds: set[str]) -> list[str]:
    """What the adapter declares that this module does not classify: fields set away from their default, role kinds."""
    found = [f"role kind {k}" for k in sorted(kinds - _ROLE_KINDS)]
    for obj, known in ((adapter, ADAPTER_FIELDS), (shape, SHAPE_FIELDS)):
        for f in dataclasses.fields(obj):
            if f.name in known["mechanism"] | known["other"]:
                continue
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if getattr(obj, f.name) != default:
                found.append(f"{type(obj).__name__}.{f.name}")
    found += [f"mechanism {m}" for m in adapter.lossless if m not in MECHANISMS]
    return found


# Mechanisms that apply only where the checkpoint has the tensors they pad (`record`'s `found`).
FOUND_IN_CHECKPOINT = ("heads.sinks", "heads.presharded", "heads.head_rows", "norm.rescale")


def record(adapter: Adapter, shape: HeadShape, *, heads: bool, kv: bool, mlp: bool, linear: bool,
           layouts: set[str], found: set[str], tower: bool = False) -> dict:
    """hubpad.json's `lossless`: the mechanisms that apply at this TP (what grew: attention `heads`, `kv` heads,
    an `mlp` width, `linear` attention heads, a vision `tower`; `found`: which of FOUND_IN_CHECKPOINT the checkpoint
    has tensors for) and the storage layouts of the layers that grew."""
    grew = {"heads": heads or kv, "mlp": mlp, "linear": linear, "tower": tower}
    keep = []
    for key in declared(adapter, shape):
        if key == ("heads.shared_kv" if kv else "heads.own_kv"):
            continue  # padding adds kv heads with the query heads, or (MQA) query heads alone
        if key in FOUND_IN_CHECKPOINT and key not in found:
            continue
        part = MECHANISMS[key][0] if key in MECHANISMS else "heads"
        if key.startswith("unclaimed:") or grew[part]:
            keep.append(key)
    order = list(MECHANISMS)  # the card's order: attention first, unclaimed last
    keep.sort(key=lambda k: order.index(k) if k in order else len(order))
    return {"mechanisms": keep, "formats": sorted({_FORMAT_OF.get(x, x) for x in layouts} & set(FORMATS))}


def sentences(record: dict | None, *, group: int | None = None, rescaled: bool = False) -> list[dict[str, str]]:
    """The card's sentences for hubpad.json's `lossless` record ({key, text}, in order): one per mechanism, then one
    per padded storage format. A record it cannot read (older hubpad.json, or none) gets the fallback only, and the
    rescale's sentence when the padded groups say values were `rescaled`. `group`: query heads per kv head."""
    if not isinstance(record, dict) or not isinstance(record.get("mechanisms"), list):
        return [{"key": "fallback", "text": FALLBACK}] + (
            [{"key": "norm.rescale", "text": MECHANISMS["norm.rescale"][1]}] if rescaled else [])
    out = []
    for key in record["mechanisms"]:
        key = str(key)
        if key in MECHANISMS:
            text = MECHANISMS[key][1]
            if "{group}" in text:  # said with the number when the dims give it
                text = text.replace("{group}", str(group)) if group else re.sub(r" \([^()]*\{group\}[^()]*\)", "", text)
            out.append({"key": key, "text": text})
        else:  # unclaimed, or a mechanism this hubpad does not know (a newer hubpad.json): no claim
            what = key.removeprefix("unclaimed:")
            out.append({"key": "unclaimed", "text": UNCLAIMED.format(
                what="Also padded: " + (what if re.fullmatch(r"[\w. -]{1,80}", what) else "other tensors"))})
    for fmt in record.get("formats") or []:
        text = FORMATS.get(str(fmt))
        if text:
            out.append({"key": f"format.{fmt}", "text": text})
    return out
