"""Families of vLLM 0.32's registry padded by adapters that reuse existing rules (issue 33): Gemma 2, Phi-3.5-MoE,
Apertus and Nemotron. Each: a tiny model built with the real transformers class, random weights everywhere (norms
and biases included), mirrored and verified at TP 3 and 6 with the CLI, and its float64 logits compared with the
original's at the published key names. Then `hubpad plan` on header-only copies of the published layouts
(tests/registry_real.py), and the refusals of the families hubpad cannot pad, in `plan` and in `mirror`.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.testing import write_checkpoint  # noqa: E402
from tests import registry_real  # noqa: E402
from tests.helpers import cli, folder_tensors, mirror_and_verify, planned_dims  # noqa: E402

REL_TOL = 1e-12
COMMON = dict(vocab_size=160, num_hidden_layers=2, max_position_embeddings=64)
# model_type -> config kwargs: heads/kv heads that neither TP divides, an intermediate size that 3 does not divide
TINY = {
    "gemma2": dict(hidden_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=24, intermediate_size=100,
                   query_pre_attn_scalar=20, sliding_window=4, num_hidden_layers=4),
    "phimoe": dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=100,
                   num_local_experts=4, num_experts_per_tok=2, attention_bias=True, lm_head_bias=True,
                   router_jitter_noise=0.0, input_jitter_noise=0.0),
    "apertus": dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=100,
                    max_position_embeddings=16384),
    # GLM-4's fused gate_up_proj is copied whole: an intermediate size whose per-rank share is whole 128 tiles
    "glm4": dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=768,
                 attention_bias=True, partial_rotary_factor=0.5, pad_token_id=0),
    "nemotron": dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=100,
                     partial_rotary_factor=0.5),
}


def _tiny(model_type: str):
    torch.manual_seed(0)
    cfg = transformers.CONFIG_MAPPING[model_type](**{**COMMON, **TINY[model_type]})
    model = transformers.AutoModelForCausalLM.from_config(cfg).double()
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.normal_(0, 0.3)  # norms, biases and xIELU's scalars too: a tensor copied to the wrong place shows
    return model


def _load(path):
    return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64,
                                                             experts_implementation="eager").eval()


@pytest.mark.parametrize("tp", [3, 6])
@pytest.mark.parametrize("model_type", sorted(TINY))
def test_padded_model_gives_identical_logits(tmp_path, model_type, tp):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    _tiny(model_type).save_pretrained(src)
    mirror_and_verify(src, dst, tp)
    old, new = (json.loads((p / "config.json").read_text()) for p in (src, dst))
    heads, kv = new["num_attention_heads"], new["num_key_value_heads"]
    assert heads % tp == 0 and (kv % tp == 0 or tp % kv == 0) and heads > old["num_attention_heads"]
    assert heads // kv == old["num_attention_heads"] // old["num_key_value_heads"]  # whole GQA groups
    assert new["head_dim"] == (old.get("head_dim") or old["hidden_size"] // old["num_attention_heads"])
    if model_type == "gemma2":  # transformers' Gemma2Config rejects hidden % heads != 0
        assert old["hidden_size"] % heads == 0 and new["query_pre_attn_scalar"] == 20
    if model_type == "glm4":
        assert new["intermediate_size"] == old["intermediate_size"]
    width = new["intermediate_size"] // tp
    assert width % (64 if model_type == "phimoe" else 128) == 0 or new["intermediate_size"] == old["intermediate_size"]
    ids = torch.randint(0, COMMON["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = _load(src)(ids).logits, _load(dst)(ids).logits
    delta = (a - b).abs().max().item()
    print(f"{model_type} tp={tp}: heads {heads}/{kv}, intermediate {new['intermediate_size']}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


def test_glm4_tp_that_would_pad_its_fused_mlp_is_refused(tmp_path):
    """GLM-4-9B's 13696 is not whole 128 tiles per rank at TP 3: one line, since the fused gate_up_proj is copied."""
    cfg = dict(registry_real.GLM4_32B, intermediate_size=13696, num_hidden_layers=1)
    src = write_checkpoint(tmp_path / "glm4", cfg, registry_real.layout(cfg), n_shards=1, header_only=True)
    result = cli("plan", src, "--tp", 3)
    assert result.exit_code == 1 and "padding GLM-4's fused mlp.gate_up_proj is not implemented" in result.output


def test_minimum_vllm_the_cards_state():
    """The first release with each class (docs/vllm-first-releases.md's way, read in the wheels), and for padded
    Phi-3.5-MoE heads the first PhiMoE that reads config.head_dim; the vocab plugin (0.19.0) comes on top where a
    derivative ships it (Gemma 2, Apertus, Nemotron at TP 3 and 6)."""
    from hubpad.plan.adapters import adapter_for
    from hubpad.plan.adapters.vllm import min_vllm

    def version(config):
        return min_vllm(adapter_for(config).serving(config)["vllm_features"])["version"]

    assert version(registry_real.GEMMA2_27B) == "0.5.1"
    assert version(registry_real.NEMOTRON4_340B) == "0.5.4"
    assert version(registry_real.APERTUS_70B) == "0.10.2"
    assert version(registry_real.PHI35_MOE) == "0.6.0"
    assert version(registry_real.GLM4_32B) == "0.8.4"
    assert version(dict(registry_real.PHI35_MOE, num_attention_heads=36, num_key_value_heads=9, head_dim=128)) == "0.9.2"


def test_published_names_are_the_ones_padded(tmp_path):
    """The tiny checkpoints carry the published key names (GLM-4's fused gate_up_proj, Phi-3.5-MoE's block_sparse_moe.experts.N.w1/w2/w3,
    Apertus' attention_layernorm and xIELU scalars), and the padded copies keep every one of them."""
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    for model_type, names in (("phimoe", ["model.layers.0.block_sparse_moe.experts.3.w2.weight",
                                          "model.layers.0.block_sparse_moe.gate.weight", "lm_head.bias",
                                          "model.layers.1.input_layernorm.bias"]),
                              ("glm4", ["model.layers.0.mlp.gate_up_proj.weight",
                                        "model.layers.1.post_mlp_layernorm.weight", "model.layers.0.self_attn.k_proj.bias"]),
                              ("apertus", ["model.layers.0.attention_layernorm.weight",
                                           "model.layers.1.mlp.act_fn.alpha_p", "model.layers.0.self_attn.k_norm.weight"])):
        _tiny(model_type).save_pretrained(src / model_type)
        mirror_and_verify(src / model_type, dst / model_type, 3)
        before, after = folder_tensors(src / model_type), folder_tensors(dst / model_type)
        assert set(before) == set(after) and all(n in before for n in names), sorted(before)[:20]


@pytest.mark.parametrize("name", sorted(registry_real.PADDED))
def test_published_layouts_plan(tmp_path, name):
    """`hubpad plan --tp 3|6` on header-only copies of the published checkpoints: the dims the registry table states,
    every per-rank rule met."""
    config, tensors = registry_real.MODELS[name]
    src = write_checkpoint(tmp_path / "src", config, tensors(config), n_shards=4, header_only=True)
    for tp, expected in registry_real.PADDED[name].items():
        assert planned_dims(src, tp) == expected, tp


@pytest.mark.parametrize("model_type,reason", [
    ("bloom", "ALiBi slopes also depend on the total head count"),
    ("falcon", "vLLM's FalconForCausalLM computes head_dim = hidden_size // heads"),
    ("dbrx", "vLLM's DbrxForCausalLM computes head_dim = hidden_size // heads"),
    ("internlm2", "InternLM2-20B's 48 heads / 8 kv heads serve as they are at TP 2, 4 and 8"),
    ("telechat", "vLLM's TeleChat2ForCausalLM computes head_dim"),
    ("jamba", "states that width as an integer multiple of hidden_size"),
    ("molmo", "MolmoForCausalLM computes head_dim = hidden_size // heads"),
    ("iquestloopcoder", "IQuest-Coder-V1-40B-Loop's 40 heads / 8 kv heads"),
    ("opencua", "the language model OpenCUAForConditionalGeneration always builds"),
    ("granitemoehybrid", "GraniteMoeHybridForCausalLM computes head_dim = hidden_size // heads"),
    ("llava_onevision", "shards its SigLIP vision tower by heads (16 heads of 72"),
    ("llava", "shards its CLIP or Pixtral vision tower by heads"),
    ("paligemma", "PaliGemmaForConditionalGeneration shards its SigLIP vision tower"),
    ("mistral3", "Pixtral vision tower by heads (16 heads of 64"),
    ("voxtral", "Whisper audio encoder by heads (20 heads of 64"),
    ("ultravox", "it serves as it is at a TP that divides 20"),
    # issue 33's omni stream (docs/families/omni.md)
    ("qwen3_omni_moe", "Qwen3OmniMoeThinkerForConditionalGeneration shards its vision encoder by heads (16 heads of 72"),
    ("NemotronH_Nano_Omni_Reasoning_V3", "vit_huge_patch16_224: 5120, which divides neither 3 nor 6"),
    ("NemotronH_Super_Omni_Reasoning_V3", "shards the RADIO vision tower's MLP by TP"),
    ("NemotronH_Omni_Reasoning_V3", "has no data-parallel encoder mode"),
    ("nemotron_h_omni", "the text-only Nemotron 3 checkpoints (model_type 'nemotron_h') pad at TP 3 and 6")])
def test_registry_refusals_name_the_reason(tmp_path, model_type, reason):
    """One `error:` line in `plan` and in `mirror`, nothing written."""
    src = write_checkpoint(tmp_path / model_type, {"model_type": model_type, "num_attention_heads": 32}, [],
                           n_shards=1, header_only=True)
    for args in (("plan", src, "--tp", 3), ("mirror", src, "--tp", 6, "--to", tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code == 1 and reason in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("error:")
    assert not (tmp_path / "out").exists()
