"""The adapter model: which config keys hold the sharded dims, and what role every tensor plays.

Every tensor name must match exactly one known pattern. An unknown name is an error naming it: copying
a tensor that should have been padded would publish a broken model that loads fine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

try:  # the regex parser, to read which literal texts a pattern ends with
    import re._constants as _sre_c
    import re._parser as _sre
except ImportError:  # Python 3.10
    import sre_constants as _sre_c
    import sre_parse as _sre

from hubpad.errors import ConfigError, HubpadError
from hubpad.plan.heads import HeadShape

L = r"^model\.layers\.(\d+)\."


@dataclass(frozen=True)
class Role:
    """What padding does to a linear layer.

    kind: "q" (rows = attention heads), "kv" (rows = kv heads), "o" (columns = attention heads), "qkv" (rows = a fused
    [q | k | v] of attention then kv heads, each section padded at its end: plan/sections.py),
    "rows"/"cols" (rows/columns = the intermediate dim of `group`), "gate_up" (rows = a fused [gate | up] of that dim
    twice, each half padded at its end: plan/sections.py), "copy" (untouched). For the head kinds,
    `group` names the per-head width (HeadShape.widths) when it is not the kind's own, as MLA's kv_b_proj.
    """

    kind: str
    group: str | None = None

    @property
    def width_key(self) -> str:
        return self.group or self.kind


COPY = Role("copy")


def width_kind(group: str) -> str:
    """The kind of an intermediate group ("dense", "expert", "shared"): a group of the layers with a width of their own
    (adapters/layer_widths.py, `expert@1280`) is its kind's, with that kind's kernel rules."""
    return group.partition("@")[0]


@dataclass(frozen=True)
class FusedExperts:
    """A fused 3-D tensor of routed experts [E, a, b] (no `.weight` suffix): which of its last two axes is the expert
    intermediate dim, and in how many equal parts (gate_up: 2, gate then up; down: 1), each padded at its end.

    Qwen3.5 stores gate_up_proj [E, 2I, H] and down_proj [E, H, I] (axis -2 / -1); Qwen3-VL-MoE the transposed
    [E, H, 2I] and [E, I, H] (axis -1 / -2), which is how vLLM reads each (is_fused_checkpoint_transposed)."""

    axis: int  # the family's layout: -2 rows, -1 columns (a checkpoint with the other one is read from its shape)
    parts: int  # 2 for gate_up (gate then up), 1 for down


@dataclass(frozen=True)
class PreshardedQKV:
    """A fused qkv_proj stored pre-sharded in num_key_value_heads chunks of [Q_c | K_c | V_c] (plan/presharded.py):
    the HeadShape width keys of its Q, K and V rows (one layer type's)."""

    q: str
    k: str
    v: str


@dataclass(frozen=True)
class VisionTower:
    """A vision tower vLLM shards by head over TP (plan/tower.py pads it in whole kv groups): where its dims live in
    config.json and what each of its padded tensors is.

    `node`: the config.json key of the tower's own config. `keys`: each dim (heads, kv, head_dim, v_dim, inter,
    hidden, merge) -> its key in that object; `defaults`: the value vLLM's config class takes for a key a config
    omits. `patterns`: tensor pattern -> plan/tower.py kind ("qkv", "proj", "sinks", "mlp_in", "mlp_out"); the rest
    of the tower is copied (the adapter's copy patterns name it). `shards`: what vLLM divides by TP ("heads": its
    attention, "inter": its MLP, "merger": its patch merger); an InternViT tower whose attention vLLM keeps whole on
    every rank shards only "inter", and the dims it does not shard may be left out of `keys` (1 by default)."""

    node: str
    keys: dict[str, str]
    defaults: dict[str, int]
    patterns: tuple[tuple[str, str], ...]
    shards: tuple[str, ...] = ("heads", "inter", "merger")


@dataclass(frozen=True)
class VllmRoute:
    """How a derivative must be served when vLLM's own class for its family would misread the padded config.

    vLLM's Qwen2 classes compute head_dim = hidden_size // heads and ignore config.head_dim: padded heads serve only
    through another class that reads head_dim (`hf_overrides`, e.g. its Llama class with q/k/v biases) or through
    another implementation (`model_impl`). config.json itself keeps its own architecture, which other engines read.
    """

    why: str  # what vLLM's own class does with the padded config
    route: str  # how the route serves it instead
    without: str  # what stock vLLM does with the derivative without the flag (the card says it)
    hf_overrides: dict | None = None
    model_impl: str | None = None
    features: tuple[str, ...] = ()  # vllm.py FIRST_RELEASE keys the route needs

    def record(self, config: dict) -> dict:
        """The plan's and hubpad.json's record of the route, for the derivative's padded `config`."""
        hidden, heads = int(config.get("hidden_size") or 0), int(config.get("num_attention_heads") or 1)
        return {"hf_overrides": self.hf_overrides, "model_impl": self.model_impl, "features": list(self.features),
                "why": self.why.format(hidden=hidden, heads=heads, wrong=hidden // heads,
                                       head_dim=config.get("head_dim")),
                "route": self.route,
                "without": self.without.format(hidden=hidden, heads=heads, wrong=hidden // heads,
                                               head_dim=config.get("head_dim"))}

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
# The MTP block at index num_hidden_layers (DeepSeek-V3, GLM-4.x): its own embedding, norms, projection, head.
MTP_MODULES = [L + r"(enorm|hnorm|eh_proj|embed_tokens|shared_head\.norm|shared_head\.head)$"]
# A vision-language model's language model sits under a prefix of its own (Qwen3-VL, Qwen3.5:
# `model.language_model.layers.N...`), its vision tower and projector beside it, copied byte for byte.
LANGUAGE_MODEL = "model.language_model."
VISION_TOWER = [r"^model\.visual\."]


def layers_pattern(indices: list[str], prefix: str = L) -> str:
    """`prefix` (a layers pattern with one `(\\d+)`) narrowed to the given layer indices (regex alternatives): the
    layers of one type, for families whose roles differ per layer type (config.json's layer_types)."""
    return prefix.replace(r"(\d+)", "(" + "|".join(indices) + ")")


def under(prefix: str, patterns: list) -> list:
    """The same patterns (strings, or (pattern, role) pairs) for a language model nested under `prefix`: every one
    that starts at `model.` starts at the prefix instead; `^lm_head$` and other top-level names stay where they are."""
    head = "^" + re.escape(prefix)
    out = []
    for item in patterns:
        pattern, rest = (item[0], item[1:]) if isinstance(item, tuple) else (item, None)
        pattern = head + pattern[len(r"^model\."):] if pattern.startswith(r"^model\.") else pattern
        out.append((pattern, *rest) if rest is not None else pattern)
    return out


def inside_vlm(linear_patterns: list, copy_modules: list, copy_params: list, layers: str = L,
               prefix: str = LANGUAGE_MODEL, tower: list = VISION_TOWER) -> dict:
    """A text family's Adapter fields for its language model nested in a vision-language checkpoint: its patterns
    moved under `prefix` (`under`: lm_head, mtp. and other top-level names stay), its dims read from text_config, the
    vision tower's modules copied byte for byte. For a tower vLLM replicates on every rank (`--mm-encoder-tp-mode
    data`, vllm.encoder_data_parallel)."""
    return dict(linear_patterns=under(prefix, linear_patterns), copy_modules=under(prefix, copy_modules) + tower,
                copy_params=under(prefix, copy_params), text_config="text_config", layers=under(prefix, [layers])[0])


def repeat_at_top(upstream: dict, config: dict, text_key: str) -> dict:
    """`config` with each padded text_config value also written at the top level where the upstream config.json
    repeats that key with the same value beside text_config (EXAONE 4.5's does: hidden_size, heads, kv heads,
    intermediate_size), so no reader finds the old count there."""
    before, after = upstream.get(text_key) or {}, config.get(text_key) or {}
    return {**config, **{k: v for k, v in after.items()
                         if k in upstream and upstream[k] == before.get(k) and v != before.get(k)}}


# Parameters that are not `<module>.<suffix>` of a linear layer.
COPY_PARAMS = [
    L + r"mlp\.(expert_bias|e_score_correction_bias|gate\.e_score_correction_bias)$",
    L + r"self_attn\.rotary_emb\.inv_freq$", r"^model\.rotary_emb\.inv_freq$",
]


# What Adapter._compile sets (Adapter.__getattr__ compiles on first use of any of them).
_COMPILED = frozenset({"_linear", "_head_vectors", "_head_rows", "_fused_experts", "_presharded_qkv",
                       "_linear_attention", "_linear_kinds", "_tower", "_tower_each", "_tower_kinds", "_copy_modules",
                       "_copy_params", "_any_role", "_any_copy_param", "_copy_param_tails"})


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
    # vLLM's model class computes head_dim = hidden_size // heads and ignores config.head_dim (Qwen2, Qwen2-MoE):
    # padded heads that change that quotient serve only through `vllm_route`, and are refused without one.
    vllm_head_dim_from_hidden: bool = False
    # vLLM reads the family's config.json through a transformers config class that rejects hidden_size % heads != 0
    # (DeepSeek-V2's DeepseekV2Config): padded heads that do not divide the hidden size serve only through
    # `vllm_route`, which names a config class that accepts them.
    vllm_config_rejects_uneven_heads: bool = False
    vllm_route: VllmRoute | None = None
    # 1-D parameters holding one value per attention head (gpt-oss attention sinks): padded with zeros.
    head_vectors: list[str] = field(default_factory=list)
    # Other tensors whose first axis holds whole heads (any trailing dims): pattern -> HeadShape width key (rows per
    # head; the key's head count: kv heads for per_kv / kv_groups keys, else query heads), padded at the end with zeros
    # (Inkling's per-kv-head short convolutions, [kv x head_dim, 1, K]).
    head_rows: list[tuple[str, str]] = field(default_factory=list)
    # Routed experts stored fused as 3-D tensors without a `.weight` suffix (Qwen3-VL-MoE, Qwen3.5): pattern ->
    # FusedExperts, padded along their intermediate axis (dense formats only).
    fused_experts: list[tuple[str, "FusedExperts"]] = field(default_factory=list)
    # Fused qkv_proj modules stored pre-sharded (MiMo-V2.5): module pattern -> PreshardedQKV (plan/presharded.py).
    presharded_qkv: list[tuple[str, "PreshardedQKV"]] = field(default_factory=list)
    # Gated DeltaNet linear-attention tensors (Qwen3.5, Qwen3-Next): pattern -> plan/gdn.py kind.
    linear_attention: list[tuple[str, str]] = field(default_factory=list)
    # A vision tower vLLM shards by head (plan/tower.py), padded with the language model.
    vision_tower: VisionTower | None = None
    # Upstream files copied although their names look like other weight formats (a component's own safetensors in a
    # folder of its own, as MiMo-V2.5's audio_tokenizer/): fnmatch patterns.
    keep_files: tuple[str, ...] = ()
    # Folders holding the weights instead of the root (a Diffusers pipeline's `transformer/` and `vision_encoder/`):
    # each folder's shards are planned, padded and written in it, with its own index and config.json (plan/folders.py)
    weight_folders: tuple[str, ...] = ()
    # Which linear attention `linear_attention` names: "gdn" (plan/gdn.py), "kda" (plan/kda.py, Kimi Delta
    # Attention) or "lightning" (plan/lightning.py); KDA and lightning layers share tensor names with the family's
    # full-attention layers: only the layers `kda.layers(config)` / `lightning.layers(config)` list are linear
    # attention.
    linear_attention_family: str = "gdn"
    # The attention heads are the linear-attention layers' count (one num_attention_heads, whose padding rules the
    # linear family states, as lightning's norm groups and slopes): the full-attention heads take the padded linear
    # count instead of choosing their own.
    heads_follow_linear: bool = False
    # vLLM's MTP layer for the family projects to the hidden size column-parallel (Qwen3.5, Qwen3-Next `mtp.fc`):
    # MTP speculative decoding then needs hidden_size % TP == 0.
    mtp_fc_shards_hidden: bool = False
    # vLLM's MoE block for the family raises "Tensor parallel size N is greater than the number of experts E"
    # (qwen2_moe.py, qwen3_moe.py, qwen3_next.py, hy_v3.py).
    tp_at_most_experts: bool = False
    # config keys vLLM's class for the family reads with no default (it stops without them) and that a config saved
    # by transformers may lack although published configs set them: key -> what vLLM does without it
    vllm_reads: dict[str, str] = field(default_factory=dict)
    # Where a multimodal config keeps its language model's dims (`text_config`); None: config.json itself.
    text_config: str | None = None
    # The layers' name prefix (a regex), for the rules that look at layer modules by name (per-head norms).
    layers: str = L
    # Only configs whose architectures include one of these (drafts share their decoder's model_type); (): any.
    architectures: tuple[str, ...] = ()
    # q/k RMSNorms over all heads of a layer (MiniMax-M2, `qk_norm_type: per_layer`): projection module -> its norm
    # module, both relative to a layer (e.g. "self_attn.q_proj" -> "self_attn.q_norm"). Zero heads would shrink the
    # norm's mean square by r = H'/H (kv heads for k); the planner scales the projection's stored rows by sqrt(r) and
    # the norm weight by 1/sqrt(r) instead, which restores it with eps untouched (plan/ops.py `scaled`).
    layer_qk_norms: dict[str, str] = field(default_factory=dict)
    # config keys of the language model (a dotted path reaches into a nested object) that hold a head count equal
    # to a padded dim's key, so they are padded with it: path -> dim key (MiniMax-M3's index head counts).
    tied_keys: dict[str, str] = field(default_factory=dict)
    # Why this family's padding is exact, where the declaration above does not show it: keys of plan/lossless.py
    # MECHANISMS, each one sentence of the card's "Why the outputs do not change" (e.g. "heads.indexer": an indexer
    # the heads never feed, copied). The rest is read off the fields above (lossless.declared); a mechanism none of
    # them states needs a MECHANISMS entry and its key here (docs/design.md, "Why the outputs do not change").
    lossless: tuple[str, ...] = ()
    # config key counting the shared experts that vLLM and transformers build as ONE MLP of that many routed experts'
    # width (moe_intermediate_size x n: ERNIE-4.5, EXAONE MoE, Trinity, Ling, Cohere2-MoE, DeepSeek-V2, Dots3 Note,
    # K2-Horizon): the "shared" group has no key of its own, its size follows the routed experts' padded width
    # (`tied_intermediate`), zeros at its end.
    shared_experts_key: str | None = None
    # vLLM derives the MLP widths from config values that only state multiples of this (DeciLM's ffn_mult, rounded up
    # to 256): a padded width is one of them too.
    intermediate_multiple: int = 1

    def __getattr__(self, name: str):
        """The compiled patterns, made on first use: hubpad knows ~70 adapters and a run uses one, so compiling
        every adapter's regexes at import cost a tenth of a second at every start."""
        if name in _COMPILED:
            self._compile()
            return object.__getattribute__(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _compile(self) -> None:
        self._linear = [(re.compile(p), r) for p, r in self.linear_patterns]
        self._head_vectors = [re.compile(p) for p in self.head_vectors]
        self._head_rows = [(re.compile(p), key) for p, key in self.head_rows]
        self._fused_experts = [(re.compile(p), f) for p, f in self.fused_experts]
        self._presharded_qkv = [(re.compile(p), q) for p, q in self.presharded_qkv]
        self._linear_attention = _alternation([p for p, _ in self.linear_attention])
        self._linear_kinds = [kind for _, kind in self.linear_attention]
        tower = self.vision_tower.patterns if self.vision_tower else ()
        self._tower = _alternation([p for p, _ in tower])
        self._tower_each = [(re.compile(p), kind) for p, kind in tower]
        self._tower_kinds = [kind for _, kind in tower]
        self._copy_modules = [re.compile(p) for p in self.copy_modules]
        self._copy_params = [re.compile(p) for p in self.copy_params]
        # Planning asks these for every tensor (~185k in Hy3): one regex search instead of up to a dozen. The
        # patterns are tried in list order; as all of them are anchored at the start (^), the first alternative
        # that matches is the first pattern that would have, so the answers are the same.
        self._any_role = _alternation([p for p, _ in self.linear_patterns] + list(self.copy_modules))
        self._any_copy_param = _alternation(list(self.copy_params))
        # A name can only be a copy param when its last dotted part ends one of these patterns: most of
        # Hy3's ~185k names (`...experts.57.gate_proj.weight_packed`) are settled by one set lookup.
        self._copy_param_tails = literal_tails(self.copy_params)

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
        tails = self._copy_param_tails
        if tails is not None and name[name.rfind(".") + 1:] not in tails and not name.endswith("\n"):
            return False  # ("$" also matches before a final newline: such a name takes the full search)
        if self._any_copy_param is not None:
            return self._any_copy_param.search(name) is not None
        return any(p.search(name) for p in self._copy_params)

    def never_copy_param(self, suffix: str) -> bool:
        """True when no name ending in `.<suffix>` can be a copy param (the tail prefilter of `is_copy_param`), so
        a planner can settle every such name at once."""
        tails = self._copy_param_tails
        return tails is not None and suffix not in tails and not suffix.endswith("\n") and "." not in suffix

    def is_head_vector(self, name: str) -> bool:
        return any(p.search(name) for p in self._head_vectors)

    def head_rows_of(self, name: str) -> str | None:
        """The HeadShape width key of a tensor whose first axis holds whole heads (head_rows), or None."""
        return next((key for p, key in self._head_rows if p.search(name)), None)

    def head_rules(self, heads: int, kv: int, hs: HeadShape, tp: int, hidden: int) -> list[str]:
        """Why `heads` / `kv` heads cannot serve at `tp` beyond the rules every family shares (dims.head_problems):
        a family's own (empty: none)."""
        return []

    def linear_attention_kind(self, name: str) -> str | None:
        """The plan/gdn.py kind of a Gated DeltaNet tensor, or None when `name` is not one (or the family has none)."""
        if self._linear_attention is None:
            return None
        m = self._linear_attention.search(name)
        return self._linear_kinds[int(m.lastgroup[1:])] if m else None

    def tower_kind(self, name: str) -> str | None:
        """The plan/tower.py kind of a padded vision-tower tensor, or None when `name` is not one."""
        if self._tower is None:
            return next((kind for p, kind in self._tower_each if p.search(name)), None)
        m = self._tower.search(name)
        return self._tower_kinds[int(m.lastgroup[1:])] if m else None

    def tp_notes(self, config: dict, tp: int) -> list[str]:
        """What serving the derivative (padded `config`) at `tp` needs beyond the card's command, in sentences: the
        card's serving notes and the TP advisor's row both say it."""
        return []

    def fused_experts_of(self, name: str) -> "FusedExperts | None":
        """How a fused 3-D expert tensor holds the intermediate dim, or None when `name` is not one."""
        return next((f for p, f in self._fused_experts if p.search(name)), None)

    def presharded_qkv_of(self, module: str) -> "PreshardedQKV | None":
        """The geometry keys of a fused pre-sharded qkv_proj module, or None when `module` is not one."""
        return next((q for p, q in self._presharded_qkv if p.search(module)), None)

    def dims_config(self, config: dict) -> dict:
        """The part of config.json that holds the language model's dims (text_config for a multimodal model)."""
        if self.text_config is None:
            return config
        text = config.get(self.text_config)
        if not isinstance(text, dict):
            raise ConfigError(f"config.json: {self.text_config} missing or not an object (the {self.name} language "
                              f"model's dims live there)")
        return text

    def check_tp(self, config: dict, tp: int) -> None:
        """Refuse a TP size this family cannot serve at even after padding: where vLLM's MoE block refuses a TP larger
        than the number of routed experts (`tp_at_most_experts`), that TP."""
        experts = routed_experts(config)
        if self.tp_at_most_experts and experts and tp > int(experts):
            raise ConfigError(f"config.json: {experts} routed experts < tp {tp}, and vLLM's {self.name} MoE block "
                              f"refuses a tensor-parallel size larger than the number of experts")

    def check_derivative(self, config: dict, tp: int) -> None:
        """Refuse a padded config (the language model's part) that vLLM's class would misread at `tp` without an error
        of its own (Cohere's unchecked heads // tp); `hubpad plan` checks the config it writes, `hubpad verify` the
        derivative's."""

    def layer_qk_norm_of(self, module: str) -> str | None:
        """The module of the norm over all heads that `module` (a q or k projection) feeds, or None."""
        for proj, norm in self.layer_qk_norms.items():
            if module.endswith("." + proj) and re.match(self.layers + re.escape(proj) + "$", module):
                return module[:-len(proj)] + norm
        return None

    def is_layer_qk_norm(self, module: str) -> bool:
        return any(module.endswith("." + norm) and re.match(self.layers + re.escape(norm) + "$", module)
                   for norm in self.layer_qk_norms.values())

    def tied_values(self, config: dict) -> dict[str, object]:
        """Each tied key present in the language model's config (tied_keys), with its value; ConfigError when one
        differs from the key it is tied to."""
        text, out = self.dims_config(config), {}
        for path, key in self.tied_keys.items():
            node, *rest = path.split(".")
            value = text.get(node)
            for part in rest:
                value = value.get(part) if isinstance(value, dict) else None
            if value is None:
                continue
            if value != text.get(key):
                raise ConfigError(f"config.json: {path} is {value!r}, not {key} ({text.get(key)!r}); {self.name} "
                                  f"needs them equal (vLLM shards one with the other)")
            out[path] = value
        return out

    def is_per_head_norm(self, module: str) -> bool:
        return self.per_head_norms and bool(re.search(self.layers + r"self_attn\.[qk]_norm$", module))

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        """Each intermediate group with the config keys that hold it and its size (a tied group: no keys)."""
        out = {}
        for group, keys in self.intermediate_keys.items():
            present = tuple(k for k in keys if config.get(k) is not None)
            if present:
                values = {config[k] for k in present}
                if len(values) > 1:
                    raise HubpadError(f"config.json: {' and '.join(present)} disagree ({sorted(values)})")
                out[group] = (present, int(config[present[0]]))
        shared = int(config.get(self.shared_experts_key) or 0) if self.shared_experts_key else 0
        if shared > 0 and "expert" in out:
            out["shared"] = ((), out["expert"][1] * shared)
        return out

    def tied_intermediate(self, config: dict, new_inter: dict[str, int]) -> dict[str, int]:
        """The padded intermediate sizes with the groups that follow another (`shared_experts_key`) set from it."""
        shared = int(config.get(self.shared_experts_key) or 0) if self.shared_experts_key else 0
        if shared > 0 and "expert" in new_inter and "shared" in new_inter:
            return {**new_inter, "shared": new_inter["expert"] * shared}
        return new_inter

    def missing_vllm_keys(self, config: dict) -> list[str]:
        """What config.json (its language model's part) lacks that vLLM's class for the family needs, said plainly."""
        text = self.dims_config(config)
        return [f"config.json has no {key}, which {why}" for key, why in self.vllm_reads.items() if key not in text]

    def route_for(self, config: dict) -> dict | None:
        """The vLLM route (VllmRoute.record) the derivative with this padded `config` needs, or None."""
        if self.vllm_route is None:
            return None
        hidden, heads = int(config.get("hidden_size") or 0), int(config.get("num_attention_heads") or 1)
        head_dim = config.get("head_dim")
        needed = ((self.vllm_head_dim_from_hidden and head_dim and hidden // heads != head_dim)
                  or (self.vllm_config_rejects_uneven_heads and hidden % heads != 0))
        return self.vllm_route.record(config) if needed else None

    def kv_heads(self, config: dict) -> int:
        """The kv heads of the layers whose k/v width key is "kv" (HeadShape.per_kv): num_key_value_heads, else every
        head its own (multi-head)."""
        return int(config.get("num_key_value_heads") or config.get("num_attention_heads") or 1)

    def head_shape(self, config: dict) -> HeadShape:
        """Rows/columns per head of each head-sharded layer: head_dim everywhere (multi-head / grouped-query)."""
        heads = int(config.get("num_attention_heads") or 1)
        return HeadShape.uniform(int(config.get("head_dim") or (int(config.get("hidden_size") or 0) // heads)))

    def for_config(self, config: dict) -> "Adapter":
        """The adapter for this config.json: itself, or (a family whose tensor roles depend on the layer types the
        config lists, as Gemma 4's sliding and global layers) a copy with patterns for it."""
        return self

    def kv_group_keys(self, config: dict) -> dict[str, tuple[str, ...]]:
        """The config keys stating each HeadShape.kv_groups layer type's kv heads (a dotted key: a nested value,
        written by `padded_config`), for the plan's dims; `config` is the language model's part."""
        return {}

    def padded_config(self, upstream: dict, config: dict, heads: int, kv: int) -> dict:
        """The derivative's config.json once the dims' keys are written into `config` (a copy of `upstream`): a family
        whose config states padded counts elsewhere too (per-layer overrides, a second layer type's keys) writes
        them here."""
        return config

    def vocab_sizes(self, config: dict) -> list[int]:
        """The vocab-parallel sizes vLLM builds for the model (embedding and head); the first that does not shard at a
        TP is the one the vocab plugin reports."""
        return [int(config.get("vocab_size") or 0)]

    def serving(self, config: dict) -> dict:
        """vLLM serving flags that fit this architecture (the card and recipe render them)."""
        return {"tool_call_parser": None, "reasoning_parser": None, "speculative_config": None, "extra_args": []}


def routed_experts(config: dict) -> int | None:
    """The number of routed experts, under whichever key the family's config names it."""
    return (config.get("num_experts") or config.get("num_local_experts") or config.get("n_routed_experts")
            or config.get("moe_num_experts"))


def mtp_speculative(config: dict) -> dict | None:
    """vLLM's speculative config for a checkpoint with MTP layers (`num_nextn_predict_layers`), else None."""
    n = config.get("num_nextn_predict_layers")
    return {"method": "mtp", "num_speculative_tokens": int(n)} if n else None


def one_shared_expert(config: dict) -> None:
    """A shared expert padded with the routed experts' width (moe_intermediate_size × n_shared_experts in vLLM)
    stays exact only when there is exactly one; refuse anything else rather than pad it wrongly."""
    shared = config.get("n_shared_experts")
    if shared not in (None, 0, 1):
        raise ConfigError(f"config.json: n_shared_experts {shared} is not supported (the shared expert is padded "
                          f"with the routed experts' width, which needs exactly one shared expert)")


def literal_tails(patterns: list[str]) -> frozenset[str] | None:
    """What a full match of any of `patterns` can have after its last ".": a finite set of literal texts when
    every pattern ends in `\\.` + literal alternatives + `$`, else None (then nothing is pre-filtered)."""
    out: set[str] = set()
    for pattern in patterns:
        tails = _pattern_tails(pattern)
        if tails is None:
            return None
        out |= tails
    return frozenset(out)


def _pattern_tails(pattern: str) -> set[str] | None:
    try:
        parsed = _sre.parse(pattern)
    except re.error:
        return None
    flags = parsed.state.flags if hasattr(parsed, "state") else parsed.pattern.flags
    items = list(parsed)
    if flags & ~re.UNICODE or not items or items[-1] != (_sre_c.AT, _sre_c.AT_END):
        return None
    pending, done = {""}, set()
    for op, av in reversed(items[:-1]):  # walk back from "$" to the last literal "."
        alternatives = _literal_alternatives(op, av)
        if alternatives is None:
            return None
        after: set[str] = set()
        for a in alternatives:
            for s in pending:
                if "." in a:
                    done.add(a[a.rfind(".") + 1:] + s)
                else:
                    after.add(a + s)
        pending = after
        if not pending:
            return done
    return None


def _literal_alternatives(op, av) -> list[str] | None:
    """The texts one parsed regex item can match, when it is a literal, a class of literals, a plain group
    or an alternation of literal sequences; None otherwise."""
    if op is _sre_c.LITERAL:
        return [chr(av)]
    if op is _sre_c.IN:
        return [chr(c) for o, c in av] if all(o is _sre_c.LITERAL for o, _ in av) else None
    if op is _sre_c.SUBPATTERN:
        _, add_flags, del_flags, sub = av
        return None if add_flags or del_flags else _sequence_alternatives(sub)
    if op is _sre_c.BRANCH:
        out: list[str] = []
        for branch in av[1]:
            texts = _sequence_alternatives(branch)
            if texts is None:
                return None
            out += texts
        return out
    return None


def _sequence_alternatives(items) -> list[str] | None:
    texts = [""]
    for op, av in items:
        alternatives = _literal_alternatives(op, av)
        if alternatives is None or len(texts) * len(alternatives) > 256:
            return None
        texts = [t + a for t in texts for a in alternatives]
    return texts


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

