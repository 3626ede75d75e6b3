"""Hy4 (`hy_v4`): DSA plus a gated MLA output, per-head learned sinks and iHC hyper-connections; pad tiny real
transformers models and compare float64 logits at TP 3 and 6.

The checkpoint carries the names vLLM 0.32's hy_v4 loader reads (vllm/models/hy_v4/nvidia/model.py, mtp.py):
`self_attn.linear_gate`, `self_attn.learnable_sink_param`, `hc_attn_layer.hc_fn|hc_base|hc_scale` (no `hc_pre.`, which
transformers' save inserts and vLLM would skip as unknown), `model.hc_head.hc_head_fn|...`, the shared expert's
and dense MLP's `gate_proj` (transformers' save renames them `linear_gate`, its reverse of the attention gate's
rename), routed experts
fused as `mlp.experts.gate_up_proj` / `down_proj` (the layout transformers loads), indexer tensors on every layer (the
third layer shares layer 1's top-k and still ships them), and an MTP layer at index num_hidden_layers with enorm,
hnorm, eh_proj, shared_head.norm, final_layernorm, an indexer and no iHC weights (mtp.py: "MTP checkpoints do not
carry iHC pre/post weights"). Sinks, gates and iHC weights are random, so a wrong pad would show.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402

from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.test_dsa import INDEXER, INDEXER_TENSORS  # noqa: E402
from tests.test_mla import REL_TOL, TINY  # noqa: E402
from tests.test_models_transformers import COMMON  # noqa: E402
from tests.tiny_moe import randomize  # noqa: E402

HY4 = {k: v for k, v in TINY.items() if k not in ("first_k_dense_replace", "num_nextn_predict_layers")}
MTP_EXTRAS = {"enorm": (64,), "hnorm": (64,), "eh_proj": (64, 128), "shared_head.norm": (64,),
              "final_layernorm": (64,)}


def _published(name: str) -> str:
    """transformers' saved name -> the published one vLLM reads."""
    name = name.replace(".hc_pre.", ".")
    return name if ".self_attn." in name else name.replace(".linear_gate.", ".gate_proj.")


def build_hy4(root):
    torch.manual_seed(0)
    cfg = transformers.CONFIG_MAPPING["hy_v4"](**{**COMMON, **HY4, **INDEXER, "num_hidden_layers": 3}, pad_token_id=0,
                                               bos_token_id=1, eos_token_id=2)
    model = transformers.AutoModelForCausalLM.from_config(cfg, experts_implementation="eager").double().eval()
    randomize(model)
    path = root / "upstream"
    model.save_pretrained(path)
    tensors = {_published(k): v for k, v in load_file(path / "model.safetensors").items()}
    n = cfg.num_hidden_layers
    assert cfg.indexer_types == ["full", "full", "shared"]
    gen = torch.Generator().manual_seed(7)
    for t in INDEXER_TENSORS:  # the shared layer and the MTP layer ship an indexer too
        for layer in (2, n):
            tensors[f"model.layers.{layer}.self_attn.indexer.{t}"] = (
                tensors[f"model.layers.0.self_attn.indexer.{t}"] + 0.25 * layer)
    for name in [k for k in tensors if k.startswith(f"model.layers.{n - 1}.") and ".hc_" not in k]:
        tensors.setdefault(name.replace(f".{n - 1}.", f".{n}.", 1), tensors[name].clone() + 0.5)
    for module, shape in MTP_EXTRAS.items():
        tensors[f"model.layers.{n}.{module}.weight"] = torch.randn(shape, generator=gen, dtype=torch.float64)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    data = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**data, "num_nextn_predict_layers": 1}))
    return model, path


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    made = {}

    def get(tp):
        if "src" not in made:
            made["src"] = build_hy4(tmp_path_factory.mktemp("hy4"))
        if tp not in made:
            root = tmp_path_factory.mktemp(f"hy4-tp{tp}")
            model, src = made["src"]
            plan = make_plan(LocalSource(src), tp, shard_size=400_000)
            run_mirror(plan, LocalPublisher(root / "padded"))
            assert verify_derivative(LocalSource(src), LocalSource(root / "padded"))["padded"] > 0
            made[tp] = (model, src, root / "padded", plan)
        return made[tp]
    return get


@pytest.mark.parametrize("tp,expert", [(3, 192), (6, 384)])
def test_hy4_padded_model_gives_identical_logits(padded, tp, expert):
    model, src, dst, plan = padded(tp)
    heads = 6
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["moe_intermediate_size"]) == (
        heads, heads, expert)
    assert (cfg["index_n_heads"], cfg["hc_mult"]) == (2, 4)
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    for layer in range(4):  # 3 layers + the MTP layer
        p = f"model.layers.{layer}.self_attn."
        assert shapes[p + "q_b_proj.weight"] == ((96, 48), (heads * 24, 48))
        assert shapes[p + "kv_b_proj.weight"] == ((128, 32), (heads * 32, 32))
        assert shapes[p + "o_proj.weight"] == ((64, 64), (64, heads * 16))
        assert shapes[p + "linear_gate.weight"] == ((64, 64), (heads * 16, 64))  # elementwise: v_head_dim per head
        assert shapes[p + "learnable_sink_param"] == ((4,), (heads,))
    assert shapes["model.layers.1.mlp.experts.gate_up_proj"] == ((4, 64, 64), (4, 2 * expert, 64))
    assert shapes["model.layers.1.mlp.experts.down_proj"] == ((4, 64, 32), (4, 64, expert))
    assert shapes["model.layers.1.mlp.shared_experts.gate_proj.weight"] == ((32, 64), (expert, 64))
    assert not any(".indexer." in n or ".hc_" in n or "_a_proj" in n for n in shapes)
    out = {k: v for f in sorted(dst.glob("*.safetensors")) for k, v in load_file(f).items()}
    assert torch.equal(out["model.layers.1.self_attn.learnable_sink_param"][4:], torch.zeros(2, dtype=torch.float64))
    card = (dst / "README.md").read_text()
    assert "--tool-call-parser hy_v4" in card and "--reasoning-parser hy_v4" in card and '"method": "mtp"' in card

    # transformers keeps Hy4's float32-declared modules (sinks, indexer k_norm / weights_proj, iHC, router, lm_head)
    # in float32 whatever dtype from_pretrained is asked for, so the in-memory float64 `model` is not the reference:
    # the original checkpoint is, loaded the same way; both are then cast to float64 and run in float64.
    original, derivative = (transformers.AutoModelForCausalLM.from_pretrained(
        p, dtype=torch.float64, experts_implementation="eager").double().eval() for p in (src, dst))
    ids = torch.randint(0, COMMON["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = original(ids).logits, derivative(ids).logits
    delta = (a - b).abs().max().item()
    print(f"hy_v4 tp={tp}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()
    assert (model(ids).logits - a).abs().max().item() < 1e-3  # the checkpoint is the model (up to those float32s)


def test_hy4_mtp_layer_pads_exactly(padded, tmp_path):
    """The MTP block in float64, as for DSA (tests/test_dsa.py): both checkpoints loaded with one more layer, so
    `model.layers.<n>` runs as an ordinary layer. That layer has no iHC weights in the checkpoint (vLLM builds the MTP
    block without iHC); for this check both copies get the same ones, layer n-1's."""
    import shutil

    _, src, dst, _ = padded(3)
    logits = []
    for i, path in enumerate((src, dst)):
        copy = tmp_path / f"copy{i}"
        shutil.copytree(path, copy)
        cfg = transformers.AutoConfig.from_pretrained(copy)
        n = cfg.num_hidden_layers
        for f in copy.glob("*.safetensors"):
            tensors = load_file(f)
            hc = {k.replace(f"layers.{n - 1}.", f"layers.{n}.", 1): v.clone() for k, v in tensors.items()
                  if k.startswith(f"model.layers.{n - 1}.hc_")}
            if hc:
                save_file({**tensors, **hc}, f, metadata={"format": "pt"})
                index = copy / "model.safetensors.index.json"
                if index.exists():
                    data = json.loads(index.read_text())
                    data["weight_map"].update({k: f.name for k in hc})
                    index.write_text(json.dumps(data))
        extra = {"num_hidden_layers": n + 1, "mlp_layer_types": list(cfg.mlp_layer_types) + ["sparse"],
                 "layer_types": list(cfg.layer_types) + [cfg.layer_types[-1]],
                 "indexer_types": list(cfg.indexer_types) + ["full"]}
        model = transformers.AutoModelForCausalLM.from_pretrained(copy, dtype=torch.float64,
                                                                  experts_implementation="eager", **extra)
        model = model.double().eval()
        stored = {k: v for f in sorted(copy.glob("*.safetensors")) for k, v in load_file(f).items()}
        layer = model.model.layers[n]
        assert torch.equal(layer.self_attn.kv_b_proj.weight, stored[f"model.layers.{n}.self_attn.kv_b_proj.weight"])
        ids = torch.randint(0, COMMON["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            logits.append(model(ids).logits)
    delta = (logits[0] - logits[1]).abs().max().item()
    print(f"hy_v4 tp=3 with the MTP block as layer {n}: max |Δ| = {delta}")
    assert delta <= REL_TOL * logits[0].abs().max().item()


@pytest.mark.parametrize("tp", [3, 6])
def test_hy4_attention_split_as_vllm_shards_it(padded, tp):
    """vLLM's hy_v4 attention rank by rank on the padded tensors: each rank holds its heads' q_b_proj / kv_b_proj rows,
    linear_gate rows, learnable_sink_param slice (model.py narrows it to [rank * n, (rank + 1) * n)) and o_proj columns,
    the replicated latent projections and indexer; the ranks' o_proj partial sums, all-reduced, are the unpadded
    attention's output (each rank run as transformers' own HYV4Attention with that rank's head count)."""
    from transformers.models.hy_v4 import modeling_hy_v4 as hy

    model, _, dst, _ = padded(tp)
    w = {k: v for f in sorted(dst.glob("*.safetensors")) for k, v in load_file(f).items()}
    attn, layer = model.model.layers[1].self_attn, 1
    captured = {}
    attn.register_forward_hook(lambda mod, args, kwargs, out: captured.update(kwargs=kwargs, out=out[0]),
                               with_kwargs=True)
    ids = torch.randint(0, COMMON["vocab_size"], (1, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        model(ids)
    heads = json.loads((dst / "config.json").read_text())["num_attention_heads"]
    n, v, qk = heads // tp, attn.v_head_dim, attn.qk_head_dim
    p = f"model.layers.{layer}.self_attn."
    total = torch.zeros_like(captured["out"])
    for rank in range(tp):
        cfg = transformers.CONFIG_MAPPING["hy_v4"](**{**model.config.to_dict(), "num_attention_heads": n})
        cfg._attn_implementation = model.config._attn_implementation
        part = hy.HYV4Attention(cfg, layer).double().eval()
        rows = slice(rank * n, (rank + 1) * n)
        state = {k[len(p):]: t for k, t in w.items() if k.startswith(p + "indexer.") or k.startswith(p + "q_a_")
                 or k.startswith(p + "kv_a_")}
        state |= {"q_b_proj.weight": w[p + "q_b_proj.weight"].view(heads, qk, -1)[rows].reshape(n * qk, -1),
                  "kv_b_proj.weight": w[p + "kv_b_proj.weight"].view(heads, -1, attn.kv_lora_rank)[rows].reshape(
                      -1, attn.kv_lora_rank),
                  "gate_proj.weight": w[p + "linear_gate.weight"].view(heads, v, -1)[rows].reshape(n * v, -1),
                  "sinks": w[p + "learnable_sink_param"][rows],
                  "o_proj.weight": w[p + "o_proj.weight"][:, rank * n * v:(rank + 1) * n * v]}
        part.load_state_dict(state, strict=True)
        with torch.no_grad():
            total += part(**{k: a for k, a in captured["kwargs"].items() if k not in ("cache", "past_key_values")})[0]
    ref = captured["out"]
    delta = (total - ref).abs().max().item()
    print(f"hy_v4 attention split over {tp} ranks ({n} heads each): max |Δ| = {delta}")
    assert delta <= REL_TOL * ref.abs().max().item()
