"""What a derivative needs from vLLM: the first release with each model class, parser and flag it uses.

Each version below was read in vLLM's released wheels (registry, tool_parsers/reasoning registries, model files,
engine args), checked in 0.5.5, 0.6.0–0.6.3, 0.6.6, 0.7.3, 0.8.0–0.8.5.post1, 0.9.0, 0.10.0–0.20.0 and 0.33.0: a
version here is the first of those releases that has the thing, and the one before it does not. The adapters'
`serving()` name the features a derivative uses; `min_vllm` turns them into the version the card states.
"""

from __future__ import annotations

# feature -> (first vLLM release that has it, what it is, for the card)
FIRST_RELEASE: dict[str, tuple[str, str]] = {
    "tool:llama3_json": ("0.6.3", "tool-call parser llama3_json"),
    "tool:hermes": ("0.6.0", "tool-call parser hermes"),
    "tool:mistral": ("0.6.0", "tool-call parser mistral"),
    "tool:hy_v3": ("0.20.0", "tool-call parser hy_v3"),
    "reasoning:qwen3": ("0.9.0", "reasoning parser qwen3"),
    "reasoning:hy_v3": ("0.20.0", "reasoning parser hy_v3"),
    "arch:Qwen3ForCausalLM": ("0.8.4", "Qwen3ForCausalLM"),
    "arch:Qwen3MoeForCausalLM": ("0.8.4", "Qwen3MoeForCausalLM"),
    "arch:HYV3ForCausalLM": ("0.20.0", "HYV3ForCausalLM"),
    "spec:hy_v3_mtp": ("0.20.0", "Hy3 MTP speculative decoding (HYV3MTPModel)"),
    # MixtralForCausalLM reads head_dim from config (it used hidden_size // heads before): padded heads load.
    "head_dim:mixtral": ("0.8.0", "MixtralForCausalLM reading head_dim from config.json"),
    "flag:moe-backend-marlin": ("0.17.0", "--moe-backend marlin"),
    # The vocab plugin's hooks (VocabParallelEmbedding padding_size, vllm.general_plugins in every worker) were
    # checked in 0.19.0–0.33.0 (docs: shared reference ecosystem.md §1.0b); older releases are not claimed.
    "plugin:vocab-patch": ("0.19.0", "hubpad's vocab plugin (checked from 0.19.0)"),
}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in version.split(".")[:3])


def min_vllm(features: list[str]) -> dict:
    """The oldest vLLM release that has every feature, and which features set it (for the card)."""
    known = [f for f in features if f in FIRST_RELEASE]
    if not known:
        return {"version": None, "because": []}
    version = max((FIRST_RELEASE[f][0] for f in known), key=_key)
    because = [FIRST_RELEASE[f][1] for f in known if FIRST_RELEASE[f][0] == version]
    return {"version": version, "because": because}


def serving(tool: str | None = None, reasoning: str | None = None, spec: dict | None = None,
            features: tuple[str, ...] = ()) -> dict:
    """An adapter's serving facts: parsers, speculative config, and the vLLM features they and the model use."""
    used = list(features)
    used += [f"tool:{tool}"] if tool else []
    used += [f"reasoning:{reasoning}"] if reasoning else []
    return {"tool_call_parser": tool, "reasoning_parser": reasoning, "speculative_config": spec, "extra_args": [],
            "vllm_features": used}
