"""MiniMax-M2: hubpad refuses it, and this measures why on a tiny real transformers model in float64.

Its q/k RMSNorm spans all heads (per layer), so zero heads change the mean square. The test pads a tiny model's
state dict by hand three ways and compares float64 logits (the norm is computed in float64 here; transformers
upcasts it only to float32): naive zero padding, the best expressible approximation (norm weights / sqrt(H'/H)),
and that rescale plus the q/k norms' eps / (H'/H), which would be exact but cannot be written to a config because
rms_norm_eps is shared with every other norm.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers.models.minimax_m2 import modeling_minimax_m2 as mm  # noqa: E402

from hubpad.errors import HubpadError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.tiny_moe import randomize  # noqa: E402

H, KV, H2, KV2, EPS = 4, 2, 6, 3, 1e-6  # TP=3 pads whole GQA groups: 4/2 → 6/3, r = 1.5
COMMON = dict(num_hidden_layers=2, vocab_size=160, hidden_size=64, intermediate_size=32, num_local_experts=4,
              num_experts_per_tok=2, head_dim=16, max_position_embeddings=64, rms_norm_eps=EPS, rotary_dim=8,
              use_qk_norm=True, qk_norm_type="per_layer", eos_token_id=1, bos_token_id=0)


def _model(heads: int, kv: int):
    cfg = transformers.CONFIG_MAPPING["minimax_m2"](num_attention_heads=heads, num_key_value_heads=kv, **COMMON)
    return transformers.AutoModelForCausalLM.from_config(cfg, experts_implementation="eager").double().eval()


def _padded(src, rescale: bool, eps_fix: bool):
    """src's weights zero-padded to H2/KV2 heads; optionally the per-layer q/k norms compensated."""
    dst = _model(H2, KV2)
    target = dst.state_dict()
    new = {}
    for name, v in src.state_dict().items():
        z = torch.zeros_like(target[name])
        z[tuple(slice(0, n) for n in v.shape)] = v
        if rescale and name.endswith(("q_norm.weight", "k_norm.weight")):
            z[:v.shape[0]] /= math.sqrt(H2 / H if "q_norm" in name else KV2 / KV)
        new[name] = z
    dst.load_state_dict(new)
    if eps_fix:
        for layer in dst.model.layers:
            layer.self_attn.q_norm.variance_epsilon = EPS / (H2 / H)
            layer.self_attn.k_norm.variance_epsilon = EPS / (KV2 / KV)
    return dst


def _norm64(self, x):
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def test_per_layer_qk_norm_has_no_exact_padding(monkeypatch):
    monkeypatch.setattr(mm.MiniMaxM2RMSNorm, "forward", _norm64)
    torch.manual_seed(0)
    src = _model(H, KV)
    randomize(src)
    ids = torch.randint(0, 160, (2, 12), generator=torch.Generator().manual_seed(1))
    rel = {}
    with torch.no_grad():
        ref = src(ids).logits
        for label, rescale, eps_fix in (("naive", False, False), ("rescaled", True, False), ("rescaled+eps", True, True)):
            got = _padded(src, rescale, eps_fix)(ids).logits
            rel[label] = (ref - got).abs().max().item() / ref.abs().max().item()
    print({k: f"{v:.2e}" for k, v in rel.items()})
    assert rel["naive"] > 1e-2  # zero heads shrink the mean square by 1.5: q·k scores grow 1.5×
    assert 1e-9 < rel["rescaled"] < 1e-5  # the best expressible approximation: not exact (eps acts as 1.5·eps)
    assert rel["rescaled+eps"] < 1e-12  # exact only with a q/k-only eps, which no config can say


def test_minimax_m2_is_refused_with_the_reason(tmp_path):
    src = tmp_path / "m2"
    _model(H, KV).save_pretrained(src)
    with pytest.raises(HubpadError, match="per layer, not per head.*1e-7 relative"):
        make_plan(LocalSource(src), 3)
