"""docs/families.md's registry table agrees with `hubpad plan` wherever tests/ holds the published layout (issue 33).

Each row of the 20B-or-more table whose checkpoint has a header-only layout here is planned at TP 3 and 6: every
`before→after` the row's TP 3 / TP 6 cell states (`a/b→c/d` is two) is a dim the plan changes, "nothing to pad" means
none changes, "the same" repeats TP 3, "refused" (or a refused status) means the plan stops with a ConfigError, and
the extra disk ("X / Y GB") is the plan's bytes out minus bytes in, to the digits stated. A row naming several
checkpoints labels each part (`Flash: …; Pro: …`, `Kimi-K2 127.4 / 127.9 GB`); an unlabelled part is the first one's.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from hubpad.errors import ConfigError
from hubpad.plan.model import config_changes
from hubpad.plan.planner import plan_for, survey
from hubpad.source.local import LocalSource
from hubpad.testing import tiny_hy3_tensors, write_checkpoint
from tests import (diffusion_gemma_real, dsa_real, dsv41_real, dsv4_real, gemma4_real, glm_real, gqa_real, hybrid_real,
                   inkling_real, internvl_real, linear_real, llama_line_real, mimo_real, minimax_real, mla2_real,
                   mla_line_real, mla_real, moe_stream_real, muse_glimmer_real, nemotron_h_real, nemotron_nas_real,
                   qwen35_real, real_models, registry_real, step3p7_real, teleflm_real, vlm_families_real,
                   vlm_real)
from tests import interns1_pro_real
from tests.gpt_oss_real import GPT_OSS_SIZES, gpt_oss_real
from tests.hy3_real import HY3_CONFIG
from tests.test_gemma3 import GEMMA3_27B_TEXT, _gemma_tensors
from tests.test_registry_table import LARGE, _names, _section_rows
from tests.test_step3 import STEP3_321B, _tensors as step3_tensors

Layout = Callable[[], tuple[dict, list]]


def _with(cfg: dict, tensors: Callable[[dict], list]) -> Layout:
    return lambda: (cfg, tensors(cfg))


def _registry(name: str) -> Layout:
    cfg, tensors = registry_real.MODELS[name]
    return _with(cfg, tensors)


def _llama_line(name: str) -> tuple[dict, list]:
    cfg, tensors = llama_line_real.MODELS[name]
    return cfg, tensors(cfg)


def _gqa(name: str) -> Layout:
    return _with(gqa_real.REAL[name], gqa_real.tensors)


# architecture -> [(the label of its part of the row, or None for the only / first one; its published layout)]
LAYOUTS: dict[str, list[tuple[str | None, Layout]]] = {
    "AfmoeForCausalLM": [("Large", _gqa("arcee-ai/Trinity-Large-Thinking")), ("Mini", _gqa("arcee-ai/Trinity-Mini"))],
    "ApertusForCausalLM": [(None, _registry("swiss-ai/Apertus-70B-Instruct-2509"))],
    "CohereForCausalLM": [("R+", _gqa("CohereLabs/c4ai-command-r-plus")), ("R", _gqa("CohereLabs/c4ai-command-r-v01"))],
    "Cohere2ForCausalLM": [(None, _gqa("CohereLabs/c4ai-command-a-03-2025"))],
    "DeciLMForCausalLM": [("Super", _with(nemotron_nas_real.SUPER_49B, nemotron_nas_real.tensors)),
                          ("Ultra", _with(nemotron_nas_real.ULTRA_253B, nemotron_nas_real.tensors))],
    "DeepseekV2ForCausalLM": [("V2.5", _with(mla_line_real.DEEPSEEK_V2_CONFIG, mla_line_real.mla_tensors)),
                              ("Lite", _with(mla_line_real.DEEPSEEK_V2_LITE_CONFIG, mla_line_real.mla_tensors))],
    "DeepseekV3ForCausalLM": [("DeepSeek-V3", _with(mla_real.DEEPSEEK_V3_CONFIG, mla_real.mla_tensors)),
                              ("Kimi-K2", _with(mla_real.KIMI_K2_CONFIG, mla_real.mla_tensors))],
    "DeepseekV32ForCausalLM": [(None, _with(dsa_real.DEEPSEEK_V32_CONFIG, dsa_real.dsa_tensors))],
    "DeepseekV4ForCausalLM": [("Flash", _with(dsv4_real.FLASH_CONFIG, dsv4_real.v4_tensors)),
                              ("Pro", _with(dsv4_real.PRO_CONFIG, dsv4_real.v4_tensors))],
    "DeepseekV41ForCausalLM": [(None, _with(dsv41_real.FLASH, dsv41_real.v41_tensors))],
    "DiffusionGemmaForBlockDiffusion": [(None, _with(diffusion_gemma_real.DIFFUSION_GEMMA_26B,
                                                     diffusion_gemma_real.tensors))],
    "Dots3NoteForCausalLM": [("BF16", _with(mla_line_real.DOTS3_NOTE_CONFIG, mla_line_real.dots3_note_tensors)),
                             ("FP8", _with(mla_line_real.DOTS3_NOTE_FP8_CONFIG, mla_line_real.dots3_note_tensors))],
    "Ernie4_5_MoeForCausalLM": [(None, _gqa("baidu/ERNIE-4.5-300B-A47B-PT"))],
    "ExaoneForCausalLM": [(None, lambda: _llama_line("LGAI-EXAONE/EXAONE-3.5-32B-Instruct"))],
    "Exaone4ForCausalLM": [(None, _gqa("LGAI-EXAONE/EXAONE-4.0-32B"))],
    "ExaoneMoeForCausalLM": [(None, _gqa("LGAI-EXAONE/K-EXAONE-236B-A23B"))],
    "Exaone4_5_ForConditionalGeneration": [(None, _with(vlm_families_real.EXAONE45_33B,
                                                        vlm_families_real.exaone45_tensors))],
    "Gemma2ForCausalLM": [(None, _registry("google/gemma-2-27b-it"))],
    "Gemma3ForCausalLM": [(None, _with(GEMMA3_27B_TEXT, _gemma_tensors))],
    "Gemma4ForConditionalGeneration": [("31B", _with(gemma4_real.GEMMA4_31B, gemma4_real.tensors)),
                                       ("26B", _with(gemma4_real.GEMMA4_26B_A4B, gemma4_real.tensors))],
    "Glm4ForCausalLM": [(None, _registry("zai-org/GLM-4-32B-0414"))],
    "Glm4MoeLiteForCausalLM": [(None, _with(mla_line_real.GLM4_7_FLASH_CONFIG, mla_line_real.mla_tensors))],
    "Glm4MoeForCausalLM": [("GLM-4.5", _with(glm_real.GLM45_CONFIG, glm_real.glm_tensors)),
                           ("Air", _with(glm_real.GLM45_AIR_CONFIG, glm_real.glm_tensors))],
    "Glm4vMoeForConditionalGeneration": [(None, _with(vlm_real.GLM45V_CONFIG, vlm_real.glm45v_tensors))],
    "Glm5NextForConditionalGeneration": [(None, _with(linear_real.GLM53_FLASH_CONFIG, linear_real.glm5_next_tensors))],
    "GlmMoeDsaForCausalLM": [(None, _with(dsa_real.GLM5_CONFIG, dsa_real.dsa_tensors))],
    "GptOssForCausalLM": [(None, lambda: gpt_oss_real(*GPT_OSS_SIZES["openai/gpt-oss-120b"]))],
    "HYV3ForCausalLM": [(None, _with(HY3_CONFIG, lambda c: tiny_hy3_tensors(c, "bf16")))],
    "HYV4ForCausalLM": [(None, _with(dsa_real.HY4_CONFIG, dsa_real.hy4_tensors))],
    "InternVLChatModel": [(None, _with(*internvl_real.MODELS["OpenGVLab/InternVL3-78B"]))],
    "InternVLForConditionalGeneration": [(None, _with(*internvl_real.MODELS["OpenGVLab/InternVL3-78B-hf"]))],
    "InternS1ForConditionalGeneration": [(None, _with(*internvl_real.MODELS["internlm/Intern-S1"]))],
    "InternS1ProForConditionalGeneration": [(None, _with(*interns1_pro_real.MODELS["internlm/Intern-S1-Pro"]))],
    "InternS2PreviewForConditionalGeneration": [(None, _with(*internvl_real.MODELS["internlm/Intern-S2-Preview"]))],
    "NVLM_D": [(None, _with(*internvl_real.MODELS["nvidia/NVLM-D-72B"]))],
    "SkyworkR1VChatModel": [(None, _with(*internvl_real.MODELS["Skywork/Skywork-R1V-38B"]))],
    "InklingForConditionalGeneration": [("Inkling", _with(inkling_real.INKLING, inkling_real.tensors))],
    "K2HorizonForCausalLM": [("375B", _with(mla_line_real.K2_HORIZON_375B_CONFIG, mla_line_real.k2_horizon_tensors)),
                             ("MoVA", _with(mla_line_real.K2_HORIZON_MOVA_36B_CONFIG,
                                            mla_line_real.k2_horizon_tensors))],
    "KimiK25ForConditionalGeneration": [(None, _with(vlm_real.KIMI_K25_CONFIG, vlm_real.kimi_k25_tensors))],
    "KimiK3ForConditionalGeneration": [(None, _with(linear_real.KIMI_K3_CONFIG, linear_real.kimi_k3_tensors))],
    "KimiLinearForCausalLM": [(None, _with(linear_real.KIMI_LINEAR_48B_CONFIG, linear_real.kimi_tensors))],
    "IQuestCoderForCausalLM": [(None, lambda: _llama_line("IQuestLab/IQuest-Coder-V1-40B-Instruct"))],
    "LagunaForCausalLM": [(None, _gqa("poolside/laguna-XS.2"))],
    "LlamaForCausalLM": [(None, _with(real_models.LLAMA33_70B, real_models.header_only_tensors))],
    "Llama4ForConditionalGeneration": [(None, _with(vlm_real.LLAMA4_SCOUT_CONFIG, vlm_real.llama4_tensors))],
    "LongcatFlashForCausalLM": [(None, _with(dsa_real.LONGCAT_FLASH_CONFIG, dsa_real.longcat_tensors))],
    "LongcatFlashNgramForCausalLM": [(None, _with(mla2_real.LONGCAT_FLASH_LITE_CONFIG, mla2_real.lite_tensors))],
    "MiMoV2FlashForCausalLM": [("Flash", _with(mimo_real.MIMO_V2_FLASH, mimo_real.tensors)),
                               ("Pro", _with(mimo_real.MIMO_V2_5_PRO, mimo_real.pro_tensors))],
    "MiMoV2OmniForCausalLM": [(None, _with(mimo_real.MIMO_V2_5, mimo_real.pro_tensors))],
    "MiniMaxM2ForCausalLM": [(None, _with(minimax_real.M2_CONFIG, minimax_real.m2_tensors))],
    "MiniMaxM3SparseForConditionalGeneration": [(None, lambda: (minimax_real.M3_CONFIG, minimax_real.m3_tensors()))],
    "MuseGlimmerForConditionalGeneration": [(None, _with(muse_glimmer_real.MUSE_GLIMMER_30B, muse_glimmer_real.tensors))],
    "NemotronForCausalLM": [(None, _registry("nvidia/Nemotron-4-340B-Instruct (HF conversion)"))],
    "NemotronHForCausalLM": [("Super", _with(nemotron_h_real.SUPER, nemotron_h_real.tensors)),
                             ("Ultra", _with(nemotron_h_real.ULTRA, nemotron_h_real.tensors))],
    "NemotronHPuzzleForCausalLM": [(None, _with(nemotron_h_real.PUZZLE, nemotron_h_real.tensors))],
    "PanguUltraMoEForCausalLM": [(None, _with(mla2_real.PANGU_ULTRA_MOE_CONFIG, mla2_real.pangu_tensors))],
    "BailingMoeV3ForCausalLM": [("Ling 3", _with(hybrid_real.LING3_FLASH, hybrid_real.ling3_tensors))],
    "FalconH1ForCausalLM": [(None, _with(hybrid_real.FALCON_H1_34B, hybrid_real.falcon_h1_tensors))],
    "PhiMoEForCausalLM": [(None, _registry("microsoft/Phi-3.5-MoE-instruct"))],
    "SarvamMLAForCausalLM": [(None, _with(mla2_real.SARVAM_105B_CONFIG, mla2_real.sarvam_tensors))],
    "SolarForCausalLM": [(None, lambda: _llama_line("upstage/solar-pro-preview-instruct"))],
    "TeleChat3ForCausalLM": [(None, lambda: _llama_line("Tele-AI/TeleChat3-36B"))],
    "Qwen2ForCausalLM": [("72B", _with(real_models.QWEN25_72B, real_models.header_only_tensors)),
                         ("32B", _with(vlm_real.QWQ_32B, vlm_real.qwen2_tensors))],
    "Qwen2MoeForCausalLM": [(None, _with(vlm_real.QWEN2_57B_A14B, vlm_real.qwen2_moe_tensors))],
    "Qwen2_5_VLForConditionalGeneration": [(None, _with(vlm_real.QWEN25_VL_72B, vlm_real.qwen2_tensors))],
    "Qwen3MoeForCausalLM": [(None, _with(real_models.QWEN3_235B_A22B, real_models.header_only_tensors))],
    "Qwen3NextForCausalLM": [(None, _with(qwen35_real.QWEN3_NEXT_80B_CONFIG, qwen35_real.qwen3_next_tensors))],
    "Qwen3VLForConditionalGeneration": [("235B", _with(vlm_real.QWEN3_VL_235B_CONFIG, vlm_real.qwen3_vl_tensors))],
    "Qwen3_5ForConditionalGeneration": [("397B", _with(qwen35_real.QWEN35_397B_CONFIG, qwen35_real.qwen35_tensors)),
                                        ("27B", _with(qwen35_real.QWEN35_27B_CONFIG, qwen35_real.qwen35_tensors))],
    "Qwen4ExpForConditionalGeneration": [(None, _with(linear_real.QWEN38_FLASH_NEXT_CONFIG,
                                                      linear_real.qwen4_exp_tensors))],
    "Step3TextForCausalLM": [(None, _with(STEP3_321B, step3_tensors))],
    "TeleFLMForCausalLM": [(None, _with(teleflm_real.FLM2_52B, teleflm_real.tensors))],
    "Step3p7ForConditionalGeneration": [(None, _with(step3p7_real.STEP37_FLASH, step3p7_real.tensors))],
    "Step3p5ForCausalLM": [(None, _with(step3p7_real.STEP35_FLASH, step3p7_real.step35_tensors))],
    "AXK1ForCausalLM": [(None, _with(moe_stream_real.AXK1_CONFIG, moe_stream_real.axk1_tensors))],
    "SarvamMoEForCausalLM": [(None, _with(moe_stream_real.SARVAM_30B, moe_stream_real.ling_tensors))],
}
PAIR = re.compile(r"(\d+(?:/\d+)*)\s*→\s*(\d+(?:/\d+)*)")
GB = re.compile(r"([\d.]+) / ([\d.]+)(?: GB)?")


def _rows() -> dict[str, list[str]]:
    """architecture -> the cells of its row in the 20B-or-more table."""
    return {arch: cells for cells in _section_rows(LARGE) for arch in _names(cells[0])}


def _part(cell: str, label: str | None, sep: str = ":") -> str | None:
    """The part of a cell for one checkpoint: `label<sep> …` up to the next `; `, else the unlabelled first part."""
    if cell.startswith("refused"):
        return cell
    parts = cell.split("; ")
    if label is not None:
        for part in parts:
            if part.startswith(label + sep):
                return part[len(label) + len(sep):].strip()
    first = parts[0]
    labelled = re.match(r"^[\w.+-]+(?: [\w.+-]+)?" + re.escape(sep) + r"(?!\d)", first) if sep == ":" else \
        re.match(r"^[A-Za-z][\w.+-]* ", first)
    return None if labelled else first


def _pairs(text: str) -> set[tuple[int, int]]:
    out = set()
    for before, after in PAIR.findall(text):
        bs, afs = before.split("/"), after.split("/")
        assert len(bs) == len(afs), f"{text!r}: {before}→{after} pairs unequal lists"
        out |= {(int(b), int(a)) for b, a in zip(bs, afs)}
    return out


def _changes(plan) -> set[tuple[int, int]]:
    """(before, after) of every dim the plan pads and every integer config.json value it changes (in nested objects
    and per-layer lists too)."""
    out = {(d.before, d.after) for d in plan.dims if d.before != d.after}

    def walk(before, after) -> None:
        if isinstance(before, dict) and isinstance(after, dict):
            for key in before.keys() & after.keys():
                walk(before[key], after[key])
        elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
            for b, a in zip(before, after):
                walk(b, a)
        elif type(before) is int and type(after) is int and before != after:
            out.add((before, after))

    for before, after in config_changes(plan.config, plan.new_config).values():
        walk(before, after)
    return out


def _plans(path) -> dict[int, object]:
    """TP -> the plan of the checkpoint at `path`, or the ConfigError that refuses it (headers read once)."""
    try:
        survey_ = survey(LocalSource(path))
    except ConfigError as e:
        return {3: e, 6: e}
    out: dict[int, object] = {}
    for tp in (3, 6):
        try:
            out[tp] = plan_for(survey_, tp)
        except ConfigError as e:
            out[tp] = e
    return out


CASES = [(arch, label) for arch, parts in LAYOUTS.items() for label, _ in parts]


def test_every_layout_names_a_row_of_the_table():
    rows = _rows()
    assert not [arch for arch in LAYOUTS if arch not in rows]


@pytest.mark.parametrize("arch, label", CASES, ids=[f"{a}-{lab}" if lab else a for a, lab in CASES])
def test_row_agrees_with_the_plan(tmp_path, arch, label):
    cells = _rows()[arch]
    status, tp3, tp6, disk = cells[2], cells[4], cells[5], cells[6]
    cfg, tensors = dict(LAYOUTS[arch])[label]()
    src = write_checkpoint(tmp_path / "src", cfg, tensors, n_shards=4, header_only=True)
    stated = {3: _part(tp3, label), 6: _part(tp6, label)}
    if stated[6] is not None and stated[6].startswith("the same"):
        stated[6] = stated[3] + stated[6][len("the same"):]
    extra = GB.search(_part(disk, label, sep=" ") or "")
    checked, plans = 0, _plans(src)
    for i, tp in enumerate((3, 6)):
        plan, cell = plans[tp], stated[tp]
        if status.startswith("refused") or (cell or "").startswith("refused"):
            assert isinstance(plan, ConfigError), f"{arch} {label or ''} TP {tp}: the row says refused, plan pads"
            checked += 1
            continue
        assert not isinstance(plan, ConfigError), f"{arch} {label or ''} TP {tp}: {plan}"
        changed = _changes(plan)
        if cell is not None and not cell.startswith("as "):
            if cell.startswith(("nothing to pad", "serves as it is")):
                assert not changed, f"{arch} TP {tp}: the row says nothing to pad, the plan pads {changed}"
            missing = _pairs(cell) - changed
            assert not missing, (f"{arch} {label or ''} TP {tp}: the row states {sorted(missing)}, "
                                 f"the plan {sorted(changed)}")
            checked += 1
        if extra:
            stated_gb = extra.group(i + 1)
            digits = len(stated_gb.partition(".")[2])
            got = (plan.bytes_out - plan.bytes_in) / 1e9
            assert abs(got - float(stated_gb)) <= 0.5 * 10 ** -digits + 1e-9, (
                f"{arch} {label or ''} TP {tp}: the row says {stated_gb} GB more, the plan {got:.3f} GB")
            checked += 1
    assert checked, f"{arch} {label or ''}: the row states nothing the plan could check"
