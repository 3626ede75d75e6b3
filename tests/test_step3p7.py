"""Step-3.7 (`step3p7`): pad a tiny real transformers Step3p7ForConditionalGeneration in the published layout
(tests/step3p7_models.py: published tensor names and config form) and compare float64 logits, with an image through
the vision tower; check both readings of the padded config (transformers' Step3p7TextConfig: num_key_value_heads and
per_layer_config; vLLM's Step3p5: num_attention_groups and attention_other_setting); refuse what the two engines
would read differently.

Tiny geometry: full layers 4 heads / 2 kv (group 2), sliding layers 6 heads / 2 kv (group 3): whole kv groups of
both types, each head count divisible by TP and the kv heads sharded: 6 / 9 / 3 at TP 3, 12 / 18 / 6 at TP 6
(Step-3.7-Flash: 64 / 96 / 8 -> 72 / 108 / 9 and 96 / 144 / 12).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors import safe_open  # noqa: E402

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.step3p7_models import IMAGE_TOKEN, build_step3p7  # noqa: E402

REL_TOL = 1e-12


def _logits(path):
    model = transformers.Step3p7ForConditionalGeneration.from_pretrained(path, dtype=torch.float64).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(IMAGE_TOKEN + 1, 128, (1, 12), generator=g)
    ids[0, 3] = IMAGE_TOKEN  # one image: 56 px / 14 = 4 x 4 patches, two stride-2 downsamplers -> one token
    pixels = torch.randn(1, 3, 56, 56, generator=g, dtype=torch.float64)
    with torch.no_grad():
        return model(input_ids=ids, pixel_values=pixels).logits, model


# tp -> (full heads, sliding heads, kv heads)
CASES = {3: (6, 9, 3), 6: (12, 18, 6)}


@pytest.mark.parametrize("tp", sorted(CASES))
def test_step3p7_padded_model_gives_identical_logits(tmp_path, tp):
    heads, swa, kv = CASES[tp]
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build_step3p7(src)
    plan = make_plan(LocalSource(src), tp, shard_size=400_000)
    run_mirror(plan, LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    text = json.loads((dst / "config.json").read_text())["text_config"]
    # vLLM's reading (Step3p5DecoderLayer / Step3p5Attention)
    assert (text["num_attention_heads"], text["num_attention_groups"]) == (heads, kv)
    other = text["attention_other_setting"]
    assert (other["num_attention_heads"], other["num_attention_groups"], other["head_dim"]) == (swa, kv, 8)
    for n in (heads, swa):
        assert n % tp == 0 and n % kv == 0
    assert kv % tp == 0 or tp % kv == 0
    index = json.loads((dst / "model.safetensors.index.json").read_text())["weight_map"]
    shape = {n: safe_open(str(dst / f), "pt").get_slice(n).get_shape() for n, f in index.items()}
    for i, h in ((0, heads), (1, swa)):
        p = f"model.layers.{i}.self_attn."
        assert (shape[p + "q_proj.weight"], shape[p + "k_proj.weight"], shape[p + "o_proj.weight"],
                shape[p + "g_proj.weight"]) == ([h * 8, 32], [kv * 8, 32], [32, h * 8], [h, 32])
    with safe_open(str(dst / index["vit_large_projector.weight"]), "pt") as f, \
            safe_open(str(src / "model.safetensors"), "pt") as g:  # the tower is copied as it is
        assert torch.equal(f.get_tensor("vit_large_projector.weight"), g.get_tensor("vit_large_projector.weight"))
    a, _ = _logits(src)
    b, model = _logits(dst)
    # transformers' reading: every layer built with the padded heads of its type
    layers = model.model.language_model.layers
    assert [(lay.self_attn.num_heads, lay.self_attn.num_key_value_groups) for lay in layers] == [
        (heads, heads // kv), (swa, swa // kv), (swa, swa // kv)]
    delta = (a - b).abs().max().item()
    print(f"tp{tp}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


def test_step3p7_transformers_saved_config_is_padded_in_its_form(tmp_path):
    """The config as transformers 5.x saves it (num_key_value_heads, num_sliding_attention_heads, per_layer_config,
    no attention_other_setting): every form gets the padded counts."""
    src = tmp_path / "upstream"
    build_step3p7(src)
    cfg = json.loads((src / "config.json").read_text())
    text = dict(cfg["text_config"])
    del text["attention_other_setting"], text["num_attention_groups"]
    text.update(num_key_value_heads=2, num_sliding_attention_heads=6,
                per_layer_config={"1": {"num_attention_heads": 6}, "2": {"num_attention_heads": 6}})
    (src / "config.json").write_text(json.dumps({**cfg, "text_config": text}))
    plan = make_plan(LocalSource(src), 3)
    out = plan.new_config["text_config"]
    assert (out["num_attention_heads"], out["num_key_value_heads"], out["num_sliding_attention_heads"]) == (6, 3, 9)
    assert out["per_layer_config"] == {"1": {"num_attention_heads": 9}, "2": {"num_attention_heads": 9}}
    assert "attention_other_setting" not in out and "num_attention_groups" not in out


def test_step3p7_readings_that_disagree_are_refused(tmp_path):
    """vLLM reads the sliding layers' kv heads and head_dim from attention_other_setting, transformers from
    num_key_value_heads / head_dim: a config where they differ would compute different models."""
    src = tmp_path / "upstream"
    build_step3p7(src)
    cfg = json.loads((src / "config.json").read_text())

    def with_other(**over):
        text = {**cfg["text_config"], "attention_other_setting": {**cfg["text_config"]["attention_other_setting"],
                                                                  **over}}
        (src / "config.json").write_text(json.dumps({**cfg, "text_config": text}))

    with_other(num_attention_groups=1)
    with pytest.raises(ConfigError, match=r"attention_other_setting.num_attention_groups 1 \(transformers reads 2\)"):
        make_plan(LocalSource(src), 3)
    with_other(head_dim=16)
    with pytest.raises(ConfigError, match=r"attention_other_setting.head_dim 16 \(transformers reads 8\)"):
        make_plan(LocalSource(src), 3)
    with_other()
    text = {**cfg["text_config"], "moe_num_experts": 4}  # vLLM's FusedMoEBlock: TP 6 > 4 experts
    (src / "config.json").write_text(json.dumps({**cfg, "text_config": text}))
    with pytest.raises(ConfigError, match="4 routed experts < tp 6"):
        make_plan(LocalSource(src), 6)
    with_other(num_attention_heads=5)
    with pytest.raises(ConfigError, match="sliding layers' 5 attention heads are not a multiple of the 2 kv heads"):
        make_plan(LocalSource(src), 3)


LAYOUTS = {"Step-3.7-Flash": ("STEP37_FLASH", "tensors", "text_config."),  # its language model under text_config
           "Step-3.5-Flash": ("STEP35_FLASH", "step35_tensors", "")}  # the same language model, text-only


@pytest.mark.parametrize("name", sorted(LAYOUTS))
@pytest.mark.parametrize("tp", [3, 6])
def test_step_flash_published_layout_plans(tmp_path, tp, name):
    """64 full / 96 sliding heads, 8 kv -> 72 / 108 / 9 at TP 3 and 96 / 144 / 12 at TP 6 (whole kv groups of both
    layer types); experts 1280 -> 1344 / 1536 (448 / 256 per rank, multiples of 64), shared expert 1280 -> 1536 and
    the dense MLP 11264 -> 11520 (whole 128-wide tiles per rank); Step-3.7's vision tower copied; Step-3.5
    (`step3p5`) padded alike at the top of config.json (tests/step3p7_real.py says which figures are unconfirmed
    offline)."""
    from hubpad.testing import write_checkpoint
    from tests import step3p7_real
    from tests.helpers import cli

    config, tensors, prefix = LAYOUTS[name]
    cfg = getattr(step3p7_real, config)
    src = write_checkpoint(tmp_path / name, cfg, getattr(step3p7_real, tensors)(cfg), n_shards=4, header_only=True)
    result = cli("plan", src, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    dims = {d["name"]: d["after"] for d in plan["dims"]}
    heads, swa, kv = {3: (72, 108, 9), 6: (96, 144, 12)}[tp]
    assert (dims["attention heads"], dims["kv heads"]) == (heads, kv)
    assert (dims["expert intermediate"], dims["shared intermediate"], dims["dense intermediate"]) == (
        {3: 1344, 6: 1536}[tp], 1536, 11520)
    changes = plan["config_changes"]

    def after(key):  # a changed config value, whether the plan lists its object whole or by its nested keys
        if key in changes:
            return changes[key][1]
        head, _, leaf = key.rpartition(".")
        return changes[head][1][leaf]

    other = f"{prefix}attention_other_setting."
    assert (after(other + "num_attention_heads"), after(other + "num_attention_groups")) == (swa, kv)
    assert changes[f"{prefix}num_attention_groups"] == [8, kv]
    rows = {r["dim"]: r for r in plan["rank_table"]}
    assert rows["q_proj rows (sliding)"]["per_rank"] == swa // tp * 128
    assert rows["g_proj rows (sliding)"]["per_rank"] == swa // tp
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    padded = {g["pattern"]: g["after"] for g in plan["tensors"]["padded_groups"]}
    assert padded["model.layers.*.moe.gate_proj.weight"] == [288, {3: 1344, 6: 1536}[tp], 4096]
    assert not any(p.startswith("vision_model") or p.startswith("vit_") for p in padded)


def test_step3p7_card_flags_come_from_vllm():
    """The step3p5 parsers, MTP drafting over the 3 MTP layers (Step3p5MTP: n_predict = num_nextn_predict_layers),
    the vision tower data-parallel, --trust-remote-code (transformers' own Step3p7Config stops vLLM 0.32's
    get_hf_text_config: num_attention_heads is per layer there), vLLM 0.23.0 or later (Step3p7ForConditionalGeneration)."""
    from hubpad.plan.adapters import adapter_for
    from hubpad.plan.adapters.vllm import min_vllm
    from tests import step3p7_real

    cfg = step3p7_real.STEP37_FLASH
    out = adapter_for(cfg).serving(cfg)
    assert (out["tool_call_parser"], out["reasoning_parser"]) == ("step3p5", "step3p5")
    assert out["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    assert out["mm_encoder_tp_mode"] == "data" and out["extra_args"] == ["--trust-remote-code"]
    assert min_vllm(out["vllm_features"])["version"] == "0.23.0"
