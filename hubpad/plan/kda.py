"""Kimi Delta Attention (KDA: Kimi-Linear, Kimi-K3, GLM-5-Next, Ling 3): its head count, and each KDA tensor's recipe.

KDA is Gated DeltaNet with a per-channel forget gate: H heads of head_dim d, each with its own query, key and value
(one value head per key head: the ratio plan/gdn.py keeps is 1), a forget gate g = -exp(A_log) * softplus(f_b(f_a(x)) +
dt_bias) per channel, beta = sigmoid(b_proj x) per head, a delta-rule state S (d x d) per head, and a gated RMSNorm
(o_norm, one [d] weight shared by every head, gate g_b(g_a(x)) or a full-rank g_proj) before o_proj.

Per-head tensors (rows H x d unless said): q/k/v_proj, q/k/v_conv1d [H d, 1, K] (or one conv1d over [q | k | v]),
f_b_proj, g_b_proj or g_proj, dt_bias [H d], b_proj [H, hidden], A_log [H] or [1, 1, H, 1], o_proj's columns.
Shared by every head, replicated, copied: f_a_proj, g_a_proj ([d, hidden] low-rank inputs), o_norm.

vLLM (model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py for Kimi-Linear, vllm/models/kimi_k3 for Kimi-K3,
vllm/models/glm5next for GLM-5-Next) asserts num_heads % tp == 0 and splits every per-head tensor contiguously
over ranks: q/k/v (and g) of the merged in_proj_qkvgfab per segment, b (num_heads rows) as its own segment, f_a
replicated (`replicated_shard_id`), f_b_proj / g_b_proj column-parallel, dt_bias through sharded_weight_loader(0),
A_log through a_log_weight_loader (4-D [1, 1, H, 1] viewed as [H], then narrowed), the three convolutions per
segment, o_proj row-parallel. Rank i therefore holds heads [i H'/tp, (i+1) H'/tp) of EVERY per-head tensor, so
heads appended at the end of each of them stay one consistent head on the last rank: padding at the end is exact
under exactly this mapping (a tensor sharded another way, or grouped per key head as Qwen3-Next's in_proj_qkvz is,
would need its own rule).

A padded head is inert whatever its gates do: its q, k and v rows and conv channels are zero, so q, k and v are
zero after the convolution (silu(0) = 0) and after the L2 norm (0 / sqrt(0 + eps) = 0); the state update
S' = diag(exp g) S + beta k (v - S^T k)^T keeps S = 0 for any finite g and beta (its A_log and dt_bias entries are
0.0, so g = -log 2, and beta = sigmoid(0) = 1/2: finite), the output S^T q is zero, the gated RMSNorm of zero is
zero (0 x rsqrt(0 + eps) x w x sigmoid(gate)), and o_proj's zero columns add nothing (tests/test_kda.py proves it
in float64, with random and extreme gates).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hubpad.errors import ConfigError
from hubpad.formats.recipe import COPY_OP, PadOp
from hubpad.formats.safetensors import TensorInfo
from hubpad.plan import gdn
from hubpad.plan.quant import FLOAT_DTYPES, QuantConfig

NESTED = "linear_attn_config"  # the published configs' sub-object (vLLM reads it; transformers prefers it)
# Ling 3 (bailing_hybrid) states no KDA keys of its own: vLLM's BailingMoeV3KimiDeltaAttention takes the model's
# num_attention_heads (the MLA layers' count too), head_dim and short_conv_kernel_size
_LING3 = {"num_heads": "num_attention_heads", "head_dim": "head_dim", "kernel": "short_conv_kernel_size"}


@dataclass(frozen=True)
class Geometry(gdn.Geometry):
    """KDA heads as plan/gdn.py sees linear-attention heads: nk = nv (one value head per key head), hk = hv = d.
    `keys`: the config keys holding the head count (`linear_attn_config.num_heads`, and `linear_num_heads` where
    transformers wrote it too)."""

    keys: tuple[str, ...] = ()

    @staticmethod
    def read(config: dict) -> "Geometry":
        nested = config.get(NESTED)
        if isinstance(nested, dict):
            where = {"num_heads": "num_heads", "head_dim": "head_dim", "kernel": "short_conv_kernel_size"}
            values = {k: nested.get(v) for k, v in where.items()}
            names = {k: f"{NESTED}.{v}" for k, v in where.items()}
        else:
            where = {"num_heads": "linear_num_heads", "head_dim": "linear_head_dim",
                     "kernel": "linear_conv_kernel_dim"}
            if "linear_num_heads" not in config and "short_conv_kernel_size" in config:  # Ling 3: the model's heads
                where = dict(_LING3)
            values = {k: config.get(v) for k, v in where.items()}
            names = where
        bad = [names[k] for k, v in values.items() if not isinstance(v, int) or isinstance(v, bool) or v <= 0]
        if bad:
            raise ConfigError(f"config.json: {bad[0]} missing or not a positive integer (needed for its Kimi Delta "
                              f"Attention layers)")
        keys = ((f"{NESTED}.num_heads",) if isinstance(nested, dict) else ()) + (
            ("linear_num_heads",) if "linear_num_heads" in config else ()) + (
            (_LING3["num_heads"],) if names == _LING3 else ())
        h, d = values["num_heads"], values["head_dim"]
        return Geometry(h, h, d, d, values["kernel"], keys)

    def with_heads(self, nk: int) -> "Geometry":
        return replace(self, nk=nk, nv=nk)

    def dims(self, after: "gdn.Geometry") -> list[tuple[str, tuple[str, ...], int, int]]:
        return [("KDA heads", self.keys, self.nk, after.nk)]

    def rank_dims(self) -> list[tuple[str, int, int]]:
        return [("KDA heads", self.nk, self.hk)]

    def tensor_op(self, t: TensorInfo, kind: str, after: "gdn.Geometry", hidden: int,
                  quant: QuantConfig) -> tuple[PadOp, tuple[int, ...]]:
        return kda_op(t, kind, self, after, hidden, quant)


def layers(config: dict) -> frozenset[int] | None:
    """0-based indices of the KDA layers: `layer_types` ("linear_attention"; what vLLM's GLM-5-Next reads and
    transformers writes), else `linear_attn_config.kda_layers` (1-based, what Kimi's configs publish and vLLM's
    Kimi classes read); None when the config says neither."""
    types = config.get("layer_types")
    if isinstance(types, list):
        return frozenset(i for i, t in enumerate(types) if t == "linear_attention")
    nested = config.get(NESTED)
    if isinstance(nested, dict) and isinstance(nested.get("kda_layers"), list):
        return frozenset(int(i) - 1 for i in nested["kda_layers"])
    group, count = config.get("layer_group_size"), config.get("num_hidden_layers")
    if isinstance(group, int) and group > 0 and isinstance(count, int):  # Ling 3: the last of each whole group, and
        # the trailing layers, are MLA (vLLM's BailingMoeV3TextConfig and transformers' BailingHybridConfig alike)
        return frozenset(i for i in range(count // group * group) if (i + 1) % group)
    return None


def kda_op(t: TensorInfo, kind: str, g: gdn.Geometry, g2: gdn.Geometry, hidden: int,
           quant: QuantConfig) -> tuple[PadOp, tuple[int, ...]]:
    """The byte recipe and new shape of one KDA tensor (kinds: "head_rows" H d rows, "beta" H rows, "conv" one
    [H d, 1, K] convolution or "conv3" one over [q | k | v], "dt_bias" [H d], "heads" A_log, "out" o_proj's
    columns); a ConfigError when its shape or format is not the one config.json implies."""
    if t.dtype not in FLOAT_DTYPES:
        raise ConfigError(f"tensor {t.name}: a {t.dtype} tensor of a Kimi Delta Attention layer; hubpad pads KDA "
                          f"layers in BF16/FP16/FP32 only")
    h, h2, d = g.nk, g2.nk, g.hk
    if kind == "heads":  # A_log: [H] or the older [1, 1, H, 1]
        if t.shape not in ((h,), (1, 1, h, 1)):
            _wrong(t, f"[{h}] or [1, 1, {h}, 1]")
        shape = (h2,) if len(t.shape) == 1 else (1, 1, h2, 1)
        return _rows(t, h, h2, t.itemsize), shape
    if kind == "dt_bias":
        _expect(t, (h * d,))
        return _rows(t, h * d, h2 * d, t.itemsize), (h2 * d,)
    if kind == "conv3":  # one convolution over [q | k | v]
        _expect(t, (3 * h * d, 1, g.kernel))
        rb = g.kernel * t.itemsize
        return (PadOp("sections", parts=tuple(PadOp("pad", 1, h * d, rb, h2 * d, rb, b"\x00" * t.itemsize)
                                              for _ in range(3))) if h2 != h else COPY_OP), (3 * h2 * d, 1, g.kernel)
    if kind == "out":
        _expect(t, (hidden, h * d))
        s = t.itemsize
        return (PadOp("pad", 1, hidden, h * d * s, hidden, h2 * d * s, b"\x00" * s) if h2 != h else COPY_OP,
                (hidden, h2 * d))
    unit = {"head_rows": d, "conv": d, "beta": 1}.get(kind)
    if unit is None:
        raise ConfigError(f"internal error: unknown KDA tensor kind {kind!r}")
    if kind == "conv":
        _expect(t, (h * d, 1, g.kernel))
    elif len(t.shape) != 2 or t.shape[0] != h * unit:
        _wrong(t, f"[{h * unit}, ...]")
    rest = t.shape[1:]
    return _rows(t, h * unit, h2 * unit, math.prod(rest) * t.itemsize), (h2 * unit, *rest)


def _rows(t: TensorInfo, rows: int, rows2: int, row_bytes: int) -> PadOp:
    if rows == rows2:
        return COPY_OP
    return PadOp("pad", 1, rows, row_bytes, rows2, row_bytes, b"\x00" * t.itemsize)


def _expect(t: TensorInfo, shape: tuple[int, ...]) -> None:
    if t.shape != shape:
        _wrong(t, str(list(shape)))


def _wrong(t: TensorInfo, expected: str) -> None:
    raise ConfigError(f"tensor {t.name}: shape {list(t.shape)}, expected {expected} for the Kimi Delta Attention "
                      f"layer config.json describes")
