"""EAGLE-3 draft models: padded exactly for their target's TP, and paired with it in the cards.

The float64 proof runs vLLM's Eagle3 draft forward (tests/draft_models.py: fc over the target's aux hidden states,
[input_layernorm(embedding) | hidden_norm(fc)] into the decoder layer, the final norm, the draft-vocab head and the
d2t scatter) around transformers' own LlamaDecoderLayer / Qwen3DecoderLayer (Mistral's for a relabelled padded
Llama draft), on the published tensor names (`midlayer.*`, `fc`, `d2t`, `t2d`), original and padded.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from hubpad.errors import ConfigError
from hubpad.plan.planner import make_plan
from hubpad.source.local import LocalSource
from tests.draft_models import build_eagle3, eagle3_config, eagle3_forward
from tests.helpers import cli, mirror_and_verify

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _inputs(cfg: dict, n: int = 9, seed: int = 5):
    g = torch.Generator().manual_seed(seed)
    hidden = cfg["hidden_size"]
    return (torch.randn(n, hidden, generator=g, dtype=torch.float64),
            torch.randn(n, 3 * (cfg.get("target_hidden_size") or hidden), generator=g, dtype=torch.float64))


def _mirror(src, dst, tp, *extra):
    mirror_and_verify(src, dst, tp, *extra)
    return json.loads((dst / "config.json").read_text())


def _assert_same_draft(src, dst, label: str) -> float:
    from tests.draft_models import flat_config

    cfg = flat_config(json.loads((src / "config.json").read_text()))
    embeds, aux = _inputs(cfg)
    a, b = eagle3_forward(src, embeds, aux), eagle3_forward(dst, embeds, aux)
    drafted = torch.isfinite(a)
    assert torch.equal(drafted, torch.isfinite(b)), f"{label}: the d2t scatter differs"
    delta = (a[drafted] - b[drafted]).abs().max().item()
    print(f"{label}: max |Δ| = {delta:.3g} (logits up to {a[drafted].abs().max().item():.3g})")
    assert delta <= 1e-12 * a[drafted].abs().max().item(), f"{label}: max |Δ| = {delta}"
    return delta


def _tensor(path, name):
    for f in sorted(path.glob("*.safetensors")):
        with safe_open(f, "pt") as h:
            if name in h.keys():
                return h.get_tensor(name)
    raise KeyError(name)


# Llama 4 heads / 2 kv of 16 on hidden 64 (6 / 3 at TP 3 and 6: hidden % 6 != 0, so the Llama draft is relabelled),
# a 2-layer Llama draft (`layers.N.`), a Qwen3 draft (per-head q/k norms), one with its own embedding and a draft vocab
# equal to the target's (no d2t), and one whose fc reads a wider target (target_hidden_size).
CASES = {
    "llama": dict(kind="llama"),
    "llama-2-layers": dict(kind="llama", layers=2),
    "qwen3": dict(kind="qwen3"),
    "llama-full-vocab": dict(kind="llama", draft_vocab=None, embed=True),
    "qwen3-wide-target": dict(kind="qwen3", target_hidden=96),
}


@pytest.mark.parametrize("case, tp", [(c, 3) for c in CASES] + [("llama", 6), ("qwen3", 6)])
def test_padded_eagle3_draft_drafts_as_the_original(tmp_path, case, tp):
    opts = dict(CASES[case])
    kind, embed = opts.pop("kind"), opts.pop("embed", False)
    cfg = eagle3_config(kind, **opts)
    src = build_eagle3(tmp_path / "src", cfg, embed=embed)
    dst = tmp_path / f"tp{tp}"
    new = _mirror(src, dst, tp)
    assert (new["num_attention_heads"], new["num_key_value_heads"], new["head_dim"]) == (6, 3, 16)
    assert new["architectures"] == cfg["architectures"]  # vLLM picks the Eagle3 class by it
    assert new["model_type"] == ("mistral" if kind == "llama" else kind)
    for name in ("fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"):  # replicated: byte for byte
        if name in ("d2t", "t2d") and opts.get("draft_vocab", 48) is None:
            continue
        assert torch.equal(_tensor(src, name), _tensor(dst, name)), name
    manifest = json.loads((dst / "hubpad.json").read_text())
    assert manifest["serving"]["draft"] == {"method": "eagle3", "num_speculative_tokens": 3}
    _assert_same_draft(src, dst, f"{case} TP={tp}")


def test_a_nonzero_pad_is_caught(tmp_path):
    """The comparison has teeth: padded heads placed other than at the end of their GQA layout (q_proj's zero head
    first, each real head one place later, so it meets another kv head) change the draft's logits. (A single nonzero
    pad value is inert on its own: a padded head's q, k, v and o are all zero, so one of them alone writes nothing.)"""
    from safetensors.torch import load_file, save_file

    src = build_eagle3(tmp_path / "src", eagle3_config("llama"))
    dst = tmp_path / "tp3"
    _mirror(src, dst, 3)
    shard = next(dst.glob("*.safetensors"))
    tensors = load_file(shard)
    q = tensors["midlayer.self_attn.q_proj.weight"]
    tensors["midlayer.self_attn.q_proj.weight"] = torch.roll(q, 16, dims=0)  # one head (16 rows) later
    save_file(tensors, shard, metadata={"format": "pt"})
    with pytest.raises(AssertionError, match="max"):
        _assert_same_draft(src, dst, "corrupted pad")


def test_draft_config_refusals_name_the_reason(tmp_path):
    """What the relabelled label cannot express is refused in one line, never dropped."""
    src = build_eagle3(tmp_path / "src", eagle3_config("llama", attention_bias=True))
    with pytest.raises(ConfigError, match="attention_bias"):
        make_plan(LocalSource(src), 3)


def test_a_non_draft_llama_is_not_taken_for_one(tmp_path):
    """Drafts share their decoder's model_type: only their architectures tell them apart (a Llama stays a Llama)."""
    from hubpad.plan.adapters import adapter_for

    assert adapter_for({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}).name == "llama"
    assert adapter_for({"model_type": "llama", "architectures": ["LlamaForCausalLMEagle3"]}).name == "eagle3_llama"
    assert adapter_for({"model_type": "qwen3", "architectures": ["Eagle3Qwen3ForCausalLM"]}).name == "eagle3_qwen3"
    assert adapter_for({"model_type": "mistral", "architectures": ["LlamaForCausalLMEagle3"]}).name == "eagle3_llama"
    assert adapter_for({"model_type": "mistral", "architectures": ["MistralForCausalLM"]}).name == "mistral"


def test_vocab_plugin_covers_the_draft_vocab(tmp_path):
    """lm_head holds draft_vocab_size rows, embed_tokens vocab_size: the plan reports the one that needs the plugin."""
    src = build_eagle3(tmp_path / "src", eagle3_config("llama", vocab=192, draft_vocab=64))  # 192 % 3 == 0, 64 not
    vocab = make_plan(LocalSource(src), 3).vocab
    assert (vocab["size"], vocab["patch_needed"], vocab["patched_size"]) == (64, True, 192)


# ---------------------------------------------------------------------------------------------------------------------
# Pairing: the draft's card names its padded target; the target's serve command carries --speculative-config.


def _serve_block(card: str) -> str:
    i = card.index("```bash\nvllm serve")
    return card[i:card.index("```", i + 8)]


def test_cli_pairs_a_draft_with_its_target(tmp_path):
    from tests import serve_models

    draft = build_eagle3(tmp_path / "draft", eagle3_config("llama"))
    padded_draft = tmp_path / "draft-tp3"
    _mirror(draft, padded_draft, 3, "--draft-for", "alice/Llama-TP3")
    card = (padded_draft / "README.md").read_text()
    assert "speculative-decoding draft" in card and "alice/Llama-TP3" in card
    serve = _serve_block(card)
    assert serve.startswith("```bash\nvllm serve alice/Llama-TP3 --tensor-parallel-size 3")
    assert '"method": "eagle3"' in serve and '"num_speculative_tokens": 3' in serve
    manifest = json.loads((padded_draft / "hubpad.json").read_text())
    assert manifest["serving"]["draft"] == {"method": "eagle3", "target": "alice/Llama-TP3",
                                            "num_speculative_tokens": 3}

    target = serve_models.build("llama", tmp_path / "target")
    padded_target = tmp_path / "target-tp3"
    _mirror(target, padded_target, 3, "--draft", padded_draft, "--num-speculative-tokens", 4)
    serve = _serve_block((padded_target / "README.md").read_text())
    spec = json.loads(serve.split("--speculative-config '")[1].split("'")[0])
    assert spec == {"method": "eagle3", "model": str(padded_draft), "num_speculative_tokens": 4}
    # the target's card counts the paired draft's method (eagle3 0.10.1; the vocab plugin's 0.19.0 is later here)
    assert json.loads((padded_target / "hubpad.json").read_text())["serving"]["min_vllm"]["version"] == "0.19.0"


def test_a_paired_draft_method_raises_the_targets_minimum_vllm(tmp_path):
    """--draft puts the draft's speculative method in the target's serve command, so the target's card states the
    first vLLM release with that method too (DSpark: 0.25.0, later than the tiny Llama target's own 0.19.0)."""
    from tests import serve_models
    from tests.draft_models import build_dspark, dspark_config

    draft = build_dspark(tmp_path / "draft", dspark_config())
    target = serve_models.build("llama", tmp_path / "target")
    _mirror(target, tmp_path / "target-tp3", 3, "--draft", draft)
    min_vllm = json.loads((tmp_path / "target-tp3" / "hubpad.json").read_text())["serving"]["min_vllm"]
    assert min_vllm == {"version": "0.25.0", "because": ['speculative method "dspark"']}


def test_pairing_refusals(tmp_path):
    from tests import serve_models

    target = serve_models.build("llama", tmp_path / "target")
    result = cli("mirror", target, "--tp", 3, "--to", tmp_path / "a", "--draft-for", "alice/X-TP3")
    assert result.exit_code == 1 and "--draft-for: llama is not a speculative-decoding draft" in result.output
    result = cli("mirror", target, "--tp", 3, "--to", tmp_path / "b", "--draft", target)
    assert result.exit_code == 1 and "names no speculative-decoding draft" in result.output


def test_mirrors_file_pairs_draft_entries_with_their_target(tmp_path):
    from tests import serve_models

    target = serve_models.build("llama", tmp_path / "target")
    draft = build_eagle3(tmp_path / "draft", eagle3_config("llama"))
    (tmp_path / "hubpad.yaml").write_text(
        "defaults: {tp: 3}\n"
        "mirrors:\n"
        "  - upstream: ./target\n    target: ./out/target-tp3\n"
        "  - upstream: ./draft\n    target: ./out/draft-tp3\n    draft_for: ./target\n")
    config = tmp_path / "hubpad.yaml"
    result = cli("mirror", target, "--config", config)
    assert result.exit_code == 0, result.output
    serve = _serve_block((tmp_path / "out/target-tp3/README.md").read_text())
    spec = json.loads(serve.split("--speculative-config '")[1].split("'")[0])
    # the draft is read from its upstream (not mirrored yet): the method is its config's
    assert spec == {"method": "eagle3", "model": str((tmp_path / "out/draft-tp3").resolve()),
                    "num_speculative_tokens": 3}
    result = cli("mirror", draft, "--config", config)
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "out/draft-tp3/hubpad.json").read_text())
    assert manifest["serving"]["draft"]["target"] == str((tmp_path / "out/target-tp3").resolve())


# ---------------------------------------------------------------------------------------------------------------------
# Qwen3 DSpark drafts: a Qwen3 stack that attends to the context's K/V without a causal mask, a Markov head, sinks.


@pytest.mark.parametrize("tp", [3, 6])
@pytest.mark.parametrize("sinks", [False, True], ids=["plain", "sinks"])
def test_padded_dspark_draft_drafts_as_the_original(tmp_path, sinks, tp):
    from tests.draft_models import build_dspark, dspark_config, dspark_forward

    cfg = dspark_config(sinks=sinks)
    src = build_dspark(tmp_path / "src", cfg)
    dst = tmp_path / f"tp{tp}"
    new = _mirror(src, dst, tp)
    assert (new["model_type"], new["architectures"]) == ("qwen3", ["DSparkDraftModel"])
    assert (new["num_attention_heads"], new["num_key_value_heads"]) == (6, 3)
    for name in ("fc.weight", "hidden_norm.weight", "markov_head.markov_w1.weight", "markov_head.markov_w2.weight",
                 "confidence_head.proj.weight", "confidence_head.proj.bias", "mask_embedding", "lm_head.weight"):
        assert torch.equal(_tensor(src, name), _tensor(dst, name)), name
    if sinks:
        sink = _tensor(dst, "layers.0.self_attn.attention_sink_bias")
        assert torch.equal(sink[:4], _tensor(src, "layers.0.self_attn.attention_sink_bias")) and not sink[4:].any()
    manifest = json.loads((dst / "hubpad.json").read_text())
    assert manifest["serving"]["draft"] == {"method": "dspark", "num_speculative_tokens": 4}  # its block size
    assert manifest["serving"]["min_vllm"]["version"] == "0.29.0"  # a qwen3 DSparkDraftModel (vllm.py)
    g = torch.Generator().manual_seed(3)
    aux, block = torch.randn(6, 192, generator=g, dtype=torch.float64), torch.randn(4, 64, generator=g,
                                                                                   dtype=torch.float64)
    prev = torch.randint(0, 96, (4,), generator=g)
    a, b = dspark_forward(src, aux, block, prev), dspark_forward(dst, aux, block, prev)
    delta = (a - b).abs().max().item()
    print(f"dspark {'sinks' if sinks else 'plain'} TP={tp}: max |Δ| = {delta:.3g} (logits up to "
          f"{a.abs().max().item():.3g})")
    assert delta <= 1e-12 * a.abs().max().item()


# ---------------------------------------------------------------------------------------------------------------------
# A standalone MTP repo (as SGLang's NextN export makes one: the target's config with architectures
# DeepseekV3ForCausalLMNextN and the model.layers.<num_hidden_layers>.* tensors alone, here in model.safetensors) pads
# to exactly the bytes of the full target's padded MTP layer (whose exactness test_mla.py and test_serve_mtp.py prove).


@pytest.mark.parametrize("tp", [3])  # TP=6 plans the same layer with the same code (test_mla.py covers it)
def test_standalone_mtp_repo_pads_as_the_targets_mtp_layer(tmp_path, tp):
    from safetensors.torch import load_file, save_file

    from tests.test_mla import _build

    _, full = _build(tmp_path)
    config = json.loads((full / "config.json").read_text())
    n = config["num_hidden_layers"]
    mtp = tmp_path / "nextn"
    mtp.mkdir()
    tensors = {k: v for f in full.glob("*.safetensors") for k, v in load_file(f).items()
               if k.startswith(f"model.layers.{n}.")}
    save_file(tensors, mtp / "model.safetensors", metadata={"format": "pt"})
    (mtp / "config.json").write_text(json.dumps({**config, "architectures": ["DeepseekV3ForCausalLMNextN"]}))
    _mirror(full, tmp_path / "full-tp", tp)
    new = _mirror(mtp, tmp_path / "nextn-tp", tp)
    padded = {k: v for f in (tmp_path / "full-tp").glob("*.safetensors") for k, v in load_file(f).items()}
    alone = {k: v for f in (tmp_path / "nextn-tp").glob("*.safetensors") for k, v in load_file(f).items()}
    assert set(alone) == set(tensors)
    for name, t in alone.items():
        assert torch.equal(t, padded[name]), name
    assert new["num_attention_heads"] == json.loads((tmp_path / "full-tp/config.json").read_text())[
        "num_attention_heads"]
    serving = json.loads((tmp_path / "nextn-tp/hubpad.json").read_text())["serving"]
    assert (serving["speculative_config"], serving["draft"]) == (None, {"method": "mtp", "num_speculative_tokens": 1})
    card = (tmp_path / "nextn-tp/README.md").read_text()
    assert '"method": "mtp"' in _serve_block(card)


def test_advisor_says_the_draft_keeps_its_architecture(tmp_path):
    src = build_eagle3(tmp_path / "src", eagle3_config("llama"))
    result = cli("plan", src)
    assert result.exit_code == 0, result.output
    assert "as model_type mistral" in result.output and "Eagle3LlamaForCausalLM" in result.output


def test_mirrors_file_draft_for_must_name_one_entry(tmp_path):
    from hubpad.errors import HubpadError
    from hubpad.formats.mirrors_file import load_mirrors, pairing

    config = tmp_path / "hubpad.yaml"
    config.write_text("mirrors:\n  - {upstream: org/target, tp: 3}\n  - {upstream: org/draft, tp: 6, draft_for: org/target}\n"
                      "  - {upstream: org/draft2, tp: 3, draft_for: org/target}\n")
    specs = load_mirrors(config, namespace="alice")
    with pytest.raises(HubpadError, match="draft_for 'org/target' names no mirror entry with tp 6"):
        pairing(specs, specs[1], "alice")
    assert pairing(specs, specs[2], "alice") == ("alice/target-TP3", [])
    assert pairing(specs, specs[0], "alice") == (None, [specs[2]])


# ---------------------------------------------------------------------------------------------------------------------
# Published layouts, planned header-only at full scale (sparse files).
# - A LlamaForCausalLMEagle3 draft of Qwen3.5-9B with the 15 tensors and shapes a public loader's notes list for it
#   (midlayer q_proj [4096, 8192], k/v_proj [1024, 8192], o_proj [4096, 4096], MLP 12288, fc [4096, 12288], lm_head
#   [32000, 4096], d2t I64 [32000], t2d BOOL [248320]); head_dim 128 follows from the shapes, rms_norm_eps and rope
#   keys are the usual ones (not confirmed offline).
# - A 64-head / 4-kv EAGLE-3 draft layer with the target's attention (hidden 4096, head_dim 128; Qwen3-235B-A22B's
#   shape; the public report of a 64 -> 96 head padding gives no config): TP=3 pads it to 96 heads / 6 kv.


def _eagle3_layout(h, heads, kv, hd, inter, vocab, draft_vocab):
    return [("midlayer.input_layernorm.weight", "BF16", (h,)), ("midlayer.hidden_norm.weight", "BF16", (h,)),
            ("midlayer.post_attention_layernorm.weight", "BF16", (h,)),
            ("midlayer.self_attn.q_proj.weight", "BF16", (heads * hd, 2 * h)),
            ("midlayer.self_attn.k_proj.weight", "BF16", (kv * hd, 2 * h)),
            ("midlayer.self_attn.v_proj.weight", "BF16", (kv * hd, 2 * h)),
            ("midlayer.self_attn.o_proj.weight", "BF16", (h, heads * hd)),
            ("midlayer.mlp.gate_proj.weight", "BF16", (inter, h)), ("midlayer.mlp.up_proj.weight", "BF16", (inter, h)),
            ("midlayer.mlp.down_proj.weight", "BF16", (h, inter)), ("fc.weight", "BF16", (h, 3 * h)),
            ("norm.weight", "BF16", (h,)), ("lm_head.weight", "BF16", (draft_vocab, h)), ("d2t", "I64", (draft_vocab,)),
            ("t2d", "BOOL", (vocab,))]


@pytest.mark.parametrize("name, dims, tp, after", [
    ("qwen3.5-9b-eagle3", (4096, 32, 8, 128, 12288, 248320, 32000), 3, (36, 9, 12288)),
    ("qwen3.5-9b-eagle3", (4096, 32, 8, 128, 12288, 248320, 32000), 6, (48, 12, 12288)),
    ("64-head-eagle3", (4096, 64, 4, 128, 12288, 151936, 32000), 3, (96, 6, 12288)),
    ("64-head-eagle3", (4096, 64, 4, 128, 12288, 151936, 32000), 6, (96, 6, 12288)),
])
def test_published_eagle3_layouts_plan(tmp_path, name, dims, tp, after):
    from hubpad.testing import write_checkpoint

    h, heads, kv, hd, inter, vocab, draft_vocab = dims
    cfg = eagle3_config("llama", hidden=h, heads=heads, kv=kv, head_dim=hd, intermediate=inter, vocab=vocab,
                        draft_vocab=draft_vocab)
    src = write_checkpoint(tmp_path / name, cfg, _eagle3_layout(h, heads, kv, hd, inter, vocab, draft_vocab),
                           n_shards=1, header_only=True)
    plan = make_plan(LocalSource(src), tp)
    got = {d.name: d.after for d in plan.dims}
    assert (got["attention heads"], got["kv heads"], got["dense intermediate"]) == after
    assert plan.new_config["model_type"] == "mistral" and plan.new_config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert plan.vocab["size"] == draft_vocab and plan.vocab["patch_needed"]  # 32000 / 64 = 500 rows of 64: not % 3


@pytest.mark.parametrize("arch, model_type, reason", [
    ("Eagle3DeepseekV3ForCausalLM", "deepseek_v3", "DeepSeek MLA layer"),
    ("Gemma4DSparkModel", "gemma4_text", "Gemma 4 DSpark"),
    ("DSparkDraftModel", "deepseek_v4", "ship inside the target checkpoint"),
    ("DSparkV41DraftModel", "deepseek_v41", "ship inside the target checkpoint"),
])
def test_drafts_hubpad_does_not_pad_are_refused_with_the_reason(tmp_path, arch, model_type, reason):
    src = build_eagle3(tmp_path / "src", eagle3_config("llama", architectures=[arch], model_type=model_type))
    result = cli("plan", src, "--tp", 3)
    assert result.exit_code == 1 and reason in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_speculators_format_draft(tmp_path, kind):
    """A speculators-format EAGLE-3 draft (transformer_layer_config nested, `layers.0.` names): padded in its nested
    config without a relabel (vLLM builds a plain PreTrainedConfig from it), its verifier named on the card."""
    cfg = eagle3_config(kind)
    src = build_eagle3(tmp_path / "src", cfg, speculators=True)
    dst = tmp_path / "tp3"
    new = _mirror(src, dst, 3)
    layer = new["transformer_layer_config"]
    assert (layer["num_attention_heads"], layer["num_key_value_heads"], layer["model_type"]) == (6, 3, kind)
    assert new["architectures"] == ["Eagle3Speculator"] and new["speculators_model_type"] == "eagle3"
    draft = json.loads((dst / "hubpad.json").read_text())["serving"]["draft"]
    assert draft == {"method": "eagle3", "verifier": "org/target", "num_speculative_tokens": 3}
    assert "[`org/target`](https://huggingface.co/org/target)" in (dst / "README.md").read_text()
    _assert_same_draft(src, dst, f"speculators {kind} TP=3")
