"""Padding REAL quantized checkpoints is lossless: quantize tiny transformers models with compressed-tensors,
save them in its compressed on-disk formats, pad them with hubpad at TP=3, decompress both with the library
and compare what comes out.

Cases
  1. RedHatAI/Hy3-NVFP4-FP8 layout on a tiny hy_v3: FP8 block [128,128] attention (`FP8_BLOCK` preset on
     `re:.*self_attn\\..*`) + NVFP4 MLP (`NVFP4` preset on `re:.*mlp.*`); heads 4→6, kv 2→3, intermediate 320→384.
  2. int4 pack-quantized on a tiny qwen3: the `W4A16` preset (symmetric, group 128, intermediate 256→384) and
     `W4A16_ASYM` with group 64 (packed zero points, intermediate 320→384); `weight_shape` must be rewritten.
     Plus: asymmetric zero points with out_features % 8 != 0 (refused, "not a multiple of 8": packed zero
     points that span a padded row cannot be padded to zero), and FP8 block with a partial last block row.
  3. ModelOpt NVFP4: a compressed-tensors NVFP4 checkpoint renamed into ModelOpt's layout (weight,
     weight_scale_2 = 1/weight_global_scale, input_scale = 1/input_global_scale, hf_quant_config.json), padded,
     then dequantized by hand (and cross-checked with compressed-tensors' own ModelOpt converter).

Every case also checks, without trusting hubpad's verify: each original tensor's bytes sit unchanged in the
top-left of its padded tensor, padded code bytes are zero (0x00; int4 0x88 nibbles = offset zero), padded
scale cells are finite and positive; the library's decompressed weights equal the original ones in the
top-left block and are exactly 0.0 elsewhere; and `verify_derivative` passes.

Logits are compared in float64 (bound 1e-12 relative; every case measures max |Δ| = 0.0) and in float32,
where the padded model must stay within 4 × the original model's own float32 noise (its float32-vs-float64
error, ~3e-6 on logits of max ~4), compared with activation fake-quantization off. The float32 max |Δ| is not
0.0: CPU GEMM blocks the reduction dimension differently for K=320 and K=384 (down_proj after intermediate
padding), so the same products are summed in another order. Bounds, reasons and measured figures:
tests/logit_bounds.py.
"""

from __future__ import annotations

import copy
import json
import math
import os
from contextlib import contextmanager

import pytest

from tests.logit_bounds import assert_exact_f64, assert_f32_within_noise

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("compressed_tensors")

from compressed_tensors.compressors import BaseCompressor, ModelCompressor  # noqa: E402
from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor  # noqa: E402
from compressed_tensors.entrypoints.convert.converters.modelopt_nvfp4 import ModelOptNvfp4Converter  # noqa: E402
from compressed_tensors.quantization import (  # noqa: E402
    QuantizationArgs,
    QuantizationConfig,
    QuantizationScheme,
    QuantizationStatus,
    QuantizationStrategy,
    apply_quantization_config,
)
from compressed_tensors.quantization.quant_scheme import FP8_BLOCK, INT8_W8A8, NVFP4, W4A16, W4A16_ASYM  # noqa: E402
from compressed_tensors.quantization.utils.helpers import (  # noqa: E402
    calculate_qparams,
    generate_gparam,
    maybe_pad_tensor_for_block_quant,
)
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from hubpad.plan.planner import make_plan
from hubpad.publish.local import LocalPublisher
from hubpad.run.mirror import run_mirror
from hubpad.run.verify import verify_derivative
from hubpad.source.local import LocalSource

TP = 3
VOCAB = 512
CODE_SUFFIXES = {"weight", "weight_packed", "weight_zero_point"}  # padded cells must dequantize to 0
SCALE_SUFFIXES = {"weight_scale", "weight_scale_inv"}  # padded cells must be finite and positive
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


# --------------------------------------------------------------------------------------------------
# Building and quantizing tiny models with the real library


def _tiny_model(model_type: str, intermediate: int, seed: int):
    """A 2-layer bf16 model, hidden 256, 4 heads / 2 kv heads of head_dim 128, random O(1)-activation weights."""
    torch.manual_seed(seed)
    kw = dict(vocab_size=VOCAB, hidden_size=256, intermediate_size=intermediate, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=128, max_position_embeddings=64,
              rms_norm_eps=1e-5, tie_word_embeddings=False)
    if model_type == "hy_v3":
        kw["mlp_layer_types"] = ["dense", "dense"]  # dense MLPs: compressed-tensors quantizes nn.Linear only
    cfg = transformers.CONFIG_MAPPING[model_type](**kw)
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(1.0, 0.2)
            elif p.ndim == 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]) if "embed" not in name else 1.0)
    return model.to(torch.bfloat16)


def _input_ids(batch: int = 2, seq: int = 16) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(1234))


def _minmax(w: torch.Tensor, args: QuantizationArgs) -> tuple[torch.Tensor, torch.Tensor]:
    """Min/max of a weight per quantization cell (what llm-compressor's minmax observer computes)."""
    if args.strategy == QuantizationStrategy.BLOCK:
        bn, bk = args.block_structure
        w = maybe_pad_tensor_for_block_quant(w, (bn, bk))  # partial blocks: zeros change no min/max (0 is in range)
        v = w.reshape(w.shape[0] // bn, bn, w.shape[1] // bk, bk)
        return v.amin(dim=(1, 3)), v.amax(dim=(1, 3))
    if args.strategy in (QuantizationStrategy.GROUP, QuantizationStrategy.TENSOR_GROUP):
        v = w.reshape(w.shape[0], -1, args.group_size)
        return v.amin(-1), v.amax(-1)
    if args.strategy == QuantizationStrategy.CHANNEL:
        return w.amin(1, keepdim=True), w.amax(1, keepdim=True)
    if args.strategy == QuantizationStrategy.TENSOR:
        return w.amin().reshape(1), w.amax().reshape(1)
    raise AssertionError(f"strategy {args.strategy} not used here")


def _quantize_and_save(model, config_groups: dict, path, ids, n_expected: int = 14) -> None:
    """apply_quantization_config, min/max calibration, ModelCompressor.compress_model, save: llm-compressor's steps."""
    amax: dict[str, float] = {}  # static activation amax per Linear (the NVFP4 input global scale)
    hooks = [m.register_forward_pre_hook(
        lambda mod, args, n=n: amax.__setitem__(n, max(amax.get(n, 0.0), args[0].abs().max().float().item())))
        for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        model(ids)
    for h in hooks:
        h.remove()

    apply_quantization_config(model, QuantizationConfig(config_groups=config_groups, ignore=["lm_head"]),
                              show_progress=False)
    n_quantized = 0
    with torch.no_grad():
        for name, m in model.named_modules():
            scheme = getattr(m, "quantization_scheme", None)
            if scheme is None:
                continue
            n_quantized += 1
            w, args = m.weight.float(), scheme.weights
            global_scale = None
            if args.strategy == QuantizationStrategy.TENSOR_GROUP:
                global_scale = generate_gparam(w.amin(), w.amax())
                m.weight_global_scale.copy_(global_scale)
            scale, zp = calculate_qparams(*_minmax(w, args), args, global_scale=global_scale)
            m.weight_scale.copy_(scale.to(m.weight_scale.dtype))
            if hasattr(m, "weight_zero_point"):
                m.weight_zero_point.copy_(zp.to(m.weight_zero_point.dtype))
            if hasattr(m, "input_global_scale"):
                a = torch.tensor([amax[name]])
                m.input_global_scale.copy_(generate_gparam(-a, a))
    assert n_quantized == n_expected  # default: 2 layers x (q, k, v, o, gate, up, down); lm_head ignored

    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    model.save_pretrained(path)
    compressor.update_config(path)


def _pad(src, dst):
    plan = make_plan(LocalSource(src), TP)
    run_mirror(plan, LocalPublisher(dst))
    report = verify_derivative(LocalSource(src), LocalSource(dst))
    assert report["ok"] and report["padded"] > 0
    return plan


def _dims(plan) -> dict[str, tuple[int, int]]:
    return {d.name: (d.before, d.after) for d in plan.dims}


def _load_decompressed(path, n_expected: int = 14):
    """Load a compressed-tensors checkpoint through transformers, decompress with ModelCompressor, cast to f32."""
    model, info = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                                    output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")), info
    model.eval()
    model.hf_quantizer.compressor.decompress_model(model)
    # compressed-tensors dequantizes NVFP4 to bf16 whatever dtype the model was loaded in (a f32 forward then
    # fails with "expected m1 and m2 to have the same dtype"); PreTrainedModel.float() refuses quantized models.
    torch.nn.Module.float(model)
    quantized = [m for m in model.modules() if getattr(m, "quantization_scheme", None) is not None]
    assert len(quantized) == n_expected
    assert all(m.quantization_status == QuantizationStatus.DECOMPRESSED for m in quantized)
    return model


def _logits(model, ids, dtype) -> torch.Tensor:
    torch.nn.Module.to(model, dtype)  # PreTrainedModel.to(dtype) refuses quantized models
    with torch.no_grad():
        return model(ids).logits


def _compare_logits(src_model, dst_model, ids) -> tuple[float, float]:
    """max |Δ| of the logits in float32 and float64; the bounds and why they are what they are: tests/logit_bounds.py.

    float64 runs the forward as loaded (compressed-tensors' activation fake-quantization included) and must be
    exact. float32 runs it with activation fake-quantization off, the same weights and GEMM shapes, so the only
    difference left is reduction order, bounded by the original model's own measured float32 noise."""
    what = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    delta64 = assert_exact_f64(_logits(src_model, ids, torch.float64), _logits(dst_model, ids, torch.float64), what,
                               min_scale=1.0)
    with _activation_qdq_off(src_model, dst_model):
        ref32, got32 = _logits(src_model, ids, torch.float32), _logits(dst_model, ids, torch.float32)
        ref64, got64 = _logits(src_model, ids, torch.float64), _logits(dst_model, ids, torch.float64)
        assert_exact_f64(ref64, got64, f"{what} (activation fake-quant off)", min_scale=1.0)
        delta32 = assert_f32_within_noise(ref32, got32, ref64, what)
    return delta32, delta64


@contextmanager
def _activation_qdq_off(*models):
    """compressed-tensors' own switch: quantization_enabled=False skips the module's QDQ (weights are decompressed)."""
    mods = [m for model in models for m in model.modules() if getattr(m, "quantization_scheme", None) is not None]
    saved = [getattr(m, "quantization_enabled", True) for m in mods]
    for m in mods:
        m.quantization_enabled = False
    try:
        yield
    finally:
        for m, was in zip(mods, saved):
            m.quantization_enabled = was


def _decompress_model_free(path, n_expected: int = 14):
    """compressed-tensors' per-module decompressor on the checkpoint's tensors, loaded into a float model.

    (transformers' from_pretrained cannot load asymmetric pack-quantized checkpoints: compressed-tensors'
    meta-device compress leaves weight_zero_point unpacked ([out, groups]) while the file holds it packed
    ([out/8, groups]), so the load fails with a size mismatch even for the unpadded original.)"""
    qc = QuantizationConfig.model_validate(json.loads((path / "config.json").read_text())["quantization_config"])
    (scheme,) = qc.config_groups.values()
    compressor = BaseCompressor.get_value_from_registry(scheme.format)
    tensors = _read_tensors(path)
    modules = {k.rpartition(".")[0] for k in tensors if k.endswith(".weight_packed")}
    assert len(modules) == n_expected
    state = {k: v.float() for k, v in tensors.items() if k.rpartition(".")[0] not in modules}
    for module in modules:
        local = {k.rpartition(".")[2]: v for k, v in tensors.items() if k.rpartition(".")[0] == module}
        state[f"{module}.weight"] = compressor.decompress(local, scheme)["weight"].float()
    return _float_model(path, state)


def _float_model(config_dir, state: dict[str, torch.Tensor]):
    cfg = transformers.AutoConfig.from_pretrained(config_dir)
    model = transformers.AutoModelForCausalLM.from_config(cfg).float().eval()
    model.load_state_dict(state, strict=True)
    return model


def _assert_float_weights_padded(src_model, dst_model) -> int:
    dst_params = dict(dst_model.named_parameters())
    n_padded = 0
    for name, p in src_model.named_parameters():
        _assert_padded_equal(p.detach(), dst_params[name].detach(), name)
        n_padded += p.shape != dst_params[name].shape
    return n_padded


def _assert_padded_equal(orig: torch.Tensor, padded: torch.Tensor, what: str) -> None:
    """`padded` holds `orig` exactly in its top-left block and exactly 0.0 everywhere else."""
    assert padded.ndim == orig.ndim and all(p >= o for p, o in zip(padded.shape, orig.shape)), what
    corner = tuple(slice(0, n) for n in orig.shape)
    assert torch.equal(padded[corner], orig), f"{what}: original values changed"
    rest = torch.ones(padded.shape, dtype=torch.bool)
    rest[corner] = False
    nonzero = padded[rest][padded[rest] != 0]
    assert nonzero.numel() == 0, f"{what}: {nonzero.numel()} padded values are not 0.0, e.g. {nonzero[:4].tolist()}"


def _assert_decompressed_weights_padded(src_model, dst_model) -> int:
    """compressed-tensors' decompressed weights: padded model == original in the top-left, 0.0 elsewhere."""
    dst_modules = dict(dst_model.named_modules())
    n_padded = 0
    for name, m in src_model.named_modules():
        if getattr(m, "quantization_scheme", None) is None:
            continue
        w_src, w_dst = m.weight.detach(), dst_modules[name].weight.detach()
        _assert_padded_equal(w_src, w_dst, f"{name}.weight (decompressed)")
        n_padded += w_src.shape != w_dst.shape
    return n_padded


# --------------------------------------------------------------------------------------------------
# Byte-level checks that do not use hubpad


def _read_tensors(path) -> dict[str, torch.Tensor]:
    out = {}
    for f in sorted(path.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as h:
            for k in h.keys():
                assert k not in out
                out[k] = h.get_tensor(k)
    return out


def _flat_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)


def _assert_bytes_preserved(src_dir, dst_dir, scale: float | None = None) -> dict[str, tuple[tuple, tuple]]:
    """Every upstream tensor's bytes are unchanged in the top-left of its DST tensor; pads are zero codes
    (int4: 0x88) or finite positive scales (exactly `scale` when given). Returns {name: (before, after)} of the
    padded tensors."""
    src, dst = _read_tensors(src_dir), _read_tensors(dst_dir)
    assert set(src) == set(dst)
    changed = {}
    for name, s in src.items():
        d = dst[name]
        suffix = name.rpartition(".")[2]
        assert d.dtype == s.dtype, name
        if suffix == "weight_shape":  # int4's original (out, in): rewritten, checked by the caller
            continue
        if d.shape == s.shape:
            assert torch.equal(_flat_bytes(d), _flat_bytes(s)), f"{name}: bytes changed"
            continue
        changed[name] = (tuple(s.shape), tuple(d.shape))
        assert d.ndim == s.ndim and all(a >= b for a, b in zip(d.shape, s.shape)), name
        corner = tuple(slice(0, n) for n in s.shape)
        assert torch.equal(_flat_bytes(d[corner]), _flat_bytes(s)), f"{name}: original bytes moved or changed"
        rest = torch.ones(d.shape, dtype=torch.bool)
        rest[corner] = False
        pad = d[rest]
        if suffix in CODE_SUFFIXES:
            want = 0x88 if d.dtype == torch.int32 else 0x00  # int4 stores q+8: 0x8 nibbles are integer 0
            ok = bool((pad.view(torch.uint8) == want).all())
            assert ok, f"{name}: padded code bytes are not {want:#04x}"
        elif suffix in SCALE_SUFFIXES:
            v = pad.float()
            ok = bool(torch.isfinite(v).all() and (v > 0).all())
            assert ok, f"{name}: padded scale cell not finite positive"
            assert scale is None or bool((v == scale).all()), f"{name}: new scale cells are not {scale}: {v.unique()[:4]}"
        else:
            raise AssertionError(f"{name}: unexpected padded tensor with suffix {suffix!r}")
    return changed


# --------------------------------------------------------------------------------------------------
# Case 1: RedHatAI/Hy3-NVFP4-FP8 layout (FP8 block attention + NVFP4 MLP) on a tiny hy_v3


@pytest.fixture(scope="module")
def hy3_mixed(tmp_path_factory):
    root = tmp_path_factory.mktemp("hy3-nvfp4-fp8")
    src, dst = root / "src", root / "dst"
    ids = _input_ids()
    groups = {"attention": QuantizationScheme(targets=[r"re:.*self_attn\..*"], **copy.deepcopy(FP8_BLOCK)),
              "experts": QuantizationScheme(targets=[r"re:.*mlp.*"], **copy.deepcopy(NVFP4))}
    _quantize_and_save(_tiny_model("hy_v3", intermediate=320, seed=0), groups, src, ids)
    plan = _pad(src, dst)
    return src, dst, plan, ids


def test_hy3_nvfp4_fp8_layout_and_plan(hy3_mixed):
    src, dst, plan, _ = hy3_mixed
    qc = json.loads((src / "config.json").read_text())["quantization_config"]
    formats = {g["format"] for g in qc["config_groups"].values()}
    assert qc["format"] == "mixed-precision" and formats == {"float-quantized", "nvfp4-pack-quantized"}
    assert plan.adapter.name == "hy_v3" and plan.formats == ["fp8", "nvfp4"]
    dims = _dims(plan)
    assert dims["attention heads"] == (4, 6)
    assert dims["kv heads"] == (2, 3)
    assert dims["head dim"] == (128, 128)
    assert dims["dense intermediate"] == (320, 384)  # per rank 128: NVFP4/Marlin K%128, N%64
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]) == (6, 3, 384)
    assert cfg["quantization_config"] == qc


def test_hy3_nvfp4_fp8_bytes(hy3_mixed):
    src, dst, _, _ = hy3_mixed
    changed = _assert_bytes_preserved(src, dst)
    p = "model.layers.0."
    assert changed[p + "self_attn.q_proj.weight"] == ((512, 256), (768, 256))  # FP8
    assert changed[p + "self_attn.q_proj.weight_scale"] == ((4, 2), (6, 2))  # bf16 block scales
    assert changed[p + "self_attn.k_proj.weight"] == ((256, 256), (384, 256))
    assert changed[p + "self_attn.k_proj.weight_scale"] == ((2, 2), (3, 2))
    assert changed[p + "self_attn.o_proj.weight"] == ((256, 512), (256, 768))
    assert changed[p + "self_attn.o_proj.weight_scale"] == ((2, 4), (2, 6))
    assert changed[p + "mlp.gate_proj.weight_packed"] == ((320, 128), (384, 128))  # NVFP4, 2 codes a byte
    assert changed[p + "mlp.gate_proj.weight_scale"] == ((320, 16), (384, 16))  # fp8 per-16 scales
    assert changed[p + "mlp.down_proj.weight_packed"] == ((256, 160), (256, 192))
    assert changed[p + "mlp.down_proj.weight_scale"] == ((256, 20), (256, 24))
    assert len(changed) == 2 * 14  # weight (+packed) and scale of every quantized linear; global scales copied


def test_hy3_nvfp4_fp8_decompressed_logits(hy3_mixed):
    src, dst, _, ids = hy3_mixed
    m_src, m_dst = _load_decompressed(src), _load_decompressed(dst)
    assert m_dst.config.num_attention_heads == 6 and m_dst.model.layers[0].mlp.down_proj.weight.shape == (256, 384)
    assert _assert_decompressed_weights_padded(m_src, m_dst) == 14
    _compare_logits(m_src, m_dst, ids)
    # measured here: f32 max |Δ| = 3.10e-6 vs the original's own f32 noise 3.47e-6; f64 max |Δ| = 0.0


# --------------------------------------------------------------------------------------------------
# Case 2: int4 W4A16 (pack-quantized), symmetric group 128 and asymmetric group 64


def _w4a16_asym_group64() -> dict:
    scheme = copy.deepcopy(W4A16_ASYM)
    scheme["weights"].group_size = 64
    return scheme


INT4_CASES = {
    # name: (scheme kwargs, intermediate before, after, group)
    "w4a16-sym-g128": (W4A16, 256, 384, 128),
    "w4a16-asym-g64": (_w4a16_asym_group64(), 320, 384, 64),
}


@pytest.fixture(scope="module", params=sorted(INT4_CASES))
def int4_case(request, tmp_path_factory):
    scheme, inter, inter2, group = INT4_CASES[request.param]
    root = tmp_path_factory.mktemp(request.param)
    src, dst = root / "src", root / "dst"
    ids = _input_ids()
    _quantize_and_save(_tiny_model("qwen3", intermediate=inter, seed=1),
                       {"group_0": QuantizationScheme(targets=["Linear"], **copy.deepcopy(scheme))}, src, ids)
    plan = _pad(src, dst)
    return request.param, src, dst, plan, ids, (inter, inter2, group, not scheme["weights"].symmetric)


def test_int4_plan_bytes_and_weight_shape(int4_case):
    name, src, dst, plan, _, (inter, inter2, group, asym) = int4_case
    qc = json.loads((src / "config.json").read_text())["quantization_config"]
    (g,) = qc["config_groups"].values()
    assert g["format"] == "pack-quantized" and g["weights"]["group_size"] == group
    assert g["weights"]["symmetric"] is (not asym)
    assert plan.adapter.name == "qwen3" and plan.formats == ["int4"]
    dims = _dims(plan)
    assert (dims["attention heads"], dims["kv heads"], dims["dense intermediate"]) == ((4, 6), (2, 3), (inter, inter2))

    changed = _assert_bytes_preserved(src, dst)
    p = "model.layers.1."
    assert changed[p + "self_attn.q_proj.weight_packed"] == ((512, 32), (768, 32))  # int32, 8 codes a word
    assert changed[p + "self_attn.q_proj.weight_scale"] == ((512, 256 // group), (768, 256 // group))
    assert changed[p + "self_attn.o_proj.weight_packed"] == ((256, 64), (256, 96))
    assert changed[p + "self_attn.o_proj.weight_scale"] == ((256, 512 // group), (256, 768 // group))
    assert changed[p + "mlp.down_proj.weight_packed"] == ((256, inter // 8), (256, inter2 // 8))
    assert changed[p + "mlp.down_proj.weight_scale"] == ((256, inter // group), (256, inter2 // group))
    if asym:  # zero points packed 8 per int32 along the OUTPUT dim
        assert changed[p + "self_attn.k_proj.weight_zero_point"] == ((32, 256 // group), (48, 256 // group))
        assert changed[p + "mlp.gate_proj.weight_zero_point"] == ((inter // 8, 256 // group),
                                                                  (inter2 // 8, 256 // group))
        assert changed[p + "mlp.down_proj.weight_zero_point"] == ((32, inter // group), (32, inter2 // group))
    else:
        assert not any(k.endswith("weight_zero_point") for k in _read_tensors(src))

    # weight_shape holds the (out, in) the library unpacks to: it must be the padded shape in DST.
    s, d = _read_tensors(src), _read_tensors(dst)
    want = {"q_proj": (512, 256, 768, 256), "k_proj": (256, 256, 384, 256), "v_proj": (256, 256, 384, 256),
            "o_proj": (256, 512, 256, 768), "gate_proj": (inter, 256, inter2, 256),
            "up_proj": (inter, 256, inter2, 256), "down_proj": (256, inter, 256, inter2)}
    n = 0
    for key, t in s.items():
        if key.endswith(".weight_shape"):
            o1, i1, o2, i2 = want[key.split(".")[-2]]
            assert t.dtype == torch.int64 and t.tolist() == [o1, i1], key
            assert d[key].dtype == torch.int64 and d[key].tolist() == [o2, i2], key
            n += 1
    assert n == 14


def test_int4_decompressed_logits_model_free(int4_case):
    """compressed-tensors' PackedQuantizationCompressor.decompress on both checkpoints' tensors."""
    name, src, dst, _, ids, _ = int4_case
    m_src, m_dst = _decompress_model_free(src), _decompress_model_free(dst)
    assert m_dst.config.num_attention_heads == 6
    assert _assert_float_weights_padded(m_src, m_dst) == 14
    _compare_logits(m_src, m_dst, ids)
    # measured here: f32 max |Δ| = 2.86e-6 (sym; noise 2.86e-6) and 2.62e-6 (asym; noise 3.15e-6); f64 max |Δ| = 0.0


def test_int4_decompressed_logits_from_pretrained(int4_case):
    """transformers' compressed-tensors integration (symmetric only: see _decompress_model_free)."""
    name, src, dst, _, ids, (_, _, _, asym) = int4_case
    if asym:
        pytest.skip("transformers cannot load asymmetric pack-quantized checkpoints (compressed-tensors 0.20.1)")
    m_src, m_dst = _load_decompressed(src), _load_decompressed(dst)
    assert _assert_decompressed_weights_padded(m_src, m_dst) == 14
    _compare_logits(m_src, m_dst, ids)
    # measured here: f32 max |Δ| = 2.86e-6 vs the original's own f32 noise 3.20e-6; f64 max |Δ| = 0.0


def test_int4_asym_zero_point_rows_not_multiple_of_8_is_refused(tmp_path):
    """Asymmetric int4 gate/up with 100 output rows (down_proj left BF16, so 100 is a legal intermediate).

    Zero points are packed 8 rows per int32 along the output dim; with out % 8 != 0 compressed-tensors fills
    the last word's unused nibbles with 0x0 (zero point -8), so rows appended there would dequantize to 8.0,
    not 0. hubpad refuses this layout with a clear error instead of publishing a pad that is not zero.
    """
    from hubpad.errors import HubpadError

    src, dst = tmp_path / "src", tmp_path / "dst"
    ids = _input_ids()
    groups = {"group_0": QuantizationScheme(targets=[r"re:.*mlp\.(gate|up)_proj$"], **_w4a16_asym_group64())}
    _quantize_and_save(_tiny_model("qwen3", intermediate=100, seed=3), groups, src, ids, n_expected=4)
    with pytest.raises(HubpadError, match="not a multiple of 8"):
        _pad(src, dst)
    assert not dst.exists()


def test_int8_w8a8_is_refused_with_the_reason(tmp_path):
    """compressed-tensors int8 W8A8 (llm-compressor's INT8_W8A8 preset) is not a format hubpad knows: one error
    naming the tensor and its dtype, nothing written."""
    from hubpad.errors import HubpadError

    src, dst = tmp_path / "src", tmp_path / "dst"
    ids = _input_ids()
    groups = {"group_0": QuantizationScheme(targets=["Linear"], **copy.deepcopy(INT8_W8A8))}
    _quantize_and_save(_tiny_model("qwen3", intermediate=256, seed=3), groups, src, ids)
    with pytest.raises(HubpadError, match=r"tensor model\.layers\.0\..*\.weight: dtype I8 is not a known weight "
                                          r"format"):
        _pad(src, dst)
    assert not dst.exists()


def test_fp8_block_partial_last_block(tmp_path):
    """FP8 block [128,128] on attention and gate/up with intermediate 320 = 2.5 row blocks (down_proj BF16:
    compressed-tensors' dynamic group-128 activations cannot run K=320). Padded rows 320..383 share the
    upstream's last, partial scale row, so the block-scale tensor is copied, not grown."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    ids = _input_ids()
    groups = {"group_0": QuantizationScheme(targets=[r"re:.*(self_attn\..*|mlp\.(gate|up)_proj)$"],
                                            **copy.deepcopy(FP8_BLOCK))}
    _quantize_and_save(_tiny_model("qwen3", intermediate=320, seed=4), groups, src, ids, n_expected=12)
    plan = _pad(src, dst)
    assert _dims(plan)["dense intermediate"] == (320, 384)
    changed = _assert_bytes_preserved(src, dst)
    p = "model.layers.1.mlp."
    assert changed[p + "gate_proj.weight"] == ((320, 256), (384, 256))
    assert p + "gate_proj.weight_scale" not in changed  # [3, 2] before and after
    assert changed[p + "down_proj.weight"] == ((256, 320), (256, 384))  # BF16, zero columns
    m_src, m_dst = _load_decompressed(src, n_expected=12), _load_decompressed(dst, n_expected=12)
    assert _assert_decompressed_weights_padded(m_src, m_dst) == 12
    _compare_logits(m_src, m_dst, ids)
    # measured here: f32 max |Δ| = 3.10e-6 vs the original's own f32 noise 3.21e-6 (with activation fake-quant
    # on, one FP8 activation rounding flip makes it 2.88e-5 = 6.4e-6 relative: see tests/logit_bounds.py); f64 0.0


# --------------------------------------------------------------------------------------------------
# Case 3: ModelOpt-layout NVFP4, dequantized by hand


MODELOPT_HF_QUANT = {"producer": {"name": "modelopt", "version": "0.41.0"},
                     "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                                      "exclude_modules": ["lm_head"]}}


def _to_modelopt(ct_dir, out_dir) -> None:
    """Rename a compressed-tensors NVFP4 checkpoint into ModelOpt's layout (scalar f32 multipliers)."""
    tensors = _read_tensors(ct_dir)
    out = {}
    for name, t in tensors.items():
        module, _, suffix = name.rpartition(".")
        if suffix == "weight_packed":
            out[f"{module}.weight"] = t
        elif suffix == "weight_global_scale":
            out[f"{module}.weight_scale_2"] = (1.0 / t).reshape(())
        elif suffix == "input_global_scale":
            out[f"{module}.input_scale"] = (1.0 / t).reshape(())
        else:
            out[name] = t
    out_dir.mkdir()
    save_file(out, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((ct_dir / "config.json").read_text())
    del config["quantization_config"]
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    (out_dir / "hf_quant_config.json").write_text(json.dumps(MODELOPT_HF_QUANT, indent=2))


def _modelopt_dequant(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """W = E2M1(nibble) * weight_scale(fp8) * weight_scale_2, even column = low nibble; other tensors as f32."""
    out = {}
    for name, t in tensors.items():
        module, _, suffix = name.rpartition(".")
        if suffix in ("weight_scale", "weight_scale_2", "input_scale"):
            continue
        if suffix == "weight" and t.dtype == torch.uint8:
            rows, half = t.shape
            nib = torch.stack((t & 0x0F, t >> 4), dim=-1).reshape(rows, 2 * half).long()
            scale = tensors[f"{module}.weight_scale"].float().repeat_interleave(16, dim=1)
            out[name] = E2M1[nib] * scale * tensors[f"{module}.weight_scale_2"].float()
        else:
            out[name] = t.float()
    return out


def _ct_dequant_via_converter(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """compressed-tensors' own path: ModelOpt → CT NVFP4 converter, then the NVFP4 decompressor."""
    converter = ModelOptNvfp4Converter(ignore=["lm_head"], targets=[r"re:.*_proj$"])
    ct = converter.process(dict(tensors))
    scheme = QuantizationScheme(targets=["Linear"], **copy.deepcopy(NVFP4))
    out = {}
    for name in ct:
        module, _, suffix = name.rpartition(".")
        if suffix == "weight_packed":
            local = {k: ct[f"{module}.{k}"] for k in ("weight_packed", "weight_scale", "weight_global_scale")}
            out[f"{module}.weight"] = NVFP4PackedCompressor.decompress(local, scheme)["weight"].float()
    return out


@pytest.fixture(scope="module")
def modelopt_nvfp4(tmp_path_factory):
    root = tmp_path_factory.mktemp("modelopt-nvfp4")
    ct_dir, src, dst = root / "ct", root / "src", root / "dst"
    ids = _input_ids()
    _quantize_and_save(_tiny_model("qwen3", intermediate=320, seed=2),
                       {"group_0": QuantizationScheme(targets=["Linear"], **copy.deepcopy(NVFP4))}, ct_dir, ids)
    _to_modelopt(ct_dir, src)
    plan = _pad(src, dst)
    return src, dst, plan, ids


def test_modelopt_nvfp4_plan_and_bytes(modelopt_nvfp4):
    src, dst, plan, _ = modelopt_nvfp4
    assert plan.quant.method == "modelopt" and plan.formats == ["nvfp4"]
    dims = _dims(plan)
    assert (dims["attention heads"], dims["kv heads"], dims["dense intermediate"]) == ((4, 6), (2, 3), (320, 384))
    assert json.loads((dst / "hf_quant_config.json").read_text()) == MODELOPT_HF_QUANT
    assert "quantization_config" not in json.loads((dst / "config.json").read_text())
    changed = _assert_bytes_preserved(src, dst)
    p = "model.layers.0."
    assert changed[p + "self_attn.v_proj.weight"] == ((256, 128), (384, 128))
    assert changed[p + "self_attn.v_proj.weight_scale"] == ((256, 16), (384, 16))
    assert changed[p + "self_attn.o_proj.weight"] == ((256, 256), (256, 384))
    assert changed[p + "mlp.down_proj.weight_scale"] == ((256, 20), (256, 24))
    assert len(changed) == 2 * 14
    d = _read_tensors(dst)
    assert d[p + "mlp.up_proj.weight_scale_2"].shape == () and d[p + "mlp.up_proj.input_scale"].shape == ()


def test_modelopt_nvfp4_dequantized_weights_and_logits(modelopt_nvfp4):
    src, dst, _, ids = modelopt_nvfp4
    raw_src, raw_dst = _read_tensors(src), _read_tensors(dst)
    w_src, w_dst = _modelopt_dequant(raw_src), _modelopt_dequant(raw_dst)
    assert set(w_src) == set(w_dst)
    n_padded = 0
    for name, w in w_src.items():
        _assert_padded_equal(w, w_dst[name], name)
        n_padded += w.shape != w_dst[name].shape
    assert n_padded == 14

    # Cross-check the hand dequantization against compressed-tensors' own converter + decompressor.
    ct_src, ct_dst = _ct_dequant_via_converter(raw_src), _ct_dequant_via_converter(raw_dst)
    assert len(ct_src) == len(ct_dst) == 14
    for name, w in ct_src.items():
        _assert_padded_equal(w, ct_dst[name], f"{name} (compressed-tensors)")
        assert torch.allclose(w, w_src[name], rtol=1e-2, atol=0), name  # CT dequantizes in bf16

    m_src, m_dst = _float_model(src, w_src), _float_model(dst, w_dst)
    assert m_dst.config.num_attention_heads == 6 and m_dst.config.intermediate_size == 384
    _compare_logits(m_src, m_dst, ids)
    # measured here: f32 max |Δ| = 2.86e-6 vs the original's own f32 noise 3.69e-6; f64 max |Δ| = 0.0
