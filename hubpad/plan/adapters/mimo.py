"""MiMo-V2 (`mimo_v2_flash`: MiMo-V2-Flash; `mimo_v2`: MiMo-V2.5's text model, MiMoV2ForCausalLM): full-attention
and sliding-window (SWA) layers that share the query heads but not the kv heads, q/k heads of head_dim (192) and
v/o heads of v_head_dim (128), per-head attention sinks on the SWA layers, routed experts (per expert, sigmoid
router with a correction bias) after a dense first layer, and MTP layers (`model.mtp.layers.N.*`, SWA attention,
dense MLP).

Two readings of the same config: transformers' MiMoV2FlashConfig gives SWA layers twice num_key_value_heads with the
full layers' head dims and takes the layer types from `layer_types` (default: full at layer 0 and every 6th);
vLLM's MiMoV2 classes read `swa_num_attention_heads`, `swa_num_key_value_heads`, `swa_head_dim`, `swa_v_head_dim` and
`hybrid_layer_pattern` (1 = SWA). The adapter takes its roles from the layer types both agree on and refuses a
config where they disagree (a derivative must compute the same thing in both engines). The padded heads are whole
groups of both layer types: query head i stays on full kv head i // (H / KV) and SWA kv head i // (H / KV_swa):
MiMo-V2-Flash's 64 heads / 4 full kv / 8 SWA kv become 96 / 6 / 12 at TP 3 and 6. The derivative writes
num_attention_heads and swa_num_attention_heads, num_key_value_heads and swa_num_key_value_heads (still twice it).
attention_value_scale (V is scaled before attention) is copied, never recomputed: it is a constant of the trained
model, not a function of the head count in either engine. New heads: zero q/k/v rows, zero o_proj columns, sink 0
(vLLM narrows attention_sink_bias by heads per rank, so the sinks of real heads stay with them); a zero head's
output is never read (zero o_proj columns).

MiMo-V2.5's fused FP8 `qkv_proj` ("Pro format": pre-sharded in num_key_value_heads chunks of [Q_c | K_c | V_c],
read so by vLLM's `_shard_fp8_qkv_proj`) is padded by appending whole zero chunks (plan/presharded.py), in every layer
type and the MTP layers, and MiMo-V2.5-Pro-FP4's MXFP4 experts are padded as any MXFP4 layer (plan/quant.py).

MiMo-V2.5 with its vision tower (`vision_config`; vLLM serves it as MiMoV2OmniForCausalLM, which shards the tower's
heads over TP: no data-parallel encoder mode, and the tower is built even under --language-model-only): the tower's
heads are padded in whole kv groups and its MLP in zero neurons (plan/tower.py), the language model as above. vLLM
also shards the tower's patch merger, hidden x spatial_merge_size² wide (MiMo-V2.5: 1280 x 4 = 5120), which padding
cannot change: a TP that does not divide it (3, 6 and 7 for MiMo-V2.5) is refused with that reason. The audio
encoder (`audio_encoder.*`, `speech_embeddings.*`: plain nn.Linear / transformers modules in vLLM, whole on every
rank) and the audio tokenizer folder vLLM loads from the checkpoint (`audio_tokenizer/`) are copied.
"""

from __future__ import annotations

import dataclasses

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import (COPY_MODULES, COPY_PARAMS, DENSE_MLP, EXPERTS, ROUTERS, Adapter, L,
                                       PreshardedQKV, Role, VisionTower, layers_pattern)
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

_MTP = r"^model\.mtp\.layers\.(\d+)\."
_FULL = {"q": Role("q"), "k": Role("kv"), "v": Role("kv", "v"), "o": Role("o")}
_SWA = {"q": Role("q", "q_swa"), "k": Role("kv", "k_swa"), "v": Role("kv", "v_swa"), "o": Role("o", "o_swa")}
_FULL_QKV, _SWA_QKV = PreshardedQKV("q", "kv", "v"), PreshardedQKV("q_swa", "k_swa", "v_swa")
_MTP_OWN = [_MTP + r"(enorm|hnorm|eh_proj|input_layernorm|pre_mlp_layernorm|final_layernorm)$"]
_SINKS = [L + r"self_attn\.attention_sink_bias$", _MTP + r"self_attn\.attention_sink_bias$"]

# MiMo-V2.5's vision tower (MiMoVisionTransformer in vLLM's mimo_v2_omni.py): tensors under `visual.` (or
# `model.visual.`, which vLLM maps there too), dims in vision_config with Mimo_VLVisionConfig's defaults.
_VISUAL = r"^(?:model\.)?visual\."
_BLOCK = _VISUAL + r"blocks\.\d+\."
TOWER = VisionTower(
    node="vision_config",
    keys={"heads": "num_heads", "kv": "num_key_value_heads", "head_dim": "qk_channels", "v_dim": "kv_channels",
          "inter": "intermediate_size", "hidden": "hidden_size", "merge": "spatial_merge_size"},
    defaults={"heads": 32, "kv": 8, "head_dim": 64, "v_dim": 64, "inter": 4608, "hidden": 1280, "merge": 2},
    patterns=((_BLOCK + r"attn\.qkv\.(weight|bias)$", "qkv"), (_BLOCK + r"attn\.proj\.(weight|bias)$", "proj"),
              (_BLOCK + r"attn\.sinks$", "sinks"), (_BLOCK + r"mlp\.(gate_proj|up_proj)\.(weight|bias)$", "mlp_in"),
              (_BLOCK + r"mlp\.down_proj\.(weight|bias)$", "mlp_out")))
_TOWER_COPY = [_VISUAL + r"(patch_embed\.proj|merger\.ln_q|merger\.mlp\.[02])$", _BLOCK + r"norm[12]$",
               r"^audio_encoder\.", r"^speech_embeddings\.\d+$"]


def layer_is_swa(config: dict) -> list[bool]:
    """Which decoder layers are sliding-window, as both engines read config.json; refused when they disagree."""
    n = int(config.get("num_hidden_layers") or 0)
    vllm = config.get("hybrid_layer_pattern")
    types = config.get("layer_types")
    hf = ([t == "sliding_attention" for t in types] if isinstance(types, list) else
          [not (i == 0 or (i + 1) % 6 == 0) for i in range(n)])
    if config.get("model_type") == "mimo_v2_flash" and isinstance(vllm, list) and [bool(x) for x in vllm] != hf:
        raise ConfigError("config.json: hybrid_layer_pattern (vLLM's layer types) and layer_types (transformers', "
                          "default: full attention at layer 0 and every 6th) disagree; the two engines would compute "
                          "different models")
    return [bool(x) for x in vllm] if isinstance(vllm, list) else hf


class MiMoV2Adapter(Adapter):
    """MiMo-V2: full and SWA attention geometries, the MiMo parsers, MTP drafting."""

    def for_config(self, config: dict) -> "MiMoV2Adapter":
        arch = (config.get("architectures") or [""])[0]
        omni = arch == "MiMoV2OmniForCausalLM" or config.get("vision_config") is not None
        self._check_readings(config)
        swa = layer_is_swa(config)
        patterns, fused = [], []
        for roles, qkv, want in ((_FULL, _FULL_QKV, False), (_SWA, _SWA_QKV, True)):
            idx = [str(i) for i, s in enumerate(swa) if s == want]
            if not idx:
                continue
            layer = layers_pattern(idx)
            patterns += [(layer + f"self_attn\\.{p}_proj$", r) for p, r in roles.items()]
            fused.append((layer + r"self_attn\.qkv_proj$", qkv))
        patterns += [(_MTP + f"self_attn\\.{p}_proj$", r) for p, r in _SWA.items()]
        fused.append((_MTP + r"self_attn\.qkv_proj$", _SWA_QKV))
        out = dataclasses.replace(self, linear_patterns=patterns + self.linear_patterns, presharded_qkv=fused)
        if omni:  # the vision tower padded with the language model, the audio encoder copied
            out = dataclasses.replace(out, vision_tower=TOWER, copy_modules=self.copy_modules + _TOWER_COPY,
                                      keep_files=("audio_tokenizer/*",))
        return out

    @staticmethod
    def _check_readings(config: dict) -> None:
        """transformers reads SWA layers as 2 x num_key_value_heads with the full layers' head dims and heads."""
        if config.get("model_type") != "mimo_v2_flash":
            return
        kv, heads = config.get("num_key_value_heads"), config.get("num_attention_heads")
        expect = {"swa_num_key_value_heads": 2 * int(kv or 0), "swa_num_attention_heads": heads,
                  "swa_head_dim": config.get("head_dim"), "swa_v_head_dim": config.get("v_head_dim")}
        bad = [f"{k} {config[k]} (transformers reads {v})" for k, v in expect.items()
               if config.get(k) is not None and config[k] != v]
        if bad:
            raise ConfigError(f"config.json: {', '.join(bad)}: transformers' MiMoV2Flash and vLLM's MiMoV2 would "
                              f"compute different models")

    def head_shape(self, config: dict) -> HeadShape:
        heads = int(config.get("num_attention_heads") or 1)
        kv = int(config.get("num_key_value_heads") or heads)
        hd, vd = int(config.get("head_dim") or 192), int(config.get("v_head_dim") or config.get("head_dim") or 128)
        swa_kv = int(config.get("swa_num_key_value_heads") or 2 * kv)
        shd = int(config.get("swa_head_dim") or hd)
        svd = int(config.get("swa_v_head_dim") or config.get("swa_head_dim") or vd)
        if int(config.get("swa_num_attention_heads") or heads) != heads:
            raise ConfigError("config.json: swa_num_attention_heads differs from num_attention_heads (one query head "
                              "count serves both layer types here)")
        for what, n in (("full", kv), ("SWA", swa_kv)):
            if heads % n:
                raise ConfigError(f"config.json: {heads} attention heads are not a multiple of the {what} layers' {n} "
                                  f"kv heads")
        widths = {"q": hd, "kv": hd, "v": vd, "o": vd, "q_swa": shd, "k_swa": shd, "v_swa": svd, "o_swa": svd}
        labels = {"q": "q_proj rows (full)", "kv": "k_proj rows (full)", "v": "v_proj rows (full)",
                  "o": "o_proj columns (full)", "q_swa": "q_proj rows (SWA)", "k_swa": "k_proj rows (SWA)",
                  "v_swa": "v_proj rows (SWA)", "o_swa": "o_proj columns (SWA)"}
        groups = {"v": heads // kv, "k_swa": heads // swa_kv, "v_swa": heads // swa_kv}
        return HeadShape(widths, labels, kv_heads=True, config_head_dim=hd, kv_groups=groups)

    def kv_group_keys(self, config: dict) -> dict[str, tuple[str, ...]]:
        return {"v": ("num_key_value_heads",), "k_swa": ("swa_num_key_value_heads",),
                "v_swa": ("swa_num_key_value_heads",)}

    def padded_config(self, upstream: dict, config: dict, heads: int, kv: int) -> dict:
        out = dict(config)
        if "swa_num_attention_heads" in out:
            out["swa_num_attention_heads"] = heads
        return out

    def serving(self, config: dict) -> dict:
        arch = (config.get("architectures") or ["MiMoV2FlashForCausalLM"])[0]
        omni = config.get("vision_config") is not None
        arch = "MiMoV2OmniForCausalLM" if omni else arch  # what vLLM serves a config with a vision tower as
        # vLLM's MiMo-V2 MTP drafter runs the first MTP layer only (speculative.py: n_predict 1)
        spec = {"method": "mtp", "num_speculative_tokens": 1} if config.get("num_nextn_predict_layers") else None
        drafter = "spec:mimo_v2_omni_mtp" if omni else "spec:mimo_v2_mtp"
        quant = config.get("quantization_config") or {}
        loads = (("load:mimo_v2_fused_qkv",) if config.get("attention_projection_layout") == "fused_qkv" else ()) + \
            (("quant:fp8_store_mxfp4",) if quant.get("store_dtype") == "mxfp4" else ())
        out = serving(tool="mimo", reasoning="mimo", spec=spec,
                      features=(f"arch:{arch}",) + (("spec:mtp", drafter) if spec else ()) + loads)
        if "load:mimo_v2_fused_qkv" in loads:
            n = config.get("num_key_value_heads")
            out["notes"] = [f"The fused FP8 qkv_proj is stored in num_key_value_heads = {n} chunks (padding appended "
                            f"whole zero chunks). vLLM loads one chunk per rank as stored only at "
                            f"--tensor-parallel-size {n}; at any other size its loader dequantizes and re-quantizes "
                            f"each rank's rows (as it does for the upstream at any size but its own chunk count), "
                            f"which re-rounds about a quarter to a third of those FP8 values by up to one FP8 step "
                            f"(docs/families/mimo-gemma-step.md)"]
        return out


_INTER = {"dense": ("intermediate_size",), "expert": ("moe_intermediate_size",)}
_MTP_MLP = [(_MTP + r"mlp\.(gate_proj|up_proj)$", Role("rows", "dense")),
            (_MTP + r"mlp\.down_proj$", Role("cols", "dense"))]

MIMO_V2 = MiMoV2Adapter(
    name="mimo_v2", model_types=("mimo_v2_flash", "mimo_v2"), linear_patterns=DENSE_MLP + EXPERTS + _MTP_MLP,
    copy_modules=COPY_MODULES + ROUTERS + _MTP_OWN, copy_params=COPY_PARAMS, intermediate_keys=_INTER,
    head_vectors=_SINKS, tp_at_most_experts=True,
)
