"""Recognise how each linear layer is stored (BF16, FP8, NVFP4, int4) and how its tensors are padded.

The quantization method comes from `config.json` / `hf_quant_config.json`; the per-layer layout is read
from the tensors actually present in the headers, so a config that says one thing and a header that says
another is an error, never a guess.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from hubpad.errors import ConfigError, HubpadError
from hubpad.formats.safetensors import TensorInfo
from hubpad.plan.gptq_awq import LAYOUTS as PACKED_LAYOUTS
from hubpad.plan.gptq_awq import PACKED_SUFFIXES, PackedConfig, detect_packed, packed_zero_fill, read_packed_config

FLOAT_DTYPES = {"BF16", "F16", "F32", "F64"}
DENSE_TAGS = {"BF16": "bf16", "F16": "fp16", "F32": "fp32", "F64": "fp64"}  # an unquantized layer's format tag

# The value written into every NEW scale cell of a padded quantized tensor: 1.0, finite and positive, so
# no kernel that takes logs/exponents of scales (DeepGEMM UE8M0, Marlin's FP8-S0E5M3) sees 0, NaN or a sign.
PAD_SCALE_VALUE = 1.0
_ONE = {
    "F32": struct.pack("<f", 1.0),
    "F64": struct.pack("<d", 1.0),
    "F16": struct.pack("<e", 1.0),
    "BF16": struct.pack("<f", 1.0)[2:],
    "F8_E4M3": b"\x38",
    "F8_E8M0": b"\x7f",
    "U8": b"\x7f",  # an e8m0 scale stored as bytes (MiMo-V2.5's MXFP4 experts): 2^(127 - 127)
}
# Unquantized layers have no block structure, but GEMM and grouped-GEMM kernels want 16-byte aligned rows
# (torch's grouped_mm refuses anything else); 8 elements per rank keeps bf16 and fp32 rows aligned.
DENSE_ALIGN = 8
ZERO_NIBBLES_INT4 = b"\x88\x88\x88\x88"  # int4 stored with offset 8: eight zeros packed in one int32 word

# Parameter suffixes that belong to a linear layer (`<module>.<suffix>`), and the single-value ones that
# padding never touches (global / per-tensor / activation scales).
LINEAR_SUFFIXES = (
    "weight", "bias", "weight_scale", "weight_scale_inv", "weight_packed", "weight_global_scale",
    "input_global_scale", "input_scale", "weight_scale_2", "weight_shape", "weight_zero_point",
    "weight_g_idx", "output_scale", "k_scale", "v_scale", "scale", *PACKED_SUFFIXES,
)
SCALAR_SUFFIXES = {"weight_global_scale", "input_global_scale", "input_scale", "weight_scale_2", "output_scale",
                   "k_scale", "v_scale"}


def one_bytes(dtype: str) -> bytes:
    """The pad scale value (1.0) encoded in a scale tensor's dtype."""
    if dtype not in _ONE:
        raise HubpadError(f"no pad scale value is defined for scale dtype {dtype}")
    return _ONE[dtype]


@dataclass(frozen=True)
class QuantConfig:
    """What the checkpoint's config says about quantization: method name, FP8 block and group sizes."""

    method: str  # "none" | "compressed-tensors" | "modelopt" | "fp8"
    fp8_blocks: tuple[tuple[int, int], ...] = ()
    int4_groups: tuple[int, ...] = ()
    weight_only_nvfp4: bool = False
    packed: PackedConfig | None = None  # GPTQ / AWQ (plan/gptq_awq.py)
    # FP8 configs whose routed experts are stored in another format (`store_dtype`, MiMo-V2.5-Pro-FP4: "mxfp4",
    # which vLLM's Fp8Config loads with its Mxfp4MoEMethod)
    expert_store: str | None = None

    @staticmethod
    def read(config: dict, hf_quant_config: dict | None) -> "QuantConfig":
        """The quantization config.json (or hf_quant_config.json) declares; one ConfigError if it is malformed."""
        try:
            return QuantConfig._read(config, hf_quant_config)
        except (AttributeError, TypeError, ValueError) as exc:  # a value of the wrong JSON type somewhere inside
            where = "config.json: quantization_config" if config.get("quantization_config") is not None \
                else "hf_quant_config.json"
            raise ConfigError(f"{where} is malformed ({type(exc).__name__}: {exc})") from None

    @staticmethod
    def _read(config: dict, hf_quant_config: dict | None) -> "QuantConfig":
        qc = config.get("quantization_config")
        if qc is None and hf_quant_config is not None:
            q = hf_quant_config.get("quantization", {})
            return QuantConfig("modelopt", weight_only_nvfp4=q.get("quant_algo") == "W4A16_NVFP4")
        if qc is None:
            return QuantConfig("none")
        method = qc.get("quant_method")
        if method == "compressed-tensors":
            formats = {qc.get("format")} | {(g or {}).get("format") for g in (qc.get("config_groups") or {}).values()}
            if "mxfp4-pack-quantized" in formats:  # Kimi-K3's routed experts, as reported
                raise ConfigError("config.json: compressed-tensors format mxfp4-pack-quantized (MXFP4 weights with "
                                  "E8M0 group scales) is not a format hubpad reads or pads")
            blocks, groups = set(), set()
            weight_only_fp4 = False
            for name, group in (qc.get("config_groups") or {}).items():
                w = (group or {}).get("weights") or {}
                if w.get("num_bits") == 4 and w.get("type") == "float" and not (group or {}).get("input_activations"):
                    weight_only_fp4 = True
                if w.get("strategy") == "block" and w.get("block_structure"):
                    blocks.add(tuple(int(x) for x in w["block_structure"]))
                if w.get("num_bits") == 4 and w.get("type") == "int" and w.get("group_size"):
                    groups.add(int(w["group_size"]))
            return QuantConfig("compressed-tensors", tuple(sorted(blocks)), tuple(sorted(groups)), weight_only_fp4)
        if method == "modelopt":
            return QuantConfig("modelopt", weight_only_nvfp4=qc.get("quant_algo") == "W4A16_NVFP4")
        if method in ("gptq", "awq"):
            return QuantConfig(method, packed=read_packed_config(qc))
        if method == "fp8":
            block = qc.get("weight_block_size")
            store = qc.get("store_dtype")
            if store not in (None, "fp8", "mxfp4"):
                raise ConfigError(f"config.json: quantization_config.store_dtype {store!r} is not supported (hubpad "
                                  f"reads FP8 configs whose experts are stored as mxfp4)")
            return QuantConfig("fp8", (tuple(int(x) for x in block),) if block else (),
                               expert_store=None if store == "fp8" else store)
        if method == "mxfp4":  # gpt-oss: MXFP4 experts only, never padded (plan/adapters/gpt_oss.py)
            return QuantConfig("mxfp4")
        raise HubpadError(f"config.json: quantization method {method!r} is not supported")


@dataclass(frozen=True)
class LinearLayout:
    """How one linear layer's weight is stored, and the per-rank alignment its kernels need.

    `n_align`/`k_align` are what every TP rank's slice of the output (rows) / input (columns) dimension
    must be a multiple of: FP8 block size, the Marlin tile (N%64, K%128) for NVFP4 and int4, int4 packing
    and group size.
    """

    name: str  # dense | fp8-tensor | fp8-channel | fp8-block | nvfp4 | nvfp4-modelopt | mxfp4 | int4
    out_features: int
    in_features: int
    batch: tuple[int, ...] = ()  # leading dims of fused 3-D expert weights
    block: tuple[int, int] | None = None
    group: int | None = None
    dtype: str | None = None  # an unquantized weight's safetensors dtype (BF16, F16, F32, F64): its format tag

    @property
    def n_align(self) -> int:
        if self.name == "fp8-block":
            return self.block[0]
        if self.name in ("nvfp4", "nvfp4-modelopt", "int4", *PACKED_LAYOUTS):
            return 64
        if self.name in ("fp8-tensor", "fp8-channel"):
            return 16
        if self.name == "mxfp4":
            return 32
        return DENSE_ALIGN

    @property
    def k_align(self) -> int:
        if self.name == "fp8-block":
            return self.block[1]
        if self.name in ("nvfp4", "nvfp4-modelopt"):
            return 128  # NVFP4 group 16, and Marlin (the non-Blackwell path) needs K % 128
        if self.name in ("int4", *PACKED_LAYOUTS):  # the Marlin K tile, the pack factor 8 and whole groups
            return math.lcm(128, 8, self.group or 1)
        if self.name in ("fp8-tensor", "fp8-channel"):
            return 16
        if self.name == "mxfp4":
            return 32  # whole e8m0 scale blocks
        return DENSE_ALIGN

    @property
    def moe_align(self) -> int:
        """Per-rank alignment of a routed expert's intermediate dim (fused-MoE kernels, not linear ones).

        vLLM's Marlin MoE needs intermediate-per-rank % max(64, group); FP8-block needs whole blocks.
        """
        if self.name == "fp8-block":
            return math.lcm(64, *self.block)
        if self.name in ("int4", *PACKED_LAYOUTS):
            return math.lcm(64, 8, self.group or 1)
        if self.name == "mxfp4":  # vLLM rounds an MXFP4 expert slice up to 128 for its kernels (Marlin, DeepGEMM,
            return 128  # CUTLASS, TRT-LLM: mxfp4_round_up_hidden_size_and_intermediate_size); whole tiles stay exact
        return 64

    @property
    def format_tag(self) -> str:
        if self.name == "dense":
            return DENSE_TAGS[self.dtype or "BF16"]
        return {"fp8-tensor": "fp8", "fp8-channel": "fp8", "fp8-block": "fp8",
                "nvfp4": "nvfp4", "nvfp4-modelopt": "nvfp4", "mxfp4": "mxfp4", "int4": "int4", "gptq": "gptq",
                "gptq_v2": "gptq",
                "awq": "awq"}[self.name]


def detect_layout(module: str, params: dict[str, TensorInfo], qcfg: QuantConfig) -> LinearLayout:
    """Decide a linear layer's storage layout from its tensors (names, dtypes, shapes) and the config."""
    has = set(params)
    unknown = has - set(LINEAR_SUFFIXES)
    if unknown:
        raise HubpadError(f"tensor {module}.{sorted(unknown)[0]}: unknown parameter of a linear layer")

    if qcfg.packed is not None and "qweight" in has:
        out_f, in_f, group = detect_packed(module, params, qcfg.packed)
        return LinearLayout(qcfg.packed.layout, out_f, in_f, group=group)
    if "weight_packed" in has and params["weight_packed"].dtype == "I32":
        return _int4_layout(module, params)
    if "weight_packed" in has:  # compressed-tensors NVFP4
        _expect(module, params, "weight_packed", "U8")
        _expect(module, params, "weight_scale", "F8_E4M3")
        out_f, packed_cols = params["weight_packed"].shape[-2:]
        layout = LinearLayout("nvfp4", out_f, packed_cols * 2, batch=params["weight_packed"].shape[:-2], group=16)
        _check_grouped_scale(module, params["weight_scale"], layout, 16)
        return layout
    if "weight" not in has:
        raise HubpadError(f"tensor {module}: linear layer without a weight tensor ({', '.join(sorted(has))})")
    w = params["weight"]
    if w.dtype in ("I8", "U8") and "scale" in has:  # DeepSeek-V4's MXFP4 experts: e2m1 pairs, an e8m0 scale per 32
        extra = has - {"weight", "scale"}
        if extra:
            raise HubpadError(f"tensor {module}.{sorted(extra)[0]}: unexpected parameter of an MXFP4 layer")
        if params["scale"].dtype != "F8_E8M0":
            raise HubpadError(f"tensor {module}.scale: dtype {params['scale'].dtype}, expected F8_E8M0 for MXFP4")
        out_f, packed_cols = w.shape[-2:]
        layout = LinearLayout("mxfp4", out_f, packed_cols * 2, batch=w.shape[:-2], group=32)
        _check_grouped_scale(module, params["scale"], layout, 32)
        return layout
    if w.dtype == "U8" and qcfg.expert_store == "mxfp4" and "weight_scale" in has and "weight_scale_2" not in has:
        return _stored_mxfp4_layout(module, params)
    if w.dtype == "U8" and "weight_scale_2" in has:  # ModelOpt NVFP4
        _expect(module, params, "weight_scale", "F8_E4M3")
        out_f, packed_cols = w.shape[-2:]
        layout = LinearLayout("nvfp4-modelopt", out_f, packed_cols * 2, batch=w.shape[:-2], group=16)
        _check_grouped_scale(module, params["weight_scale"], layout, 16)
        return layout
    if w.dtype in ("F8_E4M3", "F8_E5M2"):
        return _fp8_layout(module, params, qcfg)
    if w.dtype in FLOAT_DTYPES:
        if len(w.shape) == 1:
            raise HubpadError(f"tensor {module}.weight: 1-D weight where a linear layer was expected")
        extra = has - {"weight", "bias"}
        if extra:
            raise HubpadError(f"tensor {module}.{sorted(extra)[0]}: quantization parameter on an unquantized weight")
        return LinearLayout("dense", w.shape[-2], w.shape[-1], w.shape[:-2], dtype=w.dtype)
    raise HubpadError(f"tensor {module}.weight: dtype {w.dtype} is not a known weight format")


def pad_cell_zero(suffix: str, dtype: str, qcfg: QuantConfig) -> bytes | None:
    """What every padded cell of a tensor must hold to dequantize to 0: one zero element's bytes, or None for a
    scale tensor (whose new cells must be finite and positive instead)."""
    if suffix.startswith("weight_scale") or suffix == "scale" or (qcfg.packed is not None and suffix == "scales"):
        return None
    if qcfg.packed is not None and suffix in PACKED_SUFFIXES:
        return packed_zero_fill(qcfg.packed.layout, suffix)
    if dtype == "I32" and suffix in ("weight_packed", "weight_zero_point"):
        return ZERO_NIBBLES_INT4
    return b"\x00"


def _stored_mxfp4_layout(module: str, params: dict[str, TensorInfo]) -> LinearLayout:
    """An FP8 config's experts stored as MXFP4 (`store_dtype: mxfp4`): e2m1 pairs in `weight`, an e8m0 scale per 32
    inputs in `weight_scale` (bytes or F8_E8M0), what vLLM's Mxfp4MoEMethod loads."""
    extra = set(params) - {"weight", "weight_scale"}
    if extra:
        raise HubpadError(f"tensor {module}.{sorted(extra)[0]}: unexpected parameter of an MXFP4 layer")
    if params["weight_scale"].dtype not in ("U8", "F8_E8M0"):
        raise HubpadError(f"tensor {module}.weight_scale: dtype {params['weight_scale'].dtype}, expected U8 or F8_E8M0 "
                          f"(e8m0) for MXFP4")
    w = params["weight"]
    out_f, packed_cols = w.shape[-2:]
    layout = LinearLayout("mxfp4", out_f, packed_cols * 2, batch=w.shape[:-2], group=32)
    _check_grouped_scale(module, params["weight_scale"], layout, 32)
    return layout


def _int4_layout(module: str, params: dict[str, TensorInfo]) -> LinearLayout:
    """compressed-tensors int4 pack-quantized: eight codes per int32 word along the input dim."""
    if "weight_shape" not in params or "weight_scale" not in params:
        raise HubpadError(f"tensor {module}.weight_packed: int4 pack-quantized layer without weight_shape/weight_scale")
    out_f, packed_cols = params["weight_packed"].shape[-2:]
    in_f = packed_cols * 8
    sc = params["weight_scale"].shape
    group = None if sc[-1] == 1 else in_f // sc[-1]  # None: one scale per output channel
    if sc[-1] != 1 and in_f % sc[-1]:
        raise HubpadError(f"tensor {module}.weight_scale: shape {list(sc)} does not divide {in_f} input features")
    return LinearLayout("int4", out_f, in_f, group=group)


def _fp8_layout(module: str, params: dict[str, TensorInfo], qcfg: QuantConfig) -> LinearLayout:
    """FP8 with a per-tensor, per-channel or block scale, told apart by the scale's shape."""
    w = params["weight"]
    # DeepSeek-V4 names its (e8m0) block scale `scale`
    scale_name = next((n for n in ("weight_scale_inv", "scale") if n in params), "weight_scale")
    if scale_name not in params:
        raise HubpadError(f"tensor {module}.weight: FP8 weight without weight_scale or weight_scale_inv")
    out_f, in_f = w.shape[-2:]
    batch = w.shape[:-2]
    sc = params[scale_name].shape[len(batch):]
    if math.prod(sc) == 1:
        return LinearLayout("fp8-tensor", out_f, in_f, batch)
    if tuple(sc) == (out_f, 1) or tuple(sc) == (out_f,):
        return LinearLayout("fp8-channel", out_f, in_f, batch)
    candidates = list(qcfg.fp8_blocks) or [(128, 128)]
    for bn, bk in candidates:
        if tuple(sc) == (-(-out_f // bn), -(-in_f // bk)):
            return LinearLayout("fp8-block", out_f, in_f, batch, block=(bn, bk))
    raise HubpadError(
        f"tensor {module}.{scale_name}: shape {list(sc)} matches no FP8 scaling of a [{out_f}, {in_f}] weight "
        f"(tensor, channel or block {candidates})"
    )


def _expect(module: str, params: dict[str, TensorInfo], suffix: str, dtype: str) -> None:
    if suffix not in params:
        raise HubpadError(f"tensor {module}: NVFP4 layer without {suffix}")
    if params[suffix].dtype != dtype:
        raise HubpadError(f"tensor {module}.{suffix}: dtype {params[suffix].dtype}, expected {dtype} for NVFP4")


def _check_grouped_scale(module: str, scale: TensorInfo, layout: LinearLayout, group: int) -> None:
    want = (*layout.batch, layout.out_features, layout.in_features // group)
    if scale.shape != want:
        raise HubpadError(f"tensor {scale.name}: shape {list(scale.shape)}, expected {list(want)} for group {group}")
