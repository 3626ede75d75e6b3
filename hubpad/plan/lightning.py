"""Lightning attention (Ling / Ring 2.5 and 2.6, BailingMoeV2_5ForCausalLM): its head count, and each tensor's recipe.

A lightning layer (vLLM 0.32: layers/mamba/linear/bailing_linear_attn.py, BailingMoELinearAttention) has H heads of
head_dim d, each with its own query, key and value (QKVParallelLinear with kv heads = heads), a per-head decay slope, a
linear-attention state S (d x d) per head, a gated group RMSNorm over groups of H d / group_norm_size channels, and
`dense` back to the hidden size.

Tensors (published names, `model.layers.N.attention.*`): `query_key_value` [q | k | v] rows, H d each (and its bias
under use_bias / use_qkv_bias); `g_proj` [H d, hidden] (ColumnParallelLinear); `g_norm.weight` [H d] (vLLM's
BailingGroupRMSNormGate loads rank r's [r H d / tp, ...) slice); `dense` [hidden, H d] (RowParallelLinear; its bias,
hidden wide, copied); `query_layernorm` / `key_layernorm` [d] (one head's norm, copied).

vLLM's rules, which the padded count must meet (shard_problems):
- heads % tp (LinearAttention asserts it), every section of the fused qkv split evenly per rank;
- `tp <= group_norm_size` and `group_norm_size % tp == 0` (asserted), each group H d / group_norm_size channels:
  heads grow in whole norm groups (a new group is all new heads), so every real group keeps its channels and its
  rank, and a rank's groups are whole;
- the slopes: `MiniMaxText01LinearAttention._build_slope_tensor(H)` over the TOTAL head count, rank r taking
  [r H / tp, ...): the first H slopes of H' heads are H's exactly when floor(log2 H') == floor(log2 H) (the power-of-2
  part is then the same list, and the rest is a prefix of the same interleaved list); otherwise every real head would
  decay at another rate, so such a padding is refused. The layer factor (1 - layer_idx / (L - 1) + 1e-5) does not
  depend on the head count.

A padded head is inert: its q, k and v rows are zero (silu(0) = 0 under linear_silu; its q/k norms of zero are zero;
rotary keeps zero at zero), so its state stays zero whatever its decay, its output is zero, the gated norm of its
all-zero group is zero (0 x rsqrt(0 + eps)), and dense's zero columns add nothing. Its g_proj rows and g_norm entries
are zero too (any value would do: they scale a zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hubpad.errors import ConfigError
from hubpad.formats.recipe import COPY_OP, PadOp
from hubpad.formats.safetensors import TensorInfo
from hubpad.plan import gdn
from hubpad.plan.quant import FLOAT_DTYPES, QuantConfig


def slopes(heads: int) -> list[float]:
    """The decay slope of each head, as vLLM's MiniMaxText01LinearAttention._build_slope_tensor computes it (the same
    Python float arithmetic, before vLLM's float32 tensor)."""
    def power_of_2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]

    if math.log2(heads).is_integer():
        return power_of_2(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return power_of_2(closest) + slopes(2 * closest)[0::2][: heads - closest]


def slopes_kept(heads: int, padded: int) -> bool:
    """Whether `padded` heads give the first `heads` heads their upstream slopes: floor(log2) unchanged."""
    return math.floor(math.log2(padded)) == math.floor(math.log2(heads))


def layers(config: dict) -> frozenset[int]:
    """0-based indices of the lightning layers: vLLM's is_linear_layer, (i + 1) % layer_group_size != 0 for every
    layer (the trailing layers too, unlike Ling 3); none without a positive layer_group_size (all MLA)."""
    group, count = config.get("layer_group_size"), config.get("num_hidden_layers")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        raise ConfigError("config.json: num_hidden_layers missing or not a positive integer")
    if not isinstance(group, int) or isinstance(group, bool) or group <= 0:
        return frozenset()
    return frozenset(i for i in range(count) if (i + 1) % group)


@dataclass(frozen=True)
class Geometry(gdn.Geometry):
    """Lightning heads as plan/gdn.py sees linear-attention heads: nk = nv = H, hk = hv = head_dim (kernel unused).
    `groups`: group_norm_size (the gated norm's groups, whole heads each)."""

    groups: int = 1

    @staticmethod
    def read(config: dict) -> "Geometry":
        heads, hidden = config.get("num_attention_heads"), config.get("hidden_size")
        groups = config.get("group_norm_size", 1)
        head_dim = config.get("head_dim") or (hidden // heads if _positive(hidden) and _positive(heads) else None)
        for key, value in (("num_attention_heads", heads), ("head_dim", head_dim), ("group_norm_size", groups)):
            if not _positive(value):
                raise ConfigError(f"config.json: {key} missing or not a positive integer (needed for its lightning "
                                  f"attention layers)")
        if heads % groups:
            raise ConfigError(f"config.json: num_attention_heads {heads} is not a multiple of group_norm_size "
                              f"{groups}; the lightning layers' gated norm groups would split a head")
        return Geometry(heads, heads, head_dim, head_dim, 0, groups)

    @property
    def per_group(self) -> int:
        return self.nk // self.groups

    def with_heads(self, nk: int) -> "Geometry":
        return replace(self, nk=nk, nv=nk, groups=nk // self.per_group)

    def dims(self, after: "gdn.Geometry") -> list[tuple[str, tuple[str, ...], int, int]]:
        """The heads (one num_attention_heads with the MLA layers), the norm groups, and head_dim written out: vLLM
        falls back to hidden_size // heads without it, which the padded count would change."""
        return [("lightning heads", ("num_attention_heads",), self.nk, after.nk),
                ("lightning norm groups", ("group_norm_size",), self.groups, after.groups),
                ("lightning head dim", ("head_dim",), self.hk, after.hk)]

    def rank_dims(self) -> list[tuple[str, int, int]]:
        return [("lightning heads", self.nk, self.hk)]

    def shard_problems(self, tp: int, row_align: int, upstream: "Geometry | None" = None) -> list[str]:
        """Why these heads cannot serve at `tp` (empty: they can); `upstream`: the count whose slopes must be kept."""
        why = []
        if self.nk % tp:
            why.append(f"{self.nk} lightning heads % tp {tp} != 0")
        if self.nk % self.per_group or self.groups % tp:
            why.append(f"group_norm_size {self.groups} % tp {tp} != 0 (vLLM asserts it, and tp <= group_norm_size)")
        base = upstream or self
        if not slopes_kept(base.nk, self.nk):
            why.append(f"{self.nk} lightning heads would change the decay slopes of the first {base.nk} (vLLM builds "
                       f"them from the total count: floor(log2) must stay {math.floor(math.log2(base.nk))})")
        return why

    def rank_rows(self, tp: int, align: int) -> list[dict]:
        rows = []
        for dim, total, rule, ok in (("lightning heads", self.nk, f"{self.nk} % {tp} == 0", self.nk % tp == 0),
                                     ("lightning norm groups", self.groups, f"{self.groups} % {tp} == 0",
                                      self.groups % tp == 0)):
            rows.append({"dim": dim, "total": total, "per_rank": total // tp if ok else None, "ok": ok, "rule": rule,
                         "required": True})
        return rows

    def padded_for(self, tp: int, row_align: int) -> "Geometry":
        """The fewest heads, in whole norm groups, that shard at `tp` and keep every real head's slope."""
        for groups in range(self.groups, self.groups * 8 + tp * 8):
            g2 = self.with_heads(groups * self.per_group)
            if not g2.shard_problems(tp, row_align, self):
                return g2
        first = self.with_heads(-(-self.groups // tp) * tp * self.per_group)  # the fewest whole groups that shard
        raise ConfigError(f"no valid lightning-attention head padding exists for tp={tp} "
                          f"({'; '.join(self.shard_problems(tp, row_align))}; the fewest whole norm groups of "
                          f"{self.per_group} heads that shard, {first.groups} groups of {first.nk} heads: "
                          f"{'; '.join(first.shard_problems(tp, row_align, self))})")

    def tensor_op(self, t: TensorInfo, kind: str, after: "gdn.Geometry", hidden: int,
                  quant: QuantConfig) -> tuple:
        return lightning_op(t, kind, self, after, hidden)


def lightning_op(t: TensorInfo, kind: str, g: gdn.Geometry, g2: gdn.Geometry, hidden: int) -> tuple:
    """The byte recipe and new shape of one lightning tensor (kinds: "qkv" the fused [q | k | v] weight or bias,
    "head_rows" g_proj, "norm" g_norm [H d], "out" dense's columns, "hidden" dense's bias, copied)."""
    if t.dtype not in FLOAT_DTYPES:
        raise ConfigError(f"tensor {t.name}: a {t.dtype} tensor of a lightning attention layer; hubpad pads lightning "
                          f"layers in BF16/FP16/FP32 only")
    width, width2 = g.nk * g.hk, g2.nk * g.hk
    if kind == "qkv":  # weight [3 H d, hidden] or bias [3 H d]
        cols = t.shape[1] if len(t.shape) == 2 else 1
        _expect(t, (3 * width, hidden) if len(t.shape) == 2 else (3 * width,))
        return gdn.sections_op(t, [width] * 3, [width2] * 3, cols), (3 * width2, *t.shape[1:])
    if kind == "head_rows":
        _expect(t, (width, hidden))
        return gdn.sections_op(t, [width], [width2], hidden), (width2, hidden)
    if kind == "norm":
        _expect(t, (width,))
        return gdn.sections_op(t, [width], [width2], 1), (width2,)
    if kind == "out":
        _expect(t, (hidden, width))
        s = t.itemsize
        return (PadOp("pad", 1, hidden, width * s, hidden, width2 * s, b"\x00" * s) if width2 != width else COPY_OP,
                (hidden, width2))
    if kind == "hidden":
        _expect(t, (hidden,))
        return COPY_OP, (hidden,)
    raise ConfigError(f"internal error: unknown lightning tensor kind {kind!r}")


def _positive(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _expect(t: TensorInfo, shape: tuple[int, ...]) -> None:
    if t.shape != shape:
        raise ConfigError(f"tensor {t.name}: shape {list(t.shape)}, expected {list(shape)} for the lightning attention "
                          f"layer config.json describes")
