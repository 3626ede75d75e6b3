"""Llama-line families of vLLM's registry (issue 33). IQuest-Coder (`iquestcoder`) and TeleChat3 (`telechat3`), which
vLLM builds with its LlamaForCausalLM under labels of their own, are padded as a Llama is and written under a padded
Llama's label (MistralForCausalLM, plan/relabel.py) because their config classes reject the padded heads. Solar Pro
(`solar`) is Llama's layers with skip connections that blend earlier layers' residual streams into later ones; it keeps
its label (its repo's config class takes any head count) and the derivative writes head_dim. EXAONE 3.x (`exaone`) is
Llama under GPT-2-style names, padded under its own label and names.

Each: a tiny Llama with random weights everywhere, saved under the family's label (model_type, architectures and the
auto_map its repo ships), mirrored and verified at TP 3 and 6 with the CLI; its float64 logits against the original's
(IQuest-Coder through transformers' IQuestCoderConfig, which maps to its LlamaForCausalLM; TeleChat3, which
transformers lacks, in its Llama, the class vLLM builds for it; Solar, which transformers lacks, in a reference written
after vLLM's solar.py over transformers' decoder layers; EXAONE 3.x in transformers' own ExaoneConfig, which loads the
published names into its Llama). Then `hubpad plan` on header-only copies of the published layouts
(tests/llama_line_real.py).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.testing import write_checkpoint  # noqa: E402
from tests import llama_line_real  # noqa: E402
from tests.helpers import cli, mirror_and_verify, planned_dims  # noqa: E402

REL_TOL = 1e-12
# 4 heads / 2 kv heads of 32 (head_dim = hidden // heads, as TeleChat3's config requires): 6 / 3 at TP 3 and 6, and
# 128 % 6 != 0; an intermediate size 3 does not divide
TINY = dict(vocab_size=160, hidden_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            intermediate_size=100, num_hidden_layers=2, max_position_embeddings=64)
LABELS = {
    "iquestcoder": dict(architectures=["IQuestCoderForCausalLM"], model_type="iquestcoder",
                        auto_map=llama_line_real.IQUEST_CODER_40B["auto_map"]),
    "telechat3": dict(architectures=["Telechat3ForCausalLM"], model_type="telechat3",
                      auto_map=llama_line_real.TELECHAT3_36B["auto_map"]),
}


def _random_llama(**overrides):
    """The tiny Llama in float64 (TINY with `overrides`), every parameter random, norms included."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**TINY, **overrides})).double()
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.normal_(0, 0.3)
    return model


def _save_labelled(model, path, keys: dict, drop: tuple[str, ...] = ()) -> None:
    """Save `model`, then write `keys` into its config.json (and take out `drop`)."""
    model.save_pretrained(path)
    config = {k: v for k, v in json.loads((path / "config.json").read_text()).items() if k not in drop}
    (path / "config.json").write_text(json.dumps({**config, **keys}, indent=2))


def _tiny(path, family: str):
    """The tiny Llama, saved in float64 under the family's label."""
    _save_labelled(_random_llama(), path, LABELS[family])


def _original(path, family: str):
    """The original in transformers' class for it, or (TeleChat3) in its Llama: a copy of config.json labelled llama."""
    if family == "telechat3":
        config = json.loads((path / "config.json").read_text())
        config = {k: v for k, v in config.items() if k != "auto_map"}
        (path / "config.json").write_text(json.dumps({**config, "model_type": "llama",
                                                      "architectures": ["LlamaForCausalLM"]}))
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, trust_remote_code=False)
    assert type(model).__name__ == "LlamaForCausalLM"  # transformers maps iquestcoder to its Llama too
    assert type(model.config).__name__ == ("LlamaConfig" if family == "telechat3" else "IQuestCoderConfig")
    return model.eval()


@pytest.mark.parametrize("tp", [3, 6])
@pytest.mark.parametrize("family", sorted(LABELS))
def test_padded_model_gives_identical_logits(tmp_path, family, tp):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    _tiny(src, family)
    mirror_and_verify(src, dst, tp)
    new = json.loads((dst / "config.json").read_text())
    assert (new["num_attention_heads"], new["num_key_value_heads"], new["head_dim"]) == (6, 3, 32)
    assert new["intermediate_size"] % tp == 0
    # the padded Llama's label, without the auto_map that would load the family's own config class instead
    assert (new["model_type"], new["architectures"], new["sliding_window"]) == ("mistral", ["MistralForCausalLM"], None)
    assert "auto_map" not in new
    padded = transformers.AutoModelForCausalLM.from_pretrained(dst, dtype=torch.float64).eval()
    assert type(padded).__name__ == "MistralForCausalLM"
    ids = torch.randint(0, TINY["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = _original(src, family)(ids).logits, padded(ids).logits
    delta = (a - b).abs().max().item()
    print(f"{family} tp={tp}: heads 6/3, intermediate {new['intermediate_size']}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


@pytest.mark.parametrize("name", sorted(llama_line_real.PADDED))
def test_published_layouts_plan(tmp_path, name):
    """`hubpad plan --tp 3|6` on header-only copies of the published checkpoints: the dims the registry table states,
    every per-rank rule met, the padded Llama's label."""
    config, tensors = llama_line_real.MODELS[name]
    src = write_checkpoint(tmp_path / "src", config, tensors(config), n_shards=4, header_only=True)
    for tp, expected in llama_line_real.PADDED[name].items():
        assert planned_dims(src, tp) == expected, tp
        text = cli("plan", src, "--tp", tp).output
        relabelled = f"→ MistralForCausalLM (model_type {config['model_type']} → mistral)" in text
        assert relabelled == (config["model_type"] in ("iquestcoder", "telechat3")), text


# Solar: 6 layers, so every skip list is exercised (saved at 1 and 2, blended in at 3, 4 and 5)
SOLAR_SKIPS = dict(bskcn_1=[1, 3], bskcn_2=[2], bskcn_3=[3, 5], bskcn_4=[4], bskcn_tv=[0.9, 0.8])


def _solar(path):
    """A tiny Solar: Llama's tensors under the solar label, with skip lists and no head_dim (as published)."""
    _save_labelled(_random_llama(num_hidden_layers=6), path,
                   {**SOLAR_SKIPS, "model_type": "solar", "architectures": ["SolarForCausalLM"]}, drop=("head_dim",))


def _solar_logits(path, ids):
    """vLLM's SolarModel.forward in float64 over transformers' decoder layers (MistralConfig, no sliding window: Llama's
    layer, with any head count): before layer i, the residual stream entering it is kept when i is in bskcn_1 / bskcn_2,
    and blended with the kept one, tv x kept + (1 - tv) x stream, when i is in bskcn_3 / bskcn_4 (vLLM blends its
    hidden_states and residual alike, whose sum is the stream); tv is bskcn_tv[1], the inference value."""
    config = json.loads((path / "config.json").read_text())
    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "rms_norm_eps", "max_position_embeddings")
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    cfg = transformers.MistralConfig(**{k: config[k] for k in keys}, sliding_window=None, attn_implementation="eager",
                                     rope_parameters=config.get("rope_parameters"), head_dim=head_dim)
    model = transformers.MistralForCausalLM.from_pretrained(path, config=cfg, dtype=torch.float64).eval()
    tv, kept = config["bskcn_tv"][1], {}
    n = ids.shape[1]
    mask = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        x = model.model.embed_tokens(ids)
        position_embeddings = model.model.rotary_emb(x, torch.arange(n)[None])
        for i, layer in enumerate(model.model.layers):
            for save, blend in (("bskcn_1", "bskcn_3"), ("bskcn_2", "bskcn_4")):
                if i in config[save]:
                    kept[save] = x
            for save, blend in (("bskcn_1", "bskcn_3"), ("bskcn_2", "bskcn_4")):
                if i in config[blend]:
                    x = kept[save] * tv + x * (1 - tv)
            x = layer(x, attention_mask=mask, position_embeddings=position_embeddings)
        return model.lm_head(model.model.norm(x))


@pytest.mark.parametrize("tp", [3, 6])
def test_padded_solar_gives_identical_logits(tmp_path, tp):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    _solar(src)
    mirror_and_verify(src, dst, tp)
    new = json.loads((dst / "config.json").read_text())
    assert (new["num_attention_heads"], new["num_key_value_heads"], new["head_dim"]) == (6, 3, 32)
    assert (new["model_type"], new["architectures"]) == ("solar", ["SolarForCausalLM"])
    assert all(new[k] == v for k, v in SOLAR_SKIPS.items())
    ids = torch.randint(0, TINY["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    a, b = _solar_logits(src, ids), _solar_logits(dst, ids)
    delta = (a - b).abs().max().item()
    print(f"solar tp={tp}: heads 6/3, intermediate {new['intermediate_size']}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


def test_solar_reference_blends(tmp_path):
    """The reference's skip connections change the output (a reference that ignored them would prove nothing), and
    without them it is transformers' own Llama forward."""
    path = tmp_path / "solar"
    _solar(path)
    ids = torch.randint(0, TINY["vocab_size"], (1, 8), generator=torch.Generator().manual_seed(2))
    blended = _solar_logits(path, ids)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "bskcn_3": [], "bskcn_4": []}))
    plain = _solar_logits(path, ids)
    assert (blended - plain).abs().max().item() > 1e-3
    (path / "config.json").write_text(json.dumps({**config, "model_type": "llama", "head_dim": 32}))
    with torch.no_grad():
        llama = transformers.LlamaForCausalLM.from_pretrained(path, dtype=torch.float64,
                                                              attn_implementation="eager").eval()(ids).logits
    assert (plain - llama).abs().max().item() <= REL_TOL * llama.abs().max().item()


@pytest.mark.parametrize("dims", [{}, dict(hidden_size=192, num_attention_heads=4, num_key_value_heads=2, head_dim=48,
                                           intermediate_size=256, vocab_size=512)], ids=["published", "6-divides-192"])
def test_telechat3_the_mistral_label_cannot_express_is_refused(tmp_path, dims):
    """With q/k/v biases the Mistral label cannot hold TeleChat3, and its own config class takes no padded head count
    (plan/relabel.py refuses one that would divide the hidden size too): one line, nothing written."""
    cfg = dict(llama_line_real.TELECHAT3_36B, attention_bias=True, num_hidden_layers=1, **dims)
    src = write_checkpoint(tmp_path / "telechat3", cfg, llama_line_real.layout(cfg), n_shards=1, header_only=True)
    for args in (("plan", src, "--tp", 3), ("mirror", src, "--tp", 3, "--to", tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
        assert "MistralForCausalLM label that would hold" in result.output
        assert "cannot express attention_bias: True (q/k/v/o biases)" in result.output
    assert not (tmp_path / "out").exists()


# EXAONE 3.x: hidden 192 with heads of 48, so the padded 6 heads divide it and transformers' ExaoneConfig (a
# LlamaConfig: hidden % heads must be 0) loads the derivative too


def _exaone(path):
    """A tiny EXAONE 3.x in float64 with the published tensor names and config keys (num_layers,
    activation_function, layer_norm_epsilon, no head_dim)."""
    from safetensors.torch import save_file

    state = {llama_line_real.exaone_name(n): p.detach().clone()
             for n, p in _random_llama(hidden_size=192, head_dim=48).named_parameters()}
    path.mkdir(parents=True)
    save_file(state, path / "model.safetensors", metadata={"format": "pt"})
    config = {"architectures": ["ExaoneForCausalLM"], "model_type": "exaone", "activation_function": "silu",
              "hidden_size": 192, "intermediate_size": TINY["intermediate_size"], "layer_norm_epsilon": 1e-5,
              "max_position_embeddings": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_layers": TINY["num_hidden_layers"], "rope_theta": 10000.0, "rope_scaling": None,
              "tie_word_embeddings": False, "torch_dtype": "float64", "vocab_size": TINY["vocab_size"],
              "auto_map": llama_line_real.EXAONE_35_32B["auto_map"]}
    (path / "config.json").write_text(json.dumps(config, indent=2))


@pytest.mark.parametrize("tp", [3, 6])
def test_padded_exaone_gives_identical_logits(tmp_path, tp):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    _exaone(src)
    mirror_and_verify(src, dst, tp)
    new = json.loads((dst / "config.json").read_text())
    assert (new["num_attention_heads"], new["num_key_value_heads"], new["head_dim"]) == (6, 3, 48)
    assert (new["model_type"], new["num_layers"], new["auto_map"]) == ("exaone", 2, json.loads((src / "config.json")
                                                                                                .read_text())["auto_map"])
    ids = torch.randint(0, TINY["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    logits = []
    for path in (src, dst):
        model, info = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, trust_remote_code=False,
                                                                        output_loading_info=True)
        assert type(model.config).__name__ == "ExaoneConfig" and not info["missing_keys"] and not info["unexpected_keys"]
        with torch.no_grad():
            logits.append(model.eval()(ids).logits)
    a, b = logits
    delta = (a - b).abs().max().item()
    print(f"exaone tp={tp}: heads 6/3, intermediate {new['intermediate_size']}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()
