"""Issue 33's MLA rows (stream mla2) in vLLM's CPU build (0.32): each derivative at TP 3 serves its original's greedy
tokens. MLA's outputs in that build depend on the heads per rank, so the original (4 heads) is served at TP 2, with as
many heads per rank as the derivative's 6 at TP 3 (as tests/test_serve_families.py does for DeepSeek-V3).
"""

from __future__ import annotations

import json

import pytest

from tests import serving

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests import serve_models  # noqa: E402
from tests.helpers import cli  # noqa: E402

pytestmark = pytest.mark.serve

_CPU_MLA = {"attention_backend": "CPU_MLA", "max_num_seqs": 1}
_MLA = {k: v for k, v in serve_models._MLA.items() if k not in ("n_group", "topk_group")}

CONFIG_CODE = '''from transformers import PretrainedConfig


class {cls}(PretrainedConfig):
    model_type = "{model_type}"
'''


def _remote_config(src, module: str, cls: str, model_type: str) -> None:
    """The tokenizer, a stand-in for the repo's config class and the auto_map that names it (as published; the
    serving runs pass --trust-remote-code, as the card says). The stand-in is not the vendor's file."""
    serve_models.add_tokenizer(src)
    (src / f"{module}.py").write_text(CONFIG_CODE.format(cls=cls, model_type=model_type))
    cfg = json.loads((src / "config.json").read_text())
    cfg["auto_map"] = {"AutoConfig": f"{module}.{cls}"}
    (src / "config.json").write_text(json.dumps(cfg, indent=2))


def _serve_pair(src, tmp_path, tp: int, label: str, engine: dict) -> None:
    original = serving.run_vllm([serving.job(src, 2, **engine)], tmp_path / "run-original").ok(0)
    dst = tmp_path / f"tp{tp}"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    assert json.loads((dst / "config.json").read_text())["num_attention_heads"] == 6
    run = serving.run_vllm([serving.job(dst, tp, **engine, **serving.card_engine_args(dst))], tmp_path / "run",
                           plugins=serving.install_plugin(dst, tmp_path / "plugin"))
    serving.assert_same_outputs(original, run.ok(0), f"{label} TP=2 vs derivative TP={tp}")


def test_pangu_ultra_moe_derivative_serves_the_originals_outputs(tmp_path):
    """Sandwich norms, the correction bias at `mlp.e_score_correction_bias`, the MTP layer (skipped by the main
    model's loader), its config class read as remote code (--trust-remote-code, as the card says)."""
    from tests import mla2_models

    _, src = mla2_models.build_pangu(tmp_path / "upstream", {**serve_models.COMMON, **_MLA},
                                dtype=torch.bfloat16, seed=0)
    _remote_config(src, "configuration_openpangu_moe", "PanguUltraMoEConfig", "pangu_ultra_moe")
    _serve_pair(src, tmp_path, 3, "pangu_ultra_moe", {**_CPU_MLA, "trust_remote_code": True})


def test_sarvam_mla_derivative_serves_the_originals_outputs(tmp_path):
    """No q LoRA, the published num_experts / num_shared_experts names, its config class read as remote code. The
    fixture states n_group 1 / topk_group 1 (as transformers saves them): vLLM's CPU router takes sigmoid routing
    only with groups (the published config states none, so the published 105B's routing stops there, as
    MiniMax-M2's does: tests/test_serve_families.py)."""
    from tests import mla2_models

    sarvam = {k: v for k, v in _MLA.items() if k not in ("q_lora_rank", "num_nextn_predict_layers")}
    _, src = mla2_models.build_sarvam(tmp_path / "upstream", {**serve_models.COMMON, **sarvam, "q_lora_rank": None,
                                                              "n_group": 1, "topk_group": 1},
                                      dtype=torch.bfloat16, seed=0)
    _remote_config(src, "configuration_sarvam_mla", "SarvamMLAConfig", "sarvam_mla")
    _serve_pair(src, tmp_path, 3, "sarvam_mla", {**_CPU_MLA, "trust_remote_code": True})


# vLLM's LongCat-Flash-Lite class runs only in the V2 model runner, which needs Triton; the CPU build has none, so it
# takes the V1 runner and the class stops at construction (longcat_flash_ngram.py), the unpadded original already.
LITE_MESSAGES = ["NotImplementedError: LongcatFlashNgramForCausalLM (LongCat-Flash-Lite) requires the V2 model "
                 "runner for its n-gram embedding state"]


def test_longcat_flash_lite_original_the_cpu_build_cannot_run(tmp_path):
    from tests import mla2_models
    from tests.test_longcat import VLLM_KEYS

    lite = dict(hidden_size=128, ffn_hidden_size=256, expert_ffn_hidden_size=64, num_layers=2, num_attention_heads=4,
                q_lora_rank=96, kv_lora_rank=512, qk_rope_head_dim=64, head_dim=64, qk_nope_head_dim=64, v_head_dim=64,
                n_routed_experts=4, zero_expert_num=2, moe_topk=2, vocab_size=serve_models.VOCAB,
                max_position_embeddings=256)
    from safetensors.torch import load_file, save_file

    _, src = mla2_models.build_lite(tmp_path, **lite)
    shard = src / "model.safetensors"
    save_file({k: v.to(torch.bfloat16) for k, v in load_file(shard).items()}, shard, metadata={"format": "pt"})
    serve_models.add_tokenizer(src)
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, **VLLM_KEYS, "model_type": "longcat_flash",
                                                 "dtype": "bfloat16"}, indent=2))
    run = serving.run_vllm([serving.job(src, 1, **_CPU_MLA)], tmp_path / "run")
    assert not (run.results and run.results[0]["ok"]), "vLLM's CPU build now serves LongCat-Flash-Lite: serve its derivative"
    for message in LITE_MESSAGES:
        assert message in run.log, "\n".join(line for line in run.log.splitlines() if "rror" in line)[-4000:]
