"""Tiny upstream checkpoints for the serving tier, one per family, built with transformers and saved in BF16.

They differ from the float64 fixtures of the other tests in what vLLM's CPU backend needs: head_dim 32 or 64 (its
attention takes 32, 64, 80, 96, 112, 128, ... but not 16 or 24), an MLA latent of 576 (kv_lora_rank +
qk_rope_head_dim: the one size of the float32 CPU_MLA backend), a vocab of 512 (64-aligned, and not divisible by 3,
so TP=3 and TP=6 need the vocab plugin), and the config keys vLLM reads that a config saved by transformers lacks
but every published config sets (`published_keys`). Weights are O(0.3) (tests/tiny_moe.randomize), so each greedy
step is decisive and a single wrong padded value changes the output.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

from tests.axk1_models import add_dense_post_mlp_norms
from tests.tiny_moe import HY3_MTP_EXTRAS, MTP_EXTRAS, add_mtp_layer, randomize

VOCAB = 512
COMMON = dict(num_hidden_layers=2, vocab_size=VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5,
              tie_word_embeddings=False)
GQA = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32)
MOE = dict(num_experts_per_tok=2, moe_intermediate_size=64)



@dataclass(frozen=True)
class Family:
    """How to build one family's tiny upstream, and what vLLM's CPU backend needs to serve it."""

    model_type: str  # the transformers config it is built with
    config: dict
    published_keys: dict = field(default_factory=dict)  # config keys vLLM reads that transformers does not save
    mtp: tuple[str, ...] | None = None  # an MTP layer at index num_hidden_layers, with these modules besides its block
    saved_model_type: str | None = None  # written into config.json instead (Kimi-K2: DeepSeek-V3's architecture)
    engine: dict = field(default_factory=dict)  # vLLM engine arguments it needs here
    # padded TP -> the TP the original is served at for the comparison (default 1; tests/serve_fixtures.py)
    reference_tp: dict[int, int] = field(default_factory=dict)
    seed: int = 0  # another where seed 0 leaves a greedy step near a tie (serving.MIN_MARGIN)
    drop_keys: tuple[str, ...] = ()  # keys transformers saves that published configs state another way
    dtype: torch.dtype = torch.bfloat16  # what the checkpoint is saved in
    # multiplies the embedding after randomize(): a tied embedding that the model scales by sqrt(hidden) (Gemma 2)
    # otherwise outweighs every layer, and the greedy output repeats the prompt's last token
    embed_scale: float = 1.0
    # tensors the published checkpoints store that transformers' save leaves out, added to the saved folder
    after_save: Callable[[Path], None] | None = None


# DeepSeek-V3's router (vLLM defaults to softmax without a correction bias), and MLA served by the reference CPU_MLA
# backend: float32, latent 512 + 64 = 576 (the one size it compiles). vLLM prefers AMX_MLA where the CPU has AMX,
# which takes only bf16/fp16 weights, so the backend is named. vLLM 0.32's CPU_MLA is not a faithful MLA (measured on
# the unpadded original, README "Served by vLLM"): its tokens depend on the number of heads per rank (the original's 4
# heads at TP=1, 2 and 4 give three different outputs from the first token on) and on how many prompts share a step
# (three prompts prefilled together give other tokens than one at a time, reproducibly, and which prompts share a
# step depends on timing). So MLA is served one sequence at a time (max_num_seqs=1: deterministic), and each
# derivative is compared with the original at the TP that gives it as many heads per rank: 6 heads at TP=3 with 4 at
# TP=2, 6 at TP=6 with 4 at TP=4 (reference_tp). These rows show that padding changes nothing under vLLM's own MLA
# code, not that this code is right.
_MLA = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=96,
            kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=64, v_head_dim=64, n_routed_experts=4, n_group=2,
            topk_group=1, first_k_dense_replace=1, n_shared_experts=1, num_nextn_predict_layers=1, **MOE)
_MLA_KEYS = {"topk_method": "noaux_tc", "scoring_func": "sigmoid"}
_CPU_MLA = {"attention_backend": "CPU_MLA", "max_num_seqs": 1}
_SAME_HEADS_PER_RANK = {3: 2, 6: 4}  # 4 heads padded to 6

_GEMMA4 = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32, global_head_dim=64,
               num_global_key_value_heads=1, attention_k_eq_v=True, intermediate_size=256, sliding_window=16,
               layer_types=["sliding_attention", "full_attention"], hidden_size_per_layer_input=0,
               vocab_size_per_layer_input=VOCAB, final_logit_softcapping=30.0)

FAMILIES: dict[str, Family] = {
    "llama": Family("llama", dict(GQA, intermediate_size=256)),
    "qwen3": Family("qwen3", dict(GQA, intermediate_size=256)),
    # Qwen2: 14 heads / 2 kv on hidden 448 (head_dim 32) become 21 / 3 at TP=3, and vLLM's Qwen2 class would read
    # head_dim 448 // 21 = 21, a size no CPU attention kernel takes (loud). Its "-quiet" twin, 8 heads / 2 kv on hidden
    # 768 (head_dim 96), becomes 12 / 3, which that class would read as head_dim 64: a size the kernels take.
    "qwen2": Family("qwen2", dict(hidden_size=448, num_attention_heads=14, num_key_value_heads=2,
                                  intermediate_size=512)),
    "qwen2-quiet": Family("qwen2", dict(hidden_size=768, num_attention_heads=8, num_key_value_heads=2,
                                        intermediate_size=512), seed=1),  # seed 0: a step 9.3e-3 from a tie
    # Qwen2-MoE: the same heads, routed experts plus a gated shared expert; served by vLLM's Transformers backend.
    "qwen2_moe": Family("qwen2_moe", dict(hidden_size=448, num_attention_heads=14, num_key_value_heads=2,
                                          intermediate_size=512, moe_intermediate_size=64,
                                          shared_expert_intermediate_size=128, num_experts=4, num_experts_per_tok=2,
                                          decoder_sparse_step=1, qkv_bias=True)),
    # 8 experts: vLLM's Qwen3-MoE block refuses a TP larger than the number of experts (TP=6 here)
    "qwen3_moe": Family("qwen3_moe", dict(GQA, **MOE, intermediate_size=256, num_experts=8, decoder_sparse_step=1,
                                          norm_topk_prob=True), seed=3),  # seed 0: a step 4.5e-3 from a tie
    "mixtral": Family("mixtral", dict(GQA, intermediate_size=64, num_local_experts=4, num_experts_per_tok=2)),
    # vLLM's hy_v3 reads config.route_norm and config.expert_hidden_dim (errors without them) and
    # getattr(config, "qk_norm", False) (without the key it drops the q/k norms the checkpoint has); and
    # num_nextn_predict_layers says there is an MTP layer (hubpad's card then renders MTP speculative decoding).
    "hy_v3": Family("hy_v3", dict(GQA, **MOE, intermediate_size=256, num_experts=4, num_shared_experts=1,
                                  first_k_dense_replace=1),
                    published_keys={"route_norm": True, "qk_norm": True, "expert_hidden_dim": 64,
                                    "num_nextn_predict_layers": 1}, mtp=HY3_MTP_EXTRAS),
    "glm4_moe": Family("glm4_moe", dict(GQA, **MOE, intermediate_size=256, attention_bias=True, n_routed_experts=4,
                                        n_group=1, topk_group=1, first_k_dense_replace=1, n_shared_experts=1,
                                        use_qk_norm=True, num_nextn_predict_layers=1,
                                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                         "partial_rotary_factor": 0.5}), mtp=MTP_EXTRAS),
    # Gemma 3: hidden must divide by the padded heads (its config class insists), so 192 = 6 x 32 at TP=3.
    "gemma3_text": Family("gemma3_text", dict(hidden_size=192, num_attention_heads=4, num_key_value_heads=2,
                                              head_dim=32, intermediate_size=256, query_pre_attn_scalar=32,
                                              sliding_window=16, layer_types=["sliding_attention", "full_attention"]),
                          seed=1),  # seed 0: 1.0e-2 from a tie
    # Gemma 4: sliding layers 4 heads / 2 kv of 32, global layers 1 kv head of 64 without v_proj (attention_k_eq_v):
    # 12 / 6 / 3 at TP=3 and 6. "gemma4_text" keeps config.json as published configs state the global layers
    # (global_head_dim, num_global_key_value_heads); "gemma4_moe" as transformers 5.x saves it (per_layer_config),
    # with the MoE block (dense MLP + 4 fused experts, 64 wide: 192 at TP=3).
    "gemma4_text": Family("gemma4_text", _GEMMA4, published_keys={"global_head_dim": 64,
                                                                  "num_global_key_value_heads": 1},
                          drop_keys=("per_layer_config",)),
    "gemma4_moe": Family("gemma4_text", dict(_GEMMA4, enable_moe_block=True, num_experts=4, top_k_experts=2,
                                             moe_intermediate_size=64)),
    "deepseek_v3": Family("deepseek_v3", _MLA, published_keys=_MLA_KEYS, mtp=MTP_EXTRAS, engine=_CPU_MLA,
                          reference_tp=_SAME_HEADS_PER_RANK),
    # MiniMax-M2: q/k norms over all heads, so hubpad rescales q/k (adapters/minimax.py). Saved in float32, so the
    # rescaled values round at float32 (2^-24), not BF16: the comparison then measures the padding, within float32
    # noise. Softmax routing: vLLM's CPU router asserts scoring_func == "softmax" for a router without groups or a
    # custom function (cpu_router.py), so the published sigmoid + bias routing does not run on the CPU build
    # (test_serve_families.py expects that failure); with softmax, that router takes plain top-k and leaves the
    # correction bias (loaded, use_routing_bias) unused, in the original and the derivative alike.
    "minimax_m2": Family("minimax_m2", dict(GQA, intermediate_size=64, num_local_experts=4, num_experts_per_tok=2,
                                            rotary_dim=16, use_qk_norm=True),
                         published_keys={"scoring_func": "softmax", "use_routing_bias": True,
                                         "qk_norm_type": "per_layer"}, dtype=torch.float32,
                         seed=4),  # seed 0: a greedy step 5.2e-3 from a tie (seen in vLLM, and in transformers)
    "kimi_k2": Family("deepseek_v3", _MLA, published_keys=_MLA_KEYS, saved_model_type="kimi_k2", engine=_CPU_MLA,
                      reference_tp=_SAME_HEADS_PER_RANK),
    # A.X-K1: DeepSeek-V3's MLA and MoE with post_mlp_layernorm on the MoE output (transformers' AXK1 class; vLLM's
    # AXK1ForCausalLM reads first_k_dense_replace, which transformers 5.24 saves as mlp_layer_types, and loads a
    # post_mlp_layernorm in the dense layers too, which transformers' save leaves out); no MTP layer (vLLM has no
    # A.X-K1 drafter and skips its weights)
    "axk1": Family("axk1", {k: v for k, v in _MLA.items() if k != "num_nextn_predict_layers"}, engine=_CPU_MLA,
                   published_keys={"first_k_dense_replace": 1}, reference_tp=_SAME_HEADS_PER_RANK,
                   after_save=add_dense_post_mlp_norms),
    # GLM-4.7-Flash: the same MLA with GLM's MoE block (sigmoid routing and correction bias always, one group, as
    # published), its MTP layer; transformers' class picks dense / MoE layers from mlp_layer_types (1 dense, then MoE),
    # vLLM's from first_k_dense_replace, which published configs state and transformers does not save
    "glm4_moe_lite": Family("glm4_moe_lite", {k: v for k, v in _MLA.items() if k != "first_k_dense_replace"}
                            | dict(n_group=1, topk_group=1), mtp=MTP_EXTRAS, engine=_CPU_MLA,
                            published_keys={"first_k_dense_replace": 1}, reference_tp=_SAME_HEADS_PER_RANK,
                            seed=1),  # seed 0: a step of the TP 2 original 8.8e-3 from a tie
    # DeepSeek-V2: V2's softmax group-limited router and two shared experts; 6 padded heads on hidden 128 need the
    # card's --hf-overrides route (transformers' DeepseekV2Config, which vLLM reads it with, refuses 128 % 6)
    "deepseek_v2": Family("deepseek_v2", {k: v for k, v in _MLA.items() if k != "num_nextn_predict_layers"}
                          | dict(n_shared_experts=2, topk_method="group_limited_greedy", scoring_func="softmax",
                                 norm_topk_prob=False, routed_scaling_factor=2.0), engine=_CPU_MLA,
                          reference_tp=_SAME_HEADS_PER_RANK, seed=1),  # seed 0: a step 9.2e-3 from a tie
    # The registry families of tests/test_registry_families.py (issue 33). Gemma 2: like Gemma 3's hidden 192 = 6 x 32,
    # attention and final logits soft-capped, the embedding tied as published (vLLM's Gemma2ForCausalLM has no lm_head).
    # Phi-3.5-MoE: Mixtral's experts with q/k/v/o and lm_head biases; config.json names the class as published,
    # PhiMoEForCausalLM (transformers saves PhimoeForCausalLM, which vLLM would hand to its Transformers backend).
    # Apertus: an ungated xIELU MLP and per-head q/k norms; Nemotron: an ungated relu^2 MLP, partial RoPE; GLM-4-0414.
    "gemma2": Family("gemma2", dict(hidden_size=192, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                    intermediate_size=256, query_pre_attn_scalar=32, sliding_window=16,
                                    attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                                    tie_word_embeddings=True), embed_scale=0.1),
    "phimoe": Family("phimoe", dict(GQA, intermediate_size=64, num_local_experts=4, num_experts_per_tok=2,
                                    attention_bias=True, lm_head_bias=True, router_jitter_noise=0.0,
                                    input_jitter_noise=0.0),
                     published_keys={"architectures": ["PhiMoEForCausalLM"]}),
    "apertus": Family("apertus", dict(GQA, intermediate_size=256)),
    "nemotron": Family("nemotron", dict(GQA, intermediate_size=256, partial_rotary_factor=0.5)),
    # GLM-4-0414: its fused gate_up_proj is copied whole, so 768 (whole 128 tiles per rank at TP 3 and 6)
    "glm4": Family("glm4", dict(GQA, intermediate_size=768, attention_bias=True, partial_rotary_factor=0.5,
                                pad_token_id=0)),
}

# The GQA families with config quirks (issue 33; adapters ernie.py, exaone.py, cohere.py, afmoe.py, laguna.py): 4 heads
# / 2 kv of 32 (6 / 3 at TP 3; at TP 6 the kv heads are replicated), experts 64 wide, one dense first layer. ERNIE and
# Cohere have no head_dim key, as published (hidden // heads = 32), and Cohere its tied embedding (vLLM's
# CohereForCausalLM reads only that) and a logit_scale of 1 (the default 1/16 leaves every greedy step within 1e-2 of a
# tie). Seeds: the first whose greedy steps are all 1e-2 or more from a tie (transformers in float32 predicts vLLM's).
_QUIRKS = dict(GQA, intermediate_size=256)
FAMILIES.update({
    "ernie4_5_moe": Family("ernie4_5_moe", dict(_QUIRKS, moe_num_experts=4, moe_k=2, moe_intermediate_size=64,
                                                moe_num_shared_experts=1, moe_layer_start_index=1),
                           drop_keys=("head_dim",)),  # as published: the classes fall back to hidden // heads
    "exaone4": Family("exaone4", dict(_QUIRKS, sliding_window=16, layer_types=["sliding_attention", "full_attention"]),
                      seed=1),  # seed 0: a greedy step 5.2e-3 from a tie (vLLM and transformers alike)
    "exaone_moe": Family("exaone_moe", dict(_QUIRKS, **MOE, num_experts=4, num_shared_experts=1, first_k_dense_replace=1,
                                            sliding_window=16, layer_types=["sliding_attention", "full_attention"]),
                          seed=1),  # seed 0: 1.0e-2 from a tie
    "cohere2": Family("cohere2", dict(_QUIRKS, sliding_window=16, tie_word_embeddings=True, logit_scale=1.0,
                                      layer_types=["sliding_attention", "full_attention"]), drop_keys=("head_dim",),
                      seed=2),  # seed 0: 6.5e-3 from a tie in vLLM
    "cohere": Family("cohere", dict(_QUIRKS, use_qk_norm=True, tie_word_embeddings=True, logit_scale=1.0),
                     drop_keys=("head_dim",), seed=1),  # seed 0: 4.4e-3 from a tie
    "cohere2_moe": Family("cohere2_moe", dict(_QUIRKS, intermediate_size=64, num_experts=4, num_experts_per_tok=2,
                                              num_shared_experts=1, sliding_window=16, tie_word_embeddings=True,
                                              logit_scale=1.0,
                                              layer_types=["sliding_attention", "full_attention"]), seed=2),
    "afmoe": Family("afmoe", dict(_QUIRKS, **MOE, num_experts=4, num_shared_experts=1, num_dense_layers=1,
                                  sliding_window=16, layer_types=["sliding_attention", "full_attention"]),
                    published_keys={"n_group": 1, "topk_group": 1, "score_func": "softmax", "route_norm": True}),
    # Laguna's layers of 4 and 6 heads over 2 kv (6 / 9 at TP 3, 12 / 18 at TP 6), its MLPs dense: vLLM's LagunaMoE
    # routes with a hard-coded sigmoid, which the CPU router refuses ("laguna-moe": test_serve_families.py)
    "laguna": Family("laguna", dict(_QUIRKS, sliding_window=16, layer_types=["full_attention", "sliding_attention"],
                                    mlp_layer_types=["dense", "dense"], num_attention_heads_per_layer=[4, 6])),
    "laguna-moe": Family("laguna", dict(_QUIRKS, **MOE, num_experts=4, shared_expert_intermediate_size=64,
                                        sliding_window=16, layer_types=["full_attention", "sliding_attention"],
                                        mlp_layer_types=["dense", "sparse"], num_attention_heads_per_layer=[4, 6])),
})


def build(family: str, path: Path, seed: int | None = None) -> Path:
    """Save the family's tiny model under `path` in BF16 (plus its MTP layer, and the published config keys).

    `<family>+mtp` builds the same family with an MTP layer that drafts well (`_drafting_mtp`), for the speculative
    decoding tests."""
    family, _, variant = family.partition("+")
    f = FAMILIES[family]
    torch.manual_seed(f.seed if seed is None else seed)
    cfg = transformers.CONFIG_MAPPING[f.model_type](**dict(COMMON, **f.config))
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    randomize(model)
    if f.embed_scale != 1.0:
        with torch.no_grad():
            model.get_input_embeddings().weight.mul_(f.embed_scale)
    model.to(f.dtype).save_pretrained(path)
    if f.after_save:
        f.after_save(path)
    add_tokenizer(path)
    if f.mtp:
        add_mtp_layer(path, cfg, dtype=torch.bfloat16, extras=f.mtp)
        if variant == "mtp":
            _drafting_mtp(path, cfg.num_hidden_layers)
    data = json.loads((path / "config.json").read_text())
    data.update(f.published_keys)
    for key in f.drop_keys:
        data.pop(key, None)
    if f.saved_model_type:
        data["model_type"] = f.saved_model_type
    (path / "config.json").write_text(json.dumps(data, indent=2))
    return path


QUIET = 0.02  # what _drafting_mtp scales every layer's output projections by


def _drafting_mtp(path: Path, n: int) -> None:
    """Make the MTP layer (index n) a draft model that is often right, so its acceptance rate says something.

    Every layer's output projections (o_proj, down_proj, experts' down_proj) shrink by QUIET and the embedding grows
    tenfold, so the residual stream stays near the token's own embedding and the model behaves nearly as a bigram
    model; the head grows tenfold, so its greedy choices stay decisive. The MTP layer reads only the next token's
    embedding (eh_proj = [I | 0] over [enorm(embedding), hnorm(hidden)], its own embedding and head the main
    model's), with enorm scaled to the embedding's mean RMS (so its residual stream has the main model's scale), its
    block is a copy of the last (equally quiet) layer, and it ends in the main model's final norm: it drafts about
    what the model itself predicts from that token. Many drafts are accepted, not all, and the count depends on every
    weight of the MTP layer, its padded heads included.

    Why not 0.1, as before: the layers then added 2.25 times the embedding's norm to the residual stream (measured
    in float64, tests/test_mtp.py), the model was no bigram model, and 1 draft in 21 was accepted (the serving tier
    measured 1 in 20). With QUIET = 0.02 they add 0.35 to 0.53 of it and the float64 estimate is 12 (Hy3), 9 (GLM-4.5)
    and 5 (DeepSeek-V3) of 21 (test_mtp.py `test_the_serving_fixtures_mtp_layer_drafts`); 0.01 accepts 20 of 21.
    Served (test_serve_mtp.py, measured): Hy3 7 of 14, GLM-4.5 6 of 16, DeepSeek-V3 5 of 19, as the original."""
    file = path / "model.safetensors"
    tensors = load_file(file)
    for name, t in tensors.items():
        if name.endswith(("o_proj.weight", "down_proj.weight", "down_proj")):
            tensors[name] = (t.float() * QUIET).to(t.dtype)
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        tensors[name] = (tensors[name].float() * 10).to(torch.bfloat16)
    p, last = f"model.layers.{n}.", f"model.layers.{n - 1}."
    for name in [k for k in tensors if k.startswith(last)]:  # the MTP block: a copy of the last (quiet) layer
        tensors[p + name.removeprefix(last)] = tensors[name].clone()
    h = tensors[p + "enorm.weight"].shape[0]
    tensors[p + "eh_proj.weight"] = torch.cat([torch.eye(h), torch.zeros(h, h)], dim=1).to(torch.bfloat16)
    rms = tensors["model.embed_tokens.weight"].float().pow(2).mean(-1).sqrt().mean().item()
    tensors[p + "enorm.weight"] = torch.full((h,), rms, dtype=torch.bfloat16)
    same_as_main = {"final_layernorm.weight": "model.norm.weight", "shared_head.norm.weight": "model.norm.weight",
                    "shared_head.head.weight": "lm_head.weight", "embed_tokens.weight": "model.embed_tokens.weight"}
    for name, main in same_as_main.items():
        if p + name in tensors:
            tensors[p + name] = tensors[main].clone()
    save_file(tensors, file, metadata={"format": "pt"})


# Special tokens that vLLM's tool-call and reasoning parsers look up in the vocabulary when a request uses them
# (hermes and glm45 <tool_call>, qwen3/hy_v3/deepseek_v3 <think>, hy_v3's tagged calls, DeepSeek-V3's call markers,
# llama3_json's python tag). A real tokenizer has them; the tiny one must too, or the parser refuses the request.
PARSER_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_calls>", "</tool_calls>", "<tool_sep>",
                 "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<|python_tag|>",
                 "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                 "<｜tool▁sep｜>", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                 "<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_call_argument_begin|>"]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def add_tokenizer(path: Path, extra_special: tuple[str, ...] = ()) -> None:
    """A word-level tokenizer over the tiny vocab (special tokens, then `w<i>`), with a chat template, so vLLM can
    serve /v1/completions and /v1/chat/completions: hubpad copies these files into the derivative unchanged."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    special = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"] + PARSER_TOKENS + list(extra_special)
    vocab = {t: i for i, t in enumerate(special)}
    vocab.update({f"w{i}": i for i in range(len(special), VOCAB)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.add_special_tokens(special)
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "pad_token": "<unk>", "model_max_length": COMMON["max_position_embeddings"], "chat_template": CHAT_TEMPLATE,
    }, indent=2))


# ---------------------------------------------------------------------------------------------------------------------
# Quantized upstreams: the formats vLLM's CPU backend runs, quantized with the real compressed-tensors (or written
# from the GPTQ / AWQ specs, tests/int4_formats.py), on a Llama or Qwen3 with 128-wide heads (FP8 blocks of 128
# must hold whole heads on each rank).

QUANT_DIMS = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=128, intermediate_size=256)


# gpt-oss as OpenAI ships it (MXFP4 experts): 4 / 2 heads of 64 (6 / 3 at TP=3), experts 384 wide (whole 32-blocks
# on each of 3 or 6 ranks, so hubpad pads attention only), e8m0 scales 2^-4 .. 2^-2 (weights of O(0.3)).
GPT_OSS_DIMS = dict(hidden=256, intermediate=384, experts=4, vocab=VOCAB, heads=4, kv=2, head_dim=64,
                    scales=(123, 126), max_positions=64)


def build_quantized(fmt: str, model_type: str, path: Path, seed: int = 1) -> Path:
    """A tiny `model_type` with O(0.3) weights, quantized in `fmt` (a compressed-tensors preset name, gptq/awq, or
    MXFP4 for gpt-oss)."""
    import copy

    if (fmt, model_type) == ("MXFP4", "gpt_oss"):
        from tests.gpt_oss_models import mxfp4_gpt_oss

        mxfp4_gpt_oss(path, **GPT_OSS_DIMS)
        add_tokenizer(path)
        return path

    from compressed_tensors.quantization import QuantizationScheme
    from compressed_tensors.quantization import quant_scheme

    from tests.test_llama_quantized import _write_packed
    from tests.test_quantized import _input_ids, _quantize_and_save

    torch.manual_seed(seed)
    cfg = transformers.CONFIG_MAPPING[model_type](**dict(COMMON, **QUANT_DIMS))
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    randomize(model)
    model = model.to(torch.bfloat16)
    if fmt in ("gptq", "awq"):
        _write_packed(path, model, fmt, 128, fmt == "gptq", False, False, seed=3)
    else:
        scheme = copy.deepcopy(getattr(quant_scheme, fmt))
        _quantize_and_save(model, {"group_0": QuantizationScheme(targets=["Linear"], **scheme)}, path, _input_ids())
    add_tokenizer(path)
    return path


# ---------------------------------------------------------------------------------------------------------------------
# Kimi-K2.5: Kimi-K2's MLA language model (the dims above) under `language_model.`, a tiny MoonViT tower and its
# projector, in the hub's names (tests/vlm_models.py), with the tokenizer's `<|media_pad|>` and the
# preprocessor_config.json that vLLM's image processor reads (media_proc_cfg: 4-pixel patches merged 2 x 2, so a
# 16 x 16 image is 4 tokens).

KIMI_MEDIA_TOKEN = "<|media_pad|>"
KIMI_MEDIA_ID = 5 + len(PARSER_TOKENS)  # its id in add_tokenizer(path, (KIMI_MEDIA_TOKEN,))


def build_kimi_k25(path: Path, seed: int = 1) -> Path:  # seed 0: a greedy step 2.4e-4 from a tie
    from tests.vlm_models import build_kimi_k25 as build

    mla = {k: v for k, v in _MLA.items() if k != "num_nextn_predict_layers"}
    build(path, text=dict(COMMON, **mla, **_MLA_KEYS, model_type="kimi_k2"), seed=seed, media_id=KIMI_MEDIA_ID,
          dtype=torch.bfloat16)
    add_tokenizer(path, (KIMI_MEDIA_TOKEN,))
    (path / "preprocessor_config.json").write_text(json.dumps({"media_proc_cfg": {
        "patch_size": 4, "merge_kernel_size": 2, "temporal_merge_kernel_size": 2, "in_patch_limit": 64,
        "patch_limit_on_one_side": 16, "fixed_output_tokens": None, "in_patch_limit_each_frame": 64,
        "in_patch_limit_video": 128, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}}, indent=2))
    return path
