"""DSA = MLA + lightning indexer (DeepSeek-V3.2 `deepseek_v32`, GLM-5 `glm_moe_dsa`): pad tiny real transformers models
and compare float64 logits, and replay vLLM's per-rank sparse MLA on the padded tensors.

The tiny models carry what the published ones do, under their published names (transformers 5 saves them so, and they
are what vLLM's deepseek_v2.py loader reads): q LoRA, the indexer (`self_attn.indexer.wq_b / wk / k_norm (weight and
bias) / weights_proj`) with index_topk 4 < 12 tokens so the sparse selection really drops keys, a dense first layer,
routed experts with a correction bias, one shared expert and an MTP layer at index num_hidden_layers (its own indexer
too; transformers skips it, the plan pads its heads and copies its indexer). GLM-5's variant adds
`index_topk_freq` 2 with 3 layers, so its third layer reuses layer 1's top-k (transformers builds no indexer there);
its checkpoint still ships that layer's indexer tensors, as GLM-5's releases do (vLLM's loader drops them), and they
are copied.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402

from tests.test_mla import REL_TOL, TINY, _absorbed_mla_rank, _pad  # noqa: E402
from tests.test_models_transformers import COMMON  # noqa: E402
from tests.tiny_moe import add_mtp_layer, assert_same_logits, randomize  # noqa: E402

INDEXER = dict(index_topk=4, index_head_dim=16, index_n_heads=2)
FAMILIES = {"deepseek_v32": {}, "glm_moe_dsa": dict(num_hidden_layers=3, index_topk_freq=2)}
INDEXER_TENSORS = ("wq_b.weight", "wk.weight", "k_norm.weight", "k_norm.bias", "weights_proj.weight")


def build_dsa(tmp_path, model_type: str, **overrides):
    """A tiny float64 DSA model of `model_type` and its checkpoint (published names, MTP layer appended)."""
    torch.manual_seed(0)
    kwargs = dict(COMMON, **{**TINY, **INDEXER, **FAMILIES[model_type], **overrides})
    cfg = transformers.CONFIG_MAPPING[model_type](**kwargs)
    model = transformers.AutoModelForCausalLM.from_config(cfg, experts_implementation="eager").double().eval()
    randomize(model)
    path = tmp_path / "upstream"
    model.save_pretrained(path)
    tensors = load_file(path / "model.safetensors")
    for layer, kind in enumerate(getattr(cfg, "indexer_types", None) or []):
        if kind == "shared":  # GLM-5 ships indexer tensors for the layers that reuse a previous top-k
            for t in INDEXER_TENSORS:
                tensors[f"model.layers.{layer}.self_attn.indexer.{t}"] = (
                    tensors[f"model.layers.0.self_attn.indexer.{t}"] + 0.25)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    add_mtp_layer(path, cfg)  # a copy of the last layer (+0.5), its indexer included: vLLM's MTP layer always has one
    return model, path


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    """(model type, tp) -> (model, upstream, padded dir, plan), each built, mirrored and verified once."""
    made = {}

    def get(model_type, tp):
        if (model_type, tp) not in made:
            root = tmp_path_factory.mktemp(f"{model_type}-tp{tp}")
            model, src = build_dsa(root, model_type)
            made[model_type, tp] = (model, src, root / "padded", _pad(src, root / "padded", tp))
        return made[model_type, tp]
    return get


# (model type, tp) -> heads after, expert width after
CASES = {("deepseek_v32", 3): (6, 192), ("deepseek_v32", 6): (6, 384), ("glm_moe_dsa", 3): (6, 192),
         ("glm_moe_dsa", 6): (6, 384)}


@pytest.mark.parametrize("model_type,tp", sorted(CASES))
def test_dsa_padded_model_gives_identical_logits(padded, model_type, tp):
    heads, expert = CASES[model_type, tp]
    model, src, dst, plan = padded(model_type, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (heads, heads)
    assert (cfg["index_n_heads"], cfg["index_head_dim"], cfg["index_topk"]) == (2, 16, 4)  # the indexer's own
    assert cfg["moe_intermediate_size"] == expert
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    layers = json.loads((src / "config.json").read_text())["num_hidden_layers"]
    for layer in range(layers + 1):  # the last one is the MTP layer
        p = f"model.layers.{layer}.self_attn."
        assert shapes[p + "q_b_proj.weight"] == ((96, 48), (heads * 24, 48))
        assert shapes[p + "kv_b_proj.weight"] == ((128, 32), (heads * 32, 32))
        assert shapes[p + "o_proj.weight"] == ((64, 64), (64, heads * 16))
    assert not any(".indexer." in n or "_a_proj" in n for n in shapes)
    out = {k: v for f in sorted(dst.glob("*.safetensors")) for k, v in load_file(f).items()}
    original = load_file(src / "model.safetensors")
    indexer = [n for n in original if ".indexer." in n]
    assert len(indexer) == len(INDEXER_TENSORS) * (layers + 1)  # every layer and the MTP layer ship one
    assert all(torch.equal(out[n], original[n]) for n in indexer)  # replicated in vLLM: copied as they are
    card = (dst / "README.md").read_text()
    tool, reasoning = {"deepseek_v32": ("deepseek_v32", "deepseek_v3"), "glm_moe_dsa": ("glm47", "glm45")}[model_type]
    assert f"--tool-call-parser {tool}" in card and f"--reasoning-parser {reasoning}" in card
    assert '"method": "mtp"' in card
    # the minimum vLLM: DeepseekV32MTPModel (MTP for both families) first in 0.29.0, later than either class/parser
    assert "**vLLM 0.29.0 or newer**: the first release with DeepSeek-V3.2 / GLM-5 MTP speculative decoding" in card

    assert_same_logits(model, dst, f"{model_type} tp={tp}", COMMON["vocab_size"])


@pytest.mark.parametrize("model_type,tp", [("deepseek_v32", 3), ("glm_moe_dsa", 6)])
def test_vllm_sparse_mla_keeps_padded_heads_zero(padded, model_type, tp):
    """vLLM's decode path rank by rank: the replicated indexer's top-k keys (the same on every rank), the absorbed
    MLA over only those keys on each rank's heads, o_proj's row-parallel partial sums all-reduced."""
    model, _, dst, _ = padded(model_type, tp)
    weights = {k: v for f in sorted(dst.glob("*.safetensors")) for k, v in load_file(f).items()}
    attn = model.model.layers[1].self_attn  # a MoE layer with its own indexer
    captured = {}
    attn.register_forward_hook(lambda mod, args, kwargs, out: captured.update(
        x=args[0] if args else kwargs["hidden_states"], pe=kwargs["position_embeddings"], out=out[0]),
        with_kwargs=True)
    seq = 12
    ids = torch.randint(0, COMMON["vocab_size"], (1, seq), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        model(ids)
        x, (cos, sin) = captured["x"][0], captured["pe"]
        causal = torch.ones(seq, seq, dtype=torch.bool).tril()
        additive = torch.zeros(1, seq, seq, dtype=x.dtype).masked_fill(~causal, torch.finfo(x.dtype).min)
        q_resid = attn.q_a_layernorm(attn.q_a_proj(x[None]))
        top = attn.indexer(x[None], q_resid, (cos, sin), additive, None)[0]  # [seq, index_topk]
        selected = torch.zeros(seq, seq, dtype=torch.bool).scatter(-1, top.long(), True)
        mask = causal & selected
        assert not torch.equal(mask, causal)  # the indexer really drops keys
        n_heads = json.loads((dst / "config.json").read_text())["num_attention_heads"]
        total = torch.zeros_like(captured["out"][0])
        for rank in range(tp):
            part, o = _absorbed_mla_rank(attn, weights, "model.layers.1.self_attn.", x, cos, sin, tp, rank, n_heads,
                                         mask)
            first_padded = max(0, TINY["num_attention_heads"] - rank * (n_heads // tp))
            assert torch.equal(o[:, first_padded:], torch.zeros_like(o[:, first_padded:]))  # padded heads: 0.0
            total += part  # the all-reduce
    ref = captured["out"][0]
    delta = (total - ref).abs().max().item()
    print(f"{model_type} sparse absorbed MLA tp={tp}: max |Δ| = {delta}")
    assert delta <= REL_TOL * ref.abs().max().item()


@pytest.mark.parametrize("model_type,reason", [
    ("mistral4", "serves Mistral Small 4 from Mistral's params.json + consolidated*.safetensors"),
    ("hy_v4_vl", "vLLM 0.32 has no class for it")])
def test_mla_line_refusals_name_the_reason(tmp_path, model_type, reason):
    from hubpad.testing import write_checkpoint
    from tests.helpers import cli

    src = write_checkpoint(tmp_path / model_type, {"model_type": model_type, "num_attention_heads": 32}, [],
                           n_shards=1, header_only=True)
    result = cli("plan", src, "--tp", 3)
    assert result.exit_code == 1 and reason in result.output and len(result.output.strip().splitlines()) == 1


# Mistral Large 3 as its repos ship it: Mistral's params.json (these keys as vLLM's mistral.py reads them) and
# consolidated*.safetensors, no config.json
MISTRAL_LARGE3_PARAMS = {"dim": 7168, "n_layers": 61, "n_heads": 128, "n_kv_heads": 128, "qk_nope_head_dim": 128,
                         "qk_rope_head_dim": 64, "v_head_dim": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
                         "moe": {"num_experts": 128, "num_experts_per_tok": 4, "num_shared_experts": 1},
                         "llama_4_scaling": {"original_max_position_embeddings": 8192, "beta": 0.1}}


@pytest.mark.parametrize("params,reason", [
    (MISTRAL_LARGE3_PARAMS, "vLLM builds MistralLarge3ForCausalLM only from Mistral's own params.json"),
    ({"dim": 4096, "n_layers": 32, "n_heads": 32}, "a checkpoint in Mistral's own format")])
def test_mistral_format_repos_are_refused_naming_mistral_large_3(tmp_path, params, reason):
    from hubpad.testing import write_checkpoint
    from tests.helpers import cli

    src = write_checkpoint(tmp_path / "large3", {"model_type": "placeholder"}, [], n_shards=1, header_only=True)
    (src / "config.json").unlink()
    (src / "params.json").write_text(json.dumps(params))
    for args in (("plan", src, "--tp", 3), ("mirror", src, "--tp", 3, "--to", tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code == 1 and reason in result.output
        assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("model_type,tp", [("deepseek_v32", 3), ("glm_moe_dsa", 6)])
def test_dsa_mtp_layer_pads_exactly(padded, model_type, tp):
    """The MTP layer's decoder block in float64: transformers skips it, so both checkpoints are loaded with one more
    layer in the stack (num_hidden_layers + 1), which makes `model.layers.<n>` (the MTP block, with its own indexer) an
    ordinary layer; the MTP-only modules (enorm, hnorm, eh_proj, shared_head) are copied byte for byte (verify)."""
    _, src, dst, _ = padded(model_type, tp)
    logits = []
    for path in (src, dst):
        cfg = transformers.AutoConfig.from_pretrained(path)
        n = cfg.num_hidden_layers
        extra = {"num_hidden_layers": n + 1, "mlp_layer_types": list(cfg.mlp_layer_types) + ["sparse"],
                 "layer_types": list(cfg.layer_types) + [cfg.layer_types[-1]]}
        if getattr(cfg, "indexer_types", None) is not None:
            extra["indexer_types"] = list(cfg.indexer_types) + ["full"]  # vLLM's MTP layers always run an indexer
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64,
                                                                  experts_implementation="eager", **extra).eval()
        assert len(model.model.layers) == n + 1
        stored = {k: v for f in sorted(path.glob("*.safetensors")) for k, v in load_file(f).items()}
        for name in ("self_attn.kv_b_proj.weight", "self_attn.indexer.wq_b.weight"):  # loaded, not initialized
            assert torch.equal(model.model.layers[n].get_parameter(name), stored[f"model.layers.{n}.{name}"])
        ids = torch.randint(0, COMMON["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            logits.append(model(ids).logits)
    delta = (logits[0] - logits[1]).abs().max().item()
    print(f"{model_type} tp={tp} with the MTP block as layer {n}: max |Δ| = {delta}")
    assert delta <= REL_TOL * logits[0].abs().max().item()
