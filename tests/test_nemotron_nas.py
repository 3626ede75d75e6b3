"""Nemotron-NAS (`nemotron-nas`, DeciLMForCausalLM): per-layer kv heads (n_heads_in_group) and MLP widths (ffn_mult)
from block_configs, no-op attention and FFN layers. A tiny checkpoint (tests/nemotron_nas_models.py: two group sizes,
both kinds of no-op, two widths) is mirrored and verified at TP 3 and 6 and its float64 logits compared with the
original's through a reference written after vLLM's nemotron_nas.py; the padded widths are ones vLLM's ffn_mult formula
gives exactly; the published layouts plan header-only (tests/nemotron_nas_real.py); a linear replacement is refused.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hubpad.plan.adapters.nemotron_nas import ffn_width  # noqa: E402
from hubpad.plan.planner import plan_for, survey  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import nemotron_nas_models as models  # noqa: E402
from tests import nemotron_nas_real  # noqa: E402
from tests.helpers import assert_same_logits, cli, header_only_layouts, mirror_and_verify  # noqa: E402


@pytest.mark.parametrize("tp", [3, 6])
def test_padded_model_gives_identical_logits(tmp_path, tp):
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    old = models.build(src)
    mirror_and_verify(src, dst, tp)
    new = json.loads((dst / "config.json").read_text())
    # 8 heads over groups of 2 and 4 (kv 4 and 2) -> 12 heads (kv 6 and 3), whole groups of both sizes
    assert new["num_attention_heads"] == 12 and new["head_dim"] == 8
    assert new["num_key_value_heads"] is None and new["intermediate_size"] is None  # as the config class keeps them
    assert [b["attention"] for b in new["block_configs"]] == [b["attention"] for b in old["block_configs"]]
    widths = [ffn_width(b["ffn"]["ffn_mult"], 64) if not b["ffn"]["no_op"] else None for b in new["block_configs"]]
    assert widths == [768, 1536, None, 768]  # 256 / 1024: multiples of 256 whose per-rank share is 128-whole
    ids = torch.randint(0, models.TINY["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
    assert_same_logits(models.logits(src, ids), models.logits(dst, ids), f"nemotron-nas tp={tp}")


def test_the_reference_reads_every_layer(tmp_path):
    """A tensor of a no-op block, or a k/v of the wrong group size, does not load: the reference holds what vLLM
    builds, no more."""
    src = tmp_path / "upstream"
    models.build(src, spec=[(2, 6.0), (None, None)])
    ids = torch.randint(0, 160, (1, 5))
    models.logits(src, ids)
    cfg = json.loads((src / "config.json").read_text())
    cfg["block_configs"][0]["attention"]["n_heads_in_group"] = 4
    (src / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(RuntimeError, match="size mismatch"):
        models.logits(src, ids)


@pytest.mark.parametrize("part", ["attention", "ffn"])
def test_a_linear_replacement_is_refused(tmp_path, part):
    """Llama-3.1-Nemotron-51B's blocks that replace attention by a linear layer: vLLM builds none. One line, in plan
    and in mirror, and nothing published."""
    src = tmp_path / "upstream"
    models.build(src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["block_configs"][1][part] = {**cfg["block_configs"][1][part], "no_op": False, "replace_with_linear": True}
    (src / "config.json").write_text(json.dumps(cfg))
    for args in (("plan", src, "--tp", "3"), ("mirror", src, "--tp", "3", "--to", tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code != 0
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "replaces the layer's " + part + " with a linear layer" in lines[0], result.output
        assert "does not build" in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


# (name, tp) -> heads, kv heads, the padded widths (by published width)
PLANS = {
    ("nvidia/Llama-3_3-Nemotron-Super-49B-v1", 3): (72, 9, {2816: 3072, 5632: 6144, 7168: 7680, 14336: 14592,
                                                            17920: 18432, 28672: 29184}),
    ("nvidia/Llama-3_3-Nemotron-Super-49B-v1", 6): (96, 12, {2816: 3072, 5632: 6144, 7168: 7680, 14336: 14592,
                                                             17920: 18432, 28672: 29184}),
    ("nvidia/Llama-3_1-Nemotron-Ultra-253B-v1", 3): (144, 9, {26624: 26880, 32000: 32256, 37376: 37632,
                                                              53248: 53760, 343040: 343296, 425984: 426240}),
    ("nvidia/Llama-3_1-Nemotron-Ultra-253B-v1", 6): (192, 12, {26624: 26880, 32000: 32256, 37376: 37632,
                                                               53248: 53760, 343040: 343296, 425984: 426240}),
}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    return header_only_layouts(tmp_path_factory.mktemp("nemotron-nas"),
                               {k: (v, nemotron_nas_real.tensors) for k, v in nemotron_nas_real.REAL.items()})


@pytest.mark.parametrize("name,tp", sorted(PLANS))
def test_published_layouts_plan(published, name, tp):
    """Every published width that does not shard grows to the next multiple of 256 that does (768: 256-whole and
    128-whole per rank at TP 3 and 6); the rest (Ultra's 5376, 10752, ...) stay; ffn_mult gives each exactly."""
    plan = plan_for(survey(LocalSource(published(name))), tp)
    heads, kv, grown = PLANS[name, tp]
    assert {d.before: d.after for d in plan.dims if d.before != d.after} == {
        nemotron_nas_real.REAL[name]["num_attention_heads"]: heads, 8: kv, **grown}
    hidden = plan.new_config["hidden_size"]
    for old, new in zip(nemotron_nas_real.REAL[name]["block_configs"], plan.new_config["block_configs"]):
        if not old["ffn"]["no_op"]:
            width = ffn_width(old["ffn"]["ffn_mult"], hidden)
            assert ffn_width(new["ffn"]["ffn_mult"], hidden) == grown.get(width, width)
    assert plan.new_config["head_dim"] == hidden // nemotron_nas_real.REAL[name]["num_attention_heads"]
    assert all(row["ok"] for row in plan.rank_table if row["required"])
