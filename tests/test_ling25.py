"""Ling / Ring 2.5 and 2.6 (`bailing_hybrid`, BailingMoeV2_5ForCausalLM): lightning attention (plan/lightning.py) and
MLA layers sharing one head count, padded exactly at TP 3 and 6.

- A tiny checkpoint in the published layout (tests/ling25_models.py: 16 heads in 8 norm groups, lightning layers 0, 2
  and 4, MLA layers 1 and 3, a dense MLP then MoE) is padded with `hubpad mirror` + `hubpad verify`; a float64
  reference written after vLLM 0.32's module gives the original's and the derivative's logits, which must be equal
  (max |Δ| 0.0). 16 heads -> 18 (9 groups) at TP 3, 24 (12 groups) at TP 6, the MLA layers with them.
- vLLM's mapping: each padded lightning layer cut into TP ranks as vLLM's loaders cut it (qkv sections, g_proj rows,
  g_norm and dense's columns per rank, the rank's slice of the total count's slopes, group_norm_size / tp local norm
  groups) and the ranks' partial outputs summed equal the unpadded layer's.
- The rules: the decay slopes are kept iff floor(log2) of the head count is (vLLM's slope formula, every count up to
  260); the lightning layers are vLLM's is_linear_layer; a padding that would change the slopes, or norm groups that
  cannot shard, is one `error:` line in plan and mirror; the norm groups matter (the derivative read with upstream's
  group_norm_size differs).
"""

from __future__ import annotations

import json

import pytest

from hubpad.errors import ConfigError
from hubpad.plan import lightning
from hubpad.plan.adapters import adapter_for
from tests.helpers import assert_same_logits, cli, folder_tensors, mirror_and_verify

torch = pytest.importorskip("torch")

from tests import ling25_models  # noqa: E402

# tp -> (heads, norm groups); the MLP widths grow too (the bailing rules), exactly as well
AFTER = {3: (18, 9), 6: (24, 12)}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    src = tmp_path_factory.mktemp("ling25") / "upstream"
    ling25_models.build_ling25(src)
    ids = torch.randint(0, 256, (2, 13), generator=torch.Generator().manual_seed(1))
    return src, ids, ling25_models.ling25_logits(src, ids)


@pytest.mark.parametrize("tp", [3, 6])
def test_ling25_padded_model_gives_identical_logits(tmp_path, upstream, tp):
    src, ids, before = upstream
    dst = tmp_path / "padded"
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    heads, groups = AFTER[tp]
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["group_norm_size"], cfg["head_dim"]) == (
        heads, heads, groups, 8)
    shapes = {n: list(t.shape) for n, t in folder_tensors(dst).items()}
    for layer in (0, 4):  # lightning (4: a trailing layer, lightning under vLLM's rule)
        a = f"model.layers.{layer}.attention."
        assert shapes[a + "query_key_value.weight"] == [3 * heads * 8, 64]
        assert shapes[a + "g_proj.weight"] == [heads * 8, 64] and shapes[a + "g_norm.weight"] == [heads * 8]
        assert shapes[a + "dense.weight"] == [64, heads * 8]
        assert shapes[a + "query_layernorm.weight"] == [8]
    a = "model.layers.3.attention."  # MLA: nope 8 + rope 8, v 8
    assert shapes[a + "q_proj.weight"] == [heads * 16, 64] and shapes[a + "kv_b_proj.weight"] == [heads * 16, 16]
    assert shapes[a + "dense.weight"] == [64, heads * 8] and shapes[a + "kv_a_proj_with_mqa.weight"] == [24, 64]
    mtp = "model.layers.5."  # the MTP layer: MLA heads padded with the rest, its own modules copied
    assert shapes[mtp + "attention.q_proj.weight"] == [heads * 16, 64] and shapes[mtp + "eh_proj.weight"] == [64, 128]
    after = ling25_models.ling25_logits(dst, ids)
    assert assert_same_logits(before, after, f"ling25 tp {tp}") == 0.0

    # vLLM's per-rank lightning layers on the derivative's tensors sum to the upstream layer
    up, pad = _weights(src), _weights(dst)
    x = torch.randn(2, 9, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for layer in (0, 2, 4):
        a = f"model.layers.{layer}.attention."
        ref = ling25_models.lightning(x, up, a, ling25_models.LING25_TINY, layer)
        ranks = sum(ling25_models.lightning(x, pad, a, cfg, layer, tp, r) for r in range(tp))
        assert (ref - ranks).abs().max().item() <= 1e-12 * ref.abs().max().item()

    # the norm groups matter: the derivative read with upstream's group_norm_size (groups across heads) differs
    (dst / "config.json").write_text(json.dumps({**cfg, "group_norm_size": 8}))
    assert (ling25_models.ling25_logits(dst, ids) - before).abs().max().item() > 1e-3


def _weights(path) -> dict:
    return {k: v.to(torch.float64).clone() for k, v in folder_tensors(path).items()}


def test_slopes_are_kept_exactly_when_floor_log2_is():
    """vLLM's _build_slope_tensor over the total count: the first H slopes of H' heads are H's iff floor(log2 H') ==
    floor(log2 H); lightning.slopes is the reference's transcription of vLLM's function."""
    for h in range(1, 131):
        assert lightning.slopes(h) == ling25_models.slopes(h)
        for h2 in range(h, 261):
            assert (ling25_models.slopes(h2)[:h] == ling25_models.slopes(h)) == lightning.slopes_kept(h, h2), (h, h2)
    assert all(lightning.slopes_kept(64, h2) for h2 in (66, 72, 96, 120, 127)) and not lightning.slopes_kept(64, 128)


def test_lightning_layers_are_vllms_is_linear_layer():
    """(i + 1) % layer_group_size != 0 for every layer: the trailing layers are lightning (Ling 3 makes them MLA)."""
    assert lightning.layers({"num_hidden_layers": 5, "layer_group_size": 2}) == frozenset({0, 2, 4})
    assert lightning.layers({"num_hidden_layers": 80, "layer_group_size": 8}) == frozenset(
        i for i in range(80) if (i + 1) % 8)
    assert lightning.layers({"num_hidden_layers": 4, "layer_group_size": 0}) == frozenset()


def test_v25_and_ling3_are_told_apart_by_architecture():
    base = {"model_type": "bailing_hybrid"}
    assert adapter_for({**base, "architectures": ["BailingMoeV2_5ForCausalLM"]}).name == "ling25"
    assert adapter_for({**base, "architectures": ["BailingMoeV3ForCausalLM"]}).name == "ling3"


@pytest.mark.parametrize(("over", "tp", "why"), [
    # 4 heads in 2 groups: TP 6 needs 6 groups = 12 heads, floor(log2) 2 -> 3
    ({"num_attention_heads": 4, "num_key_value_heads": 4, "group_norm_size": 2}, 6,
     "would change the decay slopes of the first 4"),
    # one norm group: vLLM asserts tp <= group_norm_size, and 3 groups of 16 heads change the slopes
    ({"group_norm_size": 1}, 3, "group_norm_size 1 % tp 3 != 0"),
])
def test_a_padding_that_changes_slopes_is_refused(tmp_path, over, tp, why):
    src = tmp_path / "src"
    ling25_models.build_ling25(src, **over)
    for args in (("plan", src, "--tp", tp), ("mirror", src, "--tp", tp, "--to", tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code == 1 and result.output.startswith("error:"), result.output
        assert len(result.output.strip().splitlines()) == 1 and why in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_upstream_that_shards_is_left_alone(tmp_path):
    """16 heads in 8 groups serve at TP 2, 4 and 8 as they are: the card says so, and TP 4 pads no head."""
    src = tmp_path / "src"
    ling25_models.build_ling25(src)
    result = cli("plan", src, "--tp", 4, "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert {d["config_keys"][0]: d["after"] for d in plan["dims"]}["num_attention_heads"] == 16


def test_head_dim_is_written_where_config_json_leaves_it_out(tmp_path):
    """vLLM's lightning layer falls back to hidden_size // heads without head_dim: the derivative states the
    upstream's (64 // 16 = 4), not 64 // 18."""
    from hubpad.plan.planner import make_plan
    from hubpad.source.local import LocalSource

    src = tmp_path / "src"
    cfg = ling25_models.build_ling25(src)
    cfg.pop("head_dim")
    (src / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="shape"):  # the tensors say 8, the fallback 4: a mismatch is named
        make_plan(LocalSource(src), 3)
    ling25_models.build_ling25(src, head_dim=None)
    new = make_plan(LocalSource(src), 3).new_config
    assert (new["num_attention_heads"], new["head_dim"]) == (18, 4)
