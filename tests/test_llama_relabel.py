"""Padded Llamas load everywhere: when transformers' LlamaConfig cannot hold the padded heads (hidden % heads
!= 0), the derivative is labelled MistralForCausalLM (same math) and must give the original Llama's logits.

Tiny Llama-3-shaped models (8 heads / 2 kv heads, group 4, hidden 128, head_dim 16) pad to 12 / 3 at TP=3 and
TP=6 (kv replicated), and 128 % 12 != 0 rules out the Llama label. Cases cover plain RoPE and `llama3` rope
scaling (written in the legacy `rope_scaling` + `rope_theta` keys real Llama-3 config.json files carry), tied
and untied embeddings. Logits are compared in float64: measured max |Δ| = 0.0 in every case here.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.errors import HubpadError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.helpers import cli  # noqa: E402

VOCAB = 160
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16}  # short, so the 24-token inputs cross the scaled band
F64_REL_TOL = 1e-12


def _llama(path, rope: str, tied: bool, seed: int = 0, **overrides):
    """A 2-layer BF16 Llama saved under `path`; llama3 rope is written the way Meta's config.json has it."""
    torch.manual_seed(seed)
    rope_parameters = {"rope_type": "default", "rope_theta": 10000.0}
    if rope == "llama3":
        rope_parameters = dict(LLAMA3_ROPE, rope_theta=500000.0)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=128, rms_norm_eps=1e-5, tie_word_embeddings=tied,
                                   rope_parameters=rope_parameters, **overrides)
    model = transformers.LlamaForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.normal_(1.0 if "norm" in name else 0.0, 0.3)
            else:
                p.normal_(0.0, 1.0 / p.shape[-1] ** 0.5 if "embed" not in name else 1.0)
    model.to(torch.bfloat16).save_pretrained(path)  # BF16, as Llama checkpoints ship
    if rope == "llama3":  # Meta's layout: rope_theta at the top, the scaling in rope_scaling
        config = json.loads((path / "config.json").read_text())
        params = config.pop("rope_parameters")
        config["rope_theta"] = params.pop("rope_theta")
        config["rope_scaling"] = params
        (path / "config.json").write_text(json.dumps(config, indent=2))
    return model


def _pad(src, dst, tp):
    plan = make_plan(LocalSource(src), tp, shard_size=300_000)
    run_mirror(plan, LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["ok"]
    return plan


def _logits64(model, ids):
    with torch.no_grad():
        return model.double()(ids).logits


CASES = [(rope, tied, tp) for rope in ("default", "llama3") for tied in (False, True) for tp in (3, 6)]


@pytest.mark.parametrize("rope,tied,tp", CASES, ids=[f"{r}-{'tied' if t else 'untied'}-tp{p}" for r, t, p in CASES])
def test_padded_llama_relabelled_as_mistral_gives_identical_logits(tmp_path, rope, tied, tp):
    src, dst = tmp_path / "llama", tmp_path / "padded"
    _llama(src, rope, tied)
    plan = _pad(src, dst, tp)

    before = json.loads((src / "config.json").read_text())
    after = json.loads((dst / "config.json").read_text())
    assert (after["model_type"], after["architectures"], after["sliding_window"]) == \
        ("mistral", ["MistralForCausalLM"], None)
    assert (after["num_attention_heads"], after["num_key_value_heads"], after["head_dim"]) == (12, 3, 16)
    changed = {"model_type", "architectures", "sliding_window", "num_attention_heads", "num_key_value_heads",
               "intermediate_size"}
    assert {k: v for k, v in after.items() if k not in changed} == {k: v for k, v in before.items() if k not in changed}
    assert transformers.AutoConfig.from_pretrained(dst).__class__.__name__ == "MistralConfig"

    relabel = plan.to_json()["architecture"]["relabelled"]
    assert relabel["from"]["architectures"] == ["LlamaForCausalLM"]
    assert relabel["to"] == {"model_type": "mistral", "architectures": ["MistralForCausalLM"]}
    assert "128 % 12" in relabel["why"] and "Llama" in relabel["vllm"]
    manifest = json.loads((dst / "hubpad.json").read_text())
    assert manifest["architecture"]["relabelled"]["to"]["architectures"] == ["MistralForCausalLM"]
    card = (dst / "README.md").read_text()
    assert "MistralForCausalLM" in card and "LlamaForCausalLM" in card

    original = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.float64).eval()
    padded = transformers.AutoModelForCausalLM.from_pretrained(dst, dtype=torch.float64).eval()
    assert padded.__class__.__name__ == "MistralForCausalLM"
    assert padded.model.layers[0].self_attn.q_proj.weight.shape == (12 * 16, 128)
    if tied:
        assert padded.lm_head.weight.data_ptr() == padded.model.embed_tokens.weight.data_ptr()
    ids = torch.randint(0, VOCAB, (2, 24), generator=torch.Generator().manual_seed(7))
    a, b = _logits64(original, ids), _logits64(padded, ids)
    delta = (a - b).abs().max().item()
    print(f"{rope} tied={tied} tp={tp}: float64 max |Δ| = {delta}")
    assert delta <= F64_REL_TOL * a.abs().max().item()


def test_plan_text_says_the_label_changes(tmp_path):
    _llama(tmp_path / "llama", "llama3", tied=False)
    result = cli("plan", tmp_path / "llama", "--tp", "3")
    assert result.exit_code == 0, result.output
    assert "LlamaForCausalLM → MistralForCausalLM" in result.output
    assert "same Llama code" in result.output


def test_llama_that_needs_no_new_label_keeps_it(tmp_path):
    """Padded heads that divide hidden_size keep the Llama label (96 % 6 == 0 at TP=3)."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=96, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=24)
    transformers.LlamaForCausalLM(cfg).save_pretrained(tmp_path / "llama")
    plan = make_plan(LocalSource(tmp_path / "llama"), 3)
    assert plan.new_config["model_type"] == "llama" and plan.new_config["num_attention_heads"] == 6
    assert plan.to_json()["architecture"].get("relabelled") is None


@pytest.mark.parametrize("key,value", [("attention_bias", True), ("mlp_bias", True), ("pretraining_tp", 2)])
def test_what_mistral_cannot_express_is_refused(tmp_path, key, value):
    src = tmp_path / "llama"
    _llama(src, "default", tied=False, **{key: value})
    with pytest.raises(HubpadError, match=f"cannot express {key}"):
        make_plan(LocalSource(src), 3)
    result = cli("plan", src, "--tp", "3")
    assert result.exit_code == 1 and result.output.startswith("error: ") and key in result.output
    assert len(result.output.strip().splitlines()) == 1
