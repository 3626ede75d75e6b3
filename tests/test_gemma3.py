"""Gemma 3 text (`gemma3_text`): pad tiny real transformers models and compare float64 logits; plan the real
27B and 1B text configs from headers; refuse multimodal `gemma3` checkpoints clearly.

Gemma's config rejects hidden_size % heads != 0, so the head search goes past the first whole-group candidate:
27B at TP=3 skips 36/18 and takes 42/21. Logits are compared between the upstream and the padded checkpoint,
both loaded by from_pretrained in float64 (a model cast with .double() keeps float32 RoPE buffers, which differ
from a float64 load by ~4e-7 whether padded or not).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.errors import HubpadError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from hubpad.testing import write_checkpoint  # noqa: E402
from tests.helpers import cli  # noqa: E402

REL_TOL = 1e-12
TINY = dict(num_hidden_layers=4, vocab_size=160, max_position_embeddings=64, intermediate_size=100, head_dim=24,
            query_pre_attn_scalar=20, sliding_window=4, layer_types=["sliding_attention"] * 3 + ["full_attention"])
# name: (hidden, heads, kv heads, tp, heads after, kv after). hidden 336 = 2^4·3·7 with 16/8 heads is 27B's case
# in small (5376 = 2^8·3·7, 32/16): the first whole-group candidate 18/9 fails 336 % 18, so 24/12 it is.
CASES = {"gqa-tp3": (96, 4, 2, 3, 6, 3), "gqa-tp6-kv-replicated": (96, 4, 2, 6, 6, 3),
         "hidden-rule-skips-first-candidate": (336, 16, 8, 3, 24, 12)}


def _load(path):
    return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64).eval()


@pytest.mark.parametrize("case", sorted(CASES))
def test_gemma3_padded_model_gives_identical_logits(tmp_path, case):
    hidden, heads, kv, tp, heads2, kv2 = CASES[case]
    torch.manual_seed(0)
    cfg = transformers.CONFIG_MAPPING["gemma3_text"](**TINY, hidden_size=hidden, num_attention_heads=heads,
                                                      num_key_value_heads=kv)
    model = transformers.AutoModelForCausalLM.from_config(cfg).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0, 0.5)  # Gemma's RMSNorm scales by (1 + w)
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    model.save_pretrained(src)
    plan = make_plan(LocalSource(src), tp, shard_size=400_000)
    run_mirror(plan, LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    new = json.loads((dst / "config.json").read_text())
    assert (new["num_attention_heads"], new["num_key_value_heads"]) == (heads2, kv2)
    assert hidden % heads2 == 0 and new["query_pre_attn_scalar"] == 20 and new["layer_types"] == TINY["layer_types"]
    ids = torch.randint(0, 160, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = _load(src)(ids).logits, _load(dst)(ids).logits
    delta = (a - b).abs().max().item()
    print(f"{case}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


GEMMA3_27B_TEXT = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504,
    "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
    "query_pre_attn_scalar": 168, "sliding_window": 1024, "vocab_size": 262208, "rms_norm_eps": 1e-06,
    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072, "tie_word_embeddings": True,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
}
GEMMA3_1B = dict(GEMMA3_27B_TEXT, hidden_size=1152, intermediate_size=6912, num_hidden_layers=26, num_attention_heads=4,
                 num_key_value_heads=1, head_dim=256, query_pre_attn_scalar=256, sliding_window=512,
                 vocab_size=262144, max_position_embeddings=32768, rope_scaling=None)


def _gemma_tensors(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    h, hd, inter = cfg["hidden_size"], cfg["head_dim"], cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    out = [("model.embed_tokens.weight", "BF16", (cfg["vocab_size"], h)), ("model.norm.weight", "BF16", (h,))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + n, "BF16", (h,)) for n in ("input_layernorm.weight", "post_attention_layernorm.weight",
                                                 "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight")]
        out += [(p + "self_attn.q_norm.weight", "BF16", (hd,)), (p + "self_attn.k_norm.weight", "BF16", (hd,)),
                (p + "self_attn.q_proj.weight", "BF16", (q, h)), (p + "self_attn.k_proj.weight", "BF16", (kv, h)),
                (p + "self_attn.v_proj.weight", "BF16", (kv, h)), (p + "self_attn.o_proj.weight", "BF16", (h, q)),
                (p + "mlp.gate_proj.weight", "BF16", (inter, h)), (p + "mlp.up_proj.weight", "BF16", (inter, h)),
                (p + "mlp.down_proj.weight", "BF16", (h, inter))]
    return out


@pytest.mark.parametrize("name,cfg,after", [("gemma-3-27b-text", GEMMA3_27B_TEXT, (42, 21)),
                                            ("gemma-3-1b-it", GEMMA3_1B, (6, 1))])
def test_gemma3_plan_at_real_scale(tmp_path, name, cfg, after):
    src = write_checkpoint(tmp_path / name, cfg, _gemma_tensors(cfg), n_shards=2, header_only=True)
    result = cli("plan", src, "--tp", "3", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    dims = {d["config_key"]: d["after"] for d in plan["dims"]}
    assert (dims["num_attention_heads"], dims["num_key_value_heads"]) == after
    assert dims["intermediate_size"] == cfg["intermediate_size"]  # 7168 and 2304 per rank: whole 128 tiles
    assert cfg["hidden_size"] % after[0] == 0 and all(r["ok"] for r in plan["rank_table"] if r["required"])


def test_gemma3_multimodal_checkpoint_is_refused(tmp_path):
    cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
           "text_config": dict(GEMMA3_1B), "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                                                              "num_attention_heads": 16}}
    src = write_checkpoint(tmp_path / "mm", cfg, [("language_model.model.norm.weight", "BF16", (1152,))], n_shards=1)
    with pytest.raises(HubpadError, match="SigLIP vision tower"):
        make_plan(LocalSource(src), 3)
