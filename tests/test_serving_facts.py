"""Each family's vLLM serving facts (the adapters' serving()) and the minimum vLLM version they add up to.

The parser names and first releases were read in vLLM's released wheels (see hubpad/plan/adapters/vllm.py)."""

from __future__ import annotations

import pytest

from hubpad.plan.adapters import adapter_for
from hubpad.plan.adapters.vllm import FIRST_RELEASE, min_vllm
from tests.glm_real import GLM45_AIR_CONFIG, GLM45_CONFIG
from tests.gpt_oss_real import gpt_oss_real
from tests.hy3_real import HY3_CONFIG
from tests.mla_real import DEEPSEEK_V3_CONFIG, KIMI_K2_CONFIG
from tests.minimax_real import M2_CONFIG
from tests.real_models import LLAMA33_70B, QWEN3_235B_A22B, QWEN25_72B

MIXTRAL = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8}
GEMMA3_TEXT = {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"], "hidden_size": 5376,
               "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128}


@pytest.mark.parametrize("config, tool, reasoning, version", [
    (LLAMA33_70B, "llama3_json", None, "0.6.3"),
    (dict(LLAMA33_70B, rope_scaling=None), None, None, None),  # Llama 2 / 3.0 templates have no JSON tool calls
    (QWEN25_72B, "hermes", None, "0.6.0"),
    (QWEN3_235B_A22B, "hermes", "qwen3", "0.9.0"),
    (dict(QWEN3_235B_A22B, model_type="qwen3", architectures=["Qwen3ForCausalLM"]), "hermes", "qwen3", "0.9.0"),
    (dict(MIXTRAL, head_dim=128), "mistral", None, "0.6.0"),
    (dict(MIXTRAL, num_attention_heads=36, num_key_value_heads=9, head_dim=128), "mistral", None, "0.8.0"),
    (dict(MIXTRAL, model_type="mistral", architectures=["MistralForCausalLM"]), "mistral", None, "0.6.0"),
    (HY3_CONFIG, "hy_v3", "hy_v3", "0.20.0"),
    # the deepseek_v3 / kimi_k2 reasoning parsers came in 0.11.1 (0.11.0 had deepseek_r1 only)
    (DEEPSEEK_V3_CONFIG, "deepseek_v3", "deepseek_v3", "0.11.1"),
    (KIMI_K2_CONFIG, "kimi_k2", "kimi_k2", "0.11.1"),
    (GLM45_CONFIG, "glm45", "glm45", "0.11.0"),  # MTP as speculative method "mtp" (0.10.2 knew deepseek_mtp only)
    (dict(GLM45_AIR_CONFIG, num_nextn_predict_layers=0), "glm45", "glm45", "0.10.1"),  # glm45 parsers
    (gpt_oss_real(2, 4)[0], "openai", "openai_gptoss", "0.10.2"),
    (GEMMA3_TEXT, None, None, "0.8.0"),
    (M2_CONFIG, "minimax_m2", "minimax_m2", "0.11.1"),  # model class and both parsers first in 0.11.1; no MTP draft
])
def test_family_flags_and_minimum_vllm(config, tool, reasoning, version):
    s = adapter_for(config).serving(config)
    assert (s["tool_call_parser"], s["reasoning_parser"]) == (tool, reasoning)
    assert min_vllm(s["vllm_features"])["version"] == version
    assert all(f in FIRST_RELEASE for f in s["vllm_features"])


def test_hy3_mtp_and_plan_features():
    s = adapter_for(HY3_CONFIG).serving(HY3_CONFIG)
    assert s["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert min_vllm(s["vllm_features"] + ["plugin:vocab-patch"])["version"] == "0.20.0"
    llama = min_vllm(adapter_for(LLAMA33_70B).serving(LLAMA33_70B)["vllm_features"] + ["plugin:vocab-patch"])
    assert llama == {"version": "0.19.0", "because": [FIRST_RELEASE["plugin:vocab-patch"][1]]}
    assert min_vllm(["flag:moe-backend-marlin"])["version"] == "0.17.0"
    assert min_vllm([]) == {"version": None, "because": []}


def test_new_families_name_what_sets_their_minimum():
    """The card says which feature sets the minimum: the parsers for DeepSeek-V3/Kimi-K2 and gpt-oss, MTP for GLM."""
    def because(config):
        return min_vllm(adapter_for(config).serving(config)["vllm_features"])["because"]
    assert because(DEEPSEEK_V3_CONFIG) == ["reasoning parser deepseek_v3"]
    assert because(KIMI_K2_CONFIG) == ["reasoning parser kimi_k2"]
    assert because(GLM45_CONFIG) == ['speculative method "mtp"']
    assert because(gpt_oss_real(2, 4)[0]) == ["tool-call parser openai", "reasoning parser openai_gptoss"]
    assert because(GEMMA3_TEXT) == ["Gemma3ForCausalLM"]
    kimi = adapter_for(KIMI_K2_CONFIG).serving(KIMI_K2_CONFIG)
    assert kimi["extra_args"] == ["--trust-remote-code"] and "mla:kimi_k2" in kimi["vllm_features"]
    assert kimi["speculative_config"] is None and "spec:mtp" not in kimi["vllm_features"]  # Kimi-K2 has no MTP
    ds = adapter_for(DEEPSEEK_V3_CONFIG).serving(DEEPSEEK_V3_CONFIG)
    assert ds["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert {"spec:deepseek_mtp", "spec:mtp", "arch:DeepseekV3ForCausalLM"} <= set(ds["vllm_features"])


def _facts(config: dict) -> tuple:
    s = adapter_for(config).serving(config)
    return s["tool_call_parser"], s["reasoning_parser"], min_vllm(s["vllm_features"])["version"], s.get(
        "mm_encoder_tp_mode")


def test_new_families_flags_and_minimum_vllm():
    """The Qwen2 line's route, the vision-language models (served with a data-parallel encoder) and the hybrid
    linear-attention models: parsers and the oldest vLLM with every class, parser and flag (vllm.py)."""
    from tests import qwen35_real, vlm_real

    assert _facts(vlm_real.QWEN3_VL_235B_CONFIG) == ("hermes", "qwen3", "0.11.0", "data")
    assert _facts(vlm_real.KIMI_K25_CONFIG) == ("kimi_k2", "kimi_k2", "0.15.0", "data")
    assert _facts(vlm_real.GLM45V_CONFIG) == ("glm45", "glm45", "0.10.2", "data")
    assert _facts(qwen35_real.QWEN35_397B_CONFIG) == ("qwen3_coder", "qwen3", "0.17.0", "data")
    assert _facts(qwen35_real.QWEN3_NEXT_80B_CONFIG) == ("hermes", "qwen3", "0.10.2", None)
    assert adapter_for(vlm_real.KIMI_K25_CONFIG).serving(vlm_real.KIMI_K25_CONFIG)["extra_args"] == ["--trust-remote-code"]
    qwq = adapter_for(vlm_real.QWQ_32B)
    route = qwq.route_for(dict(vlm_real.QWQ_32B, num_attention_heads=45, num_key_value_heads=9, head_dim=128))
    assert min_vllm(route["features"])["version"] == "0.7.0"
    assert qwq.route_for(dict(vlm_real.QWQ_32B, head_dim=128)) is None  # 5120 // 40 = 128: nothing to route


def test_config_keys_vllm_needs_are_warned_about(tmp_path):
    """Found by the serving tier: a config saved by transformers lacks keys vLLM's class reads without a default
    (hy_v3: route_norm, expert_hidden_dim) or reads with another default (qk_norm; DeepSeek-V3's router). The plan
    and the mirror say so; the derivative keeps config.json as upstream has it."""
    from hubpad.plan.planner import make_plan
    from hubpad.source.local import LocalSource
    from hubpad.testing import TINY_HY3, tiny_hy3_tensors, write_checkpoint

    complete = write_checkpoint(tmp_path / "complete", TINY_HY3, tiny_hy3_tensors(TINY_HY3, "bf16"), n_shards=1)
    assert make_plan(LocalSource(complete), 3).warnings == []
    config = {k: v for k, v in TINY_HY3.items() if k not in ("route_norm", "qk_norm")}
    lacking = write_checkpoint(tmp_path / "lacking", config, tiny_hy3_tensors(config, "bf16"), n_shards=1)
    warnings = make_plan(LocalSource(lacking), 3).warnings
    assert [w.split(",")[0] for w in warnings] == ["config.json has no route_norm", "config.json has no qk_norm"]


def test_late_2026_families_state_their_minimum_vllm():
    """The late-2026 families' first releases, read in vLLM's wheels (vllm.py): every feature they use is in the table,
    so the card states a minimum; the latest feature sets it (the MTP class for DeepSeek-V3.2 / GLM-5, the class for
    the others). A published config without MTP layers (LongCat-Flash's) needs no MTP class."""
    from tests import dsa_real, dsv4_real, dsv41_real, linear_real, mimo_real, minimax_real

    cases = [  # config, tool, reasoning, minimum, the first of what sets it
        (dsa_real.DEEPSEEK_V32_CONFIG, "deepseek_v32", "deepseek_v3", "0.29.0", "DeepSeek-V3.2 / GLM-5 MTP"),
        (dict(dsa_real.DEEPSEEK_V32_CONFIG, num_nextn_predict_layers=0), "deepseek_v32", "deepseek_v3", "0.13.0",
         "tool-call parser deepseek_v32"),
        (dsa_real.GLM5_CONFIG, "glm47", "glm45", "0.29.0", "DeepSeek-V3.2 / GLM-5 MTP"),
        (dict(dsa_real.GLM5_CONFIG, num_nextn_predict_layers=0), "glm47", "glm45", "0.16.0", "GlmMoeDsaForCausalLM"),
        (dsa_real.HY4_CONFIG, "hy_v4", "hy_v4", "0.29.0", "HYV4ForCausalLM"),
        (dsa_real.LONGCAT_FLASH_CONFIG, "longcat", None, "0.11.0", "LongcatFlashForCausalLM"),
        (dsv4_real.FLASH_CONFIG, "deepseek_v4", "deepseek_v4", "0.20.0", "DeepseekV4ForCausalLM"),
        (dsv41_real.FLASH, "deepseek_v41", "deepseek_v41", "0.30.0", "DeepseekV41ForCausalLM"),
        # MiMo-V2.5 with its tower: MiMoV2OmniForCausalLM from 0.21.0, its fused FP8 qkv_proj read at any TP from 0.31.0
        (mimo_real.MIMO_V2_5, "mimo", "mimo", "0.31.0", "MiMo-V2.5's fused FP8 qkv_proj"),
        (minimax_real.M3_CONFIG, "minimax_m3", "minimax_m3", "0.24.0", "MiniMaxM3SparseForConditionalGeneration"),
        (linear_real.KIMI_LINEAR_48B_CONFIG, "kimi_k2", None, "0.11.1", "KimiLinearForCausalLM"),
        (linear_real.KIMI_K3_CONFIG, "kimi_k3", "kimi_k3", "0.27.0", "KimiK3ForConditionalGeneration"),
        (linear_real.GLM53_FLASH_CONFIG, "glm47", "glm45", "0.30.0", "Glm5NextForConditionalGeneration"),
        (linear_real.QWEN38_FLASH_NEXT_CONFIG, "qwen3_coder", "qwen3", "0.29.0", "Qwen4ExpForConditionalGeneration"),
    ]
    for config, tool, reasoning, version, first in cases:
        s = adapter_for(config).serving(config)
        assert (s["tool_call_parser"], s["reasoning_parser"]) == (tool, reasoning), config["model_type"]
        assert all(f in FIRST_RELEASE for f in s["vllm_features"]), (config["model_type"], s["vllm_features"])
        got = min_vllm(s["vllm_features"])
        assert (got["version"], got["because"][0].startswith(first)) == (version, True), (config["model_type"], got)
    mimo = adapter_for(mimo_real.MIMO_V2_5).serving(mimo_real.MIMO_V2_5)
    assert "arch:MiMoV2OmniForCausalLM" in mimo["vllm_features"]  # what vLLM makes of a vision_config
    v41 = adapter_for(dsv41_real.FLASH).serving(dsv41_real.FLASH)
    assert v41["speculative_config"] == {"method": "dspark", "num_speculative_tokens": 5}  # vLLM refuses "mtp" on V4.1
    qwen38 = adapter_for(linear_real.QWEN38_FLASH_NEXT_CONFIG).serving(linear_real.QWEN38_FLASH_NEXT_CONFIG)
    assert "spec:qwen4_exp_mtp" in qwen38["vllm_features"] and "spec:qwen3_5_mtp" not in qwen38["vllm_features"]


def test_drafts_state_their_minimum_vllm():
    """A draft's card states the first release with its speculative method and the registry entry its
    architectures name (a speculators config: the format and the class vLLM picks by the layer's model_type)."""
    from tests.draft_models import dspark_config, eagle3_config, speculators_config

    def version(config):
        return min_vllm(adapter_for(config).serving(config)["vllm_features"])["version"]
    assert version(eagle3_config("llama")) == "0.10.2"  # LlamaForCausalLMEagle3
    # the class is in 0.8.5, but EAGLE-3 serves a Qwen target from 0.10.1 (0.8.5-0.10.0: Llama targets only)
    assert version(dict(eagle3_config("llama"), architectures=["Eagle3LlamaForCausalLM"])) == "0.10.1"
    assert version(eagle3_config("qwen3")) == "0.24.0"  # Eagle3Qwen3ForCausalLM
    assert version(speculators_config(eagle3_config("llama"))) == "0.10.1"
    assert version(speculators_config(eagle3_config("qwen3"))) == "0.24.0"
    assert version(dspark_config()) == "0.29.0"  # a qwen3 DSparkDraftModel, relabelled Qwen3DSparkModel from 0.29.0
    assert version(dict(dspark_config(), architectures=["Qwen3DSparkModel"])) == "0.25.0"


def test_an_unread_feature_states_no_minimum(monkeypatch):
    """The mechanism kept for a feature whose first release was not read: no minimum, and hubpad.json names it."""
    from hubpad.plan.adapters import vllm

    monkeypatch.setitem(vllm.UNREAD, "arch:NewForCausalLM", "NewForCausalLM")
    unread = {"version": None, "because": [], "unread": ["NewForCausalLM"]}
    assert min_vllm(["arch:NewForCausalLM", "tool:hermes"]) == unread
    assert min_vllm(["tool:hermes"])["version"] == "0.6.0"


def test_mla_line_states_its_minimum_vllm():
    """GLM-4.7-Flash, DeepSeek-V2 (with its --hf-overrides route), K2-Horizon and Dots3 Note: parsers, MTP, extra
    flags and the minimum vLLM their published configs give, every feature read in the wheels (vllm.py)."""
    from tests import mla_line_real as real

    cases = [  # config, tool, reasoning, MTP tokens, extra args, minimum, the first of what sets it
        (real.GLM4_7_FLASH_CONFIG, "glm47", "glm45", 1, [], "0.15.0", "Glm4MoeLiteForCausalLM"),
        (real.DEEPSEEK_V2_CONFIG, None, None, None, [], "0.5.1", "DeepseekV2ForCausalLM"),
        (real.K2_HORIZON_375B_CONFIG, "k2_horizon", "k2_horizon", None, ["--trust-remote-code"], "0.30.0",
         "K2HorizonForCausalLM"),
        (real.DOTS3_NOTE_CONFIG, "dots", None, 1, [], "0.28.0", "Dots3NoteForCausalLM"),
    ]
    for config, tool, reasoning, mtp, extra, version, first in cases:
        s = adapter_for(config).serving(config)
        assert (s["tool_call_parser"], s["reasoning_parser"]) == (tool, reasoning), config["model_type"]
        assert (s["speculative_config"] or {}).get("num_speculative_tokens") == mtp, config["model_type"]
        assert s["extra_args"] == extra and all(f in FIRST_RELEASE for f in s["vllm_features"])
        got = min_vllm(s["vllm_features"])
        assert got["version"] == version and got["because"][0] == first, (config["model_type"], got)
    # DeepSeek-V2's padded heads never divide its hidden size: the route, read for 0.20.0, sets the card's minimum
    adapter = adapter_for(real.DEEPSEEK_V2_CONFIG)
    route = adapter.route_for(dict(real.DEEPSEEK_V2_CONFIG, num_attention_heads=129, num_key_value_heads=129))
    assert route["hf_overrides"] == {"model_type": "deepseek_v32"}
    assert min_vllm(route["features"])["version"] == "0.20.0"
    assert adapter.route_for(real.DEEPSEEK_V2_CONFIG) is None  # 5120 % 128 == 0: nothing to route


def test_nemotron_h_flags_and_minimum_vllm():
    """Nemotron 3 Super: qwen3_coder tool calls and nemotron_v3 reasoning (0.17.1), its latent MoE (0.13.0), MTP
    through NemotronHMTPModel (0.17.0); a dense Nemotron-H base model has no parsers (0.9.1)."""
    from tests.nemotron_h_real import SUPER

    s = adapter_for(SUPER).serving(SUPER)
    assert (s["tool_call_parser"], s["reasoning_parser"]) == ("qwen3_coder", "nemotron_v3")
    assert s["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert min_vllm(s["vllm_features"]) == {"version": "0.17.1", "because": ["reasoning parser nemotron_v3"]}
    dense = dict(SUPER, hybrid_override_pattern="M*-M", moe_latent_size=None, num_nextn_predict_layers=0)
    s = adapter_for(dense).serving(dense)
    assert (s["tool_call_parser"], s["reasoning_parser"], s["speculative_config"]) == (None, None, None)
    assert min_vllm(s["vllm_features"])["version"] == "0.9.1"


def test_inkling_flags_and_minimum_vllm():
    """Inkling: the inkling tool-call and reasoning parsers, MTP through InklingMTPModel (one draft token per MTP depth,
    8 in the published mtp_config), all first in 0.26.0."""
    from tests.inkling_real import INKLING, text_only

    for cfg in (INKLING, text_only(INKLING)):  # and its text-only format, InklingForCausalLM: 0.26.0 as well
        s = adapter_for(cfg).serving(cfg)
        assert (s["tool_call_parser"], s["reasoning_parser"]) == ("inkling", "inkling")
        assert s["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 8}
        assert min_vllm(s["vllm_features"])["version"] == "0.26.0"
        assert all(f in FIRST_RELEASE for f in s["vllm_features"])
    assert "arch:InklingForCausalLM" in s["vllm_features"]


def test_nemotron_h_puzzle_flags_and_minimum_vllm():
    """Nemotron-H Puzzle: Nemotron 3's parsers, --trust-remote-code (vLLM reads each layer's config from the
    checkpoint's class), NemotronHPuzzleForCausalLM (0.16.0), its MTP (0.19.0); per-layer MLP widths need 0.17.0."""
    from tests.nemotron_h_real import PUZZLE

    s = adapter_for(PUZZLE).serving(PUZZLE)
    assert (s["tool_call_parser"], s["reasoning_parser"], s["extra_args"]) == (
        "qwen3_coder", "nemotron_v3", ["--trust-remote-code"])
    assert s["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert min_vllm(s["vllm_features"]) == {"version": "0.19.0", "because": [
        "Nemotron-H Puzzle MTP speculative decoding (NemotronHMTPModel)"]}
    no_mtp = [f for f in s["vllm_features"] if not f.startswith("spec:")]  # at TP 3 and 6 (hidden 4096)
    assert min_vllm(no_mtp) == {"version": "0.17.1", "because": ["reasoning parser nemotron_v3"]}
    dense = {**PUZZLE, "block_configs": [{"block_type": "mamba"}, {"block_type": "mlp", "intermediate_size": 96}],
             "num_nextn_predict_layers": 0, "moe_latent_size": None}
    s = adapter_for(dense).serving(dense)
    assert (s["tool_call_parser"], min_vllm(s["vllm_features"])) == (None, {
        "version": "0.17.0", "because": ["a Nemotron-H Puzzle's per-layer MLP widths"]})


def test_gqa_quirk_families_state_their_minimum_vllm():
    """The GQA families with config quirks (issue 33), on their published configs (tests/gqa_real.py): parsers, MTP,
    and the first release of every class, parser and head_dim reading they need (vllm.py, read in the wheels).
    Cohere2's 0.29.0 is commandr.py's first release that reads config.head_dim; K-EXAONE's published
    "ExaoneMoEForCausalLM" spelling is registered again only from 0.32.0 (0.27.0-0.31.0 know "ExaoneMoeForCausalLM")."""
    from tests import bailing_models, gqa_real

    cases = [  # config, tool, reasoning, speculative method, minimum, the first of what sets it
        (gqa_real.ERNIE_300B, None, None, "mtp", "0.11.0", 'speculative method "mtp"'),
        (gqa_real.ERNIE_21B, None, None, None, "0.9.2", "Ernie4_5_MoeForCausalLM"),
        (gqa_real.EXAONE4_32B, "hermes", None, None, "0.10.0", "Exaone4ForCausalLM"),
        (gqa_real.K_EXAONE, "hermes", None, "mtp", "0.32.0", "ExaoneMoEForCausalLM"),
        (dict(gqa_real.K_EXAONE, architectures=["ExaoneMoeForCausalLM"]), "hermes", None, "mtp", "0.27.0",
         "ExaoneMoeForCausalLM"),
        (gqa_real.COMMAND_A, "cohere_command3", "cohere_command3", None, "0.29.0", "CohereForCausalLM reading head_dim"),
        (dict(gqa_real.COMMAND_A, model_type="cohere2_moe", architectures=["Cohere2MoeForCausalLM"]),
         "cohere_command3", "cohere_command3", None, "0.21.0", "Cohere2MoeForCausalLM"),
        (gqa_real.COMMAND_R_PLUS, None, None, None, "0.29.0", "CohereForCausalLM reading head_dim"),
        (gqa_real.TRINITY_LARGE, None, None, None, "0.11.1", "AfmoeForCausalLM"),
        (gqa_real.LAGUNA_XS2, "poolside_v1", "poolside_v1", None, "0.21.0", "LagunaForCausalLM"),
        (bailing_models.CONFIG, None, None, None, "0.11.0", "BailingMoeV2ForCausalLM"),
    ]
    for config, tool, reasoning, method, version, first in cases:
        s = adapter_for(config).serving(config)
        assert (s["tool_call_parser"], s["reasoning_parser"]) == (tool, reasoning), config["model_type"]
        assert (s["speculative_config"] or {}).get("method") == method, config["model_type"]
        assert all(f in FIRST_RELEASE for f in s["vllm_features"]), (config["model_type"], s["vllm_features"])
        got = min_vllm(s["vllm_features"])
        assert (got["version"], got["because"][0].startswith(first)) == (version, True), (config["model_type"], got)
    assert adapter_for(bailing_models.CONFIG).serving(bailing_models.CONFIG)["extra_args"] == ["--trust-remote-code"]
