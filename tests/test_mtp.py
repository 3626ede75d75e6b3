"""Every MTP layout hubpad pads, proven in float64: the derivative's MTP block gives the original's logits.

transformers drops the MTP layer when it loads these models, so the whole-model logits tests (test_mla.py,
test_glm.py, test_gdn.py, ...) never run it, and `hubpad verify` rebuilds the plan it checks against. Here each
family's MTP block runs on its own (tests/mtp_harness.py: the block is the family's transformers decoder layer,
the remainder in front of it and the head after it written after vLLM's `*_mtp.py`), original and derivative on the
same hidden states and token ids, and must agree to 1e-12 relative (measured: 0.0).

Each layout is also shown to catch the bug that went unseen (issue 26): one head-sharded tensor of the MTP layer
only (MLA's kv_b_proj, a q_proj with or without Qwen's gate rows) laid out wrongly, each head grown at its own tail
instead of new heads appended. The main model's float64 logits stay identical under that bug (so every whole-model
test passes), and the MTP harness fails.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import gdn_models, gqa_models  # noqa: E402
from tests.mtp_harness import assert_same_mtp, load_mtp, mtp_inputs, wrong_head_tail_layout  # noqa: E402
from tests.test_models_transformers import COMMON  # noqa: E402
from tests.tiny_moe import HY3_MTP_EXTRAS, add_mtp_layer, randomize  # noqa: E402

HY3 = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=80,
           moe_intermediate_size=32, num_experts=3, num_experts_per_tok=2, num_shared_experts=1,
           first_k_dense_replace=1)


def _deepseek(tmp_path):
    from tests.test_mla import _build

    return _build(tmp_path)[1]


def _glm(tmp_path):
    from tests.test_glm import _build

    return _build(tmp_path, use_qk_norm=True)[1]


def _glm_lite(tmp_path):
    from tests.test_glm_lite import build_glm_lite

    return build_glm_lite(tmp_path)[1]


def _hy3(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.CONFIG_MAPPING["hy_v3"](**COMMON, **HY3)
    model = transformers.AutoModelForCausalLM.from_config(cfg).double().eval()
    randomize(model)
    path = tmp_path / "upstream"
    model.save_pretrained(path)
    add_mtp_layer(path, cfg, extras=HY3_MTP_EXTRAS)
    data = json.loads((path / "config.json").read_text())
    data["num_nextn_predict_layers"] = 1  # as the published config says; the MTP layer is model.layers.2
    (path / "config.json").write_text(json.dumps(data))
    return path


def _gdn(kind):
    return lambda tmp_path: gdn_models.build(kind, tmp_path / "upstream")


# layout: (builder, TP, the MTP tensor the layout bug hits, whether to show here that whole-model logits miss the bug:
# not for the GDN models, whose float64 forward in transformers' torch fallback is slow; transformers never loads
# their `mtp.*` tensors at all, so no whole-model test can see them)
CASES = {
    "deepseek_v3": (_deepseek, 3, "model.layers.2.self_attn.kv_b_proj.weight", True),
    "glm4_moe": (_glm, 3, "model.layers.2.self_attn.q_proj.weight", True),
    "glm4_moe_lite": (_glm_lite, 6, "model.layers.2.self_attn.kv_b_proj.weight", True),
    "hy_v3": (_hy3, 3, "model.layers.2.self_attn.q_proj.weight", True),
    "qwen3_5_text": (_gdn("qwen3_5_text"), 3, "mtp.layers.0.self_attn.q_proj.weight", False),
    "qwen3_5_moe": (_gdn("qwen3_5_moe"), 6, "mtp.layers.0.self_attn.q_proj.weight", False),
    "qwen3_next": (_gdn("qwen3_next"), 3, "mtp.layers.0.self_attn.q_proj.weight", False),
    # issue 33 (tests/gqa_models.py): ERNIE-4.5's mtp_block, EXAONE MoE's mtp.layers (no final norm / its own)
    "ernie4_5_moe": (lambda tmp_path: gqa_models.build_with_mtp("ernie4_5_moe", tmp_path / "upstream"), 3,
                     "model.mtp_block.0.self_attn.q_proj.weight", False),
    "exaone_moe": (lambda tmp_path: gqa_models.build_with_mtp("exaone_moe", tmp_path / "upstream"), 6,
                   "mtp.layers.0.self_attn.q_proj.weight", False),
}


# ERNIE-4.5's MTP logits are read without a final norm (|logits| ~ 100 here) and its block's q_proj grows 4 -> 6
# heads, which changes how BLAS blocks the same rows' float64 products (7e-15 in the block's output, measured): 2e-14
# in the logits, 2e-16 of them; every other family's is 0.0.
LAST_BIT = {"ernie4_5_moe"}


def _mirror(src, dst, tp, mutate: str | None = None):
    plan = make_plan(LocalSource(src), tp, shard_size=400_000)
    if mutate:
        wrong_head_tail_layout(plan, mutate)
    run_mirror(plan, LocalPublisher(dst))
    return plan


def _main_logits(path):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64,
                                                              experts_implementation="eager").eval()
    ids = torch.randint(0, 160, (1, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("layout", sorted(CASES))
def test_padded_mtp_block_gives_identical_logits_and_catches_a_layout_bug(tmp_path, layout):
    build, tp, target, whole_model = CASES[layout]
    src = build(tmp_path)
    good = tmp_path / "padded"
    plan = _mirror(src, good, tp)
    assert verify_derivative(LocalSource(src), LocalSource(good))["padded"] > 0
    padded = {t.name for t in plan.tensors if t.padded}
    assert target in padded, f"{layout}: the MTP layer's {target} is not padded at TP={tp}"
    block = load_mtp(src)  # the harness runs a real block: its logits depend on the block's own weights
    hidden, ids = mtp_inputs(src)
    assert len(list(block.model.model.layers[0].parameters())) > 5
    assert block(hidden, ids)[1].abs().max() > 1.0
    delta = assert_same_mtp(src, good, f"{layout} TP={tp}")  # within REL_TOL relative
    assert delta == 0.0 or layout in LAST_BIT, f"{layout}: max |Δ logits| = {delta}, not 0.0"

    bad = tmp_path / "mtp-layout-bug"
    _mirror(src, bad, tp, mutate=target)
    if whole_model:  # the bug is confined to the MTP layer: whole-model logits miss it
        assert (_main_logits(good) - _main_logits(bad)).abs().max().item() == 0.0
    with pytest.raises(AssertionError, match=r"MTP max \|Δ logits\|"):
        assert_same_mtp(src, bad, f"{layout} TP={tp} with {target} laid out per head")


# ---------------------------------------------------------------------------------------------------------------------
# The serving tier's drafting MTP layers (tests/serve_models.py `_drafting_mtp`): how often they draft what the main
# model then generates, estimated here in float64 with the harness, so an acceptance count in test_serve_mtp.py is
# one of many (not 1 of 20, where equal counts say little).


def acceptance(path) -> tuple[int, int]:
    """(accepted, drafted) for one draft token per step, greedy, over serving.PROMPTS with 8 new tokens each: the
    MTP layer reads the main model's last hidden state at position t (before its final norm, as vLLM passes it) and
    the token at t + 1, and its draft is accepted when it is the token the main model generates at t + 2."""
    from tests import serving

    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64,
                                                              experts_implementation="eager").eval()
    block = load_mtp(path)
    pre_norm = {}
    model.model.norm.register_forward_hook(lambda m, i, o: pre_norm.__setitem__("h", i[0]))
    accepted = drafted = 0
    with torch.no_grad():
        for prompt in serving.PROMPTS:
            full = model.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False)
            model(full)
            draft = block(pre_norm["h"][:, :-1], full[:, 1:])[1].argmax(-1)[0]  # draft[t]: the token at t + 2
            for t in range(len(prompt) - 1, full.shape[1] - 2):
                drafted += 1
                accepted += int(draft[t] == full[0, t + 2])
    return accepted, drafted


@pytest.mark.parametrize("family, at_least", [("hy_v3", 8), ("glm4_moe", 6), ("deepseek_v3", 3)])
def test_the_serving_fixtures_mtp_layer_drafts(tmp_path, family, at_least):
    from tests import serve_models

    path = serve_models.build(f"{family}+mtp", tmp_path / "upstream")
    accepted, drafted = acceptance(path)
    print(f"{family}+mtp: {accepted} of {drafted} drafts accepted (float64)")
    assert at_least <= accepted < drafted
