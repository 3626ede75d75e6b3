"""Nemotron-H / Nemotron 3 (`nemotron_h`): pad tiny real transformers NemotronHForCausalLM models in the published
layout (tests/nemotron_h_models.py: Mamba2, attention, dense MLP and latent-MoE layers, an MTP block) and compare
float64 logits at TP 3 and 6; replay vLLM's per-rank slicing of a padded Mamba2 layer (its MergedColumnParallelLinear
sections, sharded A/D/dt_bias/norm weight, row-parallel out_proj) and check the ranks' summed outputs are the
original layer's; show why one group cannot simply take more heads; plan the published Nemotron 3 Super layout
header-only; refuse what cannot be padded exactly, with the reason.

Tiny geometry: 8 Mamba2 heads in 2 groups of 4 (TP 3: 3 groups, 12 heads; TP 6: 6 groups, 24 heads), attention 4 heads
/ 2 kv (TP 3 and 6: 6 / 3), and with one group (n_groups 1) 8 heads -> 3 groups of 8 at TP 3 (6 at TP 6).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.helpers import folder_tensors  # noqa: E402
from tests.nemotron_h_models import build_nemotron_h, config, mamba2_rank_slice  # noqa: E402

REL_TOL = 1e-12


def _logits(path):
    model = transformers.NemotronHForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    ids = torch.randint(0, 256, (2, 21), generator=torch.Generator().manual_seed(1))  # 21: several scan chunks of 8
    with torch.no_grad():
        return model(input_ids=ids).logits


# case -> (tp, build overrides, (mamba groups, mamba heads, attention heads, kv heads) after padding)
CASES = {"tp3": (3, {}, (3, 12, 6, 3)), "tp6": (6, {}, (6, 24, 6, 3)),
         "tp3-one-group": (3, dict(n_groups=1), (3, 24, 6, 3)), "tp6-one-group": (6, dict(n_groups=1), (6, 48, 6, 3)),
         "tp3-mtp": (3, dict(mtp=True), (3, 12, 6, 3))}


@pytest.mark.parametrize("case", sorted(CASES))
def test_nemotron_h_padded_model_gives_identical_logits(tmp_path, case):
    tp, over, (groups, heads, attn, kv) = CASES[case]
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build_nemotron_h(src, **over)
    run_mirror(make_plan(LocalSource(src), tp, shard_size=400_000), LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["n_groups"], cfg["mamba_num_heads"], cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (
        groups, heads, attn, kv)
    assert cfg["moe_intermediate_size"] == (192 if tp == 3 else 384)  # 40 -> 64 per rank (fused-MoE tiles)
    shapes = {n: list(t.shape) for n, t in folder_tensors(dst).items()}
    width, state = heads * 8, groups * 16
    assert shapes["backbone.layers.0.mixer.in_proj.weight"] == [2 * width + 2 * state + heads, 64]
    assert shapes["backbone.layers.0.mixer.conv1d.weight"] == [width + 2 * state, 1, 4]
    if over.get("mtp"):  # padded, and left off the card: vLLM's NemotronHMTP eh_proj shards hidden 64 over 3 ranks
        serving_facts = json.loads((dst / "hubpad.json").read_text())["serving"]
        assert serving_facts["speculative_config"] is None and "hidden_size % 3 == 0" in serving_facts["mtp_unavailable"]
        assert shapes["mtp.layers.0.mixer.q_proj.weight"] == [attn * 16, 64]
        assert shapes["mtp.layers.1.mixer.experts.0.up_proj.weight"] == [cfg["moe_intermediate_size"], 32]
    a, b = _logits(src), _logits(dst)
    delta = (a - b).abs().max().item()
    print(f"{case}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


def _mixer(cfg, state: dict):
    """transformers' NemotronHMamba2Mixer for `cfg`, in float64, holding `state` (its own parameter names)."""
    mixer = transformers.models.nemotron_h.modeling_nemotron_h.NemotronHMamba2Mixer(cfg, layer_idx=0).double().eval()
    mixer.load_state_dict(state)
    return mixer


def _layer_state(tensors: dict, layer: int) -> dict:
    p = f"backbone.layers.{layer}.mixer."
    return {n[len(p):]: t for n, t in tensors.items() if n.startswith(p)}


@pytest.mark.parametrize("tp,groups", [(3, 2), (6, 2), (3, 1), (6, 1)])
def test_padded_mamba2_layer_under_vllms_per_rank_slicing_is_the_original(tmp_path, tp, groups):
    """Each rank runs its own groups' heads and normalizes its own groups (vLLM: n_groups % tp == 0, no collective);
    out_proj's partial outputs are summed (the all-reduce). The sum is the original layer's output."""
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build_nemotron_h(src, pattern="M*", n_groups=groups)
    run_mirror(make_plan(LocalSource(src), tp), LocalPublisher(dst))
    padded = json.loads((dst / "config.json").read_text())
    h2, g2 = padded["mamba_num_heads"], padded["n_groups"]
    assert g2 % tp == 0 and h2 // g2 == 8 // groups  # whole groups of the original size
    x = torch.randn(2, 21, 64, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with torch.no_grad():
        want = _mixer(config("M*", n_groups=groups), _layer_state(load_file(src / "model.safetensors"), 0))(x)
        state = _layer_state(folder_tensors(dst), 0)
        rank_cfg = config("M*", mamba_num_heads=h2 // tp, n_groups=g2 // tp)
        got = sum(_mixer(rank_cfg, mamba2_rank_slice(state, h2, g2, 8, 16, tp, r))(x) for r in range(tp))
    delta = (want - got).abs().max().item()
    print(f"tp {tp}, {groups} group(s) -> {g2}: max |Δ| = {delta}")
    assert delta <= REL_TOL * want.abs().max().item()


def test_one_group_cannot_take_more_heads(tmp_path):
    """Why one group grows in whole groups: keeping n_groups 1 and appending zero heads widens the gated norm (vLLM's
    n_groups == 1 path sums squares over all ranks and divides by the padded width), and the output changes."""
    src = tmp_path / "upstream"
    build_nemotron_h(src, pattern="M*", n_groups=1)
    state = _layer_state(load_file(src / "model.safetensors"), 0)
    x = torch.randn(1, 9, 64, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    width, extra = 64, 4  # 8 heads of 8 channels, 4 zero heads appended to the one group (12 heads: 12 % 3 == 0)
    naive = {n: t for n, t in state.items()}
    pad = lambda t, at, n: torch.cat([t[:at], t.new_zeros(n, *t.shape[1:]), t[at:]])  # noqa: E731
    w = state["in_proj.weight"]  # [z 64 | x 64 | B 16 | C 16 | dt 8]
    naive["in_proj.weight"] = pad(pad(pad(w, 168, extra), 2 * width, extra * 8), width, extra * 8)
    naive["conv1d.weight"] = pad(state["conv1d.weight"], width, extra * 8)
    naive["conv1d.bias"] = pad(state["conv1d.bias"], width, extra * 8)
    for n in ("A_log", "D", "dt_bias"):
        naive[n] = pad(state[n], 8, extra)
    naive["norm.weight"] = pad(state["norm.weight"], width, extra * 8)
    naive["out_proj.weight"] = torch.cat([state["out_proj.weight"], torch.zeros(64, extra * 8, dtype=torch.float64)], 1)
    with torch.no_grad():
        want = _mixer(config("M*", n_groups=1), state)(x)
        got = _mixer(config("M*", n_groups=1, mamba_num_heads=12), naive)(x)
    assert (want - got).abs().max().item() > 1e-3 * want.abs().max().item()


def test_other_quantized_mamba2_layers_are_refused(tmp_path):
    """Per-tensor FP8 in_proj / out_proj pad (zero rows under one scale); an NVFP4 in_proj (block scales along its
    rows' groups) or an FP8 convolution is refused, naming the tensor."""
    from hubpad.testing import write_checkpoint
    from tests import nemotron_h_real

    cfg = {**nemotron_h_real.SUPER, "num_hidden_layers": 4, "hybrid_override_pattern": "ME*E",
           "num_nextn_predict_layers": 0}
    base = nemotron_h_real.tensors(cfg)
    rows = next(s for n, _, s in base if n.endswith("in_proj.weight"))[0]
    nvfp4 = [t for t in base if not t[0].endswith("in_proj.weight")] + [
        ("backbone.layers.0.mixer.in_proj.weight", "U8", (rows, 2048)),
        ("backbone.layers.0.mixer.in_proj.weight_scale", "F8_E4M3", (rows, 256)),
        ("backbone.layers.0.mixer.in_proj.weight_scale_2", "F32", ())]
    fp8_conv = [(n, "F8_E4M3" if n.endswith("conv1d.weight") else d, s) for n, d, s in base]
    for name, tensors, bad in (("nvfp4", nvfp4, "in_proj.weight: a U8"), ("fp8-conv", fp8_conv, "conv1d.weight: a F8")):
        src = write_checkpoint(tmp_path / name, cfg, tensors, header_only=True)
        with pytest.raises(ConfigError, match=f"{bad}.* tensor of a Mamba2 layer; hubpad pads Mamba2 layers in "
                                              f"BF16/FP16/FP32, and their in_proj / out_proj also in FP8 with one "
                                              f"scale per tensor"):
            make_plan(LocalSource(src), 3)


def test_two_shared_experts_are_refused(tmp_path):
    src = tmp_path / "upstream"
    build_nemotron_h(src, pattern="ME")
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "n_shared_experts": 2}))
    with pytest.raises(ConfigError, match="n_shared_experts 2 is not supported"):
        make_plan(LocalSource(src), 3)


def _published_plan(tmp_path, model: str, tp: int) -> tuple[dict, dict]:
    """`hubpad plan --json` of a published layout (tests/nemotron_h_real.py, header-only): its config and the plan."""
    from hubpad.testing import write_checkpoint
    from tests import nemotron_h_real
    from tests.helpers import cli

    cfg = getattr(nemotron_h_real, model)
    src = write_checkpoint(tmp_path / model, cfg, nemotron_h_real.tensors(cfg), n_shards=4, header_only=True)
    result = cli("plan", src, "--tp", str(tp), "--json")
    assert result.exit_code == 0, result.output
    return cfg, json.loads(result.output)


# model, tp -> (mamba groups, mamba heads, attention heads, kv heads, expert width, shared expert width) after padding
PUBLISHED = {("SUPER", 3): (9, 144, 48, 3, 2688, 5376), ("SUPER", 6): (12, 192, 48, 3, 2688, 5376),
             ("ULTRA", 3): (9, 288, 96, 3, 5184, 10368), ("ULTRA", 6): (12, 384, 96, 3, 5376, 10752)}


@pytest.mark.parametrize("model,tp", sorted(PUBLISHED))
def test_nemotron_3_published_layouts_plan(tmp_path, model, tp):
    """Nemotron 3 Super and Ultra (tests/nemotron_h_real.py; Ultra's layers in `layers_block_type`): Mamba2 8 groups
    (of 16 / 32 heads) -> 9 at TP 3, 12 at TP 6; attention 32 / 2 -> 48 / 3 and 64 / 2 -> 96 / 3 at both; Super's
    experts (2688, shared 5376) shard as they are, Ultra's 5120 / 10240 grow to whole per-rank tiles (64 for routed
    experts, 128 for the shared one); MTP padded, and left out of the card (hidden % tp != 0)."""
    cfg, plan = _published_plan(tmp_path, model, tp)
    dims = {d["name"]: d["after"] for d in plan["dims"]}
    assert (dims["mamba groups"], dims["mamba heads"], dims["attention heads"], dims["kv heads"],
            dims["expert intermediate"], dims["shared intermediate"]) == PUBLISHED[model, tp]
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    padded = {g["pattern"]: g["after"] for g in plan["tensors"]["padded_groups"]}
    groups, heads, h = dims["mamba groups"], dims["mamba heads"], cfg["hidden_size"]
    assert padded["backbone.layers.*.mixer.in_proj.weight"] == [2 * heads * 64 + 2 * groups * 128 + heads, h]
    assert padded["mtp.layers.*.mixer.q_proj.weight"] == [dims["attention heads"] * 128, h]


def test_nemotron_3_super_tensor_list_reproduces_the_published_totals():
    """The BF16 release's header totals (tests/nemotron_h_real.py): every BF16 parameter, and the MTP block's."""
    import math

    from tests import nemotron_h_real

    t = nemotron_h_real.tensors(nemotron_h_real.SUPER)
    assert sum(math.prod(s) for _, d, s in t if d == "BF16") == nemotron_h_real.BF16_PARAMETERS
    assert sum(math.prod(s) for n, d, s in t if d == "BF16" and n.startswith("mtp.")) == nemotron_h_real.MTP_PARAMETERS


def test_nemotron_3_super_nvfp4_layout_plans(tmp_path):
    """-NVFP4 (ModelOpt mixed precision): NVFP4 experts, per-tensor FP8 in 28 in_proj / 29 out_proj and elsewhere,
    BF16 the rest; at TP 3 the FP8 Mamba2 projections grow by whole zero groups with their scales copied."""
    from hubpad.testing import write_checkpoint
    from tests import nemotron_h_real
    from tests.helpers import cli

    cfg = {**nemotron_h_real.SUPER, "quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                                                            "kv_cache_scheme": None}}
    src = write_checkpoint(tmp_path / "Nemotron-3-Super-NVFP4", cfg, nemotron_h_real.tensors(cfg, nvfp4=True),
                           n_shards=4, header_only=True)
    result = cli("plan", src, "--tp", "3", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    padded = {g["pattern"]: (g["after"], g["count"]) for g in plan["tensors"]["padded_groups"]}
    rows = 2 * 144 * 64 + 2 * 9 * 128 + 144
    assert padded["backbone.layers.*.mixer.in_proj.weight"] == ([rows, 4096], 40)  # 28 FP8 and 12 BF16
    assert padded["backbone.layers.*.mixer.out_proj.weight"] == ([4096, 144 * 64], 40)
    assert not any("weight_scale" in p or "experts.*" in p for p in padded)  # scales copied; experts shard as is


# model, tp -> (attention heads, kv heads, mamba groups, mamba heads, dense intermediate) after padding
DENSE = {("DENSE_47B", 3): (72, 9, 9, 288, 30720), ("DENSE_47B", 6): (96, 12, 12, 384, 30720),
         ("DENSE_56B", 3): (72, 9, 9, 288, 33024), ("DENSE_56B", 6): (96, 12, 12, 384, 33024)}


@pytest.mark.parametrize("model,tp", sorted(DENSE))
def test_dense_nemotron_h_published_layouts_plan(tmp_path, model, tp):
    """Nemotron-H 47B and 56B (tests/nemotron_h_real.py: attention_head_dim, no head_dim): 64 heads / 8 kv -> 72 / 9 at
    TP 3 and 96 / 12 at TP 6 (9 kv heads do not shard at 6), Mamba2 8 groups of 32 heads -> 9 / 12 groups; the 47B's
    MLP 30720 shards at 3 and 6 as it is, the 56B's 32768 grows to 33024 (86 x 128 per rank at TP 3, 43 x 128 at 6);
    head_dim written explicitly (128)."""
    cfg, plan = _published_plan(tmp_path, model, tp)
    dims = {d["name"]: d["after"] for d in plan["dims"]}
    assert (dims["attention heads"], dims["kv heads"], dims["mamba groups"], dims["mamba heads"],
            dims["dense intermediate"]) == DENSE[model, tp]
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    assert plan["config_changes"]["head_dim"] == [None, 128]
    padded = {g["pattern"]: g["after"] for g in plan["tensors"]["padded_groups"]}
    groups, heads = dims["mamba groups"], dims["mamba heads"]
    assert padded["backbone.layers.*.mixer.in_proj.weight"] == [2 * heads * 64 + 2 * groups * 256 + heads, 8192]
    assert padded["backbone.layers.*.mixer.q_proj.weight"] == [dims["attention heads"] * 128, 8192]
    print(f"{model} TP {tp}: {sum(g['bytes_added'] for g in plan['tensors']['padded_groups']) / 1e9:.1f} GB added")


@pytest.mark.parametrize("tp,groups,heads,widths", [(3, 3, 12, (192, 192, 192, 384)), (6, 6, 24, (384, 384, 384, 768))])
def test_puzzle_padded_model_gives_identical_logits(tmp_path, tp, groups, heads, widths):
    """Nemotron-H Puzzle (tests/nemotron_h_models.py: MoE layers of 40 and 72 and an MLP layer of 80 each its own, the
    MTP MoE 56): each width padded as its kind (experts to whole 64-wide tiles per rank, the MLP to 128-wide ones),
    written back into its block; the Mamba2 and attention layers as Nemotron-H's. Float64 logits of the reference
    built after vLLM's per-layer configs: max abs diff 0.0."""
    from tests.nemotron_h_models import build_puzzle, puzzle_logits

    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build_puzzle(src, mtp=True)
    run_mirror(make_plan(LocalSource(src), tp, shard_size=400_000), LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["n_groups"], cfg["mamba_num_heads"], cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (
        groups, heads, 6, 3)
    blocks = cfg["block_configs"]
    assert (blocks[1]["moe_intermediate_size"], blocks[5]["moe_intermediate_size"],
            cfg["mtp_block_configs"][1]["moe_intermediate_size"], blocks[4]["intermediate_size"]) == widths
    assert (blocks[1]["num_experts_per_tok"], blocks[5]["num_experts_per_tok"]) == (2, 3)  # routing kept
    shapes = {n: list(t.shape) for n, t in folder_tensors(dst).items()}
    assert shapes["model.layers.1.mixer.experts.0.up_proj.weight"] == [widths[0], 32]
    assert shapes["mtp.layers.1.mixer.experts.7.down_proj.weight"] == [32, widths[2]]
    assert shapes["model.layers.4.mixer.down_proj.weight"] == [64, widths[3]]
    ids = torch.randint(0, 256, (2, 21), generator=torch.Generator().manual_seed(1))
    a, b = puzzle_logits(src, ids), puzzle_logits(dst, ids)
    delta = (a - b).abs().max().item()
    print(f"puzzle tp {tp}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


@pytest.mark.parametrize("block,key,value", [(2, "num_attention_heads", 8), (0, "ssm_state_size", 8),
                                              (1, "moe_shared_expert_intermediate_size", None)])
def test_puzzle_blocks_hubpad_cannot_pad_are_refused(tmp_path, block, key, value):
    """A block stating its own attention heads or Mamba2 state (vLLM builds Mamba2 layers from config.json) is refused,
    naming it; a width that is not a positive integer too."""
    from tests.nemotron_h_models import build_puzzle

    src = tmp_path / "upstream"
    cfg = build_puzzle(src)
    cfg["block_configs"][block][key] = value
    (src / "config.json").write_text(json.dumps(cfg))
    why = (f"not a positive integer" if value is None else
           f"states {key} {value} \\(config.json: {cfg.get(key)}\\); hubpad pads a Puzzle's per-layer MLP and expert "
           f"widths only")
    with pytest.raises(ConfigError, match=f"config.json: block_configs.{block}.*{why}"):
        make_plan(LocalSource(src), 3)


# tp -> the Puzzle's expert widths after padding (1280, 1536, 1792, 2048, 2688), by group
PUZZLE_WIDTHS = {3: {"expert@1280": 1344, "expert@1536": 1536, "expert@1792": 1920, "expert@2048": 2112,
                     "expert@2688": 2688},
                 6: {"expert@1280": 1536, "expert@1536": 1536, "expert@1792": 1920, "expert@2048": 2304,
                     "expert@2688": 2688}}


@pytest.mark.parametrize("tp", [3, 6])
def test_nemotron_puzzle_published_layout_plans(tmp_path, tp):
    """Nemotron-Labs-3-Puzzle-75B-A9B (tests/nemotron_h_real.py): Super's attention and Mamba2 padding (32 / 2 -> 48 / 3;
    8 groups of 16 heads, state 96 -> 9 / 12 groups); each MoE layer's width to whole 64-wide tiles per rank (1280 ->
    1344 at TP 3: 448 = 7 x 64; 1536 and 2688 shard as they are), written into its block; MTP padded, left off the card
    (hidden 4096); the shared expert (5376) and routing copied."""
    _, plan = _published_plan(tmp_path, "PUZZLE", tp)
    dims = {d["name"]: d["after"] for d in plan["dims"]}
    assert (dims["attention heads"], dims["kv heads"], dims["mamba groups"], dims["mamba heads"]) == (
        (48, 3, 9, 144) if tp == 3 else (48, 3, 12, 192))
    assert {g: dims[f"{g} intermediate"] for g in PUZZLE_WIDTHS[tp]} == PUZZLE_WIDTHS[tp]
    assert dims["shared intermediate"] == 5376 and "dense intermediate" not in dims
    assert all(r["ok"] for r in plan["rank_table"] if r["required"])
    before, after = plan["config_changes"]["block_configs"]
    assert [b.get("moe_intermediate_size") for b in after] == [
        PUZZLE_WIDTHS[tp][f"expert@{b['moe_intermediate_size']}"] if "moe_intermediate_size" in b else None
        for b in before]
    assert "mtp_block_configs" not in plan["config_changes"]  # the MTP's 2688 shards as it is
    padded = {g["pattern"]: g["after"] for g in plan["tensors"]["padded_groups"]}
    assert padded["model.layers.*.mixer.in_proj.weight"] == [2 * dims["mamba heads"] * 64 + 2 * dims["mamba groups"]
                                                             * 96 + dims["mamba heads"], 4096]
    print(f"Puzzle TP {tp}: {sum(g['bytes_added'] for g in plan['tensors']['padded_groups']) / 1e9:.1f} GB added")


def test_nemotron_puzzle_layer_list_holds_the_published_total():
    """The Puzzle's layer list (tests/nemotron_h_real.py) holds the model card's 75.3B parameters (MTP not counted)."""
    import math

    from tests import nemotron_h_real

    t = nemotron_h_real.tensors(nemotron_h_real.PUZZLE)
    total = sum(math.prod(s) for n, _, s in t if not n.startswith("mtp."))
    assert round(total / 1e9, 2) == 75.35 and int(total / 1e8) / 10 == nemotron_h_real.PUZZLE_BILLIONS
