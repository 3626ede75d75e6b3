"""A float64 forward of a checkpoint's MTP (multi-token prediction) block, for every MTP layout hubpad pads.

transformers drops the MTP layer when it loads these models, so the float64 logits tests never run it, and `hubpad
verify` rebuilds the same plan the mirror used, so it agrees with any layout bug confined to that layer. This module
runs the block the way vLLM's draft model does, on hidden states and token ids the test chooses, from a checkpoint
folder as hubpad reads and writes it (config.json + safetensors, sharded or not): original and derivative side by
side, with `assert_same_mtp`.

How a block is built. The MTP layer's decoder block is an instance of the family's own transformers decoder-layer
class: the block's tensors are renamed to `model.layers.0.*` of a one-layer model of the family's own
`...ForCausalLM` (its config is the checkpoint's, with one layer, built as the MTP layer is: full attention, MoE when
the block has experts) and loaded with `from_pretrained` (so per-expert tensors are fused as transformers fuses
them, and a tensor left unloaded is an error). That one-layer model then runs on `inputs_embeds` = the projection
below, and its final norm and head are the MTP block's. Only this remainder is written here, after vLLM's
`*_mtp.py` (vllm 0.32, vllm/model_executor/models/):

  DeepSeek-V3 / Kimi (`deepseek_mtp.py`), GLM-4.x (`glm4_moe_mtp.py`), GLM-4.7-Flash (`glm4_moe_lite_mtp.py`), at
  `model.layers.{num_hidden_layers + k}.`:
      e = embed(ids), zeroed at position 0;  x = eh_proj(cat[enorm(e), hnorm(hidden)]);  h = block(x)
      logits = shared_head.head(shared_head.norm(h)); embed is the layer's own `embed_tokens` where the checkpoint
      has one (vLLM shares one embedding between the main model and the MTP layers), else the main model's.
  Hy3 (`hy_v3_mtp.py`), the same prefix, no embedding or head of its own:
      e = embed(ids) (main), zeroed at position 0;  x = eh_proj(cat[enorm(e), hnorm(hidden)]);  h = block(x)
      logits = lm_head(final_layernorm(h))  (its shared head is the identity and the main lm_head)
  Qwen3.5 / Qwen3-Next (`qwen3_5_mtp.py`, `qwen3_next_mtp.py`), at `mtp.`, decoder layers `mtp.layers.{k}.`:
      e = embed(ids) (main, not zeroed);  x = fc(cat[pre_fc_norm_embedding(e), pre_fc_norm_hidden(hidden)])
      h = layers.k(x);  logits = lm_head(norm(h))  (main lm_head)

The norms are the family's own RMSNorm class (Qwen's is 1 + weight). The concatenation order is [embedding |
hidden] in every family: eh_proj / fc columns 0..H-1 read the token embedding.

API:
  `mtp_forward(path, hidden, ids, k=0) -> (hidden_out, logits)`: one MTP layer `k` of the checkpoint at `path`
      (float64; `hidden` [batch, seq, H] plays the main model's last hidden states, `ids` [batch, seq] the tokens).
  `assert_same_mtp(original, derivative, label, k=0) -> float`: both on the same random inputs, logits equal to
      REL_TOL relative; returns max |Δ| (logits and output hidden states).
  `LAYOUTS`: model_type -> `MtpLayout` (how the layer is named and what is around its block). A new family (say
      DeepSeek-V4's `mtp.*`) adds an entry with `register(model_type, layout)`: its prefix, its remainder's tensor
      names, and the config overrides that make layer 0 of a one-layer model its MTP block.
  `wrong_head_tail_layout(plan, name)`: a layout bug for the mutation tests (each head grown at its own tail
      instead of new heads appended), to apply to one tensor of a plan.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch

REL_TOL = 1e-12  # float64, relative to the largest logit


@dataclass(frozen=True)
class MtpLayout:
    """Where one family's MTP layer k lives and what surrounds its decoder block.

    Names are full tensor names without `.weight`; `{p}` stands for `prefix(text_config, k)` and `{m}` for the main
    model's prefix (`model.` or `model.language_model.`). An entry of `embed` / `head` is a list of candidates, the
    first present wins."""

    prefix: Callable[[dict, int], str]  # the decoder block's tensor prefix, e.g. "model.layers.61."
    enorm: str
    hnorm: str
    proj: str  # [H, 2H], input cat[enorm(embedding), hnorm(hidden)]
    final_norm: str | None  # None: the head reads the block's output as it is (ERNIE-4.5)
    embed: tuple[str, ...]
    head: tuple[str, ...]
    remainder: tuple[str, ...]  # names under {p} that are not the decoder block's (left out of it)
    zero_position_0: bool  # vLLM masks the token embedding at position 0 (DeepSeek-style, Hy3)
    block_config: Callable[[dict, bool], dict] = field(default=lambda text, moe: {})  # (text config, has experts)


def _layers_prefix(text: dict, k: int) -> str:
    return f"model.layers.{text['num_hidden_layers'] + k}."


def _mtp_prefix(text: dict, k: int) -> str:
    return f"mtp.layers.{k}."


_DEEPSEEK_STYLE = MtpLayout(
    prefix=_layers_prefix, enorm="{p}enorm", hnorm="{p}hnorm", proj="{p}eh_proj", final_norm="{p}shared_head.norm",
    embed=("{p}embed_tokens", "{m}embed_tokens"), head=("{p}shared_head.head", "lm_head"),
    remainder=("enorm", "hnorm", "eh_proj", "embed_tokens", "shared_head."), zero_position_0=True,
    block_config=lambda text, moe: {"first_k_dense_replace": 0 if moe else 1})
_HY3 = MtpLayout(
    prefix=_layers_prefix, enorm="{p}enorm", hnorm="{p}hnorm", proj="{p}eh_proj", final_norm="{p}final_layernorm",
    embed=("{m}embed_tokens",), head=("lm_head",), remainder=("enorm", "hnorm", "eh_proj", "final_layernorm"),
    zero_position_0=True,
    block_config=lambda text, moe: {"first_k_dense_replace": 0 if moe else 1,
                                    "mlp_layer_types": ["sparse" if moe else "dense"]})
_QWEN_MTP = MtpLayout(
    prefix=_mtp_prefix, enorm="mtp.pre_fc_norm_embedding", hnorm="mtp.pre_fc_norm_hidden", proj="mtp.fc",
    final_norm="mtp.norm", embed=("{m}embed_tokens",), head=("lm_head",), remainder=(), zero_position_0=False,
    block_config=lambda text, moe: {"layer_types": ["full_attention"], "mlp_only_layers": [],
                                    "decoder_sparse_step": 1})

# GLM-4.7-Flash (`glm4_moe_lite_mtp.py`): DeepSeek-V3's layout; transformers' class picks dense or MoE layers from
# mlp_layer_types, not first_k_dense_replace
_GLM_LITE = replace(_DEEPSEEK_STYLE, block_config=lambda text, moe: {"mlp_layer_types": ["sparse" if moe else "dense"]})
# ERNIE-4.5 (`ernie_mtp.py`): e = embed(ids) (main), zeroed at position 0; x = mtp_linear_proj(cat[mtp_emb_norm(e),
# mtp_hidden_norm(hidden)]); h = mtp_block(x) (a decoder layer with a dense MLP); logits = lm_head(h), no final norm.
_ERNIE = MtpLayout(
    prefix=lambda text, k: f"model.mtp_block.{k}.", enorm="model.mtp_emb_norm.{k}", hnorm="model.mtp_hidden_norm.{k}",
    proj="model.mtp_linear_proj.{k}", final_norm=None, embed=("{m}embed_tokens",), head=("lm_head", "{m}embed_tokens"),
    remainder=(), zero_position_0=True, block_config=lambda text, moe: {"moe_layer_start_index": 1})
# EXAONE MoE (`exaone_moe_mtp.py`): Qwen's arrangement (mtp.fc over [embedding | hidden], mtp.norm), its block a dense
# layer (is_mtp: never MoE)
_EXAONE_MTP = MtpLayout(
    prefix=_mtp_prefix, enorm="mtp.pre_fc_norm_embedding", hnorm="mtp.pre_fc_norm_hidden", proj="mtp.fc",
    final_norm="mtp.norm", embed=("{m}embed_tokens",), head=("lm_head",), remainder=(), zero_position_0=False,
    block_config=lambda text, moe: {"layer_types": ["full_attention"], "mlp_layer_types": ["dense"]})

LAYOUTS: dict[str, MtpLayout] = {
    "deepseek_v3": _DEEPSEEK_STYLE, "kimi_k2": _DEEPSEEK_STYLE, "glm4_moe": _DEEPSEEK_STYLE, "hy_v3": _HY3,
    "glm4_moe_lite": _GLM_LITE,
    "qwen3_next": _QWEN_MTP, "qwen3_5_text": _QWEN_MTP, "qwen3_5_moe_text": _QWEN_MTP, "ernie4_5_moe": _ERNIE,
    "exaone_moe": _EXAONE_MTP,
}
# the transformers config a saved model_type is built with (Kimi-K2 ships DeepSeek-V3's architecture)
CONFIG_TYPE = {"kimi_k2": "deepseek_v3"}
# Families whose MTP layer does not fit MtpLayout, with the module that runs it: its `forward(path, hidden, ids, k)`
# and `inputs(path)` stand in for this module's. DeepSeek-V4 (tests/mtp_dsv4.py): hyper-connection streams (hidden is
# [batch, seq, hc_mult, H]), separate e_proj / h_proj, and its own hc_head before the final norm.
CUSTOM = {"deepseek_v4": "tests.mtp_dsv4"}


def _custom(path: Path):
    """The module that runs this checkpoint's MTP layer when its family is in CUSTOM, else None."""
    import importlib

    name = CUSTOM.get(_read(Path(path))[1].get("model_type"))
    return importlib.import_module(name) if name else None


def register(model_type: str, layout: MtpLayout, config_type: str | None = None) -> None:
    """Add a family's MTP layout (and the transformers model_type its block is built with, when not its own)."""
    LAYOUTS[model_type] = layout
    if config_type:
        CONFIG_TYPE[model_type] = config_type


# ---------------------------------------------------------------------------------------------------------------------

def _read(path: Path) -> tuple[dict, dict, str]:
    """The checkpoint's config.json, its text config, and the main model's tensor prefix."""
    config = json.loads((path / "config.json").read_text())
    text = config.get("text_config", config)
    return config, text, "model.language_model." if "text_config" in config else "model."


def _tensors(path: Path, wanted: Callable[[str], bool]) -> dict[str, torch.Tensor]:
    from safetensors import safe_open

    out = {}
    for file in sorted(path.glob("*.safetensors")):
        with safe_open(file, "pt") as f:
            for name in f.keys():
                if wanted(name):
                    out[name] = f.get_tensor(name).to(torch.float64)
    return out


def _first(tensors: dict, names: tuple[str, ...], p: str, m: str, k: int = 0) -> torch.Tensor:
    for n in names:
        key = n.format(p=p, m=m, k=k) + ".weight"
        if key in tensors:
            return tensors[key]
    raise KeyError(f"none of {[n.format(p=p, m=m, k=k) for n in names]} in the checkpoint")


@dataclass
class MtpBlock:
    """One MTP layer, loaded in float64: the one-layer transformers model holding its block, final norm and head,
    plus the remainder in front of it."""

    model: torch.nn.Module
    enorm: torch.nn.Module
    hnorm: torch.nn.Module
    proj: torch.Tensor
    embed: torch.Tensor
    zero_position_0: bool

    @torch.no_grad()
    def __call__(self, hidden: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e = self.embed[ids]
        if self.zero_position_0:
            e = e.clone()
            e[:, 0] = 0
        x = torch.cat([self.enorm(e), self.hnorm(hidden.to(torch.float64))], dim=-1) @ self.proj.T
        normed = {}
        hook = self.model.model.norm.register_forward_hook(lambda m, i, o: normed.__setitem__("h", o))
        try:
            logits = self.model(inputs_embeds=x, use_cache=False).logits
        finally:
            hook.remove()
        return normed["h"], logits


def load_mtp(path: Path, k: int = 0) -> MtpBlock:
    """MTP layer `k` of the checkpoint at `path`, built as the module docstring says."""
    import transformers

    path = Path(path)
    config, text, m = _read(path)
    model_type = text["model_type"]
    layout = LAYOUTS[model_type]
    p = layout.prefix(text, k)
    tensors = _tensors(path, lambda n: n.startswith(p) or n.startswith(("mtp.", m + "embed_tokens", "lm_head",
                                                                       m + "mtp_")))
    block = {n.removeprefix(p): t for n, t in tensors.items()
             if n.startswith(p) and not n.removeprefix(p).startswith(layout.remainder)}
    assert block, f"{path}: no MTP decoder block under {p}"
    moe = any(".experts." in n for n in block)
    keep = {key: v for key, v in text.items() if key not in ("architectures", "model_type", "transformers_version")}
    keep.update(num_hidden_layers=1, tie_word_embeddings=False, **layout.block_config(text, moe))
    keep.pop("num_nextn_predict_layers", None)
    keep.pop("mtp_num_hidden_layers", None)
    cfg = transformers.CONFIG_MAPPING[CONFIG_TYPE.get(model_type, model_type)](**keep)
    state = {"model.layers.0." + n: t for n, t in block.items()}
    state["model.embed_tokens.weight"] = _first(tensors, layout.embed, p, m)
    h = text["hidden_size"]
    state["model.norm.weight"] = (_first(tensors, (layout.final_norm,), p, m) if layout.final_norm
                                  else torch.ones(h, dtype=torch.float64))  # replaced by the identity below
    state["lm_head.weight"] = _first(tensors, layout.head, p, m)
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory(prefix="hubpad-mtp-") as tmp:
        cfg.save_pretrained(tmp)
        save_file({n: t.contiguous() for n, t in state.items()}, f"{tmp}/model.safetensors", metadata={"format": "pt"})
        model, info = transformers.AutoModelForCausalLM.from_pretrained(
            tmp, dtype=torch.float64, experts_implementation="eager", output_loading_info=True)
    missing = [n for n in info["missing_keys"] if "rotary" not in n]
    assert not missing and not info["unexpected_keys"] and not info.get("mismatched_keys"), \
        f"{path}: the MTP block does not fill a {type(model).__name__} layer: {info}"
    norm_cls = type(model.model.norm)
    if layout.final_norm is None:
        model.model.norm = torch.nn.Identity()

    def norm(name: str) -> torch.nn.Module:
        n = norm_cls(h, eps=text["rms_norm_eps"]).to(torch.float64)
        n.weight.data.copy_(_first(tensors, (name,), p, m, k))
        return n

    return MtpBlock(model.eval(), norm(layout.enorm), norm(layout.hnorm), _first(tensors, (layout.proj,), p, m, k),
                    state["model.embed_tokens.weight"], layout.zero_position_0)


def mtp_forward(path: Path, hidden: torch.Tensor, ids: torch.Tensor, k: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(output hidden states after the final norm, logits) of MTP layer `k` of the checkpoint at `path`."""
    custom = _custom(path)
    return custom.forward(path, hidden, ids, k) if custom else load_mtp(path, k)(hidden, ids)


def mtp_inputs(path: Path, batch: int = 2, seq: int = 10, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """O(1) random hidden states [batch, seq, H] and token ids for the checkpoint at `path`."""
    custom = _custom(path)
    if custom:
        return custom.inputs(path, batch, seq, seed)
    _, text, _ = _read(Path(path))
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(batch, seq, text["hidden_size"], generator=gen, dtype=torch.float64)
    return hidden, torch.randint(0, text["vocab_size"], (batch, seq), generator=gen)


def assert_same_mtp(original: Path, derivative: Path, label: str, k: int = 0, rel_tol: float = REL_TOL) -> float:
    """The derivative's MTP layer `k` gives the original's logits (and output hidden states) on the same inputs, to
    `rel_tol` relative; returns max |Δ logits|."""
    hidden, ids = mtp_inputs(original)
    ha, la = mtp_forward(original, hidden, ids, k)
    hb, lb = mtp_forward(derivative, hidden, ids, k)
    delta = (la - lb).abs().max().item()
    dh = (ha - hb).abs().max().item()
    print(f"{label}: MTP layer {k}: max |Δ logits| = {delta}, max |Δ hidden| = {dh}")
    assert delta <= rel_tol * la.abs().max().item(), f"{label}: MTP max |Δ logits| = {delta}"
    assert dh <= rel_tol * ha.abs().max().item(), f"{label}: MTP max |Δ hidden| = {dh}"
    return delta


# ---------------------------------------------------------------------------------------------------------------------
# Mutations: a layout bug applied to one tensor of a plan, as a padder that got one layer's layout wrong would write it

def wrong_head_tail_layout(plan, name: str) -> None:
    """Replace the recipe of `name` (rows of whole heads appended at the end: MLA's kv_b_proj, a q_proj) with the
    same growth spread over the heads: each head's rows followed by its share of the new rows (same shape, every
    original row kept, but heads 1.. shifted), as the issue's bug did to the MTP layer only."""
    for i, t in enumerate(plan.tensors):
        if t.name == name:
            op = t.op
            assert op.kind == "pad" and op.batch == 1 and op.new_row_bytes == op.row_bytes, op
            heads = _heads_of(plan, name)
            assert op.rows % heads == 0 and op.new_rows % heads == 0, (op, heads)
            wrong = replace(op, batch=heads, rows=op.rows // heads, new_rows=op.new_rows // heads)
            _set_op(plan, i, replace(t, op=wrong))
            return
    raise KeyError(name)


def _heads_of(plan, name: str) -> int:
    """The original's attention heads (the plan's config is the upstream's)."""
    return plan.config.get("text_config", plan.config)["num_attention_heads"]


def _set_op(plan, i: int, tensor) -> None:
    plan.tensors[i] = tensor
    for shard in plan.shards:
        shard.tensors[:] = [tensor if t.name == tensor.name else t for t in shard.tensors]
