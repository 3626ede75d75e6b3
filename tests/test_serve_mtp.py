"""MTP speculative decoding, served as the card says: the padded MTP layer drafts exactly as the original's.

vLLM's CPU build runs speculative decoding. With the card's own `--speculative-config` ({"method": "mtp", ...}), the
original at TP=1 and the derivative at its padded TP must generate the same tokens as without speculation (greedy
speculative decoding is lossless) and accept the same number of drafted tokens: the MTP layer is a decoder layer
with padded heads and experts, and a pad that were not inert would change its drafts. The fixture's MTP layer is
made to draft (tests/serve_models.py `_drafting_mtp`), and the acceptance count must be neither zero nor everything.

MLA (DeepSeek-V3): vLLM 0.32's CPU_MLA gives other tokens when it verifies drafts than when it decodes one token at a
time (several query tokens per sequence take its prefill path; measured: the unpadded original at TP=2 with and
without MTP differ from the second token on), so there the derivative with MTP is compared with the original with
MTP (identical tokens and acceptance), and "lossless" is not checked.
"""

from __future__ import annotations

import json

import pytest

from tests import serving

pytestmark = pytest.mark.serve


def _card_speculative_config(derivative) -> dict:
    argv = serving.card_serve_command(derivative)
    assert "--speculative-config" in argv, "the card renders no MTP speculative decoding"
    return json.loads(argv[argv.index("--speculative-config") + 1])


@pytest.mark.parametrize("family, tp", [pytest.param("hy_v3", 3, id="hy_v3-tp3"),
                                        pytest.param("deepseek_v3", 3, id="deepseek_v3-tp3"),
                                        pytest.param("glm4_moe", 3, id="glm4_moe-tp3")])
def test_padded_mtp_layer_accepts_as_the_original(zoo, family, tp):
    name = f"{family}+mtp"
    derivative = zoo.derivative(name, tp)
    spec = _card_speculative_config(derivative)
    assert spec["method"] == "mtp"
    engine = zoo.engine(name)
    if "attention_backend" in engine:  # the draft model picks its own backend: the same CPU adaptation (MLA)
        spec = {**spec, "attention_backend": engine["attention_backend"]}
    plain = zoo.original(name, tp)
    original = serving.run_vllm([serving.job(zoo.upstream(name), zoo.reference_tp(name, tp), speculative_config=spec,
                                             metrics=True, **engine)], derivative.parent / "run-original-mtp").ok(0)
    served = serving.run_vllm([serving.job(derivative, tp, speculative_config=spec, metrics=True, **engine)],
                              derivative.parent / f"run-tp{tp}-mtp", plugins=zoo.plugin(derivative)).ok(0)
    ref = zoo.reference_tp(name, tp)
    serving.assert_same_outputs(original, served, f"{family} TP={ref} vs derivative TP={tp} with MTP")
    if "attention_backend" not in engine:  # MLA: vLLM's CPU_MLA verifies drafts on another path (module docstring)
        serving.assert_same_outputs(plain, original, f"{family} TP={ref} without vs with MTP")
    a, b = original["spec"], served["spec"]
    print(f"{family}: drafts {a}, derivative {b}")
    assert 0 < a["num_accepted_tokens"] < a["num_draft_tokens"], a
    assert (b["num_drafts"], b["num_draft_tokens"], b["num_accepted_tokens"]) == \
        (a["num_drafts"], a["num_draft_tokens"], a["num_accepted_tokens"])
