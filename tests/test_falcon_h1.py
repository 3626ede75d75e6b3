"""Falcon-H1 (`falcon_h1`): attention and Mamba2 side by side in every layer, with muP multipliers.

Tiny real transformers FalconH1ForCausalLM models in the published layout (tests/hybrid_models.py) are padded with
`hubpad mirror` at TP 3 and 6, verified, and their float64 logits compared; a padded Mamba2 mixer is replayed under
vLLM's per-rank slicing WITH vLLM's per-rank muP vector (falcon_h1.py's FalconH1SSMDecoderLayer._init_mup_vector,
written out below) and the ranks' summed outputs compared with the original mixer's; the published Falcon-H1-34B layout
is planned header-only (tests/hybrid_real.py).

Tiny geometry: Mamba2 8 heads of 8 in 2 groups -> 3 groups / 12 heads at TP 3, 6 / 24 at TP 6 (mamba_d_ssm 64 -> 96 /
192); attention 4 / 2 kv -> 6 / 3; one group (8 heads) -> 3 groups of 8 at TP 3.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.helpers import assert_same_logits, folder_tensors, mirror_and_verify  # noqa: E402
from tests.hybrid_models import FALCON_TINY, build_falcon_h1, falcon_h1_logits  # noqa: E402
from tests.nemotron_h_models import mamba2_rank_slice  # noqa: E402

IDS = torch.randint(0, 256, (2, 21), generator=torch.Generator().manual_seed(1))  # 21: several scan chunks of 8

# case -> (tp, build overrides, (mamba groups, mamba heads, mamba_d_ssm, attention heads, kv heads) after padding)
CASES = {"tp3": (3, {}, (3, 12, 96, 6, 3)), "tp6": (6, {}, (6, 24, 192, 6, 3)),
         "tp3-one-group": (3, dict(mamba_n_groups=1), (3, 24, 192, 6, 3)),
         # mamba_d_ssm null: FalconH1Config and vLLM read mamba_expand x hidden (128 = 8 heads of 16); written padded
         "tp3-width-from-expand": (3, dict(mamba_d_ssm=None, mamba_d_head="auto"), (3, 12, 192, 6, 3))}


@pytest.mark.parametrize("case", [c if c in ("tp3", "tp6") else pytest.param(c, marks=pytest.mark.slow)
                                  for c in sorted(CASES)])
def test_falcon_h1_padded_model_gives_identical_logits(tmp_path, case):
    tp, over, want = CASES[case]
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build_falcon_h1(src, **over)
    mirror_and_verify(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert tuple(cfg[k] for k in ("mamba_n_groups", "mamba_n_heads", "mamba_d_ssm", "num_attention_heads",
                                  "num_key_value_heads")) == want
    groups, heads, width = want[:3]
    shapes = {n: list(t.shape) for n, t in folder_tensors(dst).items()}
    assert shapes["model.layers.0.mamba.in_proj.weight"] == [2 * width + 2 * groups * 16 + heads, 64]
    assert cfg["head_dim"] == 16 and cfg["ssm_multipliers"] == FALCON_TINY["ssm_multipliers"]
    assert_same_logits(falcon_h1_logits(src, IDS), falcon_h1_logits(dst, IDS), f"falcon_h1 {case}")


def _vllm_rank_mup(cfg: dict, tp: int) -> torch.Tensor:
    """vLLM 0.32's FalconH1SSMDecoderLayer._init_mup_vector on one rank: section bounds of the GLOBAL padded sizes, each
    divided by tp (d_ssm, n_groups x d_state after MambaMixer2's override, n_heads)."""
    d, gs, heads, m = cfg["mamba_d_ssm"], cfg["mamba_n_groups"] * cfg["mamba_d_state"], cfg["mamba_n_heads"], \
        cfg["ssm_multipliers"]
    v = torch.ones(1, (2 * d + 2 * gs + heads) // tp, dtype=torch.float64)
    v[:, : d // tp] *= m[0]
    v[:, d // tp: 2 * d // tp] *= m[1]
    v[:, 2 * d // tp: (2 * d + gs) // tp] *= m[2]
    v[:, (2 * d + gs) // tp: (2 * d + 2 * gs) // tp] *= m[3]
    v[:, (2 * d + 2 * gs) // tp:] *= m[4]
    return v


def _mixer(cfg: dict, state: dict, mup: torch.Tensor):
    """transformers' FalconH1Mixer for config.json values `cfg`, float64, holding `state` and the muP vector `mup`."""
    config = transformers.FalconH1Config(**{k: v for k, v in cfg.items() if k in FALCON_TINY})
    mixer = transformers.models.falcon_h1.modeling_falcon_h1.FalconH1Mixer(config, layer_idx=0).double().eval()
    mixer.register_buffer("mup_vector", mup.reshape(1, 1, -1), persistent=False)
    mixer.load_state_dict(state)
    return mixer


_MIXER = "model.layers.0.mamba."


@pytest.mark.parametrize("tp", [3, pytest.param(6, marks=pytest.mark.slow)])
def test_padded_mixer_under_vllms_per_rank_slicing_and_mup_vector_is_the_original(tmp_path, tp):
    """Each rank multiplies its in_proj rows by vLLM's per-rank muP vector (one multiplier per section, bounds from the
    padded config / tp) and runs its own groups; the ranks' out_proj partial sums add up to the original mixer."""
    from hubpad.publish.local import LocalPublisher
    from hubpad.run.mirror import run_mirror
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    original = build_falcon_h1(src)
    run_mirror(make_plan(LocalSource(src), tp), LocalPublisher(dst))
    padded = json.loads((dst / "config.json").read_text())
    x = torch.randn(2, 21, 64, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    mamba = lambda tensors: {n[len(_MIXER):]: t for n, t in tensors.items() if n.startswith(_MIXER)}  # noqa: E731
    with torch.no_grad():
        want = _mixer(original, mamba(folder_tensors(src)), _vllm_rank_mup(original, 1))(x)
        state = mamba(folder_tensors(dst))
        rank_cfg = {**padded, **{k: padded[k] // tp for k in ("mamba_n_groups", "mamba_n_heads", "mamba_d_ssm")}}
        h2, g2 = padded["mamba_n_heads"], padded["mamba_n_groups"]
        got = sum(_mixer(rank_cfg, mamba2_rank_slice(state, h2, g2, 8, 16, tp, r), _vllm_rank_mup(padded, tp))(x)
                  for r in range(tp))
    assert_same_logits(want, got, f"falcon_h1 mixer, {tp} ranks")


def test_mamba_width_that_is_not_heads_times_head_dim_is_refused(tmp_path):
    src = tmp_path / "upstream"
    build_falcon_h1(src)
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "mamba_d_ssm": 72}))
    with pytest.raises(ConfigError, match="mamba_d_ssm 72 is not mamba_n_heads 8 x mamba_d_head 8"):
        make_plan(LocalSource(src), 3)


# tp -> (attention heads, kv heads, mamba groups, mamba heads, mamba_d_ssm) after padding
PUBLISHED = {3: (30, 6, 3, 48, 6144), 6: (30, 6, 6, 96, 12288)}


@pytest.mark.parametrize("tp", sorted(PUBLISHED))
def test_falcon_h1_34b_published_layout_plans(tmp_path, tp):
    """Falcon-H1-34B (tests/hybrid_real.py): attention 20 / 4 kv (groups of 5) -> 30 / 6; Mamba2 2 groups of 16 heads
    -> 3 (TP 3) or 6 (TP 6) groups; the MLP (21504) and hidden size shard as they are."""
    from hubpad.testing import write_checkpoint
    from tests import hybrid_real
    from tests.helpers import cli

    cfg = hybrid_real.FALCON_H1_34B
    src = write_checkpoint(tmp_path / "src", cfg, hybrid_real.falcon_h1_tensors(cfg), n_shards=4, header_only=True)
    result = cli("plan", src, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    dims = {d["name"]: d["after"] for d in plan["dims"]}
    assert (dims["attention heads"], dims["kv heads"], dims["mamba groups"], dims["mamba heads"],
            dims["mamba width"]) == PUBLISHED[tp]
    assert dims["dense intermediate"] == 21504
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
