"""Hy4 (`hy_v4`): DSA plus a gated MLA output, per-head learned sinks and iHC hyper-connections; pad tiny real
transformers models and compare float64 logits at TP 3 and 6.

The checkpoint carries the names vLLM 0.32's hy_v4 loader reads (vllm/models/hy_v4/nvidia/model.py, mtp.py):
`self_attn.linear_gate`, `self_attn.learnable_sink_param`, `hc_attn_layer.hc_fn|hc_base|hc_scale` (no `hc_pre.`, which
transformers' save inserts and vLLM would skip as unknown), `model.hc_head.hc_head_fn|...`, the shared expert's
and dense MLP's `gate_proj` (transformers' save renames them `linear_gate`, its reverse of the attention gate's rename), routed experts
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
        if tp not in made:
            root = tmp_path_factory.mktemp(f"hy4-tp{tp}")
            model, src = build_hy4(root)
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
