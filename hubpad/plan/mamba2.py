"""Mamba2 (state-space) layers, as Nemotron-H / Nemotron 3 and Falcon-H1 ship them: their heads and groups, and each
tensor's recipe (both families' vLLM classes build the same MambaMixer2).

A Mamba2 layer has H heads of P channels (x, z; intermediate I = H P) in G groups: head h reads the group
h // (H / G) of B and C (N wide each), as transformers' torch path repeat_interleaves them and vLLM's kernels index
them. Its gated RMSNorm normalizes each group's H/G heads together (group_size = I / G, in transformers'
NemotronHRMSNormGated and vLLM's Mixer2RMSNormGated alike). In plan/gdn.py's terms a group is a key head (B and C of
N = hk rows each) and a head a value head (P = hv rows), r = H / G heads per group.

vLLM's MambaMixer2 (model_executor/layers/mamba/mamba_mixer2.py, 0.32) asserts H % tp == 0 and
(G % tp == 0 or G == 1); with G % tp == 0 it loads in_proj as a MergedColumnParallelLinear of [z I | x I | B G N |
C G N | dt H] rows and conv1d as one of [x I | B G N | C G N] channels, each section split contiguously over ranks,
and A_log (as A = -exp(A_log)), D, dt_bias, the norm's weight (sharded_weight_loader(0)) and out_proj's columns
(RowParallelLinear) likewise. Rank i thus holds heads [i H'/tp, ...) and groups [i G'/tp, ...), which are the same
heads' groups, and normalizes its own groups (n_groups % tp == 0: no collective). A norm group cannot take a new
head (its mean would change), so heads grow in whole groups of r: G' is the fewest groups >= G with G' % tp == 0
(Nemotron 3 Super: 8 groups of 16 heads -> 9 at TP 3, 12 at TP 6), each appended at the end of every section.

One group (G == 1) is the case the brief calls "Mamba2 with one group": vLLM then replicates B and C on every rank and
its norm spans the whole width (a sum of squares all-reduced over ranks, divided by the padded width), so padding
heads into that one group would shrink every real head's mean square by H / H'. No stored scale can undo it exactly:
x, B and C pass through the convolution's silu before the scan, and the gated norm's gate z through its own silu, so
no weight scales the norm's input linearly, and the norm's eps is config.json's layer_norm_epsilon, shared by every
RMSNorm of the model. What stays exact is the same rule: whole groups, here of all H heads. With H % tp == 0 nothing
is padded (G stays 1, replicated as upstream); otherwise G' = tp groups (the original one, then tp - 1 zero groups of
H heads: H' = tp H), which vLLM shards as G % tp == 0, rank 0 holding the original heads and their norm group
unchanged. That is exact but costs (tp - 1) x the Mamba2 weights and state: the advisor's extra disk says so.

A padded head is inert: its x, z, B and C rows and conv channels (and conv bias) are zero, so x = silu(0) = 0 after
the convolution and B = C = 0 in its group; the state update h' = exp(dt A) h + dt B x^T keeps h = 0 for any finite
dt and A (its A_log, D, dt_bias entries are 0.0: A = -1, dt = softplus(0 + 0) = log 2), y = C h + D x = 0, the gated
norm of its all-zero group is 0 x rsqrt(0 + eps) x w = 0 (its norm weight entries are 0.0), and out_proj's zero
columns add nothing. tests/test_nemotron_h.py proves it in float64 with transformers' NemotronH classes and replays
vLLM's per-rank slicing.

Tensors (published names, config.json keys mamba_num_heads, n_groups, mamba_head_dim, ssm_state_size, conv_kernel, or
Falcon-H1's mamba_n_heads, mamba_n_groups, mamba_d_head, mamba_d_state, mamba_d_conv and the width mamba_d_ssm):
in_proj.weight [2 I + 2 G N + H, hidden] (and .bias), conv1d.weight [I + 2 G N, 1, K] (and .bias), A_log / D /
dt_bias [H], norm.weight [I], out_proj.weight [hidden, I] (its bias, [hidden], copied). BF16/FP16/FP32; in_proj and
out_proj also as ModelOpt's per-tensor FP8 (an F8_E4M3 weight and scalar weight_scale / input_scale, as Nemotron 3
Super-NVFP4 stores 28 in_proj and 29 out_proj): zero rows or columns are zero whatever the one scale, which is copied.
Any other format of a Mamba2 tensor is refused, naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hubpad.errors import ConfigError
from hubpad.formats.recipe import COPY_OP, PadOp
from hubpad.formats.safetensors import TensorInfo
from hubpad.plan import gdn
from hubpad.plan.quant import FLOAT_DTYPES, QuantConfig

_FP8 = {"F8_E4M3", "F8_E5M2"}  # zero bytes are +0.0 in both
_TENSOR_SCALES = {"weight_scale", "input_scale"}  # ModelOpt's per-tensor FP8: copied, whatever the rows
# (what the geometry calls it, the config keys that may state it, first found wins: NemotronHConfig reads the
# legacy mamba_* spellings too; Falcon-H1 spells them mamba_n_heads, mamba_d_head, mamba_d_state, mamba_d_conv)
_KEYS = {"heads": ("mamba_num_heads", "mamba_n_heads"), "groups": ("n_groups", "mamba_n_groups"),
         "head_dim": ("mamba_head_dim", "mamba_d_head"), "state": ("ssm_state_size", "mamba_d_state"),
         "kernel": ("conv_kernel", "mamba_d_conv")}
# Falcon-H1 states the layer's width I as mamba_d_ssm (None: mamba_expand x hidden_size) and may leave mamba_d_head
# "auto" (I // heads), as FalconH1Config and vLLM's falcon_h1.py read them: the derivative writes its padded width.
_WIDTH_KEY = "mamba_d_ssm"


@dataclass(frozen=True)
class Geometry(gdn.Geometry):
    """Mamba2 heads as plan/gdn.py sees linear-attention heads: nk = groups (B and C, hk = N rows each), nv = heads
    (x and z, hv = P rows each), kernel = the convolution's width. `group_key`: the config key stating the groups."""

    group_key: str = "n_groups"
    heads_key: str = "mamba_num_heads"
    width_key: str | None = None  # the config key stating heads x head_dim, where the family has one

    @staticmethod
    def read(config: dict) -> "Geometry":
        values, names = {}, {}
        for what, keys in _KEYS.items():
            key = next((k for k in keys if k in config), keys[0])
            values[what], names[what] = config.get(key), key
        width = _width(config) if _WIDTH_KEY in config else None
        if width is not None and values["head_dim"] == "auto" and isinstance(values["heads"], int) and values["heads"]:
            values["head_dim"] = width // values["heads"]
        bad = [names[k] for k, v in values.items() if not isinstance(v, int) or isinstance(v, bool) or v <= 0]
        if bad:
            raise ConfigError(f"config.json: {bad[0]} missing or not a positive integer (needed for its Mamba2 layers)")
        if values["heads"] % values["groups"]:
            raise ConfigError(f"config.json: {names['heads']} {values['heads']} is not a multiple of "
                              f"{names['groups']} {values['groups']}")
        if width is not None and width != values["heads"] * values["head_dim"]:
            raise ConfigError(f"config.json: {_WIDTH_KEY} {width} is not {names['heads']} {values['heads']} x "
                              f"{names['head_dim']} {values['head_dim']}")
        return Geometry(values["groups"], values["heads"], values["state"], values["head_dim"], values["kernel"],
                        names["groups"], names["heads"], _WIDTH_KEY if width is not None else None)

    def with_heads(self, nk: int) -> "Geometry":
        return replace(self, nk=nk, nv=nk * self.ratio)

    def sections(self) -> list[int]:
        """Channels of conv1d: [x, B, C]."""
        return [self.nv * self.hv, self.nk * self.hk, self.nk * self.hk]

    def in_proj_sections(self) -> list[int]:
        """Rows of in_proj: [z, x, B, C, dt]."""
        return [self.nv * self.hv, *self.sections(), self.nv]

    def dims(self, after: "gdn.Geometry") -> list[tuple[str, tuple[str, ...], int, int]]:
        width = [("mamba width", (self.width_key,), self.nv * self.hv, after.nv * after.hv)] if self.width_key else []
        return [("mamba groups", (self.group_key,), self.nk, after.nk),
                ("mamba heads", (self.heads_key,), self.nv, after.nv)] + width

    def rank_dims(self) -> list[tuple[str, int, int]]:
        return [("mamba groups", self.nk, self.hk), ("mamba heads", self.nv, self.hv)]

    def shard_problems(self, tp: int, row_align: int) -> list[str]:
        """vLLM's MambaMixer2 asserts: heads % tp == 0, and groups % tp == 0 or one group (replicated)."""
        why = [f"{self.nv} mamba heads % tp {tp} != 0"] if self.nv % tp else []
        if self.nk % tp and self.nk != 1:
            why.append(f"{self.nk} mamba groups % tp {tp} != 0 (vLLM's MambaMixer2 needs n_groups % tp == 0 or "
                       f"n_groups == 1)")
        return why

    def rank_rows(self, tp: int, align: int) -> list[dict]:
        groups = {"dim": "mamba groups", "total": self.nk, "required": True}
        if self.nk == 1:
            groups.update(per_rank=1, ok=True, rule="1 group, replicated on every rank")
        else:
            groups.update(per_rank=self.nk // tp if self.nk % tp == 0 else None, ok=self.nk % tp == 0,
                          rule=f"{self.nk} % {tp} == 0, {self.ratio} heads each")
        heads = {"dim": "mamba heads", "total": self.nv, "per_rank": self.nv // tp if self.nv % tp == 0 else None,
                 "ok": self.nv % tp == 0, "rule": f"{self.nv} % {tp} == 0", "required": True}
        return [groups, heads]

    def tensor_op(self, t: TensorInfo, kind: str, after: "gdn.Geometry", hidden: int,
                  quant: QuantConfig) -> tuple[PadOp, tuple[int, ...]]:
        return mamba2_op(t, kind, self, after, hidden)


def _width(config: dict) -> int:
    """Falcon-H1's mamba_d_ssm, or mamba_expand x hidden_size where it is null (FalconH1Config, vLLM alike)."""
    width = config.get(_WIDTH_KEY)
    if width is None:
        expand, hidden = config.get("mamba_expand"), config.get("hidden_size")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (expand, hidden)):
            raise ConfigError(f"config.json: {_WIDTH_KEY} is null and mamba_expand x hidden_size is not a size")
        width = int(expand * hidden)
    if not isinstance(width, int) or isinstance(width, bool) or width <= 0:
        raise ConfigError(f"config.json: {_WIDTH_KEY} {width!r} is not a positive integer")
    return width


def mamba2_op(t: TensorInfo, kind: str, g: Geometry, g2: Geometry, hidden: int) -> tuple[PadOp, tuple[int, ...]]:
    """The byte recipe and new shape of one Mamba2 tensor (kinds: "in_proj", "conv", "heads" (A_log, D, dt_bias),
    "norm", "out"); a ConfigError when its shape or dtype is not the one config.json implies."""
    suffix = t.name.rsplit(".", 1)[-1]
    if kind == "out" and suffix == "bias":  # [hidden]: out_proj's output, not padded
        _expect(t, (hidden,))
        return COPY_OP, t.shape
    projection = kind in ("in_proj", "out")
    if projection and suffix in _TENSOR_SCALES and t.shape in ((), (1,)):  # FP8 with one scale per tensor
        return COPY_OP, t.shape
    if not (t.dtype in FLOAT_DTYPES or (projection and suffix == "weight" and t.dtype in _FP8)) or (
            projection and suffix not in ("weight", "bias")):
        raise ConfigError(f"tensor {t.name}: a {t.dtype} {list(t.shape)} tensor of a Mamba2 layer; hubpad pads "
                          f"Mamba2 layers in BF16/FP16/FP32, and their in_proj / out_proj also in FP8 with one scale "
                          f"per tensor (weight_scale, input_scale)")
    if kind == "heads":
        _expect(t, (g.nv,))
        return gdn.append_op(t, g2.nv - g.nv), (g2.nv,)
    if kind == "norm":  # one weight per channel, sharded with the heads: the new groups' entries are 0.0
        _expect(t, (g.nv * g.hv,))
        return gdn.append_op(t, (g2.nv - g.nv) * g.hv), (g2.nv * g.hv,)
    if kind == "conv":
        if suffix == "bias":
            _expect(t, (sum(g.sections()),))
            return gdn.sections_op(t, g.sections(), g2.sections(), 1), (sum(g2.sections()),)
        _expect(t, (sum(g.sections()), 1, g.kernel))
        return gdn.sections_op(t, g.sections(), g2.sections(), g.kernel), (sum(g2.sections()), 1, g.kernel)
    if kind == "in_proj":
        rows, rows2 = g.in_proj_sections(), g2.in_proj_sections()
        if suffix == "bias":
            _expect(t, (sum(rows),))
            return gdn.sections_op(t, rows, rows2, 1), (sum(rows2),)
        _expect(t, (sum(rows), hidden))
        return gdn.sections_op(t, rows, rows2, hidden), (sum(rows2), hidden)
    if kind == "out":
        width, width2 = g.nv * g.hv, g2.nv * g.hv
        _expect(t, (hidden, width))
        s = t.itemsize
        return (PadOp("pad", 1, hidden, width * s, hidden, width2 * s, b"\x00" * s) if width2 != width else COPY_OP,
                (hidden, width2))
    raise ConfigError(f"internal error: unknown Mamba2 tensor kind {kind!r}")


def _expect(t: TensorInfo, shape: tuple[int, ...]) -> None:
    if t.shape != shape:
        raise ConfigError(f"tensor {t.name}: shape {list(t.shape)}, expected {list(shape)} for the Mamba2 layer "
                          f"config.json describes")
