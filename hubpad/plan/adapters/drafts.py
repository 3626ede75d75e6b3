"""Speculative-decoding draft models that run at their target's TP: EAGLE-3 drafts (vLLM's Eagle3LlamaForCausalLM and
Eagle3Qwen3ForCausalLM) and Qwen3 DSpark drafts (Qwen3DSparkForCausalLM), padded as their decoder layers are, and
what vLLM needs to pair one with its target (the speculative method and its default number of draft tokens).

vLLM builds a draft inside the target's workers with the target's tensor-parallel group (llama_eagle3.py,
qwen3_eagle3.py; SpeculativeConfig takes draft_tensor_parallel_size = the target's, and 1 is refused for EAGLE-3
at TP > 1 by the proposer), so a draft with 32 heads and 8 kv heads fails at TP=3 exactly as its target would. Per
rank (read in vLLM 0.32's llama_eagle3.py / qwen3_eagle3.py / llama.py / qwen3.py):
- `midlayer.self_attn.{q,k,v}_proj` (vLLM: one QKVParallelLinear over 2 x hidden inputs for layer 0, hidden for
  later ones) shard rows by head, `o_proj` (RowParallelLinear) columns; `mlp.gate/up_proj` rows and `down_proj`
  columns by neuron: padded as a Llama / Qwen3 decoder layer (whole GQA groups; zero rows and columns).
- `fc` (ReplicatedLinear 3 x target_hidden -> hidden), every norm (`input_layernorm`, `hidden_norm`,
  `post_attention_layernorm`, `norm`, Qwen3's per-head `q_norm`/`k_norm`, `input_norm`/`fc_norm` where present),
  `d2t` (draft id -> target id offsets, an I64 vector), `t2d` (skipped by vLLM's loader) and `mask_hidden`
  (P-EAGLE) are replicated or not sharded along any padded dim: copied byte for byte.
- `lm_head` [draft_vocab, hidden] (ParallelLMHead) and `embed_tokens` [vocab, hidden] (VocabParallelEmbedding,
  built even when the draft shares the target's) are vocab-parallel: the vocab plugin covers both sizes.
- The draft's heads need not match the target's: they are the draft's own attention, padded for the same TP. Its
  hidden size must be the target's (fc and the embeddings), which padding never changes.
"""

from __future__ import annotations

from hubpad.errors import ConfigError
from hubpad.plan.adapters.base import ATTENTION, COPY_PARAMS, DENSE_MLP, Adapter, L

# A draft's decoder layers: `midlayer.` (one layer, the published EAGLE-3 name) or `layers.N.` (several).
D = r"^(?:midlayer|layers\.\d+)\."

# The Llama family's attention and dense MLP roles (base.py), on the draft's layer names.
_ATTENTION = [(D + pattern[len(L):], role) for pattern, role in ATTENTION]
_MLP = [(D + pattern[len(L):], role) for pattern, role in DENSE_MLP]
_COPY_MODULES = [
    r"^fc$", r"^norm$", r"^lm_head$", r"^embed_tokens$", r"^input_norm$", r"^fc_norm\.\d+$",
    D + r"(input_layernorm|post_attention_layernorm|hidden_norm)$",
]
# Parameters without a linear layer: the vocab maps and P-EAGLE's mask vector (replicated or never loaded).
_COPY_PARAMS = [r"^d2t$", r"^t2d$", r"^mask_hidden$", *COPY_PARAMS]

# vLLM's registry names for each EAGLE-3 class (registry.py `_SPECULATIVE_DECODING_MODELS`)
EAGLE3_LLAMA_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "PEagleDraftModel", "PeagleLlamaForCausalLM",
                      "Eagle3Qwen2_5vlForCausalLM", "Eagle3Qwen3vlForCausalLM")
EAGLE3_QWEN3_ARCHS = ("Eagle3Qwen3ForCausalLM", "PeagleQwen3ForCausalLM")


class DraftAdapter(Adapter):
    """A draft model: no parsers of its own (it is served inside its target's `vllm serve`); `draft_method` is the
    speculative method vLLM runs it with."""

    draft_method = "eagle3"

    def serving(self, config: dict) -> dict:
        return {"tool_call_parser": None, "reasoning_parser": None, "speculative_config": None, "extra_args": [],
                "draft": {"method": self.draft_method}, "vllm_features": self.draft_features(config)}

    def draft_features(self, config: dict) -> list[str]:
        """The speculative method and the registry entry the draft's architectures name (vllm.py's first releases:
        e.g. Eagle3LlamaForCausalLM 0.8.5, Eagle3Qwen3ForCausalLM 0.24.0, Qwen3DSparkModel 0.25.0)."""
        archs = [a for a in config.get("architectures") or [] if a in self.architectures]
        return [f"spec:{self.draft_method}"] + [f"arch:{a}" for a in archs[:1]]

    def vocab_sizes(self, config: dict) -> list[int]:
        """The lm_head's draft vocab first (always loaded), then the embedding's vocab (built even when shared); the
        planner passes the config with its text part's keys on top (a speculators draft's draft_vocab_size is
        top-level)."""
        sizes = [config.get("draft_vocab_size"), config.get("vocab_size")]
        return [int(s) for s in sizes if s]


EAGLE3_LLAMA = DraftAdapter(
    # mistral: a padded Llama draft's own label (planned again, e.g. by `hubpad plan` on a derivative)
    name="eagle3_llama", model_types=("llama", "mistral"), architectures=EAGLE3_LLAMA_ARCHS,
    linear_patterns=_ATTENTION + _MLP, copy_modules=_COPY_MODULES, copy_params=_COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",)}, hidden_must_divide_by_heads=True, layers=D,
)

class DSparkAdapter(DraftAdapter):
    draft_method = "dspark"


# Qwen3 DSpark (vLLM 0.32 qwen3_dspark.py over qwen3_dflash.py): a Qwen3 decoder stack `layers.N.` whose layers take
# hidden-size inputs; the context's K/V come from each layer's own k/v_proj over hidden_norm(fc(target hidden
# states)) (DFlashQwen3Model._project_context_kv, per rank), the block's queries attend to them without a causal mask.
# Head-sharded: q/k/v/o and the optional per-head `attention_sink_bias` (DFlash's loader gives each rank
# heads / tp of it: padded with zeros, inert as the padded head's v and o are zero). Replicated: fc, hidden_norm,
# norm, the Markov head (markov_w1 an nn.Embedding, markov_w2 a ParallelLMHead with disable_tp), the confidence
# head (ReplicatedLinear), d2t/t2d, mask_embedding. lm_head and embed_tokens (optional) are vocab-parallel.
QWEN3_DSPARK_ARCHS = ("Qwen3DSparkModel", "DSparkDraftModel")  # DSparkDraftModel with model_type qwen3 (speculative.py)
_DSPARK_COPY_MODULES = [
    r"^fc$", r"^hidden_norm$", r"^norm$", r"^lm_head$", r"^embed_tokens$", r"^markov_head\.markov_w[12]$",
    r"^confidence_head\.proj$", D + r"(input_layernorm|post_attention_layernorm)$",
]
_DSPARK_COPY_PARAMS = [r"^d2t$", r"^t2d$", r"^mask_embedding$", *COPY_PARAMS]

QWEN3_DSPARK = DSparkAdapter(
    name="dspark_qwen3", model_types=("qwen3",), architectures=QWEN3_DSPARK_ARCHS,
    linear_patterns=_ATTENTION + _MLP, copy_modules=_DSPARK_COPY_MODULES, copy_params=_DSPARK_COPY_PARAMS,
    head_vectors=[D + r"self_attn\.attention_sink_bias$"],
    intermediate_keys={"dense": ("intermediate_size",)}, per_head_norms=True, layers=D,
)

EAGLE3_QWEN3 = DraftAdapter(
    name="eagle3_qwen3", model_types=("qwen3",), architectures=EAGLE3_QWEN3_ARCHS,
    linear_patterns=_ATTENTION + _MLP, copy_modules=_COPY_MODULES, copy_params=_COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",)}, per_head_norms=True, layers=D,
)


# The speculators format (vllm/transformers_utils/configs/speculators: speculators_model_type "eagle3", the decoder's
# config under `transformer_layer_config`, draft_vocab_size at top level, the target under
# speculators_config.verifier.name_or_path): vLLM builds a plain PreTrainedConfig from transformer_layer_config (no
# LlamaConfig check, so no relabel) and picks Eagle3LlamaForCausalLM / Eagle3Qwen3ForCausalLM by its model_type.
class SpeculatorsAdapter(DraftAdapter):
    def serving(self, config: dict) -> dict:
        out = super().serving(config)
        spec = config.get("speculators_config")
        verifier = spec.get("verifier") if isinstance(spec, dict) else None
        name = verifier.get("name_or_path") if isinstance(verifier, dict) else None
        if isinstance(name, str) and name:
            out["draft"]["verifier"] = name  # the target before padding, as the draft's config names it
        out["draft"]["num_speculative_tokens"] = default_speculative_tokens("eagle3", config)
        return out

    def draft_features(self, config: dict) -> list[str]:
        """Method eagle3, the speculators format, and the class vLLM picks by the layer's model_type (algos.py)."""
        arch = {"eagle3_qwen3_speculators": "Eagle3Qwen3ForCausalLM"}.get(self.name, "Eagle3LlamaForCausalLM")
        return ["spec:eagle3", "format:speculators-eagle3", f"arch:{arch}"]


EAGLE3_LLAMA_SPECULATORS = SpeculatorsAdapter(
    name="eagle3_llama_speculators", model_types=("llama",), text_config="transformer_layer_config",
    linear_patterns=_ATTENTION + _MLP, copy_modules=_COPY_MODULES, copy_params=_COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",)}, layers=D,
)
EAGLE3_QWEN3_SPECULATORS = SpeculatorsAdapter(
    name="eagle3_qwen3_speculators", model_types=("qwen3",), text_config="transformer_layer_config",
    linear_patterns=_ATTENTION + _MLP, copy_modules=_COPY_MODULES, copy_params=_COPY_PARAMS,
    intermediate_keys={"dense": ("intermediate_size",)}, per_head_norms=True, layers=D,
)


def speculators_adapter(config: dict) -> Adapter | None:
    """The adapter of a speculators-format EAGLE-3 draft (by its transformer_layer_config's model_type), else None."""
    if config.get("speculators_model_type") != "eagle3":
        return None
    layer = config.get("transformer_layer_config")
    kind = layer.get("model_type", "llama") if isinstance(layer, dict) else None
    return {"llama": EAGLE3_LLAMA_SPECULATORS, "qwen3": EAGLE3_QWEN3_SPECULATORS}.get(kind)


def draft_method(config: dict) -> str | None:
    """The speculative method vLLM runs a checkpoint with as a draft ("eagle3", "dspark", "mtp"), from its config's
    architectures as vLLM's SpeculativeConfig detects them; None: not a draft hubpad knows."""
    archs = set(config.get("architectures") or [])
    if config.get("speculators_model_type") == "eagle3" or archs & set(EAGLE3_LLAMA_ARCHS + EAGLE3_QWEN3_ARCHS):  # (a Qwen3 DSpark's DSparkDraftModel: below)
        return "eagle3"
    if any("DSpark" in a for a in archs):
        return "dspark"
    # a repo holding only a model's MTP layers: SGLang's NextN export (the target's config, architectures
    # <Arch>ForCausalLMNextN, the model.layers.<num_hidden_layers>.* tensors alone), or an <Arch>MTP label
    if any(a.endswith(("MTP", "MTPModel", "NextN")) for a in archs):
        return "mtp"
    return None


def default_speculative_tokens(method: str, config: dict | None = None) -> int:
    """Draft tokens per step for a card's --speculative-config: EAGLE-3 a speculators config's own
    (proposal_methods[0].speculative_tokens), else 3 (vLLM's and the EAGLE authors' examples);
    DSpark its block size (vLLM's own default for the method: config block_size or dspark_block_size; Qwen3-Omni
    DSpark requires exactly that); an MTP head its number of layers (at least 1)."""
    config = config or {}
    if method == "mtp":
        return int(config.get("num_nextn_predict_layers") or config.get("mtp_num_hidden_layers") or 1)
    if method == "dspark":
        block = config.get("block_size") or config.get("dspark_block_size")
        return int(block) if block else 3
    spec = config.get("speculators_config")
    methods = (spec.get("proposal_methods") if isinstance(spec, dict) else None) or [{}]
    tokens = methods[0].get("speculative_tokens") if isinstance(methods, list) and isinstance(methods[0], dict) else None
    return tokens if type(tokens) is int and tokens > 0 else 3  # a speculators config's own, else 3


def speculative_config(model: str, config: dict, tokens: int | None = None, what: str | None = None) -> dict:
    """vLLM's --speculative-config for serving with the draft `model` (the padded draft's repo id or path), whose
    config.json is `config`: the method as vLLM detects it, and `tokens` or the method's default."""
    method = draft_method(config)
    if method is None:
        raise ConfigError(f"{what or model}: config.json names no speculative-decoding draft vLLM knows "
                          f"(architectures {config.get('architectures')})")
    return {"method": method, "model": model, "num_speculative_tokens": tokens or default_speculative_tokens(method, config)}


# Drafts hubpad knows and does not pad (yet), by architecture, with the reason (checked before anything else).
REFUSED_DRAFTS: dict[str, str] = {
    **dict.fromkeys(("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"),
                    "an EAGLE-3 draft with a DeepSeek MLA layer (vLLM deepseek_eagle3.py) is not padded by hubpad yet: "
                    "its midlayer's MLA projections are not covered by the draft adapters"),
    "Gemma4DSparkModel": ("a Gemma 4 DSpark draft (vLLM gemma4_dspark.py) is not padded by hubpad: its Gemma 4 "
                          "attention (sliding and global heads of other widths) is not covered"),
    "K3DSparkModel": "a Kimi-K3 DSpark draft (vLLM kimi_k3 dspark_mla.py, MLA) is not padded by hubpad",
}


def refused_draft(config: dict) -> str | None:
    """Why hubpad refuses this draft, or None: the architectures above, and a DeepSeek-V4 DSpark, which vLLM loads
    from the target's own checkpoint (its stages ship with the target: pad the target)."""
    archs = config.get("architectures") or []
    for arch in archs:
        if arch in REFUSED_DRAFTS:
            return REFUSED_DRAFTS[arch]
    if ("DSparkDraftModel" in archs and config.get("model_type") != "qwen3") or "DSparkV41DraftModel" in archs:
        return ("a DeepSeek-V4 / V4.1 DSpark draft reuses its target's config and weights (vLLM speculative.py): its "
                "stages ship inside the target checkpoint (`mtp.*`), so pad the target, not a draft repo")
    return None
