"""MiniMax-M2 (`minimax_m2`): its q/k RMSNorm spans all heads, so padding rescales (adapters/minimax.py).

Tiny real transformers models with the published tensor names (`block_sparse_moe.experts.N.w1/w2/w3`, the gate,
`e_score_correction_bias`, `self_attn.q_norm/k_norm` over all heads) and an MTP layer after the last one (the published
config's `num_mtp_modules`; transformers does not load it, the plan pads and rescales it). transformers' norm casts to
float32; the float64 comparisons compute it in float64 (`_norm64`), which changes nothing else.
"""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402
from transformers.models.minimax_m2 import modeling_minimax_m2 as mm  # noqa: E402

from hubpad.errors import IntegrityError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402

H, KV, EPS, VOCAB = 48, 8, 1e-6, 160  # the published 48 / 8 heads, head_dim 8
TINY = dict(num_hidden_layers=2, vocab_size=VOCAB, hidden_size=64, intermediate_size=32, num_local_experts=6,
            num_experts_per_tok=2, head_dim=8, max_position_embeddings=64, rms_norm_eps=EPS, rotary_dim=4,
            use_qk_norm=True, eos_token_id=1, bos_token_id=0, num_attention_heads=H, num_key_value_heads=KV)
# What the published config.json sets and transformers' config class does not write (vLLM reads scoring_func).
PUBLISHED_KEYS = dict(scoring_func="sigmoid", use_routing_bias=True, qk_norm_type="per_layer", num_mtp_modules=1,
                      mtp_transformer_layers=1, use_mtp=True)


def _norm64(self, x):
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


@pytest.fixture(autouse=True)
def _float64_norm(monkeypatch):
    monkeypatch.setattr(mm.MiniMaxM2RMSNorm, "forward", _norm64)


def _model(**overrides):
    cfg = transformers.CONFIG_MAPPING["minimax_m2"](**{**TINY, **overrides})
    return transformers.AutoModelForCausalLM.from_config(cfg, experts_implementation="eager").double().eval()


def _randomize(model) -> None:
    """Weights of O(1/sqrt(fan-in)) (activations O(1), as in a trained model), norms around 1, routing biases."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(1.0, 0.2)
            elif p.ndim >= 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
            else:
                p.normal_(0.0, 0.1)
        for module in model.modules():
            if getattr(module, "e_score_correction_bias", None) is not None:
                module.e_score_correction_bias.normal_(0.0, 0.1)


def _build(tmp_path, dtype=torch.float64, seed=0):
    """A tiny M2 saved with the published names, config keys and one MTP layer (a copy of the last layer + 0.25)."""
    torch.manual_seed(seed)
    model = _model()
    _randomize(model)
    if dtype != torch.float64:  # the original IS the rounded model: compare against that
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(dtype).double())
    path = tmp_path / "upstream"
    model.to(dtype).save_pretrained(path)
    model.double()
    tensors = load_file(path / "model.safetensors")
    n = TINY["num_hidden_layers"]
    for name in [k for k in tensors if k.startswith(f"model.layers.{n - 1}.")]:
        tensors[name.replace(f".{n - 1}.", f".{n}.", 1)] = (tensors[name].double() + 0.25).to(dtype)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, **PUBLISHED_KEYS}, indent=2))
    return model, path


def _mirror(src, dst, tp):
    plan = make_plan(LocalSource(src), tp, shard_size=2_000_000)
    run_mirror(plan, LocalPublisher(dst))
    report = verify_derivative(LocalSource(src), LocalSource(dst))
    assert report["padded"] > 0
    return plan


def _logits(model, path=None):
    if path is not None:
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64,
                                                                  experts_implementation="eager").eval()
    ids = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(ids).logits


def _rel(a, b) -> float:
    return (a - b).abs().max().item() / a.abs().max().item()


# tp: (heads, kv heads after), as MiniMax-M2's own at TP 3 and 6 (r = 1.125 and 1.5)
CASES = {3: (54, 9), 6: (72, 12)}


@pytest.mark.parametrize("tp", sorted(CASES))
def test_m2_padded_and_rescaled_gives_identical_float64_logits(tmp_path, tp):
    model, src = _build(tmp_path)
    dst = tmp_path / f"tp{tp}"
    plan = _mirror(src, dst, tp)
    heads, kv = CASES[tp]
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (heads, kv, 8)
    assert cfg["rms_norm_eps"] == EPS and cfg["scoring_func"] == "sigmoid"  # eps untouched
    rq, rk = heads / H, kv / KV
    scales = {(g["pattern"], g.get("scale")) for g in plan.to_json()["tensors"]["padded_groups"]}
    assert {s for s in scales if s[1] is not None} == {
        ("model.layers.*.self_attn.q_proj.weight", math.sqrt(rq)), ("model.layers.*.self_attn.k_proj.weight",
                                                                    math.sqrt(rk)),
        ("model.layers.*.self_attn.q_norm.weight", 1 / math.sqrt(rq)),
        ("model.layers.*.self_attn.k_norm.weight", 1 / math.sqrt(rk))}
    shapes = {t.name: (t.src.shape, t.shape, t.op.scale) for t in plan.tensors if t.padded}
    for layer in (0, 1, 2):  # layer 2 is the MTP layer: the same treatment
        p = f"model.layers.{layer}.self_attn."
        assert shapes[p + "q_norm.weight"] == ((H * 8,), (heads * 8,), 1 / math.sqrt(rq))
        assert shapes[p + "k_proj.weight"] == ((KV * 8, 64), (kv * 8, 64), math.sqrt(rk))
        assert shapes[p + "v_proj.weight"] == ((KV * 8, 64), (kv * 8, 64), None)  # v is not normalized
        assert shapes[p + "o_proj.weight"] == ((64, H * 8), (64, heads * 8), None)
    assert shapes["model.layers.2.block_sparse_moe.experts.5.w1.weight"][1][0] % tp == 0
    card = (dst / "README.md").read_text()
    assert "--tool-call-parser minimax_m2" in card and "--reasoning-parser minimax_m2" in card
    assert "Rescaled" in card and f"{math.sqrt(rq):.6f}" in card

    padded = transformers.AutoModelForCausalLM.from_pretrained(dst, dtype=torch.float64,
                                                               experts_implementation="eager").eval()
    a, b = _logits(model), _logits(padded)
    delta = _rel(a, b)
    print(f"minimax_m2 TP {tp}: max |Δ| / max |logit| = {delta:.2e}")
    assert delta <= 1e-12

    with torch.no_grad():  # why the rescale: undo it, and zero heads alone change the logits at O(1)
        for layer in padded.model.layers:
            attn = layer.self_attn
            for proj, norm, r in ((attn.q_proj, attn.q_norm, rq), (attn.k_proj, attn.k_norm, rk)):
                proj.weight /= math.sqrt(r)
                norm.weight *= math.sqrt(r)
    naive = _rel(a, _logits(padded))
    print(f"zero padding without the rescale (r = {rq}): {naive:.2e}")
    assert naive > 1e-2


def test_m2_bf16_rounding_cost_and_verify_by_value(tmp_path):
    """A BF16 checkpoint: the rescaled q/k projections and norms are rounded to BF16 (each value to the nearest).
    Measured in float64 against the BF16 original, next to what computing the original in BF16 costs. Then a rescaled
    element one unit off the nearest value, or left at the unscaled original's value, fails `hubpad verify`."""
    model, src = _build(tmp_path, dtype=torch.bfloat16)
    dst = tmp_path / "tp3"
    _mirror(src, dst, 3)
    ref = _logits(model)
    rounding = _rel(ref, _logits(None, dst))
    bf16 = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16,
                                                             experts_implementation="eager").eval()
    noise = _rel(ref, _logits(bf16).double())
    print(f"BF16 storage of the rescaled tensors: {rounding:.2e}; the original computed in BF16: {noise:.2e}")
    assert 1e-6 < rounding < noise / 2

    files = sorted(dst.glob("model*.safetensors"))
    name = "model.layers.1.self_attn.k_norm.weight"
    f = next(f for f in files if name in load_file(f))
    for mutate in (lambda t: t.view(torch.int16).add_(1).view(torch.bfloat16),
                   lambda t: (t.double() * math.sqrt(54 / 48)).to(torch.bfloat16)):  # the unscaled original's value
        tensors = load_file(f)
        saved = {k: v.clone() for k, v in tensors.items()}
        tensors[name][:5] = mutate(tensors[name][:5].clone())
        save_file(tensors, f, metadata={"format": "pt"})
        with pytest.raises(IntegrityError, match=f"tensor {name}: scaled element"):
            verify_derivative(LocalSource(src), LocalSource(dst))
        save_file(saved, f, metadata={"format": "pt"})
    verify_derivative(LocalSource(src), LocalSource(dst))  # restored: passes again


def _fp8_block(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """128 x 128 blocks (whole here): scale = amax / 448, q = e4m3(w / scale); weight_scale_inv = scale (float32)."""
    rb, cb = w.shape[0] // 128, w.shape[1] // 128
    blocks = w.double().reshape(rb, 128, cb, 128)
    scale = (blocks.abs().amax(dim=(1, 3)) / 448).float()
    q = (blocks / scale.double()[:, None, :, None]).reshape(w.shape).to(torch.float8_e4m3fn)
    return q, scale


def _dequantize(tensors: dict) -> dict:
    out = {}
    for name, t in tensors.items():
        if name.endswith("weight_scale_inv"):
            continue
        inv = tensors.get(name + "_scale_inv")
        if inv is not None:
            t = t.double() * inv.double().repeat_interleave(128, 0).repeat_interleave(128, 1)
        out[name] = t.double()
    return out


def test_m2_fp8_block_folds_the_factor_into_the_float32_scales(tmp_path):
    """FP8 (the published format): the q/k weights keep their FP8 bytes (`hubpad verify` checks every original
    byte), their float32 block scales take sqrt(r), each rounded to the nearest float32, and the norms take 1/sqrt(r)
    (F32 here, to show what the FP8 fold itself costs). Dequantized, in float64: the logits equal the dequantized
    original's to float32 rounding."""
    torch.manual_seed(2)
    model = _model(hidden_size=128, head_dim=128, num_attention_heads=4, num_key_value_heads=2, rotary_dim=64,
                   num_hidden_layers=1)
    _randomize(model)
    src = tmp_path / "fp8"
    model.float().save_pretrained(src)
    tensors = load_file(src / "model.safetensors")
    for name in [k for k in tensors if k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight",
                                                   "o_proj.weight"))]:
        tensors[name], tensors[name + "_scale_inv"] = _fp8_block(tensors[name])
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(PUBLISHED_KEYS, num_mtp_modules=0, quantization_config={
        "activation_scheme": "dynamic", "fmt": "float8_e4m3fn", "quant_method": "fp8", "weight_block_size": [128, 128],
        "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]})
    (src / "config.json").write_text(json.dumps(cfg, indent=2))
    dst = tmp_path / "tp3"
    plan = _mirror(src, dst, 3)
    scales = {t.name.rpartition("self_attn.")[2]: t.op.scale for t in plan.tensors if t.padded}
    assert scales["q_proj.weight"] is None and scales["q_proj.weight_scale_inv"] == math.sqrt(1.5)
    assert scales["k_norm.weight"] == 1 / math.sqrt(1.5) and scales["v_proj.weight_scale_inv"] is None

    def dequantized(folder, state):  # the same checkpoint as float64 weights, read by transformers
        out = tmp_path / f"{folder.name}-f64"
        out.mkdir()
        save_file({k: v.contiguous() for k, v in _dequantize(state).items()}, out / "model.safetensors",
                  metadata={"format": "pt"})
        config = json.loads((folder / "config.json").read_text())
        del config["quantization_config"]
        (out / "config.json").write_text(json.dumps(config))
        return out

    padded = {}
    for f in sorted(dst.glob("model*.safetensors")):
        padded.update(load_file(f))
    a, b = _logits(None, dequantized(src, tensors)), _logits(None, dequantized(dst, padded))
    delta = _rel(a, b)
    print(f"FP8 block, factor folded into float32 scales: {delta:.2e}")
    assert delta < 1e-6
