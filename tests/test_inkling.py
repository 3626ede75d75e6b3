"""Inkling (`inkling_mm_model`): pad tiny real transformers InklingForConditionalGeneration models in the published
layout (tests/inkling_models.py: global and sliding layers with their own kv heads, per-kv-head short convolutions,
relative-position branch, dense and MoE MLPs, towers, MTP depths) and compare float64 logits at TP 3 and 6; check the
rules vLLM's Inkling adds (hidden % tp; every layer type's kv heads >= tp and dividing hidden); plan the published
Inkling and Inkling-Small configs header-only; refuse what cannot be padded exactly, with the reason.

Tiny geometry: 4 heads, 1 global kv head (group 4), 2 sliding kv heads (group 2), hidden 48: TP 3 -> 12 heads, 3 global
/ 6 sliding kv; TP 6 -> 24 / 6 / 12 (12 / 3 / 6 shards at TP 6 only by replicating the global kv heads, which vLLM's
Inkling conv state refuses).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.helpers import folder_tensors  # noqa: E402
from tests.inkling_models import build_inkling, load_text, text_only  # noqa: E402

REL_TOL = 1e-12


def _logits(path, text: bool = False):
    """Float64 logits from transformers' class for the format: InklingForConditionalGeneration, or the text class
    InklingForCausalLM on the text-only format."""
    model = (load_text(path) if text else
             transformers.InklingForConditionalGeneration.from_pretrained(path, dtype=torch.float64).eval())
    model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    ids = torch.randint(0, 256, (2, 19), generator=torch.Generator().manual_seed(1))  # > the sliding window (6)
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("flat", [False, True], ids=["inkling_mm_model", "inkling_model"])
@pytest.mark.parametrize("tp,heads,kv,swa_kv", [(3, 12, 3, 6), (6, 24, 6, 12)])
def test_inkling_padded_model_gives_identical_logits(tmp_path, tp, heads, kv, swa_kv, flat):
    """Both formats: the multimodal release, and the text-only one (InklingForCausalLM, `inkling_model`: the dims at the
    top of config.json, the same `model.llm.*` / `model.mtp.*` names, no towers) through transformers' text class."""
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    if flat:
        build_inkling(tmp_path / "multimodal")
        text_only(tmp_path / "multimodal", src)
    else:
        build_inkling(src)
    run_mirror(make_plan(LocalSource(src), tp, shard_size=400_000), LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    config = json.loads((dst / "config.json").read_text())
    text = config if flat else config["text_config"]
    assert (text["num_attention_heads"], text["swa_num_attention_heads"], text["num_key_value_heads"],
            text["swa_num_key_value_heads"]) == (heads, heads, kv, swa_kv)
    shapes = {n: list(t.shape) for n, t in folder_tensors(dst).items()}
    for p, n in (("model.llm.layers.0.", swa_kv), ("model.llm.layers.2.", kv),  # sliding, global
                 ("model.mtp.layers.0.transformer_block.", swa_kv), ("model.mtp.layers.1.transformer_block.", kv)):
        assert shapes[p + "attn.wq_du.weight"] == [heads * 8, 48]
        assert shapes[p + "attn.wr_du.weight"] == [heads * 4, 48]
        assert shapes[p + "attn.wk_dv.weight"] == shapes[p + "attn.wv_dv.weight"] == [n * 8, 48]
        assert shapes[p + "attn.k_sconv.weight"] == shapes[p + "attn.v_sconv.weight"] == [n * 8, 1, 4]
        assert shapes[p + "attn.wo_ud.weight"] == [48, heads * 8]
    assert shapes["model.llm.layers.1.mlp.experts.w13_weight"] == [4, 768, 48]  # copied
    a, b = _logits(src, flat), _logits(dst, flat)
    delta = (a - b).abs().max().item()
    print(f"{'inkling_model' if flat else 'inkling_mm_model'} tp {tp}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


def test_inkling_kv_heads_must_divide_hidden_and_cover_tp(tmp_path):
    """hidden 40 is refused at TP 3 (the reduce-scatter needs hidden % tp); at TP 4 the whole-group paddings 8 heads /
    2 / 4 kv (2 global kv heads < tp 4: the conv state holds whole kv heads per rank) and 12 / 3 / 6 (3 kv heads do not
    shard) fail, and 16 / 4 / 8 meets every rule (40 % 4 == 0, 40 % 8 == 0)."""
    src = tmp_path / "upstream"
    build_inkling(src, hidden_size=40, moe_intermediate_size=256, mtp=False)
    with pytest.raises(ConfigError, match="hidden_size 40 % tp 3 != 0: vLLM's Inkling reduce-scatters"):
        make_plan(LocalSource(src), 3)
    plan = make_plan(LocalSource(src), 4)
    dims = {d.name: d.after for d in plan.dims}
    assert (dims["attention heads"], dims["kv heads"], dims["swa kv heads"]) == (16, 4, 8)
    from hubpad.plan.dims import Aligns, head_problems

    survey_adapter, shape = plan.adapter, plan.adapter.head_shape(plan.adapter.dims_config(plan.config))
    assert "2 global kv heads < tp 4" in "; ".join(head_problems(8, 2, shape, 4, Aligns(), 40, survey_adapter))


def test_inkling_mlp_widths_that_need_padding_are_refused(tmp_path):
    src = tmp_path / "upstream"
    build_inkling(src, moe_intermediate_size=96, mtp=False)
    with pytest.raises(ConfigError, match="the expert width 96 does not shard at tp 3 as it is \\(each rank's share "
                                          "must be a multiple of 64, what fused-MoE kernels need\\), and Inkling "
                                          "interleaves gate and up rows"):
        make_plan(LocalSource(src), 3)


def test_inkling_layer_types_the_engines_read_differently_are_refused(tmp_path):
    src = tmp_path / "upstream"
    build_inkling(src, mtp=False)
    cfg = json.loads((src / "config.json").read_text())
    text = {k: v for k, v in cfg["text_config"].items() if k not in ("local_layer_ids", "layer_types")}
    (src / "config.json").write_text(json.dumps({**cfg, "text_config": text}))
    with pytest.raises(ConfigError, match="neither local_layer_ids nor layer_types"):
        make_plan(LocalSource(src), 3)


def _release(name: str, flat: bool) -> dict:
    """A published release's config.json (tests/inkling_real.py), or its text-only format (`inkling_model`)."""
    from tests import inkling_real

    cfg = getattr(inkling_real, name)
    return inkling_real.text_only(cfg) if flat else cfg


@pytest.mark.parametrize("flat", [False, True], ids=["inkling_mm_model", "inkling_model"])
@pytest.mark.parametrize("tp", [3, 6])
def test_inkling_published_layout_plans(tmp_path, tp, flat):
    """Inkling (tests/inkling_real.py), and its text-only format: 64 heads / 8 global / 16 sliding kv -> 96 / 12 / 24
    at TP 3 and 6 (6144 % 9 != 0 rules out 72 / 9 / 18 at TP 3); MLP widths, towers and the MoE copied."""
    from hubpad.testing import write_checkpoint
    from tests import inkling_real
    from tests.helpers import cli

    cfg = _release("INKLING", flat)
    src = write_checkpoint(tmp_path / "Inkling", cfg, inkling_real.tensors(cfg), n_shards=8, header_only=True)
    result = cli("plan", src, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    dims = {d["name"]: d["after"] for d in plan["dims"]}
    assert (dims["attention heads"], dims["kv heads"], dims["swa kv heads"]) == (96, 12, 24)
    key = "swa_num_attention_heads" if flat else "text_config.swa_num_attention_heads"
    assert plan["config_changes"][key] == [64, 96]
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    padded = {g["pattern"] for g in plan["tensors"]["padded_groups"]}
    assert not any(".mlp." in p or "visual" in p or "audio" in p for p in padded)
    assert "model.mtp.layers.*.transformer_block.attn.k_sconv.weight" in padded


@pytest.mark.parametrize("flat", [False, True], ids=["inkling_mm_model", "inkling_model"])
@pytest.mark.parametrize("tp", [3, 6])
def test_inkling_small_is_refused_at_tp_3_and_6(tmp_path, tp, flat):
    from hubpad.testing import write_checkpoint
    from tests import inkling_real
    from tests.helpers import cli

    cfg = _release("INKLING_SMALL", flat)
    src = write_checkpoint(tmp_path / "Inkling-Small", cfg, inkling_real.tensors(cfg), n_shards=4, header_only=True)
    line = (f"error: config.json: hidden_size 4096 % tp {tp} != 0: vLLM's Inkling reduce-scatters the attention and MLP "
            f"outputs over the hidden dimension for their short convolutions (each rank convolves hidden_size // tp "
            f"channels), and padding cannot change the hidden size, which every RMSNorm averages over")
    for command in (("plan", src, "--tp", str(tp)), ("mirror", src, "--tp", str(tp), "--to", tmp_path / "out")):
        result = cli(*command)
        assert result.exit_code == 1
        assert result.output.strip().splitlines()[-1] == line
    assert not (tmp_path / "out").exists()


def test_transformers_text_only_inkling_is_refused(tmp_path):
    """model_type inkling_text (what transformers' InklingForCausalLM saves, under its own tensor names) is refused in
    plan and mirror, nothing written: vLLM cannot build it (tests/test_serve_inkling.py expects its message)."""
    from hubpad.plan.adapters.inkling import INKLING_TEXT_REFUSAL
    from tests.helpers import cli
    from tests.inkling_models import TEXT

    src = tmp_path / "upstream"
    transformers.InklingForCausalLM(transformers.InklingTextConfig(**TEXT)).save_pretrained(src)
    assert json.loads((src / "config.json").read_text())["model_type"] == "inkling_text"
    for command in (("plan", src, "--tp", "3"), ("mirror", src, "--tp", "3", "--to", tmp_path / "out")):
        result = cli(*command)
        assert result.exit_code == 1
        assert result.output.strip().splitlines()[-1] == f"error: config.json: {INKLING_TEXT_REFUSAL}"
    assert not (tmp_path / "out").exists()
