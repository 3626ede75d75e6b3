"""FP8 linears with a per-tensor, a per-channel and a 128x128 block scale pad losslessly, end to end.

A tiny Llama (hidden 256, 2 layers, 4 heads / 2 kv heads of head_dim 128, vocab 512) is quantized, padded with
hubpad and both checkpoints are dequantized and run:

  1. compressed-tensors `FP8` preset (static per-tensor weight scale, static per-tensor input scale calibrated
     from the activation amax), quantized with the real library (`float-quantized` format);
  2. compressed-tensors `FP8_DYNAMIC` preset (per-channel weight scale [out, 1], dynamic per-token activations);
  3. HF `quant_method: "fp8"` (DeepSeek-V3 / Qwen3-FP8 layout): e4m3 weights with a float32 `weight_scale_inv`
     of shape [ceil(out/128), ceil(in/128)], written here from the spec with safetensors (lm_head, embeddings and
     norms bf16), and dequantized model-free by the spec (cross-checked with transformers' own Fp8Dequantize
     wherever that handles the shape: it derives the block from the scale grid, so not partial last blocks).

Each at TP=3 and TP=6 (case 3 also with intermediate 320: a partial last 128-block, whose scale row the padded
rows 320..383 share at TP=3). Per case: hubpad's verify reports ok; heads 4 → 6, kv heads 2 → 3 and the
intermediate padded to whole 128-wide tiles per rank (the derivative relabelled MistralForCausalLM, 256 % 6 != 0);
quantization_config copied; at the byte level every upstream tensor sits unchanged in the top-left of its padded
tensor, every padded FP8 code is 0x00, every new scale cell is exactly 1.0 in the scale's dtype, per-tensor weight
and input scales are copied unchanged, and the set of tensors that grow (and their shapes) is exactly the one
the dims imply; the dequantized padded weights equal the original ones in the top-left and are exactly 0.0
elsewhere; float64 logits are identical (bound 1e-12 relative; compressed-tensors' activation fake-quant on) and
float32 logits stay within 4 x the original's own float32 noise (tests/logit_bounds.py).

Measured (2 x86_64 vCPUs; Python 3.11, torch 2.13.0+cpu, transformers 5.24.0, compressed-tensors 0.20.1), max |Δ|
of the logits, padded vs original (float32: activation fake-quant off, next to the original's own float32 noise):

    case                             max|logit|  float64  float32  f32 noise (orig)  ratio
    ct-fp8-tensor-tp3 (MLP 320→384)     3.91       0.0    3.81e-6      2.69e-6        1.42
    ct-fp8-tensor-tp6 (MLP 256→768)     4.48       0.0    2.86e-6      2.74e-6        1.04
    ct-fp8-channel-tp3 (MLP 320→384)    3.96       0.0    2.62e-6      2.75e-6        0.95
    ct-fp8-channel-tp6 (MLP 256→768)    4.42       0.0    3.10e-6      4.03e-6        0.77
    hf-fp8-block-inter256-tp3           4.56       0.0    2.86e-6      2.65e-6        1.08
    hf-fp8-block-inter320-tp3           4.29       0.0    2.62e-6      2.93e-6        0.89
    hf-fp8-block-inter256-tp6           4.56       0.0    2.86e-6      2.65e-6        1.08

float64 is exact in every case; float32 differs only by reduction order (padded GEMM shapes), within the 4 x bound.
The whole file runs in ~13 s on 2 idle cores (~27 s while another job shared them).
"""

from __future__ import annotations

import copy
import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("compressed_tensors")

from compressed_tensors.compressors import ModelCompressor  # noqa: E402
from compressed_tensors.quantization import (  # noqa: E402
    QuantizationConfig,
    QuantizationScheme,
    QuantizationStrategy,
    apply_quantization_config,
)
from compressed_tensors.quantization.quant_scheme import FP8, FP8_DYNAMIC  # noqa: E402
from compressed_tensors.quantization.utils.helpers import calculate_qparams  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from tests.test_llama_quantized import LINEARS, N_LINEAR, _assert_relabelled_and_padded, _pad  # noqa: E402
from tests.test_quantized import (  # noqa: E402
    _assert_decompressed_weights_padded,
    _assert_bytes_preserved,
    _assert_padded_equal,
    _compare_logits,
    _float_model,
    _input_ids,
    _load_decompressed,
    _minmax,
    _read_tensors,
    _tiny_model,
)

BLOCK = 128
FP8_MAX = torch.finfo(torch.float8_e4m3fn).max  # 448
HF_FP8_QC = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [BLOCK, BLOCK]}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _padded_inter(inter: int, tp: int) -> int:
    return _cdiv(inter, BLOCK * tp) * BLOCK * tp


def _linear_shapes(inter: int, tp: int) -> dict[str, tuple[tuple[int, int], tuple[int, int]]]:
    """(out, in) of every decoder linear before and after padding: heads 4 → 6 and kv heads 2 → 3 of 128."""
    i2 = _padded_inter(inter, tp)
    return {"self_attn.q_proj": ((512, 256), (768, 256)), "self_attn.k_proj": ((256, 256), (384, 256)),
            "self_attn.v_proj": ((256, 256), (384, 256)), "self_attn.o_proj": ((256, 512), (256, 768)),
            "mlp.gate_proj": ((inter, 256), (i2, 256)), "mlp.up_proj": ((inter, 256), (i2, 256)),
            "mlp.down_proj": ((256, inter), (256, i2))}


def _expected_growth(inter: int, tp: int, scale: str) -> dict[str, tuple[tuple, tuple]]:
    """{tensor: (shape before, shape after)} of exactly the tensors padding must grow."""
    out = {}
    for layer in range(2):
        for linear, ((o1, i1), (o2, i2)) in _linear_shapes(inter, tp).items():
            p = f"model.layers.{layer}.{linear}."
            out[p + "weight"] = ((o1, i1), (o2, i2))
            if scale == "channel" and o2 != o1:
                out[p + "weight_scale"] = ((o1, 1), (o2, 1))
            before, after = (_cdiv(o1, BLOCK), _cdiv(i1, BLOCK)), (_cdiv(o2, BLOCK), _cdiv(i2, BLOCK))
            if scale == "block" and before != after:
                out[p + "weight_scale_inv"] = (before, after)
    return out


def _assert_fp8_bytes(src_dir, dst_dir) -> dict[str, tuple[tuple, tuple]]:
    """Without hubpad: every upstream tensor's bytes unchanged in the top-left of its DST tensor; padded FP8 codes
    0x00; every new scale cell exactly 1.0; only FP8 weights grow. Returns {name: (before, after)} of the tensors
    that grew."""
    changed = _assert_bytes_preserved(src_dir, dst_dir, scale=1.0)
    src = _read_tensors(src_dir)
    assert sum(t.dtype == torch.float8_e4m3fn for t in src.values()) == N_LINEAR
    for name in changed:
        if name.endswith(".weight"):
            assert src[name].dtype == torch.float8_e4m3fn, f"{name}: a {src[name].dtype} weight grew"
    return changed


# --------------------------------------------------------------------------------------------------
# Cases 1 and 2: compressed-tensors FP8 (per-tensor, per-channel), quantized with the real library


def _minmax_fp8(w: torch.Tensor, args) -> tuple[torch.Tensor, torch.Tensor]:
    """tests/test_quantized.py's _minmax plus the TENSOR and CHANNEL strategies (llm-compressor's minmax)."""
    if args.strategy == QuantizationStrategy.TENSOR:
        return w.amin().reshape(1), w.amax().reshape(1)
    if args.strategy == QuantizationStrategy.CHANNEL:
        return w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True)
    return _minmax(w, args)


def _quantize_and_save_fp8(model, scheme: dict, path, ids) -> None:
    """tests/test_quantized.py's _quantize_and_save for FP8 per-tensor / per-channel weights, with the static
    per-tensor input scale calibrated from each Linear's input amax (llm-compressor's static_minmax)."""
    amax: dict[str, float] = {}
    hooks = [m.register_forward_pre_hook(
        lambda mod, args, n=n: amax.__setitem__(n, max(amax.get(n, 0.0), args[0].abs().max().float().item())))
        for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        model(ids)
    for h in hooks:
        h.remove()

    groups = {"group_0": QuantizationScheme(targets=["Linear"], **copy.deepcopy(scheme))}
    apply_quantization_config(model, QuantizationConfig(config_groups=groups, ignore=["lm_head"]), show_progress=False)
    n_quantized = n_static_inputs = 0
    with torch.no_grad():
        for name, m in model.named_modules():
            qs = getattr(m, "quantization_scheme", None)
            if qs is None:
                continue
            n_quantized += 1
            scale, _ = calculate_qparams(*_minmax_fp8(m.weight.float(), qs.weights), qs.weights)
            assert scale.shape == m.weight_scale.shape, (name, scale.shape, m.weight_scale.shape)
            m.weight_scale.copy_(scale.to(m.weight_scale.dtype))
            ia = qs.input_activations
            if ia is not None and not ia.dynamic:
                a = torch.tensor([amax[name]])
                s, _ = calculate_qparams(-a, a, ia)
                m.input_scale.copy_(s.reshape(m.input_scale.shape).to(m.input_scale.dtype))
                n_static_inputs += 1
    assert n_quantized == N_LINEAR  # lm_head ignored
    assert n_static_inputs == (N_LINEAR if not scheme["input_activations"].dynamic else 0)

    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    model.save_pretrained(path)
    compressor.update_config(path)


CT_CASES = {
    # name: (preset, weight strategy, intermediate, tp)
    "ct-fp8-tensor-tp3": (FP8, "tensor", 320, 3),
    "ct-fp8-tensor-tp6": (FP8, "tensor", 256, 6),
    "ct-fp8-channel-tp3": (FP8_DYNAMIC, "channel", 320, 3),
    "ct-fp8-channel-tp6": (FP8_DYNAMIC, "channel", 256, 6),
}


@pytest.mark.parametrize("case", sorted(CT_CASES))
def test_compressed_tensors_fp8_tensor_and_channel(tmp_path, case):
    scheme, strategy, inter, tp = CT_CASES[case]
    src, dst, ids = tmp_path / "src", tmp_path / "dst", _input_ids()
    _quantize_and_save_fp8(_tiny_model("llama", intermediate=inter, seed=7), scheme, src, ids)
    qc = json.loads((src / "config.json").read_text())["quantization_config"]
    (group,) = qc["config_groups"].values()
    assert qc["format"] == "float-quantized" and group["weights"]["strategy"] == strategy

    plan = _pad(src, dst, tp)  # verify_derivative ok, something padded
    assert plan.formats == ["fp8"]
    cfg = _assert_relabelled_and_padded(dst, tp, inter)
    assert cfg["intermediate_size"] == _padded_inter(inter, tp) > inter
    assert cfg["quantization_config"] == qc

    s = _read_tensors(src)
    p = "model.layers.0.self_attn.q_proj."
    if strategy == "tensor":  # one weight scale and one static input scale per linear, copied
        assert s[p + "weight_scale"].shape == (1,) and s[p + "input_scale"].shape == (1,)
        assert sum(k.endswith(".input_scale") for k in s) == N_LINEAR
    else:
        assert s[p + "weight_scale"].shape == (512, 1) and not any(k.endswith(".input_scale") for k in s)
    assert not any(k.endswith("zero_point") for k in s)
    assert _assert_fp8_bytes(src, dst) == _expected_growth(inter, tp, strategy)

    m_src, m_dst = _load_decompressed(src), _load_decompressed(dst)
    assert m_src.__class__.__name__ == "LlamaForCausalLM" and m_dst.__class__.__name__ == "MistralForCausalLM"
    assert _assert_decompressed_weights_padded(m_src, m_dst) == N_LINEAR
    f32, f64 = _compare_logits(m_src, m_dst, ids)
    print(f"{case}: max |Δ| float32 {f32}, float64 {f64}")


# --------------------------------------------------------------------------------------------------
# Case 3: HF fp8 (weight_scale_inv, 128x128 blocks), written and dequantized by the spec


def _block_quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per 128x128 block: scale = amax / 448, q = e4m3(w / scale); weight_scale_inv = scale (float32)."""
    out_f, in_f = w.shape
    rb, cb = _cdiv(out_f, BLOCK), _cdiv(in_f, BLOCK)
    full = torch.zeros(rb * BLOCK, cb * BLOCK)
    full[:out_f, :in_f] = w.float()  # a partial last block: zeros change no amax
    blocks = full.reshape(rb, BLOCK, cb, BLOCK)
    scale = blocks.abs().amax(dim=(1, 3)) / FP8_MAX
    assert bool((scale > 0).all())
    q = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).reshape(rb * BLOCK, cb * BLOCK)
    return q[:out_f, :in_f].to(torch.float8_e4m3fn).contiguous(), scale.to(torch.float32).contiguous()


def _block_dequantize(q: torch.Tensor, scale_inv: torch.Tensor) -> torch.Tensor:
    """w = q * scale_inv expanded over its 128x128 blocks, cropped to the weight's shape (float32)."""
    out_f, in_f = q.shape
    assert scale_inv.dtype == torch.float32 and scale_inv.shape == (_cdiv(out_f, BLOCK), _cdiv(in_f, BLOCK))
    s = scale_inv.repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)[:out_f, :in_f]
    return q.float() * s


def _write_hf_fp8(path, model) -> None:
    tensors = {}
    for name, p in model.state_dict().items():
        module, _, suffix = name.rpartition(".")
        if module.endswith(LINEARS) and suffix == "weight":
            tensors[name], tensors[f"{module}.weight_scale_inv"] = _block_quantize(p)
        else:
            tensors[name] = p.to(torch.bfloat16).contiguous()
    path.mkdir(parents=True)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.update(dtype="bfloat16", quantization_config=dict(HF_FP8_QC))
    (path / "config.json").write_text(json.dumps(config, indent=2))


def _dequantize_hf_fp8(tensors: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], int]:
    """Float state dict by the spec; each weight transformers' Fp8Dequantize can handle is cross-checked with it.
    Returns the state dict and how many weights were cross-checked."""
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize

    modules = {k.rpartition(".")[0] for k in tensors if k.endswith(".weight_scale_inv")}
    assert len(modules) == N_LINEAR
    state, n_checked = {}, 0
    for name, t in tensors.items():
        module, _, suffix = name.rpartition(".")
        if suffix == "weight_scale_inv":
            continue
        if module not in modules:
            assert t.dtype == torch.bfloat16, name
            state[name] = t.float()
            continue
        assert t.dtype == torch.float8_e4m3fn and suffix == "weight", name
        scale_inv = tensors[f"{module}.weight_scale_inv"]
        w = state[name] = _block_dequantize(t, scale_inv)
        # transformers derives the block from the scale grid (rows // scale rows): right only for whole blocks.
        if t.shape[0] == BLOCK * scale_inv.shape[0] and t.shape[1] == BLOCK * scale_inv.shape[1]:
            lib = Fp8Dequantize(None)._dequantize_one(t, scale_inv, torch.float32)
            assert torch.equal(lib, w), f"{name}: transformers' Fp8Dequantize differs from the spec"
            n_checked += 1
    return state, n_checked


HF_CASES = {
    # name: (intermediate, tp)
    "hf-fp8-block-inter256-tp3": (256, 3),
    "hf-fp8-block-inter320-tp3": (320, 3),
    "hf-fp8-block-inter256-tp6": (256, 6),
}


@pytest.mark.parametrize("case", sorted(HF_CASES))
def test_hf_fp8_block_weight_scale_inv(tmp_path, case):
    inter, tp = HF_CASES[case]
    src, dst, ids = tmp_path / "src", tmp_path / "dst", _input_ids()
    model = _tiny_model("llama", intermediate=inter, seed=8)
    _write_hf_fp8(src, model)
    s = _read_tensors(src)
    p = "model.layers.0.mlp.gate_proj."
    assert s[p + "weight"].dtype == torch.float8_e4m3fn and s[p + "weight_scale_inv"].shape == (_cdiv(inter, 128), 2)
    assert s["lm_head.weight"].dtype == s["model.embed_tokens.weight"].dtype == torch.bfloat16

    plan = _pad(src, dst, tp)  # verify_derivative ok, something padded
    assert plan.quant.method == "fp8" and plan.quant.fp8_blocks == ((BLOCK, BLOCK),) and plan.formats == ["fp8"]
    cfg = _assert_relabelled_and_padded(dst, tp, inter)
    assert cfg["intermediate_size"] == _padded_inter(inter, tp) > inter
    assert cfg["quantization_config"] == HF_FP8_QC

    changed = _assert_fp8_bytes(src, dst)
    assert changed == _expected_growth(inter, tp, "block")
    if inter % BLOCK:  # TP=3, 320 → 384: the padded rows share the upstream's last (partial) scale row
        assert (p + "weight_scale_inv") not in changed and changed[p + "weight"] == ((320, 256), (384, 256))

    (w_src, n_src), (w_dst, n_dst) = _dequantize_hf_fp8(s), _dequantize_hf_fp8(_read_tensors(dst))
    assert set(w_src) == set(w_dst)
    assert n_dst == N_LINEAR  # every padded weight is whole blocks (per-rank 128 tiles)
    assert n_src == (N_LINEAR if inter % BLOCK == 0 else N_LINEAR - 6)  # gate/up/down of 2 layers are partial
    n_padded = 0
    for name, w in w_src.items():
        _assert_padded_equal(w, w_dst[name], name)
        n_padded += w.shape != w_dst[name].shape
    assert n_padded == N_LINEAR

    m_src, m_dst = _float_model(src, w_src), _float_model(dst, w_dst)  # strict load_state_dict
    assert m_src.__class__.__name__ == "LlamaForCausalLM" and m_dst.__class__.__name__ == "MistralForCausalLM"
    assert m_dst.config.num_attention_heads == 6 and m_dst.config.intermediate_size == _padded_inter(inter, tp)
    f32, f64 = _compare_logits(m_src, m_dst, ids)
    print(f"{case}: max |Δ| float32 {f32}, float64 {f64}")
