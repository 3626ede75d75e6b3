"""Step-3.7 in vLLM's CPU build (0.32.0): what stops it, with vLLM's exact messages, and the padded language model
served through vLLM's Step3p5 classes (the ones Step3p7ForConditionalGeneration builds its language model with).

- Step3p7ForConditionalGeneration does not run here, original or derivative: with transformers' own Step3p7Config
  (5.19 in vLLM's venv; vLLM registers no step3p7 config class) vLLM's get_hf_text_config stops on
  `hasattr(text_config, "num_attention_heads")`, a per-layer attribute there; with a remote-code config (the card's
  --trust-remote-code; the test writes a stand-in, not StepFun's file) the class itself cannot be imported:
  vllm/transformers_utils/processors/step3_vl.py imports torchvision, which vLLM's CPU venv lacks.
- The language model does: the original and the `hubpad mirror --tp 3` derivative, each rewritten as a text-only
  `step3p5` checkpoint (text_config lifted to the top, the vision tensors dropped: the same rewrite for both, no
  padding involved), are served by vLLM's Step3p5ForCausalLM, the original at TP 1 and the derivative at TP 3 and 6 with its
  vocab plugin: full layers 4 -> 6 / 12 heads, sliding 6 -> 9 / 18, kv 2 -> 3 / 6, each sharded by vLLM per its own
  layer type.
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve

torch = pytest.importorskip("torch")

NATIVE_CONFIG_MESSAGE = "AmbiguousGlobalPerLayerAttributeError: 'num_attention_heads' is a per-layer attribute"
NO_TORCHVISION_MESSAGE = "ModuleNotFoundError: No module named 'torchvision'"
SEED = 1  # seed 0 leaves a greedy step 3.7e-4 from a tie (serving.MIN_MARGIN)

_STANDIN = '''from transformers import PretrainedConfig


class Step3p7Config(PretrainedConfig):
    """A stand-in for the hub's remote-code config (not StepFun's file): sub-configs as plain attributes."""

    model_type = "step3p7"

    def __init__(self, vision_config=None, text_config=None, projector_bias=False, image_token_id=5, **kwargs):
        self.vision_config = PretrainedConfig(**(vision_config or {}))
        self.text_config = PretrainedConfig(**(text_config or {}))
        self.projector_bias, self.image_token_id = projector_bias, image_token_id
        super().__init__(**kwargs)
'''


def _upstream(path):
    from tests.step3p7_models import build_served

    return build_served(path, seed=SEED)


def test_step3p7_does_not_run_in_the_cpu_build(tmp_path):
    """Not hubpad's doing: the unpadded original stops, with vLLM's own messages (docs/families/mimo-gemma-step.md)."""
    src = _upstream(tmp_path / "upstream")
    run = serving.run_vllm([serving.job(src, 1)], tmp_path / "run-native")
    assert run.results and not run.results[0]["ok"], "vLLM's CPU build now reads transformers' Step3p7Config"
    assert NATIVE_CONFIG_MESSAGE in run.log
    cfg = json.loads((src / "config.json").read_text())
    (src / "configuration_step3p7.py").write_text(_STANDIN)
    (src / "config.json").write_text(json.dumps({**cfg, "auto_map": {"AutoConfig": "configuration_step3p7.Step3p7Config"}}))
    run = serving.run_vllm([serving.job(src, 1, trust_remote_code=True)], tmp_path / "run-remote-code")
    assert run.results and not run.results[0]["ok"], "vLLM's CPU build now imports Step3p7ForConditionalGeneration"
    assert NO_TORCHVISION_MESSAGE in run.log


@pytest.mark.parametrize("tp", [3, 6])
def test_step3p7_language_model_serves_the_originals_outputs(tmp_path, tp):
    from tests.helpers import cli
    from tests.step3p7_models import text_only

    src = _upstream(tmp_path / "upstream")
    dst = tmp_path / f"tp{tp}"
    result = cli("mirror", src, "--tp", str(tp), "--to", dst)
    assert result.exit_code == 0, result.output
    text = json.loads((dst / "config.json").read_text())["text_config"]
    assert (text["num_attention_heads"], text["num_attention_groups"],
            text["attention_other_setting"]["num_attention_heads"]) == {3: (6, 3, 9), 6: (12, 6, 18)}[tp]
    original = serving.run_vllm([serving.job(text_only(src, tmp_path / "text-upstream"), 1)],
                                tmp_path / "run-original").ok(0)
    served = text_only(dst, tmp_path / f"text-tp{tp}")
    run = serving.run_vllm([serving.job(served, tp)], tmp_path / f"run-tp{tp}",
                           plugins=serving.install_plugin(served, tmp_path / "plugin"))
    delta = serving.assert_same_outputs(original, run.ok(0), f"step3p5 language model TP=1 vs derivative TP={tp}")
    print(f"max |Δ logprob| = {delta}")
