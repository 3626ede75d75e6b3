"""Dots3 Note (`dots3_note`, vLLM's Dots3NoteForCausalLM; dots-studio/dots3-note-prev): DeepSeek-V3.2's sparse MLA
(dsa.py) on the full layers, a second MLA geometry on the sliding-window layers, a headwise output gate, vision and
audio towers.

Read in transformers 5.24 (models/dots3_note) and vLLM 0.32 (vllm/models/dots3_note/nvidia: model.py, mtp.py,
multimodal.py; transformers_utils/configs/dots3_note.py). The published config.json is flat: vLLM reads it with its own
Dots3NoteConfig (a DeepseekV3Config), transformers turns the same keys into per-layer configs.

- Two MLA geometries, each vLLM's per-head sharding (q_b_proj / kv_b_proj rows and o_proj columns per head, the
  latent projections replicated): full layers (`layer_types` other than sliding_attention, Dots3NoteFullAttention, a
  DeepseekV2MLAAttention with the replicated DSA indexer, copied) with num_attention_heads and qk_nope / qk_rope /
  v_head_dim; sliding layers (Dots3NoteSlidingAttention, `assert num_heads % tp_size == 0`) with
  swa_num_attention_heads and the swa_* widths. Padding appends heads to both at once, keeping the published ratio
  (128 : 64): the sliding layers' widths follow through HeadShape.head_ratio, and the derivative writes both counts
  (and the equal kv counts) into config.json.
- `self_attn.g_proj`, headwise (one row per head): vLLM builds it as a ReplicatedLinear and narrows its output to the
  rank's heads (`gate.narrow(-1, rank * num_heads, num_heads)`), transformers as nn.Linear(hidden, heads). Padded heads
  get zero rows: sigmoid(0) = 0.5 gates an output that is already zero. It needs no per-rank alignment in any format
  (HeadShape.replicated). The elementwise gate (a ColumnParallelLinear) is refused: transformers has none and no
  published checkpoint uses it.
- k_rope_only_layernorm (over the shared rope key) and the q/kv LoRA rescale see no head: copied / unchanged.
- MLPs: dense layers and the MTP layer's MLP (intermediate_size), routed experts (moe_intermediate_size) and the shared
  MLP of moe_intermediate_size × n_shared_experts (`shared_experts_key`; transformers reads
  shared_experts_intermediate_size, which must agree). vLLM zero-pads block-FP8 dense MLPs to whole blocks per rank at
  load itself; hubpad's widths are already whole blocks per rank, which that padding leaves as they are.
- The MTP layer `model.layers.{num_hidden_layers}` (vLLM's Dots3NoteMTP): the sliding geometry (vLLM appends
  `mtp_layer_types`, default sliding_attention, to layer_types), a dense MLP, DeepSeek-V3's enorm / hnorm / eh_proj /
  shared_head, and `model.mtp.embed_tokens`: padded like the other layers, its own modules copied.
- `vision_encoder.*` and `audio_encoder.*` are plain nn.Linear towers in vLLM (never sharded): copied byte for byte.
"""

from __future__ import annotations

import dataclasses

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import (COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, MTP_MODULES, ROUTERS, SHARED,
                                       Adapter, L, Role, layers_pattern, mtp_speculative)
from hubpad.plan.adapters.deepseek import MLA_LATENT
from hubpad.plan.adapters.dsa import INDEXER, INDEXER_PARAMS
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

_NAMES = {"q": r"self_attn\.(q_b_proj|q_proj)$", "kv_b": r"self_attn\.kv_b_proj$", "o": r"self_attn\.o_proj$",
          "g": r"self_attn\.g_proj$"}
_ROLES = {"q": "q", "kv_b": "q", "o": "o", "g": "q"}
_TOWERS = r"^(vision_encoder|audio_encoder)\."
_OWN = [L + r"self_attn\.k_rope_only_layernorm$", r"^model\.mtp\.embed_tokens$", _TOWERS]
_SHARED_KEYS = ("shared_experts_intermediate_size", "moe_shared_expert_intermediate_size")  # transformers' reading


def _geometry(text: dict, prefix: str) -> tuple[int, dict[str, int]]:
    """(heads, per-head widths q / kv_b / o) of one MLA geometry: prefix "" (full layers) or "swa_" (sliding)."""
    keys = ("num_attention_heads", "num_key_value_heads", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
            "kv_lora_rank")
    values = {k: text.get(prefix + k) for k in keys}
    bad = [prefix + k for k, v in values.items() if not isinstance(v, int) or v <= 0]
    if bad:
        raise ConfigError(f"config.json: {bad[0]} missing or not a positive integer (Dots3 Note's "
                          f"{'sliding' if prefix else 'full'} layers need it)")
    if values["num_key_value_heads"] != values["num_attention_heads"]:
        raise ConfigError(f"config.json: {prefix}num_key_value_heads differs from {prefix}num_attention_heads; MLA has "
                          f"no kv heads and both engines require them equal")
    nope, rope, v = values["qk_nope_head_dim"], values["qk_rope_head_dim"], values["v_head_dim"]
    return values["num_attention_heads"], {"q": nope + rope, "kv_b": nope + v, "o": v, "g": 1}


def mtp_layers(text: dict) -> int:
    """MTP layers as vLLM counts them: num_nextn_predict_layers, 1 when config.json has none (its Dots3NoteConfig's
    default; the published config states none and ships model.layers.46)."""
    n = text.get("num_nextn_predict_layers", 1)
    return int(n) if n is not None else 1


def sliding_layers(text: dict) -> list[int]:
    """The sliding-window layers, MTP layers included (vLLM's speculative.py appends `mtp_layer_types`, default
    sliding_attention, to layer_types for them)."""
    types = list(text.get("layer_types") or [])
    n = int(text.get("num_hidden_layers") or 0)
    if len(types) != n:
        raise ConfigError(f"config.json: layer_types has {len(types)} entries for {n} layers (Dots3 Note's full and "
                          f"sliding layers are told apart by it)")
    types += list(text.get("mtp_layer_types") or ["sliding_attention"] * mtp_layers(text))
    return [i for i, t in enumerate(types) if t == "sliding_attention"]


class Dots3NoteAdapter(Adapter):
    """vLLM's dots tool-call parser (`<dots_function_call>`, registered with Dots3 Note in 0.28.0); no reasoning parser
    of vLLM's is Dots3's; MTP drafting through Dots3NoteMTP."""

    def for_config(self, config: dict) -> "Dots3NoteAdapter":
        for key in ("attention_gate_type", "swa_attention_gate_type"):
            if config.get(key, "headwise") != "headwise":
                raise ConfigError(f"config.json: {key} {config[key]!r} is not supported (hubpad pads the headwise gate, "
                                  f"one g_proj row per head, as published; transformers builds no other)")
        sliding = sliding_layers(config)
        n = int(config.get("num_hidden_layers") or 0) + mtp_layers(config)
        patterns = []
        for suffix, idx in (("", [i for i in range(n) if i not in sliding]), ("_swa", sliding)):
            if idx:
                layers = layers_pattern([str(i) for i in idx])
                patterns += [(layers + name, Role(_ROLES[key], key + suffix)) for key, name in _NAMES.items()]
        return dataclasses.replace(self, linear_patterns=patterns + self.linear_patterns)

    def head_shape(self, config: dict) -> HeadShape:
        heads, full = _geometry(config, "")
        swa_heads, swa = _geometry(config, "swa_")
        widths = {**full, **{k + "_swa": v for k, v in swa.items()}}
        labels = {"q": "q_b_proj rows (full)", "kv_b": "kv_b_proj rows (full)", "o": "o_proj columns (full)",
                  "g": "g_proj rows (full)", "q_swa": "q_b_proj rows (sliding)", "kv_b_swa": "kv_b_proj rows (sliding)",
                  "o_swa": "o_proj columns (sliding)", "g_swa": "g_proj rows (sliding)"}
        ratio = {k + "_swa": (swa_heads, heads) for k in full} if swa_heads != heads else {}
        latent = max(config["kv_lora_rank"] + config["qk_rope_head_dim"],
                     config["swa_kv_lora_rank"] + config["swa_qk_rope_head_dim"])  # vLLM's cache rows: the wider
        return HeadShape(widths, labels, kv_heads=False, config_head_dim=None, latent_kv=latent, head_ratio=ratio,
                         replicated=frozenset({"g", "g_swa"}))

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        out = super().intermediate_sizes(config)
        stated = {k: config[k] for k in _SHARED_KEYS if config.get(k) is not None}
        if "shared" in out and any(v != out["shared"][1] for v in stated.values()):
            raise ConfigError(f"config.json: {stated} differs from moe_intermediate_size x n_shared_experts "
                              f"({out['shared'][1]}), which vLLM builds the shared expert with")
        return out

    def padded_config(self, upstream: dict, config: dict, heads: int, kv: int) -> dict:
        swa = self.head_shape(upstream).head_count("q_swa", heads)
        out = {**config, "swa_num_attention_heads": swa, "swa_num_key_value_heads": swa}
        shared = int(out.get("moe_intermediate_size") or 0) * int(out.get("n_shared_experts") or 0)
        return {**out, **{k: shared for k in _SHARED_KEYS if k in upstream}}

    def serving(self, config: dict) -> dict:
        spec = mtp_speculative({"num_nextn_predict_layers": mtp_layers(config)})
        return serving(tool="dots", spec=spec, features=("arch:Dots3NoteForCausalLM",) + (
            ("spec:dots3_note_mtp", "spec:mtp") if spec else ()))


DOTS3_NOTE = Dots3NoteAdapter(
    name="dots3_note", model_types=("dots3_note",),
    linear_patterns=DENSE_MLP + EXPERTS + SHARED,
    copy_modules=COPY_MODULES + ROUTERS + MLA_LATENT + INDEXER + MTP_MODULES + _OWN,
    copy_params=COPY_PARAMS + INDEXER_PARAMS + [_TOWERS + r".*$"],
    intermediate_keys={"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)},
    shared_experts_key="n_shared_experts", lossless=("heads.indexer",),  # the full layers' indexer: copied, replicated
)
