"""A vision-language model whose language model is one of hubpad's text families, nested under a prefix of its own
with its dims in a nested config (`llm_config` / `text_config`): the InternViT family (InternVL-Chat, InternVL in
transformers' layout, NVLM-D, Skywork-R1V, Intern-S1).

The language model is padded by its own family's rules (Qwen2 with its LlamaForCausalLM route, Qwen3, Qwen3-MoE,
Llama), chosen by the nested config's model_type; every one of that family's tensor patterns moves under the prefix
(`model.` -> `lm_prefix`, `lm_head` -> `head_prefix` + `lm_head`). The rest of the checkpoint (tower, projector) is
copied, or, where the VLM names a `tower` (plan/tower.py), its sharded widths padded.

vLLM builds these language models with `init_vllm_registered_model(hf_config=config.text_config)` (internvl.py,
nvlm_d.py, skyworkr1v.py, interns1.py), so the class is the nested config's `architectures`: a Qwen2 route
(--hf-overrides naming LlamaForCausalLM) reaches it as a nested override, `{"text_config": {...}}`, which vLLM 0.32's
ModelConfig applies to the nested config object (`_apply_dict_overrides`). vLLM remaps `llm_config` to `text_config`
(transformers_utils/config.py `_CONFIG_ATTRS_MAPPING`), the same object, so the override names `text_config` for
both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import Adapter, VisionTower, under
from hubpad.plan.adapters.vllm import with_encoder_data_parallel


def _move(pattern: str, lm_prefix: str, head_prefix: str) -> str:
    """One text-family pattern moved under the VLM's prefixes: `^model\\.` as base.under moves it, `^lm_head` under
    `head_prefix`."""
    if pattern.startswith(r"^lm_head"):
        return "^" + re.escape(head_prefix) + pattern[1:]
    return under(lm_prefix, [pattern])[0]


def _move_all(items: list, lm_prefix: str, head_prefix: str) -> list:
    return [(_move(i[0], lm_prefix, head_prefix), *i[1:]) if isinstance(i, tuple) else _move(i, lm_prefix, head_prefix)
            for i in items]


@dataclass(frozen=True)
class VLM:
    """Where a VLM keeps its language model and what else it holds.

    `text_config`: the config.json key of the language model's config. `lm_prefix`: what replaces `model.` in its
    names; `head_prefix`: what goes before `lm_head`. `copy_modules` / `copy_params`: the tower and projector
    (copied). `tower`: a tower vLLM shards (plan/tower.py), or None. `encoder_dp`: the class sets
    supports_encoder_tp_data, so the card serves with --mm-encoder-tp-mode data and the tower is copied whole.
    `text_families`: nested model_type -> the text adapter that pads it; `text_refusals`: nested model_type -> why not.
    `remote_config`: served with --trust-remote-code (config.json names the checkpoint's own config class).
    """

    arch: str
    text_config: str
    lm_prefix: str
    head_prefix: str
    copy_modules: tuple[str, ...]
    copy_params: tuple[str, ...]
    text_families: dict[str, Adapter]
    text_refusals: dict[str, str] = field(default_factory=dict)
    tower: VisionTower | None = None
    encoder_dp: bool = False
    remote_config: bool = False  # transformers has no config class for it: vLLM reads the checkpoint's own


class NestedLM(Adapter):
    """The VLM's adapter: `for_config` reads the nested model_type and returns its text family's rules moved under
    the prefixes (a NestedLM whose `text` is that family's adapter)."""

    vlm: VLM
    text: Adapter | None

    def for_config(self, config: dict) -> "NestedLM":
        node = self.dims_config(config)
        model_type = node.get("model_type")
        if model_type in self.vlm.text_refusals:
            raise ConfigError(f"config.json: {self.vlm.text_config}: {self.vlm.text_refusals[model_type]}")
        text = self.vlm.text_families.get(model_type)
        if text is None:
            known = ", ".join(sorted(self.vlm.text_families))
            raise ConfigError(f"config.json: {self.vlm.text_config}.model_type {model_type!r}: hubpad pads a "
                              f"{self.name} language model of type {known}")
        return nested(self.name, self.model_types, self.vlm, text)

    def serving(self, config: dict) -> dict:
        base = self.text.serving(self.dims_config(config)) if self.text else super().serving(config)
        features = [f for f in base.get("vllm_features", []) if not f.startswith("arch:")] + [f"arch:{self.vlm.arch}"]
        out = {**base, "vllm_features": features}
        if self.vlm.encoder_dp:
            out = with_encoder_data_parallel(out, self.vlm.arch)
        if self.vlm.remote_config:
            out["extra_args"] = list(out.get("extra_args") or []) + ["--trust-remote-code"]
        return out

    def route_for(self, config: dict) -> dict | None:
        """The text family's route, its --hf-overrides nested under the config vLLM builds the language model from."""
        route = super().route_for(config)
        if route is None or not route.get("hf_overrides"):
            return route
        return {**route, "hf_overrides": {"text_config": route["hf_overrides"]},
                "features": route["features"] + ["hf-overrides:nested"]}


_MOVED = ("linear_patterns", "copy_modules", "copy_params", "head_vectors", "head_rows", "fused_experts",
          "presharded_qkv", "linear_attention")


def nested(name: str, model_types: tuple[str, ...], vlm: VLM, text: Adapter) -> NestedLM:
    """`text`'s rules for a language model inside `vlm` (the adapter `for_config` returns)."""
    values = {f.name: getattr(text, f.name) for f in fields(Adapter)}
    moved = {k: _move_all(list(values[k]), vlm.lm_prefix, vlm.head_prefix) for k in _MOVED}
    moved["copy_modules"] += list(vlm.copy_modules)
    moved["copy_params"] += list(vlm.copy_params)
    adapter = NestedLM(**{**values, **moved, "name": name, "model_types": model_types, "architectures": (vlm.arch,),
                          "text_config": vlm.text_config, "vision_tower": vlm.tower,
                          "layers": _move(text.layers, vlm.lm_prefix, vlm.head_prefix)})
    adapter.vlm, adapter.text = vlm, text
    return adapter


def vlm_adapter(name: str, model_types: tuple[str, ...], vlm: VLM) -> NestedLM:
    """The registry's entry for a VLM: the first text family's rules until `for_config` reads the nested type."""
    return nested(name, model_types, vlm, next(iter(vlm.text_families.values())))
