"""Nemotron-H and Nemotron 3 (`nemotron_h`, NemotronHForCausalLM): a stack of single-mixer blocks, each a Mamba2 layer
("M", plan/mamba2.py), a GQA attention layer ("*"), a dense relu2 MLP ("-") or a latent MoE ("E"), as
`hybrid_override_pattern` (or transformers' `layers_block_type`) lists them; Nemotron 3 Super and Ultra add an MTP
block (`mtp.layers.N.*`: an attention layer with enorm/hnorm/eh_proj, then an MoE layer with final_layernorm).

Published names (transformers writes and reads them, and vLLM maps `backbone.` to `model.`): `backbone.embeddings`,
`backbone.layers.N.norm`, `backbone.layers.N.mixer.*`, `backbone.norm_f`, `lm_head`. The mixers' tensors:
- Mamba2: in_proj, conv1d, A_log, D, dt_bias, norm, out_proj: heads padded in whole groups (plan/mamba2.py).
- attention: q/k/v/o_proj, heads padded in whole GQA groups (Super: 32 heads / 2 kv -> 48 / 3 at TP 3 and 6).
- MLP: up_proj rows / down_proj columns of intermediate_size (non-gated).
- latent MoE: gate (router, with e_score_correction_bias) and the replicated fc1_latent_proj / fc2_latent_proj
  (vLLM: ReplicatedLinear, hidden <-> moe_latent_size) copied; routed experts `experts.E.up_proj` / `down_proj` of
  moe_intermediate_size over the latent; the shared expert `shared_experts.up_proj` / `down_proj` of
  moe_shared_expert_intermediate_size over hidden (vLLM builds it x n_shared_experts, transformers once: exactly one
  is accepted).

vLLM's NemotronHMTP projects [embedding | hidden] with a ColumnParallelLinear eh_proj to the hidden size, so MTP
speculative decoding needs hidden_size % TP == 0 (Super: 4096, not at TP 3 or 6): the card leaves it out there.

The Nemotron-H Puzzle (`nemotron_h_puzzle`, NemotronHPuzzleForCausalLM, Nemotron-Labs-3-Puzzle-75B-A9B) is the same
stack whose layers state configs of their own (`block_configs`, the MTP's `mtp_block_configs`): vLLM builds each MoE,
attention and MLP layer from the checkpoint's get_nemotron_h_config_for_layer (block i over config.json; its config
class is remote code) and every Mamba2 layer from config.json. Its MoE layers have expert widths of their own, padded
per width (adapters/layer_widths.py) and written back into their blocks; any other per-block key that would change a
sharded shape is refused. Published under `model.` (vLLM maps `backbone.` alike: both are read).
"""

from __future__ import annotations

import dataclasses

from hubpad.errors import ConfigError
from hubpad.plan.adapters import layer_widths
from hubpad.plan.adapters.base import Adapter, Role, one_shared_expert
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

_MTP = r"^mtp\.layers\.(\d+)\."
_ATTENTION = [(r"mixer\.q_proj$", Role("q")), (r"mixer\.[kv]_proj$", Role("kv")), (r"mixer\.o_proj$", Role("o"))]
# the width-sharded sublayers: (kind, block type, config key, {tail: role kind})
_WIDTHS = [("dense", "mlp", "intermediate_size", {r"mixer\.up_proj$": "rows", r"mixer\.down_proj$": "cols"}),
           ("expert", "moe", "moe_intermediate_size",
            {r"mixer\.experts\.\d+\.up_proj$": "rows", r"mixer\.experts\.\d+\.down_proj$": "cols"}),
           ("shared", "moe", "moe_shared_expert_intermediate_size",
            {r"mixer\.shared_experts\.up_proj$": "rows", r"mixer\.shared_experts\.down_proj$": "cols"})]


def _patterns(backbone: str) -> dict:
    """The adapter's tensor patterns for a checkpoint whose decoder lives under `backbone` (a regex): its layers and the
    MTP layers (`mtp.layers.N`)."""
    layers = (rf"^{backbone}\.layers\.(\d+)\.", _MTP)

    def each(tails: list) -> list:
        return [(p + t[0], *t[1:]) if isinstance(t, tuple) else p + t for p in layers for t in tails]

    widths = [(tail, Role(kind, group)) for group, _, _, tails in _WIDTHS for tail, kind in tails.items()]
    return dict(
        linear_patterns=each(_ATTENTION + widths),
        copy_modules=[rf"^{backbone}\.(embeddings|norm_f)$", r"^lm_head$"] + each(
            [r"norm$", r"mixer\.(gate|fc1_latent_proj|fc2_latent_proj)$", r"(enorm|hnorm|eh_proj|final_layernorm)$"]),
        copy_params=each([r"mixer\.gate\.e_score_correction_bias$"]),
        # (pattern, plan/mamba2.py kind)
        linear_attention=[(layers[0] + tail, kind) for tail, kind in (
            (r"mixer\.in_proj\.\w+$", "in_proj"), (r"mixer\.conv1d\.\w+$", "conv"),
            (r"mixer\.(A_log|D|dt_bias)$", "heads"), (r"mixer\.norm\.weight$", "norm"),
            (r"mixer\.out_proj\.\w+$", "out"))],
        layers=f"^(?:{layers[0][1:]}|{layers[1][1:]})")


class NemotronHAdapter(Adapter):
    """Nemotron 3's parsers (an MoE stack: qwen3_coder tool calls, nemotron_v3 reasoning) and its MTP drafter; the
    dense Nemotron-H base models have neither."""

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        one_shared_expert(config)
        return super().intermediate_sizes(config)

    def head_shape(self, config: dict) -> HeadShape:
        """head_dim as the engines read it: config.json's head_dim, else NemotronHConfig's default 128 (transformers and
        vLLM alike; not hidden // heads); the dense Nemotron-H releases state it as attention_head_dim, which their
        remote code read. The derivative states head_dim."""
        return HeadShape.uniform(int(config.get("head_dim") or config.get("attention_head_dim") or 128))

    def serving(self, config: dict) -> dict:
        moe = "E" in _pattern(config)
        layers = int(config.get("num_nextn_predict_layers") or 0)
        spec = {"method": "mtp", "num_speculative_tokens": layers} if layers else None
        features = ("arch:NemotronHForCausalLM",) + (("moe:nemotron_h_latent",) if config.get("moe_latent_size")
                                                     else ()) + (("spec:mtp", "spec:nemotron_h_mtp") if spec else ())
        return serving(tool="qwen3_coder" if moe else None, reasoning="nemotron_v3" if moe else None, spec=spec,
                       features=features)


_LETTERS = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*", "mlp": "-", "moe": "E"}


def _pattern(config: dict) -> str:
    """The layer types as vLLM reads them: a Puzzle's block_configs (its config class derives the pattern from them),
    hybrid_override_pattern, or transformers' layers_block_type."""
    if isinstance(config.get("block_configs"), list):
        return "".join(_LETTERS.get(b.get("block_type"), "?") for b in config["block_configs"] if isinstance(b, dict))
    pattern = config.get("hybrid_override_pattern")
    if isinstance(pattern, str):
        return pattern
    return "".join(_LETTERS.get(t, "?") for t in config.get("layers_block_type") or [])


_PUZZLE_BACKBONE = "(?:model|backbone)"  # the published Puzzle checkpoints' `model.`; vLLM maps `backbone.` alike
# What a Puzzle block may state besides its widths without changing a sharded shape: its type, the MoE's routing (the
# router and its correction bias are copied), the latent (replicated) and an attention layer's window. Any other key
# that differs from config.json's is refused: vLLM builds the Mamba2 layers from config.json, and hubpad pads one
# attention head count.
_FREE_BLOCK_KEYS = {"block_type", "n_routed_experts", "num_experts_per_tok", "routed_scaling_factor", "n_group",
                    "topk_group", "norm_topk_prob", "moe_latent_size", "sliding_window"}


class NemotronHPuzzleAdapter(NemotronHAdapter):
    """Nemotron-H Puzzle: each layer's block (`block_configs`, the MTP's `mtp_block_configs`) may state widths of its
    own, each width an intermediate group (adapters/layer_widths.py); served through its checkpoint's config class."""

    def for_config(self, config: dict) -> "NemotronHPuzzleAdapter":
        widths = [(tails, _groups(config, kind, block_type, key)) for kind, block_type, key, tails in _WIDTHS]
        layered = [p for tails, groups in widths for p in layer_widths.patterns(groups, tails)]
        return dataclasses.replace(self, linear_patterns=layered + self.linear_patterns)

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        one_shared_expert(config)
        return {group: (w.keys, w.size) for kind, block_type, key, _ in _WIDTHS
                for group, w in _groups(config, kind, block_type, key).items()}

    def serving(self, config: dict) -> dict:
        """Nemotron 3's flags, and --trust-remote-code: vLLM has no config class of its own for nemotron_h_puzzle and
        reads each layer's config from the checkpoint's (get_nemotron_h_config_for_layer)."""
        out = super().serving(config)
        rename = {"arch:NemotronHForCausalLM": "arch:NemotronHPuzzleForCausalLM",
                  "spec:nemotron_h_mtp": "spec:nemotron_h_puzzle_mtp"}
        features = [rename.get(f, f) for f in out["vllm_features"]]
        features += ["puzzle:mlp_widths"] if "-" in _pattern(config) else []
        return {**out, "vllm_features": features, "extra_args": ["--trust-remote-code"]}


def _layers(config: dict) -> list[layer_widths.Layer]:
    """Every layer with its block: the decoder's (`block_configs`, under `model.` or `backbone.`) and the MTP's
    (`mtp_block_configs`, `mtp.layers.N`), each block checked against config.json."""
    out = []
    for key, prefix in (("block_configs", rf"^{_PUZZLE_BACKBONE}\.layers\.(\d+)\."), ("mtp_block_configs", _MTP)):
        for i, block in enumerate(_blocks(config, key)):
            path = f"{key}.{i}"
            if block.get("block_type") not in ("mamba", "attention", "mlp", "moe"):
                raise ConfigError(f"config.json: {path}.block_type is {block.get('block_type')!r}, not one of mamba, "
                                  f"attention, mlp, moe")
            widths = {k for _, t, k, _ in _WIDTHS if t == block["block_type"]}
            for name, value in block.items():
                if name not in _FREE_BLOCK_KEYS | widths and value != config.get(name):
                    raise ConfigError(f"config.json: {path} states {name} {value!r} (config.json: "
                                      f"{config.get(name)!r}); hubpad pads a Puzzle's per-layer MLP and expert widths "
                                      f"only, and vLLM builds every Mamba2 layer from config.json")
            out.append(layer_widths.Layer(prefix.replace(r"(\d+)", str(i)), path, block))
    return out


def _blocks(config: dict, key: str) -> list[dict]:
    blocks = config.get(key) or []
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        raise ConfigError(f"config.json: {key} must be a list of objects")
    return blocks


def _groups(config: dict, kind: str, block_type: str, key: str) -> dict[str, layer_widths.Width]:
    return layer_widths.widths([la for la in _layers(config) if la.block["block_type"] == block_type], kind, key, config)


_INTERMEDIATE_KEYS = {kind: (key,) for kind, _, key, _ in _WIDTHS}
NEMOTRON_H = NemotronHAdapter(
    name="nemotron_h", model_types=("nemotron_h",), intermediate_keys=_INTERMEDIATE_KEYS,
    linear_attention_family="mamba2", mtp_fc_shards_hidden=True, **_patterns("backbone"))
NEMOTRON_H_PUZZLE = NemotronHPuzzleAdapter(
    name="nemotron_h_puzzle", model_types=("nemotron_h_puzzle",), intermediate_keys=_INTERMEDIATE_KEYS,
    linear_attention_family="mamba2", mtp_fc_shards_hidden=True, **_patterns(_PUZZLE_BACKBONE))
