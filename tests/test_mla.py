"""DeepSeek-V3 / Kimi-K2 (MLA): pad tiny real transformers models and compare float64 logits.

MLA has no kv heads (the latent KV is shared): padding appends whole heads to q_b_proj rows (heads ×
(qk_nope + qk_rope)), kv_b_proj rows (heads × (qk_nope + v)) and o_proj columns (heads × v). The MTP layer is
padded like the others. A second check replays vLLM's weight-absorbed MLA decode (the "forward_mqa" path of
vllm/model_executor/layers/attention/mla_attention.py, with W_UK / W_UV split per head out of kv_b_proj as
`split_kv_b_proj` does) rank by rank on the padded tensors: every padded head's output is exactly zero and the
all-reduced sum equals the unpadded attention.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds  # noqa: E402

from hubpad.errors import HubpadError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.test_models_transformers import COMMON  # noqa: E402
from tests.tiny_moe import add_mtp_layer, assert_same_logits, randomize  # noqa: E402

REL_TOL = 1e-12  # float64, relative to the largest value
TINY = dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_attention_heads=4,
            num_key_value_heads=4, q_lora_rank=48, kv_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16,
            v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2, n_group=2, topk_group=1,
            first_k_dense_replace=1, n_shared_experts=1, num_nextn_predict_layers=1)


def _build(tmp_path, model_type: str = "deepseek_v3", **overrides):
    torch.manual_seed(0)
    kwargs = dict(COMMON, **{**TINY, **overrides})
    cfg = transformers.CONFIG_MAPPING["deepseek_v3"](**kwargs)
    model = transformers.AutoModelForCausalLM.from_config(cfg, experts_implementation="eager").double().eval()
    randomize(model)
    path = tmp_path / "upstream"
    model.save_pretrained(path)
    add_mtp_layer(path, cfg)
    if model_type != "deepseek_v3":  # Kimi-K2 ships the same architecture under its own model_type
        data = json.loads((path / "config.json").read_text())
        data["model_type"] = model_type
        (path / "config.json").write_text(json.dumps(data))
    return model, path


def _pad(src, dst, tp):
    plan = make_plan(LocalSource(src), tp, shard_size=400_000)
    run_mirror(plan, LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    return plan


@pytest.mark.parametrize("model_type,tp,heads,expert", [("deepseek_v3", 3, 6, 192), ("kimi_k2", 6, 6, 384)])
def test_mla_padded_model_gives_identical_logits(tmp_path, model_type, tp, heads, expert):
    model, src = _build(tmp_path, model_type)
    dst = tmp_path / "padded"
    plan = _pad(src, dst, tp)
    cfg = json.loads((dst / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (heads, heads)
    assert cfg["moe_intermediate_size"] == expert and cfg["head_dim"] == 8  # head_dim (= qk_rope) untouched
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    for layer in (0, 1, 2):  # layer 2 is the MTP block
        p = f"model.layers.{layer}.self_attn."
        assert shapes[p + "q_b_proj.weight"] == ((96, 48), (heads * 24, 48))
        assert shapes[p + "kv_b_proj.weight"] == ((128, 32), (heads * 32, 32))
        assert shapes[p + "o_proj.weight"] == ((64, 64), (64, heads * 16))
    assert shapes["model.layers.2.mlp.experts.3.down_proj.weight"] == ((64, 32), (64, expert))
    assert shapes["model.layers.1.mlp.shared_experts.gate_proj.weight"] == ((32, 64), (expert, 64))
    assert not any("kv_a_proj" in n or "q_a_proj" in n or "eh_proj" in n for n in shapes)
    card = (dst / "README.md").read_text()
    parser = {"deepseek_v3": "deepseek_v3", "kimi_k2": "kimi_k2"}[model_type]
    assert f"--tool-call-parser {parser}" in card and f"--reasoning-parser {parser}" in card
    assert '"method": "mtp"' in card and ("--trust-remote-code" in card) == (model_type == "kimi_k2")
    assert "vLLM 0.11.1 or newer" in card  # the deepseek_v3 / kimi_k2 reasoning parsers (plan/adapters/vllm.py)
    if model_type == "kimi_k2":
        cfg["model_type"] = "deepseek_v3"  # transformers has no kimi_k2 class; vLLM maps it to DeepseekV3Config
        (dst / "config.json").write_text(json.dumps(cfg))

    assert_same_logits(model, dst, f"{model_type} tp={tp}", COMMON["vocab_size"])


def _absorbed_mla_rank(attn, w: dict, prefix: str, x, cos, sin, tp: int, rank: int, n_heads: int, mask=None):
    """One TP rank of vLLM's weight-absorbed MLA (forward_mqa) on the padded tensors; returns (o_proj partial, v).

    `mask` (query × key, True = attended): causal by default; DSA passes the indexer's top-k selection."""
    nope, rope, vd, lkv = attn.qk_nope_head_dim, attn.qk_rope_head_dim, attn.v_head_dim, attn.kv_lora_rank
    n = n_heads // tp
    heads = slice(rank * n, (rank + 1) * n)
    q_c = attn.q_a_layernorm(x @ w[prefix + "q_a_proj.weight"].T)
    q = (q_c @ w[prefix + "q_b_proj.weight"].T).view(x.shape[0], n_heads, nope + rope)[:, heads]  # column shard
    q_nope, q_pe = q.split([nope, rope], dim=-1)
    kv_c, k_pe = (x @ w[prefix + "kv_a_proj_with_mqa.weight"].T).split([lkv, rope], dim=-1)
    kv_c = attn.kv_a_layernorm(kv_c)
    q_pe, k_pe = ds.apply_rotary_pos_emb_interleave(q_pe.transpose(0, 1)[None], k_pe[None, None], cos, sin)
    q_pe, k_pe = q_pe[0].transpose(0, 1), k_pe[0, 0]
    kv_b = w[prefix + "kv_b_proj.weight"].view(n_heads, nope + vd, lkv)[heads].reshape(n * (nope + vd), lkv)
    w_uk, w_uv = kv_b.T.view(lkv, n, nope + vd).split([nope, vd], dim=-1)  # split_kv_b_proj
    ql_nope = torch.einsum("snh,lnh->snl", q_nope, w_uk)
    scores = (torch.einsum("snl,tl->nst", ql_nope, kv_c) + torch.einsum("snr,tr->nst", q_pe, k_pe)) * attn.scaling
    mask = torch.ones(x.shape[0], x.shape[0], dtype=torch.bool).tril() if mask is None else mask
    probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    o = torch.einsum("snl,lnv->snv", torch.einsum("nst,tl->snl", probs, kv_c), w_uv)
    o_cols = w[prefix + "o_proj.weight"][:, rank * n * vd:(rank + 1) * n * vd]  # row-parallel o_proj
    return o.reshape(x.shape[0], n * vd) @ o_cols.T, o


@pytest.mark.parametrize("tp", [3, 6])
def test_vllm_absorbed_mla_keeps_padded_heads_zero(tmp_path, tp):
    model, src = _build(tmp_path)
    dst = tmp_path / "padded"
    _pad(src, dst, tp)
    weights = {}
    for f in sorted(dst.glob("*.safetensors")):
        weights.update(load_file(f))
    attn = model.model.layers[0].self_attn
    captured = {}
    attn.register_forward_hook(lambda mod, args, kwargs, out: captured.update(x=args[0] if args else kwargs[
        "hidden_states"], pe=kwargs["position_embeddings"], out=out[0]), with_kwargs=True)
    ids = torch.randint(0, COMMON["vocab_size"], (1, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        model(ids)
        x, (cos, sin) = captured["x"][0], captured["pe"]
        n_heads = json.loads((dst / "config.json").read_text())["num_attention_heads"]
        total = torch.zeros_like(captured["out"][0])
        for rank in range(tp):
            part, o = _absorbed_mla_rank(attn, weights, "model.layers.0.self_attn.", x, cos, sin, tp, rank, n_heads)
            first_padded = max(0, TINY["num_attention_heads"] - rank * (n_heads // tp))
            assert torch.equal(o[:, first_padded:], torch.zeros_like(o[:, first_padded:]))  # padded heads: 0.0
            total += part  # the all-reduce
    ref = captured["out"][0]
    delta = (total - ref).abs().max().item()
    print(f"absorbed MLA tp={tp}: max |Δ| = {delta}")
    assert delta <= REL_TOL * ref.abs().max().item()


def test_mla_refuses_several_shared_experts(tmp_path):
    _, src = _build(tmp_path, n_shared_experts=2)
    with pytest.raises(HubpadError, match="n_shared_experts 2"):
        make_plan(LocalSource(src), 3)
