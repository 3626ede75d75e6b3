"""Kimi Delta Attention (plan/kda.py) proven on Kimi-Linear (KDA + MLA) at TP=3 and TP=6.

- A tiny KimiLinearForCausalLM built with transformers (tests/linear_models.py, published tensor names and config
  form) is mirrored with hubpad: KDA heads and MLA heads padded independently, experts to the kernel tile; float64
  logits must equal the original's exactly and hubpad verify must pass.
- A zero-padded KDA head keeps a zero state and a zero output whatever its forget gate and beta are (transformers'
  own chunked and recurrent KDA functions, random and extreme gates).
- vLLM's mapping: every per-head tensor of the padded layer is cut into TP contiguous slices as vLLM's loaders cut
  them (q/k/v/b/f_b/g_b rows, each conv, dt_bias, A_log, o_proj columns; f_a, g_a, o_norm whole); each rank's KDA
  layer run on its slices and the o_proj partial sums added equal the unpadded layer's output.

transformers runs KDA through its torch fallback here (no flash-linear-attention): chunk_kimi_delta_attention computes
in float32; heads are independent there, so the real heads' float32 values do not depend on the padded ones.
"""

from __future__ import annotations

import copy
import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "KimiLinearForCausalLM"):
    pytest.skip("transformers has no Kimi-Linear", allow_module_level=True)

from transformers.models.kimi_linear import modeling_kimi_linear as mkl  # noqa: E402

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import linear_models  # noqa: E402
from tests.helpers import cli, mirror_and_verify  # noqa: E402

# tp -> (KDA heads, MLA heads, expert width)
AFTER = {3: (6, 6, 192), 6: (6, 6, 384)}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    src = linear_models.build_kimi_linear(tmp_path_factory.mktemp("kimi-linear") / "upstream")
    return src, linear_models.kimi_linear_logits(src)


@pytest.mark.parametrize("tp", [3, 6])
def test_kimi_linear_pads_exactly(tmp_path, upstream, tp):
    src, before = upstream
    dst = tmp_path / "padded"
    mirror_and_verify(src, dst, tp)

    config = json.loads((dst / "config.json").read_text())
    kda_heads, mla_heads, experts = AFTER[tp]
    assert config["linear_attn_config"]["num_heads"] == kda_heads  # what vLLM and transformers read
    assert "linear_num_heads" not in config  # the published form stays the published form
    assert (config["num_attention_heads"], config["moe_intermediate_size"]) == (mla_heads, experts)

    plan = make_plan(LocalSource(src), tp)
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    kda = "model.layers.0.self_attn."
    rows = kda_heads * 16
    for proj in ("q_proj", "k_proj", "v_proj"):
        assert shapes[kda + proj + ".weight"] == ((64, 64), (rows, 64))
        assert shapes[kda + proj[0] + "_conv1d.weight"] == ((64, 1, 4), (rows, 1, 4))
    assert shapes[kda + "f_b_proj.weight"] == ((64, 16), (rows, 16))
    assert shapes[kda + "g_b_proj.weight"] == ((64, 16), (rows, 16))
    assert shapes[kda + "b_proj.weight"] == ((4, 64), (kda_heads, 64))
    assert shapes[kda + "dt_bias"] == ((64,), (rows,))
    assert shapes[kda + "A_log"] == ((1, 1, 4, 1), (1, 1, kda_heads, 1))
    assert shapes[kda + "o_proj.weight"] == ((64, 64), (64, rows))
    assert not [n for n in shapes if n.endswith(("f_a_proj.weight", "g_a_proj.weight", "o_norm.weight"))]
    mla = "model.layers.3.self_attn."  # the MLA layer: MLA's rules, not KDA's
    assert shapes[mla + "q_proj.weight"] == ((4 * 24, 64), (mla_heads * 24, 64))
    assert shapes[mla + "kv_b_proj.weight"] == ((4 * 32, 16), (mla_heads * 32, 16))
    assert shapes[mla + "o_proj.weight"] == ((64, 64), (64, mla_heads * 16))

    after = linear_models.kimi_linear_logits(dst)
    delta = (before - after).abs().max().item()
    print(f"kimi_linear TP={tp}: float64 max |Δ| = {delta} (max |logit| {before.abs().max().item():.1f})")
    assert delta == 0.0


def test_kimi_linear_config_as_transformers_writes_it(tmp_path):
    """transformers' save writes the KDA dims twice (linear_attn_config and linear_num_heads): both are padded (the
    tensors are the published form's, whose logits are compared above)."""
    src = linear_models.build_kimi_linear(tmp_path / "upstream", published_config=False)
    dst = tmp_path / "padded"
    assert cli("mirror", src, "--tp", 3, "--to", dst).exit_code == 0
    config = json.loads((dst / "config.json").read_text())
    assert config["linear_attn_config"]["num_heads"] == config["linear_num_heads"] == 6
    assert cli("verify", src, dst).exit_code == 0


def _zero_head_inputs(gen, g_scale: float, beta_value: float | None):
    b, t, h, d = 2, 70, 3, 8  # 70 tokens: two chunks of 64 in the chunked form
    q, k, v = (torch.randn(b, t, h, d, generator=gen, dtype=torch.float64) for _ in range(3))
    for x in (q, k, v):
        x[:, :, -1] = 0.0  # the padded head
    g = -torch.rand(b, t, h, d, generator=gen, dtype=torch.float64) * g_scale
    beta = (torch.rand(b, t, h, generator=gen, dtype=torch.float64) if beta_value is None
            else torch.full((b, t, h), beta_value, dtype=torch.float64))
    return q, k, v, g, beta


@pytest.mark.parametrize("g_scale,beta_value", [(1.0, None), (1e4, 1.0), (0.0, 0.0), (30.0, 0.5)])
def test_a_zero_padded_kda_head_keeps_zero_state_and_output(g_scale, beta_value):
    """Whatever the forget gate (no decay to total decay) and beta: a head with zero q, k, v has a zero recurrent
    state and a zero output, chunked (prefill) and recurrent (decode, from a state), and the gated RMSNorm of its zero
    output is zero for any gate."""
    gen = torch.Generator().manual_seed(1)
    q, k, v, g, beta = _zero_head_inputs(gen, g_scale, beta_value)
    out, state = mkl.chunk_kimi_delta_attention(q, k, v, g, beta, output_final_state=True,
                                                use_qk_l2norm_in_kernel=True)
    assert out[:, :, -1].abs().max().item() == 0.0 and state[:, -1].abs().max().item() == 0.0
    assert (out[:, :, :-1].abs().max().item() > 0) is (beta_value != 0.0)  # real heads compute (beta 0 writes nothing)
    step = [x[:, :1] for x in (q, k, v, g, beta)]
    out1, state1 = mkl.recurrent_kimi_delta_attention(*step[:3], g=step[3], beta=step[4], initial_state=state,
                                                      output_final_state=True, use_qk_l2norm_in_kernel=True)
    assert out1[:, :, -1].abs().max().item() == 0.0 and state1[:, -1].abs().max().item() == 0.0
    norm = mkl.KimiLinearRMSNormGated(8).double()
    with torch.no_grad():
        norm.weight.normal_(1.0, 0.3)
    gate = torch.randn(out.shape, generator=gen, dtype=torch.float64) * 10
    assert norm(out.double(), gate)[:, :, -1].abs().max().item() == 0.0


def _kda_layer(model, idx):
    return model.model.layers[idx].self_attn


def _rank_slice(layer, tp: int, rank: int, heads: int, d: int):
    """Rank `rank`'s KDA layer as vLLM loads it: contiguous slices of every per-head tensor (each of q/k/v rows and
    convolutions per segment, b rows, f_b / g_b rows, dt_bias, A_log, o_proj columns); f_a, g_a, o_norm whole."""
    per = heads // tp
    rows, heads_sl = slice(rank * per * d, (rank + 1) * per * d), slice(rank * per, (rank + 1) * per)
    local = copy.deepcopy(layer)
    local.num_heads = per
    local.qkv_dim = per * d
    fg = local.forget_gate
    fg.num_heads, fg.qkv_dim = per, per * d
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "g_b_proj"):
            getattr(local, name).weight = torch.nn.Parameter(getattr(layer, name).weight[rows].clone())
        local.b_proj.weight = torch.nn.Parameter(layer.b_proj.weight[heads_sl].clone())
        full = layer.conv1d.weight  # transformers stacks q/k/v_conv1d: [3 H d, 1, K]
        segments = [full[i * heads * d:(i + 1) * heads * d][rows] for i in range(3)]
        local.conv1d = torch.nn.Conv1d(3 * per * d, 3 * per * d, full.shape[-1], groups=3 * per * d,
                                       padding=full.shape[-1] - 1, bias=False).double()
        local.conv1d.weight = torch.nn.Parameter(torch.cat(segments).clone())
        local.conv_dim = 3 * per * d
        fg.f_b_proj.weight = torch.nn.Parameter(layer.forget_gate.f_b_proj.weight[rows].clone())
        fg.dt_bias = torch.nn.Parameter(layer.forget_gate.dt_bias[rows].clone())
        fg.A_log = torch.nn.Parameter(layer.forget_gate.A_log[:, :, heads_sl].clone())
        local.o_proj.weight = torch.nn.Parameter(layer.o_proj.weight[:, rows].clone())
    return local


@pytest.mark.parametrize("tp", [3, 6])
def test_padding_at_the_end_is_exact_under_vllms_per_rank_mapping(tmp_path, upstream, tp):
    src, _ = upstream
    dst = tmp_path / "padded"
    assert cli("mirror", src, "--tp", tp, "--to", dst).exit_code == 0
    original = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.float64).eval()
    padded = transformers.AutoModelForCausalLM.from_pretrained(dst, dtype=torch.float64).eval()
    heads = padded.config.linear_num_heads
    x = torch.randn(2, 20, 64, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with torch.no_grad():
        want = _kda_layer(original, 0)(x)
        ranks = [_rank_slice(_kda_layer(padded, 0), tp, r, heads, 16)(x) for r in range(tp)]
    got = sum(ranks)
    delta = (want - got).abs().max().item()
    print(f"KDA layer, {tp} ranks of {heads // tp} heads: max |Δ| = {delta} (max |out| {want.abs().max().item():.2f})")
    assert delta <= 1e-12 * want.abs().max().item()
    # the last rank holds the padded heads: what it adds is only its real heads' share (zero at TP=6: 4 real of 6)
    if tp == 6:
        assert ranks[-1].abs().max().item() == 0.0


def test_kda_refusals_name_the_reason(tmp_path):
    src = linear_models.build_kimi_linear(tmp_path / "upstream")
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "linear_attn_config": {
        **config["linear_attn_config"], "head_dim": 32}}))
    with pytest.raises(ConfigError, match=r"self_attn\.\w+: shape \[.*\], expected .* Kimi Delta Attention"):
        make_plan(LocalSource(src), 3)
    no_layers = {k: v for k, v in config["linear_attn_config"].items() if k != "kda_layers"}
    (src / "config.json").write_text(json.dumps({**config, "linear_attn_config": no_layers}))
    with pytest.raises(ConfigError, match="cannot be told from the full-attention ones"):
        make_plan(LocalSource(src), 3)


def test_more_than_one_shared_expert_is_refused_in_kimi_linear(tmp_path):
    """vLLM builds num_shared_experts x moe_intermediate_size as one MLP: padding it with the routed width would be
    wrong for two, so hubpad refuses (Kimi-K3, with two, is planned only where the width needs no padding)."""
    src = linear_models.build_kimi_linear(tmp_path / "upstream")
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "num_shared_experts": 2}))
    with pytest.raises(ConfigError, match="num_shared_experts 2 is not supported"):
        make_plan(LocalSource(src), 3)
