"""EAGLE-3 speculative decoding, served as the cards say: a padded draft with its padded target drafts as the originals.

vLLM's CPU build runs EAGLE-3 (vllm/v1/spec_decode, Eagle3LlamaForCausalLM). The pair is a tiny Llama target made
nearly a bigram model and an EAGLE-3 draft built to guess it (tests/draft_models.py): the draft's vocab is a sorted
half of the target's (d2t), its attention reads the next token's embedding. `hubpad mirror DRAFT --tp N` pads the
draft (4 heads / 2 kv -> 6 / 3; its config relabelled to model_type mistral, architectures kept) and
`hubpad mirror TARGET --tp N --draft <padded draft>` puts `--speculative-config` in the target's card.

Served at TP=1, the original pair must give the same greedy tokens with and without the draft (lossless), and its
draft must be right sometimes and wrong sometimes. The padded pair, at TP=N with the card's own --speculative-config,
must give the same tokens (logprobs within serving.LOGPROB_BOUND) and the same drafts, draft tokens and accepted
tokens, position by position: a draft whose padding changed its output would change what it proposes.
"""

from __future__ import annotations

import json

import pytest

from tests import serving
from tests.helpers import cli

pytestmark = pytest.mark.serve

TOKENS = 16  # generated per prompt: about 40 drafts of 3 tokens over the three prompts


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from tests import draft_models  # torch and transformers: imported only when a serving test runs

    serving.vllm_python()
    root = tmp_path_factory.mktemp("eagle3")
    target = draft_models.build_serving_target(root / "target")
    return root, target, draft_models.build_serving_draft(root / "draft", target)


@pytest.fixture(scope="module")
def pair(built):
    root, target, draft = built
    spec = {"method": "eagle3", "model": str(draft), "num_speculative_tokens": 3}
    run = serving.run_vllm([serving.job(target, 1, max_tokens=TOKENS),
                            serving.job(target, 1, max_tokens=TOKENS, speculative_config=spec, metrics=True)],
                           root / "run-original")
    return root, target, draft, run.ok(0), run.ok(1)


def _card_speculative_config(derivative) -> dict:
    argv = serving.card_serve_command(derivative)
    assert "--speculative-config" in argv, "the target's card renders no speculative decoding"
    return json.loads(argv[argv.index("--speculative-config") + 1])


@pytest.mark.parametrize("tp", [3, 6])
def test_padded_eagle3_pair_drafts_as_the_original(pair, tp):
    root, target, draft, plain, original = pair
    padded_draft, padded_target = root / f"draft-tp{tp}", root / f"target-tp{tp}"
    result = cli("mirror", draft, "--tp", tp, "--to", padded_draft)
    assert result.exit_code == 0, result.output
    config = json.loads((padded_draft / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("mistral", ["LlamaForCausalLMEagle3"])
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (6, 3)  # TP=6: 3 kv heads, each on 2 ranks
    result = cli("mirror", target, "--tp", tp, "--to", padded_target, "--draft", padded_draft)
    assert result.exit_code == 0, result.output
    spec = _card_speculative_config(padded_target)
    assert spec == {"method": "eagle3", "model": str(padded_draft), "num_speculative_tokens": 3}
    plugin = serving.install_plugin(padded_target, root / f"target-tp{tp}-plugin")
    served = serving.run_vllm([serving.job(padded_target, tp, max_tokens=TOKENS, speculative_config=spec,
                                           metrics=True)], root / f"run-tp{tp}", plugins=plugin).ok(0)
    serving.assert_same_outputs(plain, original, "target TP=1 without vs with its EAGLE-3 draft")
    serving.assert_same_outputs(original, served, f"EAGLE-3 pair TP=1 vs padded pair TP={tp}")
    a, b = original["spec"], served["spec"]
    print(f"EAGLE-3 drafts: original TP=1 {a}, padded TP={tp} {b}")
    assert 0 < a["num_accepted_tokens"] < a["num_draft_tokens"], a
    assert b == a


def test_unpadded_draft_stops_vllm_at_the_padded_targets_tp(built):
    """Why the draft is padded too: vLLM builds it at the target's TP and refuses its 4 heads at TP=3 (its own
    message, from SpeculativeConfig's validation of the draft's model config)."""
    root, target, draft = built
    padded_target = root / "target-tp3-alone"
    result = cli("mirror", target, "--tp", 3, "--to", padded_target)
    assert result.exit_code == 0, result.output
    plugin = serving.install_plugin(padded_target, root / "target-tp3-alone-plugin")
    spec = {"method": "eagle3", "model": str(draft), "num_speculative_tokens": 3}
    run = serving.run_vllm([serving.job(padded_target, 3, speculative_config=spec)], root / "run-unpadded-draft",
                           plugins=plugin)
    assert run.results and not run.results[0]["ok"]
    assert ("Total number of attention heads (4) must be divisible by tensor parallel size (3)."
            in run.results[0]["error"]), run.results[0]["error"]
