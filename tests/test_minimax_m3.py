"""MiniMax-M3 (`minimax_m3_vl`): pad a tiny real transformers MiniMaxM3SparseForConditionalGeneration and compare
float64 logits.

The tiny model carries what the published one does, under the published names (transformers' save writes them):
`language_model.model.layers.N.*`, a dense first layer (`mlp.*`) and a sparse MoE layer (`block_sparse_moe.experts.N.
w1/w2/w3`, one shared expert, the gate and `e_score_correction_bias`), per-head Gemma-style q/k norms, a lightning
indexer on the sparse layer (`index_q_proj` one head per kv head, 64 heads / 4 kv as published; a single-head
`index_k_proj`; their norms) with
blocks small enough that the selection matters (16 tokens, blocks of 4, top 2), and a vision tower with its
projectors. The config also carries `sparse_attention_config` as published configs do (vLLM reads it there).
transformers' RMSNorm casts to float32; the float64 comparisons compute it in float64 (`_norm64`).
"""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers.models.minimax_m3_vl import modeling_minimax_m3_vl as m3  # noqa: E402

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402

VOCAB = 160
TEXT = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=32, dense_intermediate_size=48,
            shared_intermediate_size=32, num_hidden_layers=2, num_attention_heads=64, num_key_value_heads=4, head_dim=8,
            rotary_dim=4, num_local_experts=6, num_experts_per_tok=2, max_position_embeddings=256, index_n_heads=4,
            index_head_dim=8, index_block_size=4, index_topk_blocks=2, index_local_blocks=1,
            layer_types=["full_attention", "minimax_m3_sparse"], mlp_layer_types=["dense", "sparse"], bos_token_id=0,
            eos_token_id=1)
VISION = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, patch_size=14,
              image_size=28)
# What the published text_config sets besides (vLLM reads these; transformers' config class folds them into index_*)
PUBLISHED_TEXT = {"n_shared_experts": 1, "scoring_func": "sigmoid", "use_routing_bias": True, "qk_norm_type": "per_head",
                  "use_gemma_norm": True, "hidden_act": "swigluoai", "moe_layer_freq": [0, 1],
                  "sparse_attention_config": {"use_sparse_attention": True, "sparse_index_dim": 8,
                                              "sparse_num_index_heads": 4, "sparse_topk_blocks": 2,
                                              "sparse_block_size": 4, "sparse_local_block": 1,
                                              "sparse_attention_freq": [0, 1]}}


def _norm64(self, x):
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)) * (1.0 + self.weight)


@pytest.fixture(autouse=True)
def _float64_norm(monkeypatch):
    monkeypatch.setattr(m3.MiniMaxM3VLRMSNorm, "forward", _norm64)


def _build(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.CONFIG_MAPPING["minimax_m3_vl"](text_config=TEXT, vision_config=VISION, projector_hidden_size=64)
    model = transformers.AutoModelForImageTextToText.from_config(cfg, experts_implementation="eager").double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0.0, 0.2)  # Gemma-style: the scale is 1 + weight
            elif p.ndim >= 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
            else:
                p.normal_(0.0, 0.1)
        for module in model.modules():
            if getattr(module, "e_score_correction_bias", None) is not None:
                module.e_score_correction_bias.normal_(0.0, 0.1)
    path = tmp_path / "upstream"
    model.save_pretrained(path)
    config = json.loads((path / "config.json").read_text())
    config["text_config"].update(PUBLISHED_TEXT)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return model, path


def _logits(model):
    ids = torch.randint(2, VOCAB, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(input_ids=ids).logits


# tp: (heads, kv heads) after: the published 64 / 4 heads, as MiniMax-M3's own (6 kv heads: 2 per rank at TP 3, 1 at 6)
CASES = {3: (96, 6), 6: (96, 6)}


@pytest.mark.parametrize("tp", sorted(CASES))
def test_m3_padded_model_gives_identical_float64_logits(tmp_path, tp):
    model, src = _build(tmp_path)
    dst = tmp_path / f"tp{tp}"
    plan = make_plan(LocalSource(src), tp, shard_size=2_000_000)
    run_mirror(plan, LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    heads, kv = CASES[tp]
    text = json.loads((dst / "config.json").read_text())["text_config"]
    assert (text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"]) == (heads, kv, 8)
    assert text["index_n_heads"] == text["sparse_attention_config"]["sparse_num_index_heads"] == kv
    shapes = {t.name: (t.src.shape, t.shape) for t in plan.tensors if t.padded}
    p = "language_model.model.layers.1.self_attn."
    assert shapes[p + "index_q_proj.weight"] == ((4 * 8, 64), (kv * 8, 64))  # one index head per kv head
    assert p + "index_k_proj.weight" not in shapes and p + "q_norm.weight" not in shapes  # single head; per head
    assert not any(n.startswith(("vision_tower.", "multi_modal_projector.", "patch_merge_mlp.")) for n in shapes)
    assert all(t.op.scale is None for t in plan.tensors if t.padded)  # per-head norms: nothing rescaled
    card = (dst / "README.md").read_text()
    assert "--tool-call-parser minimax_m3" in card and "--reasoning-parser minimax_m3" in card
    assert "--mm-encoder-tp-mode data" in card

    padded = transformers.AutoModelForImageTextToText.from_pretrained(dst, dtype=torch.float64,
                                                                 experts_implementation="eager").eval()
    a, b = _logits(model), _logits(padded)
    delta = (a - b).abs().max().item() / a.abs().max().item()
    print(f"minimax_m3 TP {tp}: max |Δ| / max |logit| = {delta:.2e}")
    assert delta <= 1e-12


def test_m3_refuses_index_heads_other_than_kv_heads(tmp_path):
    _, src = _build(tmp_path)
    config = json.loads((src / "config.json").read_text())
    config["text_config"]["sparse_attention_config"]["sparse_num_index_heads"] = 8
    (src / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="sparse_num_index_heads is 8, not num_key_value_heads"):
        make_plan(LocalSource(src), 3)
