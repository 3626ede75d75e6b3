"""Inkling (`inkling_mm_model`, InklingForConditionalGeneration: Thinking Machines' Inkling and Inkling-Small): the
language model under `model.llm.` with its dims in `text_config`, vision and audio towers (`model.visual.*`,
`model.audio.*`) and MTP depths (`model.mtp.*`) beside it, in the published names both engines read. The text-only
format vLLM serves as InklingForCausalLM (`inkling_model`, its InklingModelConfig) is the same language model and MTP
depths under the same names with the dims at the top of config.json and no towers: the same adapter without
text_config (INKLING_MODEL). transformers' own text-only model_type `inkling_text` is refused (INKLING_TEXT_REFUSAL).

Each decoder layer is global ("hybrid") or sliding-window ("hybrid_sliding", `local_layer_ids`) attention with its own
kv heads (Inkling: 8 global, 16 sliding) and the same query heads (64), then a dense MLP (the first dense_mlp_idx
layers) or an MoE, with depthwise short convolutions (+ residual) on four streams: K and V per kv head
(`attn.k_sconv` / `attn.v_sconv`, [kv x head_dim, 1, K]) and the attention and MLP outputs (`attn_sconv`,
`mlp_sconv`, [hidden, 1, K]). q and k are RMS-normed per head; a per-head relative-position branch `wr_du`
(d_rel rows per head) feeds a shared bias table (`rel_logits_proj.proj`).

What vLLM 0.32 requires (vllm/models/inkling/nvidia: model.py, attention.py, sconv_swa_attn.py, short_conv.py):
- hidden_size % tp == 0: the attention and MLP outputs are reduce-scattered over the hidden dimension before their
  short convolutions (`tensor_model_parallel_reduce_scatter(delta, dim=-1)`, which asserts it; each rank convolves
  hidden // tp channels), and padding cannot change the hidden size (every RMSNorm averages over it). Inkling-Small
  (hidden 4096) is refused at TP 3 and 6 for this reason; Inkling (6144) passes.
- Each layer's conv state (InklingConvState) asserts tp <= its kv heads (whole kv heads per rank, no replication) and
  packs hidden // kv_heads channels of the two output streams per kv head: every layer type's kv heads must be >= tp
  and divide hidden_size. Heads are padded in whole GQA groups of both layer types (query head i keeps global kv head
  i // 8 and sliding kv head i // 4); the first count that meets every rule: Inkling 64 heads / 8 global / 16 sliding
  kv -> 96 / 12 / 24 at TP 3 and 6 (72 / 9 / 18 would shard, but 6144 % 9 != 0).
- Heads % tp, kv % tp (QKVR MergedColumnParallelLinear of [q | k | v | r], RowParallel wo_ud).
New heads: zero wq_du / wk_dv / wv_dv / wr_du rows and k/v conv channels, zero wo_ud columns. A zero head's q and k
are zero after the per-head RMSNorm (0 x rsqrt(eps) x w), its relative states zero, so its scores are uniform, over
V rows of its own new kv head, which are zero (the V conv of zero is zero, with its residual): its output is zero, and
wo_ud's zero columns add nothing. Real heads keep their kv heads, so nothing else changes.

Not padded, so refused where they would need it: the MLP widths. Inkling stores gate and up interleaved row by row
(`w13_dn`, `experts.w13_weight`, `shared_experts.shared_w13_weight`; vLLM keeps each pair on one rank), a layout
hubpad does not pad; at TP 3 and 6 Inkling's widths (dense 24576, experts 3072) shard as they are.

The MTP depths (`model.mtp.layers.N.transformer_block.*`: global or sliding per `mtp_config.local_layer_ids`, dense
MLP) are padded like decoder layers; the towers (vLLM builds them without tensor parallelism), the routers, norms,
embeddings and the MLPs are copied.
"""

from __future__ import annotations

import dataclasses

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import Adapter, Role, layers_pattern
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.dims import EXPERT_TILE
from hubpad.plan.heads import HeadShape

_LAYERS = r"^model\.llm\.layers\.(\d+)\."
_MTP = r"^model\.mtp\.layers\.(\d+)\.transformer_block\."
_TOWERS = r"^model\.(visual|audio)\."
_GLOBAL = {"q": Role("q"), "kv": Role("kv"), "rel": Role("q", "rel"), "o": Role("o")}
_SWA = {"q": Role("q", "q_swa"), "kv": Role("kv", "kv_swa"), "rel": Role("q", "rel"), "o": Role("o", "o_swa")}
_BLOCK_COPY = [r"(attn_norm|mlp_norm|attn_sconv|mlp_sconv)$", r"attn\.(q_norm|k_norm)$", r"mlp\.(w13_dn|w2_md|gate)$"]
_BLOCK_PARAMS = [r"attn\.rel_logits_proj\.proj$", r"mlp\.global_scale$", r"mlp\.gate\.global_scale$",
                 r"mlp\.(experts|shared_experts)\..+$"]

SMALL_HIDDEN_REFUSAL = ("hidden_size {hidden} % tp {tp} != 0: vLLM's Inkling reduce-scatters the attention and MLP "
                        "outputs over the hidden dimension for their short convolutions (each rank convolves "
                        "hidden_size // tp channels), and padding cannot change the hidden size, which every RMSNorm "
                        "averages over")


def layer_is_swa(text: dict) -> list[bool]:
    """Which decoder layers are sliding-window, as both engines read text_config: `local_layer_ids` (vLLM; transformers
    derives `layer_types` from it), or transformers' `layer_types`; refused when they disagree or say nothing (the
    engines' defaults differ: vLLM none, transformers all but every 6th)."""
    n = int(text.get("num_hidden_layers") or 0)
    local, types = text.get("local_layer_ids"), text.get("layer_types")
    from_local = [i in set(local) for i in range(n)] if isinstance(local, list) else None
    from_types = [t == "hybrid_sliding" for t in types] if isinstance(types, list) else None
    if from_local is None and from_types is None:
        raise ConfigError("config.json: text_config has neither local_layer_ids nor layer_types, so vLLM (no sliding "
                          "layers) and transformers (all but every 6th) read different layer types")
    if from_local is not None and from_types is not None and from_local != from_types:
        raise ConfigError("config.json: text_config's local_layer_ids and layer_types disagree on which layers slide")
    return from_local if from_local is not None else from_types


def _mtp_is_swa(config: dict) -> list[bool]:
    """Which MTP depths are sliding-window (mtp_config.local_layer_ids, what vLLM's InklingMTP and transformers read)."""
    mtp = config.get("mtp_config") or {}
    n = int(mtp.get("num_nextn_predict_layers") or 0)
    local = set(mtp.get("local_layer_ids") or [])
    return [i in local for i in range(n)]


def _widths(text: dict) -> tuple[int, int]:
    """(dense MLP width, expert width): published (`dense_intermediate_size` and `intermediate_size`) or as
    transformers writes them (`intermediate_size` and `moe_intermediate_size`), read as vLLM's InklingModelConfig does."""
    if text.get("moe_intermediate_size") is not None and text.get("dense_intermediate_size") is None:
        return int(text.get("intermediate_size") or 0), int(text["moe_intermediate_size"])
    inter = int(text.get("intermediate_size") or 0)
    return int(text.get("dense_intermediate_size") or inter), inter


class InklingAdapter(Adapter):
    """Inkling: two attention layer types sharing query heads, vLLM's short-convolution rules, the inkling parsers."""

    def for_config(self, config: dict) -> "InklingAdapter":
        text = self.dims_config(config)
        patterns, rows = [], []
        for prefix, swa in ((_LAYERS, layer_is_swa(text)), (_MTP, _mtp_is_swa(config))):
            for roles, key, want in ((_GLOBAL, "kv", False), (_SWA, "kv_swa", True)):
                idx = [str(i) for i, s in enumerate(swa) if s == want]
                if not idx:
                    continue
                layer = layers_pattern(idx, prefix)
                patterns += [(layer + r"attn\.wq_du$", roles["q"]), (layer + r"attn\.(wk_dv|wv_dv)$", roles["kv"]),
                             (layer + r"attn\.wr_du$", roles["rel"]), (layer + r"attn\.wo_ud$", roles["o"])]
                rows.append((layer + r"attn\.(k_sconv|v_sconv)\.weight$", key))
        return dataclasses.replace(self, linear_patterns=patterns, head_rows=rows)

    def head_shape(self, config: dict) -> HeadShape:
        need = [k for k in ("head_dim", "swa_head_dim", "swa_num_key_value_heads", "d_rel") if config.get(k) is None]
        if need:
            raise ConfigError(f"config.json: text_config has no {need[0]}, which vLLM and transformers default "
                              f"differently (published configs state it)")
        heads, kv, swa_kv = (int(config.get(k) or 0) for k in ("num_attention_heads", "num_key_value_heads",
                                                                "swa_num_key_value_heads"))
        swa_heads = config.get("swa_num_attention_heads")
        if swa_heads is not None and swa_heads != heads:
            raise ConfigError(f"config.json: swa_num_attention_heads {swa_heads} differs from num_attention_heads "
                              f"{heads}; hubpad pads one query head count for both Inkling layer types")
        for what, n in (("num_key_value_heads", kv), ("swa_num_key_value_heads", swa_kv)):
            if not n or heads % n:
                raise ConfigError(f"config.json: {heads} attention heads are not a multiple of {what} {n}")
        hd, shd, rel = int(config["head_dim"]), int(config["swa_head_dim"]), int(config["d_rel"])
        widths = {"q": hd, "kv": hd, "o": hd, "rel": rel, "q_swa": shd, "kv_swa": shd, "o_swa": shd}
        labels = {"q": "wq_du rows (global)", "kv": "wk_dv/wv_dv rows (global)", "o": "wo_ud columns (global)",
                  "rel": "wr_du rows", "q_swa": "wq_du rows (sliding)", "kv_swa": "wk_dv/wv_dv rows (sliding)",
                  "o_swa": "wo_ud columns (sliding)"}
        return HeadShape(widths, labels, kv_heads=True, config_head_dim=hd, kv_groups={"kv_swa": heads // swa_kv})

    def kv_group_keys(self, config: dict) -> dict[str, tuple[str, ...]]:
        return {"kv_swa": ("swa_num_key_value_heads",)}

    def head_rules(self, heads: int, kv: int, hs: HeadShape, tp: int, hidden: int) -> list[str]:
        """vLLM's InklingConvState: whole kv heads per rank (tp <= kv heads) and hidden // kv heads channels of the
        output streams per kv head (hidden % kv heads == 0), for each layer type's kv heads."""
        why = []
        for label, n in (("global", kv), ("sliding", hs.kv_count("kv_swa", heads, kv))):
            if n < tp:
                why.append(f"{n} {label} kv heads < tp {tp} (vLLM's Inkling conv state holds whole kv heads per rank)")
            elif hidden % n:
                why.append(f"hidden_size {hidden} % {n} {label} kv heads != 0 (vLLM's Inkling conv state packs "
                           f"hidden_size // kv heads output channels per kv head)")
        return why

    def check_tp(self, config: dict, tp: int) -> None:
        hidden = int(config.get("hidden_size") or 0)
        if hidden % tp:
            raise ConfigError(f"config.json: {SMALL_HIDDEN_REFUSAL.format(hidden=hidden, tp=tp)}")
        dense, expert = _widths(config)
        for what, width, per_rank in (("dense MLP", dense, 1), ("expert", expert, EXPERT_TILE)):
            if width and (width % tp or (width // tp) % per_rank):
                need = f"a multiple of {per_rank}, what fused-MoE kernels need" if per_rank > 1 else "whole"
                raise ConfigError(f"config.json: the {what} width {width} does not shard at tp {tp} as it is (each "
                                  f"rank's share must be {need}), and Inkling interleaves gate and up rows (w13), a "
                                  f"layout hubpad does not pad")

    def serving(self, config: dict) -> dict:
        mtp = int((config.get("mtp_config") or {}).get("num_nextn_predict_layers") or 0)
        spec = {"method": "mtp", "num_speculative_tokens": mtp} if mtp else None  # one token per MTP depth
        arch = (config.get("architectures") or ["InklingForConditionalGeneration"])[0]
        return serving(tool="inkling", reasoning="inkling", spec=spec,
                       features=(f"arch:{arch}",) + (("spec:mtp", "spec:inkling_mtp") if spec else ()))


INKLING_MODEL = InklingAdapter(
    name="inkling_model", model_types=("inkling_model",), linear_patterns=[],
    copy_modules=[r"^model\.llm\.(embed|embed_norm|norm|unembed)$", r"^model\.mtp\.chain_norm$",
                  r"^model\.mtp\.layers\.\d+\.(hidden_norm|embed_norm|input_proj)$"]
    + [p + t for p in (_LAYERS, _MTP) for t in _BLOCK_COPY],
    copy_params=[p + t for p in (_LAYERS, _MTP) for t in _BLOCK_PARAMS],
    tied_keys={"swa_num_attention_heads": "num_attention_heads"}, layers=f"^(?:{_LAYERS[1:]}|{_MTP[1:]})",
)
INKLING = dataclasses.replace(
    INKLING_MODEL, name="inkling", model_types=("inkling_mm_model",), text_config="text_config",
    copy_modules=[_TOWERS, *INKLING_MODEL.copy_modules], copy_params=[_TOWERS + r".+$", *INKLING_MODEL.copy_params])

INKLING_TEXT_REFUSAL = (
    "model_type inkling_text is transformers' text-only Inkling (InklingTextConfig), which vLLM 0.32 cannot build: its "
    "InklingForCausalLM reads a text-only Inkling as model_type inkling_model (vLLM's InklingModelConfig; an "
    "InklingTextConfig has no dense_mlp_idx or use_sconv), and transformers saves InklingForCausalLM under its own "
    "tensor names (model.layers.N.self_attn.*), which vLLM's Inkling loader does not map; a checkpoint in the published "
    "names (model.llm.*) is served as model_type inkling_model")
