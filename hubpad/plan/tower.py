"""A vision tower whose attention vLLM shards by head over TP, padded in whole kv groups (MiMo-V2.5's
MiMoVisionTransformer): its head counts, what they must divide, and each padded tensor's recipe.

Per rank, as vLLM 0.32.0 builds it (model_executor/models/mimo_v2_omni.py, the tower's `quant_config` is None):
- `blocks.N.attn.qkv`: one QKVParallelLinear over a fused [Q | K | V] tensor (heads x head_dim | kv x head_dim |
  kv x v_dim rows, weight and bias), each section split contiguously over the ranks. MiMoVisionAttention divides
  both the heads and the kv heads by TP (`dist_utils.divide`: kv heads are never replicated), and a rank's query
  head i attends its local kv head i // group (the Triton window kernel's kv_group_num, MMEncoderAttention's GQA).
- `attn.proj`: RowParallelLinear over heads x v_dim columns (its bias is added once, after the reduce).
- `attn.sinks` [heads] (window blocks): whole on every rank, narrowed at run time to the rank's heads, each a logit
  bias of its head's key 0.
- `mlp.gate_proj` / `mlp.up_proj` rows and `mlp.down_proj` columns: the intermediate, column / row parallel.
- replicated, copied: patch_embed, norm1 / norm2, and the merger's norm; the 2-D rotary is per head and the same for
  every head.
- `merger.mlp.0` / `merger.mlp.2`: ColumnParallelLinear(hidden x merge², hidden x merge²) and its RowParallelLinear.
  That width is the tower's hidden size times the merge window, which padding never changes: a TP it does not
  divide is refused (vLLM would stop at `divide`).

Padding appends whole kv groups at the end: kv' is the smallest multiple of TP at least kv, heads' = kv' x group,
each qkv section grows at its end (rows and bias), proj grows zero columns, the sinks 0.0 (any finite value is
exact). A padded head's q, k and v are zero, so it attends uniformly over zero values and its output is zero, and
proj's zero columns add nothing; real heads keep their kv head (i // group) on every rank, since every section grows
at its end and the group is unchanged. The MLP grows zero neurons up to a multiple of TP: silu(0) x 0 = 0 and
down_proj's zero columns. The tower is unquantized in vLLM: its tensors must be BF16 / FP16 / FP32.

InternViT (`VisionTower.shards` = ("inter",)): vLLM 0.32.0 keeps its attention whole on every rank where it cannot
shard it (intern_vit.py InternParallelAttention falls back to replicated when heads + dummy heads do not divide TP;
interns1_vit.py builds q/k/v/projection as plain nn.Linear), but its MLP `fc1` / `fc2` stays Column / RowParallel
over intermediate_size (12800 in InternViT-6B: neither 3 nor 6 divides it). Only the MLP grows, by zero neurons:
fc1's zero rows and zero bias give act(0) = 0 (GELU), fc2's zero columns add nothing; the heads, the projector and
the rest of the tower are copied.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hubpad.errors import ConfigError
from hubpad.formats.recipe import COPY_OP, PadOp
from hubpad.formats.safetensors import TensorInfo
from hubpad.plan.adapters.base import VisionTower
from hubpad.plan.gdn import sections_op
from hubpad.plan.ops import _pad2d
from hubpad.plan.quant import FLOAT_DTYPES

DIMS = ("heads", "kv", "head_dim", "v_dim", "inter", "hidden", "merge")


@dataclass(frozen=True)
class Geometry:
    """A tower's head counts and widths, and where config.json states them."""

    heads: int
    kv: int
    head_dim: int
    v_dim: int
    inter: int
    hidden: int
    merge: int
    spec: VisionTower

    @staticmethod
    def read(config: dict, spec: VisionTower) -> "Geometry":
        node = config.get(spec.node)
        if not isinstance(node, dict):
            raise ConfigError(f"config.json: {spec.node} missing or not an object")
        values = {d: node.get(spec.keys.get(d, ""), spec.defaults.get(d, 1 if d not in spec.keys else None))
                  for d in DIMS}
        bad = [d for d, v in values.items() if not isinstance(v, int) or isinstance(v, bool) or v <= 0]
        if bad:
            raise ConfigError(f"config.json: {spec.node}.{spec.keys[bad[0]]} missing or not a positive integer "
                              f"(needed for its vision tower)")
        g = Geometry(**values, spec=spec)
        if g.heads % g.kv:
            raise ConfigError(f"config.json: {spec.node}.{spec.keys['heads']} {g.heads} is not a multiple of "
                              f"{spec.keys['kv']} {g.kv}")
        if g.head_dim != g.v_dim:
            raise ConfigError(f"config.json: {spec.node}: {spec.keys['head_dim']} {g.head_dim} != {spec.keys['v_dim']} "
                              f"{g.v_dim}; vLLM splits the tower's fused qkv as [heads x {spec.keys['head_dim']} | kv x "
                              f"{spec.keys['v_dim']} | kv x {spec.keys['v_dim']}], which reads k wrongly unless they "
                              f"are equal")
        return g

    @property
    def group(self) -> int:
        return self.heads // self.kv

    def shards(self, what: str) -> bool:
        """Whether vLLM divides this part of the tower ("heads", "inter", "merger") by TP."""
        return what in self.spec.shards

    @property
    def merger(self) -> int:
        """The merger's column-parallel width: hidden x merge²."""
        return self.hidden * self.merge ** 2

    def key(self, dim: str) -> str:
        return f"{self.spec.node}.{self.spec.keys[dim]}"

    def dims(self, after: "Geometry") -> list[tuple[str, tuple[str, ...], int, int]]:
        """The plan's dims: (name, config keys, before, after)."""
        heads = [("vision heads", (self.key("heads"),), self.heads, after.heads),
                 ("vision kv heads", (self.key("kv"),), self.kv, after.kv)] if self.shards("heads") else []
        return heads + [("vision intermediate", (self.key("inter"),), self.inter, after.inter)]

    def rank_rows(self, tp: int) -> list[dict]:
        """The per-rank table's rows, as vLLM checks them."""
        rows = []
        for dim, total, rule in self._sharded():
            ok = total % tp == 0
            rows.append({"dim": dim, "total": total, "per_rank": total // tp if ok else None, "ok": ok,
                         "rule": f"{total} % {tp} == 0", "required": True})
        return rows

    def _sharded(self) -> list[tuple[str, int, str]]:
        """(dim, total, rule) of each width vLLM divides by TP in this tower."""
        out = [("vision heads", self.heads, "divide"), ("vision kv heads", self.kv, "divide")] \
            if self.shards("heads") else []
        out += [("vision intermediate", self.inter, "divide")]
        return out + ([("vision merger (hidden x merge²)", self.merger, "divide")] if self.shards("merger") else [])

    def write(self, config: dict) -> dict:
        """`config` with this geometry's counts in its tower object (written even where upstream relied on vLLM's
        defaults, so the padded values are stated)."""
        node = dict(config[self.spec.node])
        if self.shards("heads"):
            node.update({self.spec.keys["heads"]: self.heads, self.spec.keys["kv"]: self.kv})
        node[self.spec.keys["inter"]] = self.inter
        return {**config, self.spec.node: node}


def problems(g: Geometry, tp: int) -> list[str]:
    """Why the tower cannot serve at `tp` as it is (empty: it can)."""
    why = [f"{dim} {n} % tp {tp} != 0" for dim, n, _ in g._sharded() if n % tp and not dim.startswith("vision merger")]
    if g.shards("merger") and g.merger % tp:
        why.append(_merger_reason(g, tp))
    return why


def _merger_reason(g: Geometry, tp: int) -> str:
    fits = ", ".join(str(t) for t in range(2, 9) if g.merger % t == 0)
    return (f"vLLM shards the vision tower's patch merger, a column-parallel layer {g.merger} wide ({g.key('hidden')} "
            f"{g.hidden} x {g.key('merge')}² {g.merge ** 2}), and {g.merger} % tp {tp} != 0; padding never changes "
            f"the tower's hidden size, so this tower cannot serve at tp {tp}"
            + (f" (of TP 2-8 it can at {fits})" if fits else ""))


def choose(g: Geometry, tp: int) -> Geometry:
    """Whole kv groups up to the smallest kv count TP divides (where vLLM shards the heads), and the MLP up to a
    multiple of TP; a ConfigError when the merger cannot shard."""
    if g.shards("merger") and g.merger % tp:
        raise ConfigError(f"config.json: {_merger_reason(g, tp)}")
    if not g.shards("heads"):
        return replace(g, inter=-(-g.inter // tp) * tp)
    kv = -(-g.kv // tp) * tp
    return replace(g, heads=kv * g.group, kv=kv, inter=-(-g.inter // tp) * tp)


def tower_op(t: TensorInfo, kind: str, g: Geometry, g2: Geometry) -> tuple[PadOp, tuple[int, ...]]:
    """The byte recipe and new shape of one padded tower tensor; a ConfigError when its shape or dtype is not the
    one config.json implies."""
    if t.dtype not in FLOAT_DTYPES:
        raise ConfigError(f"tensor {t.name}: {t.dtype}; vLLM builds the vision tower unquantized, so hubpad pads its "
                          f"tensors in BF16/FP16/FP32 only")
    suffix = t.name.rsplit(".", 1)[-1]
    zero = b"\x00" * t.itemsize
    if kind == "qkv":
        rows = [g.heads * g.head_dim, g.kv * g.head_dim, g.kv * g.v_dim]
        rows2 = [g2.heads * g.head_dim, g2.kv * g.head_dim, g2.kv * g.v_dim]
        width = g.hidden if suffix == "weight" else 1
        _expect(t, (sum(rows), g.hidden) if suffix == "weight" else (sum(rows),))
        return sections_op(t, rows, rows2, width), ((sum(rows2), g.hidden) if suffix == "weight" else (sum(rows2),))
    if kind == "sinks":
        _expect(t, (g.heads,))
        return _pad2d(t, 1, (g2.heads,), zero), (g2.heads,)
    if kind in ("proj", "mlp_out"):
        cols, cols2 = (g.heads * g.v_dim, g2.heads * g.v_dim) if kind == "proj" else (g.inter, g2.inter)
        if suffix == "bias":
            _expect(t, (g.hidden,))
            return COPY_OP, t.shape
        _expect(t, (g.hidden, cols))
        return _pad2d(t, 2, (g.hidden, cols2), zero), (g.hidden, cols2)
    if kind == "mlp_in":
        if suffix == "bias":
            _expect(t, (g.inter,))
            return _pad2d(t, 1, (g2.inter,), zero), (g2.inter,)
        _expect(t, (g.inter, g.hidden))
        return _pad2d(t, 2, (g2.inter, g.hidden), zero), (g2.inter, g.hidden)
    raise ConfigError(f"internal error: unknown vision tower tensor kind {kind!r}")


def _expect(t: TensorInfo, shape: tuple[int, ...]) -> None:
    if t.shape != shape:
        raise ConfigError(f"tensor {t.name}: shape {list(t.shape)}, expected {list(shape)} for the vision tower "
                          f"config.json describes")
