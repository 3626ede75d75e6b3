"""Llama on 3 and 6 GPUs in the formats people run it in: GPTQ and AWQ int4 (written from their specs, see
tests/int4_formats.py), compressed-tensors W4A16 and FP8-block + NVFP4 (quantized with the real library).

A tiny Llama (hidden 256, 4 heads / 2 kv heads of head_dim 128) pads to 6 / 3 heads at TP=3 and TP=6; 256 % 6
!= 0, so every derivative here is also labelled MistralForCausalLM. For each case: upstream bytes sit unchanged
in the top-left of every padded tensor and the pads hold exactly the format's zero (GPTQ/AWQ code 8 and zero
point 8, stored 7 by GPTQ v1; scales 1.0; new g_idx entries point at new, finite-scaled groups); the
dequantized weights (by the spec, and by the library: gptqmodel's own dequantizer copied, compressed-tensors'
AWQ converter + decompressor) equal the original in the top-left and are exactly 0.0 elsewhere; float64 logits
of the dequantized models match (≤ 1e-12 relative). Measured max |Δ| in float64: 0.0 in every case.
"""

from __future__ import annotations

import copy
import json
import math
import struct

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("compressed_tensors")

from compressed_tensors.quantization import QuantizationScheme  # noqa: E402
from compressed_tensors.quantization.quant_scheme import FP8_BLOCK, NVFP4, W4A16  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from hubpad.errors import HubpadError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import int4_formats as fmt  # noqa: E402
from tests.test_quantized import (  # noqa: E402
    _assert_decompressed_weights_padded,
    _assert_padded_equal,
    _compare_logits,
    _float_model,
    _input_ids,
    _load_decompressed,
    _quantize_and_save,
    _read_tensors,
    _tiny_model,
)

LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")
N_LINEAR = 2 * len(LINEARS)


def _pad(src, dst, tp):
    plan = make_plan(LocalSource(src), tp, shard_size=1_000_000)
    run_mirror(plan, LocalPublisher(dst))
    report = verify_derivative(LocalSource(src), LocalSource(dst))
    assert report["ok"] and report["padded"] > 0
    return plan


def _expected_dims(tp: int, inter: int) -> dict:
    """6 / 3 heads (kv replicated at TP=6); the MLP per rank in whole 128-wide tiles."""
    return {"num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 128,
            "intermediate_size": -(-inter // (128 * tp)) * 128 * tp}


def _assert_relabelled_and_padded(dst, tp, inter):
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["model_type"], cfg["architectures"], cfg["sliding_window"]) == ("mistral", ["MistralForCausalLM"], None)
    for key, value in _expected_dims(tp, inter).items():
        assert cfg[key] == value, key
    return cfg


# --------------------------------------------------------------------------------------------------
# GPTQ and AWQ checkpoints


PACKED_CASES = {
    # name: (method, group, sym, v2, act_order, intermediate, tp)
    "gptq-v1-sym-g128-tp3": ("gptq", 128, True, False, False, 256, 3),
    "gptq-v1-sym-g128-tp6": ("gptq", 128, True, False, False, 256, 6),
    "gptq-v2-asym-g64-actorder-tp3": ("gptq", 64, False, True, True, 320, 3),
    "awq-gemm-g128-tp3": ("awq", 128, False, False, False, 256, 3),
    "awq-gemm-g128-tp6": ("awq", 128, False, False, False, 256, 6),
}


def _quant_config(method, group, sym, v2, act_order) -> dict:
    if method == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True, "version": "gemm",
                "modules_to_not_convert": None}
    return {"quant_method": "gptq", "bits": 4, "group_size": group, "desc_act": act_order, "sym": sym,
            "checkpoint_format": "gptq_v2" if v2 else "gptq", "damp_percent": 0.01, "true_sequential": True}


def _write_packed(path, model, method, group, sym, v2, act_order, seed) -> None:
    """Quantize every decoder linear of `model` into GPTQ / AWQ; everything else fp16, as those checkpoints are."""
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, p in model.state_dict().items():
        module = name.rpartition(".")[0]
        if module.endswith(LINEARS):
            w = p.float()
            if method == "awq":
                packed = fmt.awq_tensors(w, group)
            else:
                perm = torch.randperm(w.shape[1], generator=gen) if act_order else None
                packed = fmt.gptq_tensors(w, group, sym, v2, perm)
            tensors.update({f"{module}.{k}": v.contiguous() for k, v in packed.items()})
        else:
            tensors[name] = p.half().contiguous()
    path.mkdir(parents=True)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.update(dtype="float16", quantization_config=_quant_config(method, group, sym, v2, act_order))
    (path / "config.json").write_text(json.dumps(config, indent=2))


def _dequantize(tensors: dict, method: str, group: int, v2: bool) -> dict[str, torch.Tensor]:
    """Float state dict: spec dequantization of every packed linear, cross-checked with the library's."""
    modules = {k.rpartition(".")[0] for k in tensors if k.endswith(".qweight")}
    assert len(modules) == N_LINEAR
    state = {k: v.float() for k, v in tensors.items() if k.rpartition(".")[0] not in modules}
    library = fmt.compressed_tensors_awq_dequantize(
        {k: v for k, v in tensors.items() if k.rpartition(".")[0] in modules}, group) if method == "awq" else {}
    for module in modules:
        local = {k.rpartition(".")[2]: v for k, v in tensors.items() if k.rpartition(".")[0] == module}
        if method == "awq":
            w = fmt.dequant_awq(local, group)
            assert torch.equal(w.half(), library[module]), f"{module}: compressed-tensors' AWQ unpacking differs"
        else:
            w = fmt.dequant_gptq(local, v2)
            assert torch.equal(w, fmt.gptqmodel_dequantize(local, v2)), f"{module}: gptqmodel's dequantizer differs"
        state[f"{module}.weight"] = w.float()  # fp16 scale × small int: exact in float32
        assert torch.equal(state[f"{module}.weight"].double(), w)
    return state


@pytest.fixture(scope="module", params=sorted(PACKED_CASES))
def packed_case(request, tmp_path_factory):
    method, group, sym, v2, act_order, inter, tp = PACKED_CASES[request.param]
    root = tmp_path_factory.mktemp(request.param)
    src, dst = root / "src", root / "dst"
    _write_packed(src, _tiny_model("llama", inter, seed=5), method, group, sym, v2, act_order, seed=5)
    plan = _pad(src, dst, tp)
    return request.param, src, dst, plan, PACKED_CASES[request.param]


def test_packed_plan_config_and_pad_bytes(packed_case):
    name, src, dst, plan, (method, group, sym, v2, act_order, inter, tp) = packed_case
    assert plan.formats == [method]
    _assert_relabelled_and_padded(dst, tp, inter)
    assert json.loads((dst / "config.json").read_text())["quantization_config"] == \
        json.loads((src / "config.json").read_text())["quantization_config"]
    s, d = _read_tensors(src), _read_tensors(dst)
    assert set(s) == set(d)
    zero_word = 0x77777777 if method == "gptq" and not v2 else 0x88888888  # zero point 8 as stored
    n_padded = 0
    for key, a in s.items():
        b, suffix = d[key], key.rpartition(".")[2]
        assert a.dtype == b.dtype, key
        if suffix == "g_idx":
            _assert_g_idx(key, a, b, group, d[key.replace("g_idx", "scales")])
            continue
        corner = tuple(slice(0, n) for n in a.shape)
        assert torch.equal(b[corner], a), f"{key}: upstream bytes changed"
        if a.shape == b.shape:
            continue
        n_padded += 1
        rest = torch.ones(b.shape, dtype=torch.bool)
        rest[corner] = False
        pad = b[rest]
        if suffix == "qweight":
            assert bool((pad == -0x77777778).all()), f"{key}: padded codes are not 8"  # 0x88888888 as int32
        elif suffix == "qzeros":
            want = zero_word - 2**32 if zero_word >= 2**31 else zero_word
            assert bool((pad == want).all()), f"{key}: padded zero points are not 8"
        elif suffix == "scales":
            assert bool((pad == 1.0).all()), f"{key}: padded scales are not 1.0"
        else:
            raise AssertionError(f"{key}: unexpected padded tensor")
    assert n_padded == 3 * N_LINEAR  # qweight, qzeros and scales of every linear layer


def _assert_g_idx(key, a, b, group, scales_after):
    """Upstream entries unchanged; each new entry (input feature k) points at new group k // g, whose scales are
    finite (the padded rows' groups)."""
    assert torch.equal(b[:a.numel()], a), key
    new = b[a.numel():]
    ks = torch.arange(a.numel(), b.numel())
    assert torch.equal(new.long(), ks // group), key
    if new.numel():
        assert int(new.min()) >= a.numel() // group and int(new.max()) < scales_after.shape[0], key
        assert bool(torch.isfinite(scales_after[new.long()].float()).all()), key


def test_packed_dequantized_weights_and_float64_logits(packed_case):
    name, src, dst, plan, (method, group, sym, v2, act_order, inter, tp) = packed_case
    w_src = _dequantize(_read_tensors(src), method, group, v2)
    w_dst = _dequantize(_read_tensors(dst), method, group, v2)
    n_padded = 0
    for key, w in w_src.items():
        _assert_padded_equal(w, w_dst[key], key)
        n_padded += w.shape != w_dst[key].shape
    assert n_padded == N_LINEAR
    m_src, m_dst = _float_model(src, w_src), _float_model(dst, w_dst)
    assert m_src.__class__.__name__ == "LlamaForCausalLM" and m_dst.__class__.__name__ == "MistralForCausalLM"
    f32, f64 = _compare_logits(m_src, m_dst, _input_ids())
    print(f"{name}: max |Δ| float32 {f32}, float64 {f64}")


# --------------------------------------------------------------------------------------------------
# compressed-tensors on Llama: W4A16 and FP8-block attention + NVFP4 MLP, at TP=3 and TP=6


CT_CASES = {
    "w4a16-tp3": ("w4a16", 3), "w4a16-tp6": ("w4a16", 6),
    "fp8block-nvfp4-tp3": ("fp8block-nvfp4", 3), "fp8block-nvfp4-tp6": ("fp8block-nvfp4", 6),
}


def _ct_groups(kind: str) -> dict:
    if kind == "w4a16":
        return {"group_0": QuantizationScheme(targets=["Linear"], **copy.deepcopy(W4A16))}
    return {"attention": QuantizationScheme(targets=[r"re:.*self_attn\..*"], **copy.deepcopy(FP8_BLOCK)),
            "mlp": QuantizationScheme(targets=[r"re:.*mlp.*"], **copy.deepcopy(NVFP4))}


@pytest.mark.parametrize("case", sorted(CT_CASES))
def test_compressed_tensors_llama_float64_logits(tmp_path, case):
    kind, tp = CT_CASES[case]
    src, dst, ids = tmp_path / "src", tmp_path / "dst", _input_ids()
    _quantize_and_save(_tiny_model("llama", intermediate=256, seed=6), _ct_groups(kind), src, ids)
    _pad(src, dst, tp)
    _assert_relabelled_and_padded(dst, tp, 256)
    m_src, m_dst = _load_decompressed(src), _load_decompressed(dst)
    assert m_dst.__class__.__name__ == "MistralForCausalLM"
    assert _assert_decompressed_weights_padded(m_src, m_dst) == N_LINEAR
    f32, f64 = _compare_logits(m_src, m_dst, ids)
    print(f"{case}: max |Δ| float32 {f32}, float64 {f64}")


# --------------------------------------------------------------------------------------------------
# What cannot be padded exactly, or is not GPTQ/AWQ as hubpad knows it, is refused


def _tiny_packed(tmp_path, **qc_overrides):
    model = _tiny_model("llama", 256, seed=1)
    _write_packed(tmp_path / "src", model, "gptq", 128, True, False, False, seed=1)
    cfg_path = tmp_path / "src" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["quantization_config"].update(qc_overrides)
    cfg_path.write_text(json.dumps(cfg))
    return tmp_path / "src"


@pytest.mark.parametrize("overrides,message", [
    ({"bits": 8}, "4-bit only"),
    ({"checkpoint_format": "marlin"}, "checkpoint_format 'marlin'"),
    ({"dynamic": {"+:.*q_proj.*": {"bits": 8}}}, "dynamic"),
    ({"group_size": 64}, "scales: shape"),  # config and headers disagree
])
def test_gptq_inputs_hubpad_cannot_pad_are_refused(tmp_path, overrides, message):
    with pytest.raises(HubpadError, match=message):
        make_plan(LocalSource(_tiny_packed(tmp_path, **overrides)), 3)


def test_gptq_per_channel_cannot_pad_input_features(tmp_path):
    """group_size -1: one zero point per column covers all input features; rows appended to o_proj/down_proj
    would need that (asymmetric) zero point as their code, so hubpad refuses instead of guessing."""
    model = _tiny_model("llama", 256, seed=2)
    _write_packed(tmp_path / "src", model, "gptq", -1, False, True, False, seed=2)
    with pytest.raises(HubpadError, match="group_size -1"):
        make_plan(LocalSource(tmp_path / "src"), 3)


def test_g_idx_entries_are_appended_as_int32(tmp_path):
    """The appended g_idx bytes are little-endian int32 group ids (what GPTQ writes)."""
    src = _tiny_packed(tmp_path)
    plan = make_plan(LocalSource(src), 3)
    (t,) = [t for t in plan.tensors if t.name == "model.layers.0.mlp.down_proj.g_idx"]
    assert t.op.kind == "append" and t.shape == (384,)
    assert list(struct.unpack("<128i", t.op.data)) == [k // 128 for k in range(256, 384)]
    assert math.prod(t.shape) * 4 == t.nbytes
