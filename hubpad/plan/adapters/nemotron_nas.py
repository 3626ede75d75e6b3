"""Nemotron-NAS (`nemotron-nas`, DeciLMForCausalLM: Llama-3.3-Nemotron-Super-49B v1 / v1.5, Llama-3.1-Nemotron-Ultra-
253B): Llama layers whose block (`block_configs[i]`) states its own attention and FFN. vLLM's nemotron_nas.py builds
layer i from its block: no attention (`attention.no_op`) or a LlamaAttention of num_attention_heads query heads over
num_attention_heads // `attention.n_heads_in_group` kv heads; no FFN (`ffn.no_op`) or a LlamaMLP whose width it derives
from `ffn.ffn_mult`: find_multiple(int(2 * ffn_mult * hidden_size / 3), 256). Its config class is the checkpoint's
remote code (--trust-remote-code), which keeps num_key_value_heads and intermediate_size null.

Heads: each layer's kv heads are heads // its group size (HeadShape.kv_groups, the per-layer kv mechanism Gemma 4's
global layers use): padding appends whole groups of every size, so n_heads_in_group stays and query head i keeps kv
head i // group in every layer (Super: 64 heads / 8 kv -> 72 / 9 at TP 3, 96 / 12 at TP 6). head_dim is written: vLLM
falls back to hidden_size // heads without it.

FFN widths: each width is an intermediate group of its layers (adapters/layer_widths.py). vLLM computes the width from
ffn_mult, so a padded width must be one the formula yields, a multiple of 256 (`intermediate_multiple`); the planner
writes each group's width at its blocks' ffn_mult keys and `padded_config` turns it back into the multiplier the
formula maps to that width exactly (checked; refused where no float does).

A block that replaces its attention or FFN by a linear layer (`replace_with_linear`, Llama-3.1-Nemotron-51B) is refused:
vLLM's class builds none (it would build attention with n_heads_in_group null and stop), original or derivative.
"""

from __future__ import annotations

import dataclasses

from hubpad.errors import ConfigError
from hubpad.plan.adapters import layer_widths
from hubpad.plan.adapters.base import COPY_MODULES, COPY_PARAMS, L, Adapter, Role, layers_pattern
from hubpad.plan.adapters.vllm import serving
from hubpad.plan.heads import HeadShape

_MLP = {r"mlp\.(gate_proj|up_proj)$": "rows", r"mlp\.down_proj$": "cols"}
_FFN_ROUND = 256  # vLLM's _find_multiple(intermediate_size, 256)


def ffn_width(ffn_mult: float, hidden: int) -> int:
    """The MLP width vLLM's nemotron_nas.py (and the checkpoint's modeling code) derive from a block's ffn_mult."""
    width = int(2 * ffn_mult * hidden / 3)
    return width if width % _FFN_ROUND == 0 else width + _FFN_ROUND - width % _FFN_ROUND


def ffn_mult_for(width: int, hidden: int) -> float:
    """An ffn_mult that `ffn_width` maps to `width` (a multiple of 256), else ConfigError."""
    mult = 3 * width / (2 * hidden)  # any value within 256 below the width rounds up to it
    if ffn_width(mult, hidden) == width:
        return mult
    raise ConfigError(f"config.json: no ffn_mult gives an MLP width of {width} with hidden_size {hidden} through vLLM's "
                      f"find_multiple(int(2 * ffn_mult * hidden_size / 3), 256)")


def _blocks(config: dict) -> list[dict]:
    """block_configs, checked: one object per layer with `attention` and `ffn` objects vLLM can build."""
    blocks = config.get("block_configs")
    layers = int(config.get("num_hidden_layers") or 0)
    if not isinstance(blocks, list) or not all(isinstance(b, dict) and isinstance(b.get("attention"), dict)
                                               and isinstance(b.get("ffn"), dict) for b in blocks):
        raise ConfigError("config.json: block_configs must be a list of objects with attention and ffn objects "
                          "(nemotron-nas states every layer there)")
    if len(blocks) != layers:
        raise ConfigError(f"config.json: {len(blocks)} block_configs for {layers} layers")
    heads = int(config.get("num_attention_heads") or 0)
    for i, block in enumerate(blocks):
        for part in ("attention", "ffn"):
            if block[part].get("replace_with_linear") and not block[part].get("no_op"):
                raise ConfigError(f"config.json: block_configs.{i}.{part} replaces the layer's {part} with a linear "
                                  f"layer, which vLLM's DeciLMForCausalLM does not build (nemotron_nas.py builds "
                                  f"attention, an MLP or nothing), so neither this checkpoint nor a padded one serves")
        attention = block["attention"]
        group = attention.get("n_heads_in_group")
        if not attention.get("no_op") and (type(group) is not int or group <= 0 or heads % group):
            raise ConfigError(f"config.json: block_configs.{i}.attention.n_heads_in_group is {group!r}, not a positive "
                              f"divisor of the {heads} attention heads")
        mult = block["ffn"].get("ffn_mult")
        if not block["ffn"].get("no_op") and (isinstance(mult, bool) or not isinstance(mult, (int, float))
                                              or mult <= 0):
            raise ConfigError(f"config.json: block_configs.{i}.ffn.ffn_mult is {mult!r}, not a positive number")
    return blocks


def _groups(config: dict) -> dict[int, list[int]]:
    """Attention layers by their group size (n_heads_in_group), the first attention layer's size first (vLLM's
    convertor takes its kv heads as the model's)."""
    out: dict[int, list[int]] = {}
    for i, block in enumerate(_blocks(config)):
        if not block["attention"].get("no_op"):
            out.setdefault(int(block["attention"]["n_heads_in_group"]), []).append(i)
    if not out:
        raise ConfigError("config.json: no block_configs entry has attention (every attention.no_op is true)")
    return out


def _kv_key(group: int, base: int) -> str:
    return "kv" if group == base else f"kv@{group}"


def _widths(config: dict) -> dict[str, layer_widths.Width]:
    """The MLP widths by intermediate group: each FFN layer's width from its ffn_mult, stated at that key."""
    hidden = int(config.get("hidden_size") or 0)
    layers = [layer_widths.Layer(layers_pattern([str(i)]), f"block_configs.{i}.ffn",
                                 {"ffn_mult": ffn_width(block["ffn"]["ffn_mult"], hidden)})
              for i, block in enumerate(_blocks(config)) if not block["ffn"].get("no_op")]
    return layer_widths.widths(layers, "dense", "ffn_mult", config)


class NemotronNasAdapter(Adapter):
    """Per-layer kv heads and MLP widths from block_configs; served through the checkpoint's config class."""

    def for_config(self, config: dict) -> "NemotronNasAdapter":
        groups = _groups(config)
        base = next(iter(groups))
        kv = [(layers_pattern([str(i) for i in idx]) + r"self_attn\.[kv]_proj$", Role("kv", _kv_key(g, base)))
              for g, idx in groups.items()]
        return dataclasses.replace(self, linear_patterns=kv + layer_widths.patterns(_widths(config), _MLP)
                                   + self.linear_patterns)

    def kv_heads(self, config: dict) -> int:
        return int(config.get("num_attention_heads") or 1) // next(iter(_groups(config)))

    def head_shape(self, config: dict) -> HeadShape:
        heads = int(config.get("num_attention_heads") or 1)
        hd = int(config.get("head_dim") or int(config.get("hidden_size") or 0) // heads)
        groups = _groups(config)
        base = next(iter(groups))
        own = {_kv_key(g, base): g for g in groups if g != base}
        return HeadShape({"q": hd, "kv": hd, "o": hd, **dict.fromkeys(own, hd)},
                         {"q": "q_proj rows", "kv": "k/v_proj rows", "o": "o_proj columns",
                          **{k: f"k/v_proj rows (groups of {g})" for k, g in own.items()}},
                         kv_heads=True, config_head_dim=hd, kv_groups=own)

    def intermediate_sizes(self, config: dict) -> dict[str, tuple[tuple[str, ...], int]]:
        return {group: (w.keys, w.size) for group, w in _widths(config).items()}

    def padded_config(self, upstream: dict, config: dict, heads: int, kv: int) -> dict:
        """The blocks' ffn_mult back from the widths the planner wrote there (upstream's where the width stayed), and
        num_key_value_heads as upstream states it (null: the config class keeps it so)."""
        hidden = int(upstream.get("hidden_size") or 0)
        out = {**config, "block_configs": [dict(b) for b in config["block_configs"]]}
        for block, old in zip(out["block_configs"], _blocks(upstream)):
            if old["ffn"].get("no_op"):
                continue
            width = block["ffn"]["ffn_mult"]
            same = width == ffn_width(old["ffn"]["ffn_mult"], hidden)
            block["ffn"] = {**block["ffn"], "ffn_mult": old["ffn"]["ffn_mult"] if same else ffn_mult_for(width, hidden)}
        if "num_key_value_heads" in upstream:
            out["num_key_value_heads"] = upstream["num_key_value_heads"]
        else:
            out.pop("num_key_value_heads", None)
        return out

    def serving(self, config: dict) -> dict:
        """--trust-remote-code: vLLM has no config class of its own for nemotron-nas (the checkpoint's turns
        block_configs into the objects nemotron_nas.py reads)."""
        return {**serving(features=("arch:DeciLMForCausalLM",)), "extra_args": ["--trust-remote-code"]}


NEMOTRON_NAS = NemotronNasAdapter(
    name="nemotron-nas", model_types=("nemotron-nas",),
    linear_patterns=[(L + r"self_attn\.q_proj$", Role("q")), (L + r"self_attn\.o_proj$", Role("o"))],
    copy_modules=COPY_MODULES, copy_params=COPY_PARAMS, intermediate_keys={"dense": ()},
    intermediate_multiple=_FFN_ROUND,
)
