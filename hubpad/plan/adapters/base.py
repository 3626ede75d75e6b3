"""The adapter model: which config keys hold the sharded dims, and what role every tensor plays.

Every tensor name must match exactly one known pattern. An unknown name is an error naming it: copying
a tensor that should have been padded would publish a broken model that loads fine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hubpad.errors import HubpadError

L = r"^model\.layers\.(\d+)\."


@dataclass(frozen=True)
class Role:
    """What padding does to a linear layer.

    kind: "q" (rows = attention heads), "kv" (rows = kv heads), "o" (columns = attention heads),
    "rows"/"cols" (rows/columns = the intermediate dim of `group`), "copy" (untouched).
    """

    kind: str
    group: str | None = None


COPY = Role("copy")

# Linear layers shared by the Llama family (names as transformers and vLLM write them).
ATTENTION = [
    (L + r"self_attn\.q_proj$", Role("q")),
    (L + r"self_attn\.[kv]_proj$", Role("kv")),
    (L + r"self_attn\.o_proj$", Role("o")),
]
DENSE_MLP = [
    (L + r"mlp\.(gate_proj|up_proj)$", Role("rows", "dense")),
    (L + r"mlp\.down_proj$", Role("cols", "dense")),
]
EXPERTS = [
    (L + r"mlp\.experts\.\d+\.(gate_proj|up_proj)$", Role("rows", "expert")),
    (L + r"mlp\.experts\.\d+\.down_proj$", Role("cols", "expert")),
]
# Modules with weights that are never sharded along a padded dim (norms, routers, embeddings).
COPY_MODULES = [
    r"^model\.embed_tokens$", r"^model\.norm$", r"^lm_head$",
    L + r"(input_layernorm|post_attention_layernorm|pre_feedforward_layernorm|post_feedforward_layernorm)$",
]
ROUTERS = [L + r"mlp\.(gate|router\.gate|shared_expert_gate)$"]
# Parameters that are not `<module>.<suffix>` of a linear layer.
COPY_PARAMS = [
    L + r"mlp\.(expert_bias|e_score_correction_bias|gate\.e_score_correction_bias)$",
    L + r"self_attn\.rotary_emb\.inv_freq$", r"^model\.rotary_emb\.inv_freq$",
]


@dataclass
class Adapter:
    """One family of architectures: its model types, tensor patterns and config keys."""

    name: str
    model_types: tuple[str, ...]
    linear_patterns: list[tuple[str, Role]]
    copy_modules: list[str] = field(default_factory=list)
    copy_params: list[str] = field(default_factory=list)
    # intermediate group -> config keys holding its size (all present ones are updated together)
    intermediate_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    per_head_norms: bool = False
    hidden_must_divide_by_heads: bool = False  # transformers' LlamaConfig rejects hidden % heads != 0

    def __post_init__(self) -> None:
        self._linear = [(re.compile(p), r) for p, r in self.linear_patterns]
        self._copy_modules = [re.compile(p) for p in self.copy_modules]
        self._copy_params = [re.compile(p) for p in self.copy_params]
        # Planning asks these for every tensor (~185k in Hy3): one regex search instead of up to a dozen. The
        # patterns are tried in list order; as all of them are anchored at the start (^), the first alternative
        # that matches is the first pattern that would have, so the answers are the same.
        self._any_role = _alternation([p for p, _ in self.linear_patterns] + list(self.copy_modules))
        self._any_copy_param = _alternation(list(self.copy_params))

    def linear_role(self, module: str) -> Role | None:
        """The role of a linear layer (a module with weight/scale/bias params), or None if unknown."""
        if self._any_role is not None:
            m = self._any_role.search(module)
            if m is None:
                return None
            i = int(m.lastgroup[1:])
            return self._linear[i][1] if i < len(self._linear) else COPY
        for pattern, role in self._linear:
            if pattern.search(module):
                return role
        if any(p.search(module) for p in self._copy_modules):
            return COPY
        return None

    def is_copy_param(self, name: str) -> bool:
        if self._any_copy_param is not None:
            return self._any_copy_param.search(name) is not None
        return any(p.search(name) for p in self._copy_params)

    def is_per_head_norm(self, module: str) -> bool:
        return self.per_head_norms and bool(re.search(L + r"self_attn\.[qk]_norm$", module))

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        """Each intermediate group with the config keys that hold it and its size."""
        out = {}
        for group, keys in self.intermediate_keys.items():
            present = tuple(k for k in keys if config.get(k) is not None)
            if present:
                values = {config[k] for k in present}
                if len(values) > 1:
                    raise HubpadError(f"config.json: {' and '.join(present)} disagree ({sorted(values)})")
                out[group] = (present, int(config[present[0]]))
        return out

    def serving(self, config: dict) -> dict:
        """vLLM serving flags that fit this architecture (the card and recipe render them)."""
        return {"tool_call_parser": None, "reasoning_parser": None, "speculative_config": None, "extra_args": []}


def _alternation(patterns: list[str]) -> re.Pattern | None:
    """`(?P<p0>...)|(?P<p1>...)|...`, or None when a pattern is not anchored or cannot be combined safely."""
    if not patterns or not all(p.startswith("^") for p in patterns) or any("(?P" in p or "\\" + d in p
                                                                            for p in patterns for d in "123456789"):
        return None
    try:
        return re.compile("|".join(f"(?P<p{i}>{p})" for i, p in enumerate(patterns)))
    except re.error:
        return None


SHARED = [
    (L + r"mlp\.(shared_mlp|shared_experts|shared_expert)\.(gate_proj|up_proj)$", Role("rows", "shared")),
    (L + r"mlp\.(shared_mlp|shared_experts|shared_expert)\.down_proj$", Role("cols", "shared")),
]

