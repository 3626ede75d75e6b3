"""DeepSeek-V4: pad a tiny real transformers V4 (published tensor names, MTP layer, sliding + CSA + HCA layers, hash
and score routers, hyper-connections) at TP 3 and 6 and compare float64 logits; the controls the padding rule rests on;
vLLM's per-rank split of the grouped output projection replayed on the padded tensors; the refusals.

The rule (hubpad/plan/adapters/deepseek_v4.py): whole o_groups appended, zero wq_b rows, zero wo_a rows (group-major),
zero wo_b columns, zero sinks for the new heads, num_attention_heads and o_groups raised together.
"""

from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402

from hubpad.errors import ConfigError, HubpadError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.dsv4_models import build_model, load, save_published  # noqa: E402
from tests.helpers import folder_tensors  # noqa: E402

REL_TOL = 1e-12
SMALL = dict(n_routed_experts=8, num_experts_per_tok=2)  # the float64 tier; the serving fixture takes 64 / top-6


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    path = tmp_path_factory.mktemp("dsv4") / "upstream"
    save_published(build_model(**SMALL), path)
    return path


@pytest.fixture(scope="module")
def reference(upstream):
    """The upstream loaded by transformers in float64, the inputs (140 tokens: longer than the HCA ratio 128, so both
    compressors and the indexer run) and its logits."""
    model = load(upstream)
    ids = torch.randint(0, 160, (2, 140), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model, ids, model(ids).logits


@pytest.fixture(scope="module")
def derivative(upstream, tmp_path_factory):
    """`hubpad mirror` of the upstream at a TP (each built once), with its plan."""
    built = {}

    def get(tp):
        if tp not in built:
            dst = tmp_path_factory.mktemp(f"dsv4-tp{tp}") / "out"
            plan = make_plan(LocalSource(upstream), tp, shard_size=20_000_000)
            run_mirror(plan, LocalPublisher(dst))
            built[tp] = dst, plan
        return built[tp]
    return get


@pytest.mark.parametrize("tp,heads,groups,expert", [(3, 6, 3, 192), (6, 12, 6, 384)])
def test_dsv4_padded_model_gives_identical_logits(upstream, reference, derivative, tp, heads, groups, expert):
    dst, plan = derivative(tp)
    assert verify_derivative(LocalSource(upstream), LocalSource(dst))["padded"] > 0
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["o_groups"], cfg["num_key_value_heads"]) == (heads, groups, 1)
    kept = ("o_lora_rank", "index_n_heads", "head_dim", "moe_intermediate_size")
    assert tuple(cfg[k] for k in kept) == (32, 2, 64, expert)
    shapes = {t.name: (tuple(t.src.shape), tuple(t.shape)) for t in plan.tensors if t.padded}
    for p in ("layers.0.", "layers.1.", "layers.2.", "mtp.0."):  # the MTP layer is padded like the others
        assert shapes[p + "attn.wq_b.weight"] == ((256, 32), (heads * 64, 32))
        assert shapes[p + "attn.wo_a.weight"] == ((64, 128), (groups * 32, 128))  # in-features: 2 heads × 64 stay
        assert shapes[p + "attn.wo_b.weight"] == ((64, 64), (64, groups * 32))
        assert shapes[p + "attn.attn_sink"] == ((4,), (heads,))
        assert shapes[p + "ffn.experts.7.w2.weight"] == ((64, 32), (64, expert))
        assert shapes[p + "ffn.shared_experts.w1.weight"] == ((32, 64), (expert, 64))
    replicated = ("wq_a", "wkv", "q_norm", "kv_norm", "compressor", "indexer", "hc_", "ffn.gate", "e_proj", "h_proj",
                  "embed", "head.", "norm.weight")
    assert not [n for n in shapes if any(r in n for r in replicated)]
    out, src = folder_tensors(dst), folder_tensors(upstream)
    for p in ("layers.1.", "mtp.0."):
        assert torch.equal(out[p + "attn.attn_sink"][4:], torch.zeros(heads - 4, dtype=torch.float64))
        assert torch.equal(out[p + "attn.wo_a.weight"][:64], src[p + "attn.wo_a.weight"])  # group-major: appended
        assert not out[p + "attn.wo_a.weight"][64:].any() and not out[p + "attn.wq_b.weight"][256:].any()
    card = (dst / "README.md").read_text()
    assert "--tool-call-parser deepseek_v4" in card and "--reasoning-parser deepseek_v4" in card
    assert '"method": "mtp"' in card and f"divides its o\\_groups ({groups})" in card
    # DeepseekV4ForCausalLM, both deepseek_v4 parsers and DeepSeekV4MTPModel: first in vLLM 0.20.0 (vllm.py)
    assert "**vLLM 0.20.0 or newer**: the first release with DeepseekV4ForCausalLM, DeepSeek-V4 MTP" in card

    _, ids, ref = reference
    with torch.no_grad():
        delta = (load(dst)(ids).logits - ref).abs().max().item()
    print(f"deepseek_v4 tp={tp}: max |Δ| = {delta}")
    assert delta <= REL_TOL * ref.abs().max().item()


def _padded_by_hand(model, heads: int, groups: int, layout: str):
    """The tiny V4 with 2 extra zero heads (4 → 6), built in memory: `append` adds them at the end with o_groups kept
    at 2 (3 heads a group, so every head after the first group is regrouped: the hand padding that serves fluent
    garbage); `per_group` inserts one zero head at the end of each group (exact in transformers)."""
    cfg = model.config.to_dict()
    cfg.update(num_attention_heads=heads, o_groups=groups)
    other = transformers.AutoModelForCausalLM.from_config(transformers.DeepseekV4Config(**cfg),
                                                          experts_implementation="eager").to(torch.float64).eval()
    state, hd, old = dict(model.state_dict()), model.config.head_dim, model.config.num_attention_heads
    per = old // model.config.o_groups
    for name in list(state):
        t = state[name]
        if name.endswith("self_attn.q_b_proj.weight"):
            rows = list(t.view(old, hd, -1))
            if layout == "append":
                rows += [torch.zeros_like(rows[0])] * (heads - old)
            else:
                rows = [r for g in range(groups) for r in rows[g * per:(g + 1) * per] + [torch.zeros_like(rows[0])]]
            state[name] = torch.cat(rows)
        elif name.endswith("self_attn.sinks"):
            sinks = list(t)
            if layout == "append":
                sinks += [torch.zeros_like(t[0])] * (heads - old)
            else:
                sinks = [s for g in range(groups) for s in sinks[g * per:(g + 1) * per] + [torch.zeros_like(t[0])]]
            state[name] = torch.stack(sinks)
        elif name.endswith("self_attn.o_a_proj.weight"):  # [groups × rank, heads-per-group × head_dim]: new columns
            state[name] = torch.cat([t, torch.zeros(t.shape[0], heads // groups * hd - t.shape[1], dtype=t.dtype)], 1)
    other.load_state_dict(state)
    return other


def test_dsv4_controls_regrouped_heads_and_poisoned_sinks(reference, derivative):
    """What the rule rests on, each seen to matter: appending zero heads while keeping o_groups regroups the heads
    (large Δ); one zero head per group is exact in transformers (but vLLM cannot split it: refused below); a padded
    head's sink may be any finite value or −inf, while +inf or NaN poison the logits."""
    model, ids, _ = reference
    ids = ids[:, :24]  # the grouping is the same at any length: a short input keeps the controls quick
    with torch.no_grad():
        ref = model(ids).logits
        kept = (_padded_by_hand(model, 6, 2, "append")(ids).logits - ref).abs().max().item()
        per_group = (_padded_by_hand(model, 6, 2, "per_group")(ids).logits - ref).abs().max().item()
    print(f"appended heads, o_groups kept: max |Δ| = {kept}; one zero head per group: max |Δ| = {per_group}")
    assert kept > 0.1 and per_group <= REL_TOL * ref.abs().max().item()

    padded = load(derivative(3)[0])
    for value, exact in ((float("-inf"), True), (1e4, True), (float("inf"), False)):  # NaN: as +inf
        with torch.no_grad():
            for layer in padded.model.layers:
                layer.self_attn.sinks[4:] = value
            out = padded(ids).logits
        if exact:
            assert (out - ref).abs().max().item() <= REL_TOL * ref.abs().max().item(), value
        else:
            assert out.isnan().any(), value


def _vllm_output_projection(w: dict, p: str, o: torch.Tensor, cfg: dict, tp: int) -> torch.Tensor:
    """vLLM's grouped output projection (vllm/models/deepseek_v4 attention.py), rank by rank: rank r takes heads
    [r·H/tp, (r+1)·H/tp) of the attention output `o` [tokens, H, head_dim], wo_a rows of its n_local_groups =
    o_groups // tp groups (ColumnParallel, bmm over groups), wo_b columns of them (RowParallel); the partial
    outputs are summed (the all-reduce)."""
    heads, groups, rank, hd = cfg["num_attention_heads"], cfg["o_groups"], cfg["o_lora_rank"], cfg["head_dim"]
    wo_a = w[p + "attn.wo_a.weight"].view(groups, rank, -1)
    out = 0
    for r in range(tp):
        lh, lg = heads // tp, groups // tp
        x = o[:, r * lh:(r + 1) * lh].reshape(o.shape[0], lg, -1)  # [tokens, local groups, heads-per-group × hd]
        y = torch.einsum("tgi,goi->tgo", x, wo_a[r * lg:(r + 1) * lg]).reshape(o.shape[0], -1)
        out = out + y @ w[p + "attn.wo_b.weight"][:, r * lg * rank:(r + 1) * lg * rank].T
    assert hd * heads // groups == wo_a.shape[-1]
    return out


@pytest.mark.parametrize("tp", [3, 6])
def test_vllm_split_of_the_grouped_projection_is_exact(upstream, derivative, tp):
    """The padded wo_a / wo_b split as vLLM splits them, fed attention outputs that are NOT zero for the padded heads
    (a zero query attends uniformly): the all-reduced sum equals the unpadded projection, in float64."""
    dst = derivative(tp)[0]
    src, out = folder_tensors(upstream), folder_tensors(dst)
    c1, c2 = json.loads((upstream / "config.json").read_text()), json.loads((dst / "config.json").read_text())
    g = torch.Generator().manual_seed(5)
    o = torch.randn(7, c2["num_attention_heads"], c2["head_dim"], generator=g, dtype=torch.float64)
    for p in ("layers.0.", "mtp.0."):
        want = _vllm_output_projection(src, p, o[:, :c1["num_attention_heads"]], c1, 1)
        got = _vllm_output_projection(out, p, o, c2, tp)
        assert (got - want).abs().max().item() <= REL_TOL * want.abs().max().item()


def _hand_padded(upstream, path, heads: int):
    """The upstream padded by heads only, as by hand: zero heads appended, o_groups kept at 2."""
    shutil.copytree(upstream, path)
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(num_attention_heads=heads)
    tensors = load_file(path / "model.safetensors")
    for name in list(tensors):
        t = tensors[name]
        if name.endswith("attn.wq_b.weight"):
            tensors[name] = torch.cat([t, torch.zeros((heads - 4) * 64, t.shape[1], dtype=t.dtype)])
        elif name.endswith("attn.attn_sink"):
            tensors[name] = torch.cat([t, torch.zeros(heads - 4, dtype=t.dtype)])
        elif name.endswith("attn.wo_a.weight"):
            tensors[name] = torch.cat([t, torch.zeros(t.shape[0], (heads - 4) // 2 * 64, dtype=t.dtype)], 1)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(cfg))
    return path


def test_dsv4_refuses_groups_that_do_not_divide_the_tp(upstream, derivative, tmp_path):
    """A heads-only hand padding whose heads divide the TP while its o_groups do not: plan and verify refuse it, since
    vLLM would compute n_local_groups = o_groups // tp without a word. (8 heads in 2 groups at TP 4 reaches the group
    check; 6 heads in 2 groups, V4-Flash's 72 / 8 in miniature, already fails on its heads per group.)"""
    with pytest.raises(ConfigError, match=r"o_groups 2 % tp 4 != 0 while its 8 attention heads divide tp 4"):
        make_plan(LocalSource(_hand_padded(upstream, tmp_path / "hand8", 8)), 4)
    with pytest.raises(ConfigError, match=r"6 attention heads in 2 o_groups .* padded by heads only"):
        make_plan(LocalSource(_hand_padded(upstream, tmp_path / "hand6", 6)), 3)

    # verify: a derivative whose config.json was edited back to the original's o_groups
    dst = tmp_path / "tp3"
    shutil.copytree(derivative(3)[0], dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["o_groups"] = 2
    (dst / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(HubpadError, match="o_groups 2 % tp 3 != 0"):
        verify_derivative(LocalSource(upstream), LocalSource(dst))


def test_dsv4_refuses_what_it_cannot_pad(tmp_path):
    path = tmp_path / "bad"
    save_published(build_model(**SMALL), path)
    cfg = json.loads((path / "config.json").read_text())
    for key, value, match in (("o_groups", 3, "4 attention heads are not a multiple of o_groups 3"),
                              ("o_lora_rank", 31, "o_lora_rank 31 is not a multiple of 2"),
                              ("num_key_value_heads", 2, "one shared KV head")):
        (path / "config.json").write_text(json.dumps({**cfg, key: value}))
        with pytest.raises(ConfigError, match=match):
            make_plan(LocalSource(path), 3)


@pytest.mark.parametrize("tp", [3, 6])
def test_dsv4_mtp_layer_gives_identical_logits(upstream, derivative, tp):
    """The MTP layer (`mtp.0.*`, which transformers does not load) run as vLLM's DeepSeekV4MTP runs it
    (tests/mtp_dsv4.py through the float64 MTP harness): the derivative's equals the original's."""
    from tests.mtp_harness import assert_same_mtp

    assert_same_mtp(upstream, derivative(tp)[0], f"deepseek_v4 tp={tp}")


def test_dsv4_mtp_harness_catches_a_layout_bug_in_the_mtp_layer(upstream, tmp_path):
    """A padder that gets only the MTP layer's wq_b wrong (new rows spread over the heads instead of appended) passes
    the main model's logits but not the MTP harness."""
    from tests.mtp_harness import mtp_forward, mtp_inputs, wrong_head_tail_layout

    plan = make_plan(LocalSource(upstream), 3, shard_size=20_000_000)
    wrong_head_tail_layout(plan, "mtp.0.attn.wq_b.weight")
    dst = tmp_path / "wrong"
    run_mirror(plan, LocalPublisher(dst))
    hidden, ids = mtp_inputs(upstream)
    (_, a), (_, b) = mtp_forward(upstream, hidden, ids), mtp_forward(dst, hidden, ids)
    print(f"MTP wq_b spread over heads: max |Δ logits| = {(a - b).abs().max().item()}")
    assert (a - b).abs().max().item() > 1e-3
