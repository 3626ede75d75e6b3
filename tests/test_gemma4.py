"""Gemma 4 (`gemma4`, `gemma4_text`): pad tiny real transformers models (sliding and global layers of different
head_dim and kv heads, attention_k_eq_v, the MoE block with fused experts, vision and audio towers) and compare
float64 logits, image input included; check both config forms (published global_* keys, transformers 5.x
per_layer_config) end up stating the same padded counts.

Tiny geometry: 4 heads, 2 sliding kv heads (group 2), 1 global kv head (group 4): at TP 3 and 6 the heads go to 12
(a multiple of both groups and of TP), sliding kv 6, global kv 3 (replicated twice at TP 6). The expert width 40
grows to 64 per rank (192 at TP 3, 384 at TP 6).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.errors import ConfigError  # noqa: E402
from hubpad.plan.planner import make_plan  # noqa: E402
from hubpad.publish.local import LocalPublisher  # noqa: E402
from hubpad.run.mirror import run_mirror  # noqa: E402
from hubpad.run.verify import verify_derivative  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests.gemma4_models import TEXT, build_gemma4  # noqa: E402

REL_TOL = 1e-12
IMAGE_TOKEN, BOI, EOI = 250, 251, 252


def _image():
    """One 16x16 image as 16 patches of 4x4x3 (pooled 2x2 -> 4 soft tokens), positions (x, y)."""
    g = torch.Generator().manual_seed(3)
    pixels = torch.rand((1, 16, 48), generator=g, dtype=torch.float64)
    pos = torch.tensor([[[x, y] for y in range(4) for x in range(4)]])
    ids = torch.tensor([[2, 17, BOI] + [IMAGE_TOKEN] * 4 + [EOI, 40, 41, 99, 7, 200, 3]])
    return ids, pixels, pos


def _logits(path, multimodal: bool, image: bool):
    cls = transformers.Gemma4ForConditionalGeneration if multimodal else transformers.Gemma4ForCausalLM
    model = cls.from_pretrained(path, dtype=torch.float64).eval()
    model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    with torch.no_grad():
        if image:
            ids, pixels, pos = _image()
            return model(input_ids=ids, pixel_values=pixels, image_position_ids=pos).logits
        ids = torch.randint(0, 240, (2, 14), generator=torch.Generator().manual_seed(1))
        return model(input_ids=ids).logits


# name: (build kwargs, tp, (heads, sliding kv, global kv) after). Without attention_k_eq_v the global layers keep
# num_key_value_heads (transformers ignores num_global_key_value_heads then): one group, 6 / 3 / 3 at TP 3.
CASES = {
    "mm-vision-tp3": (dict(), 3, (12, 6, 3)),
    "mm-vision-audio-moe-tp6": (dict(moe=True, audio=True), 6, (12, 6, 3)),
    "mm-moe-per-layer-config-tp3": (dict(moe=True, legacy_config=False), 3, (12, 6, 3)),
    "text-kv-shared-ple-tp6": (dict(multimodal=False, num_hidden_layers=6, num_kv_shared_layers=2,
                                    hidden_size_per_layer_input=8,
                                    layer_types=["sliding_attention", "full_attention"] * 3), 6, (12, 6, 3)),
    "text-no-k-eq-v-tp3": (dict(multimodal=False, attention_k_eq_v=False), 3, (6, 3, 3)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gemma4_padded_model_gives_identical_logits(tmp_path, case):
    kwargs, tp, (heads, kv, global_kv) = CASES[case]
    multimodal = kwargs.get("multimodal", True)
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build_gemma4(src, **kwargs)
    plan = make_plan(LocalSource(src), tp, shard_size=400_000)
    run_mirror(plan, LocalPublisher(dst))
    assert verify_derivative(LocalSource(src), LocalSource(dst))["padded"] > 0
    cfg = json.loads((dst / "config.json").read_text())
    text = cfg["text_config"] if multimodal else cfg
    assert (text["num_attention_heads"], text["num_key_value_heads"]) == (heads, kv)
    # transformers reads either form; both must state the padded global kv heads
    loaded = transformers.AutoConfig.from_pretrained(dst)
    loaded = loaded.get_text_config()
    full = [i for i, t in enumerate(loaded.layer_types) if t == "full_attention"]
    assert {loaded.per_layer_config[i].num_key_value_heads for i in full} == {global_kv}
    assert {loaded.per_layer_config[i].head_dim for i in full} == {TEXT["global_head_dim"]}
    if "num_global_key_value_heads" in text:  # read only with attention_k_eq_v; else left as upstream has it
        assert text["num_global_key_value_heads"] == (global_kv if text.get("attention_k_eq_v") else 1)
    if "per_layer_config" in text:
        assert {v.get("num_key_value_heads", kv) for v in text["per_layer_config"].values()} == {global_kv}
    image = multimodal
    a, b = _logits(src, multimodal, image), _logits(dst, multimodal, image)
    delta = (a - b).abs().max().item()
    print(f"{case}: max |Δ| = {delta}")
    assert delta <= REL_TOL * a.abs().max().item()


def test_gemma4_towers_are_copied_byte_for_byte(tmp_path):
    from safetensors import safe_open
    src, dst = tmp_path / "upstream", tmp_path / "padded"
    build_gemma4(src, audio=True)
    run_mirror(make_plan(LocalSource(src), 3, shard_size=400_000), LocalPublisher(dst))
    a = safe_open(str(src / "model.safetensors"), "pt")
    towers = [k for k in a.keys() if k.startswith(("model.vision_tower.", "model.audio_tower.", "model.embed_"))]
    assert len(towers) > 30
    index = json.loads((dst / "model.safetensors.index.json").read_text())["weight_map"]
    for name in towers:
        b = safe_open(str(dst / index[name]), "pt")
        assert torch.equal(a.get_tensor(name), b.get_tensor(name)), name


def test_gemma4_double_wide_mlp_is_refused(tmp_path):
    src = tmp_path / "upstream"
    build_gemma4(src, multimodal=False, num_hidden_layers=6, num_kv_shared_layers=2, use_double_wide_mlp=True,
                 layer_types=["sliding_attention", "full_attention"] * 3)
    with pytest.raises(ConfigError, match="use_double_wide_mlp"):
        make_plan(LocalSource(src), 3)


# Published layouts (tests/gemma4_real.py) planned from headers at TP 3 and 6:
# name -> {tp: (heads, sliding kv, global kv, expert intermediate or None)}
REAL = {"google/gemma-4-31B-it": {3: (48, 24, 6, None), 6: (48, 24, 6, None)},
        "google/gemma-4-26B-A4B-it": {3: (24, 12, 3, 768), 6: (24, 12, 3, 768)}}


@pytest.mark.parametrize("name", sorted(REAL))
def test_gemma4_published_layouts_plan_at_tp3_and_tp6(tmp_path, name):
    from hubpad.testing import write_checkpoint
    from tests import gemma4_real
    from tests.helpers import cli

    cfg = gemma4_real.REAL_GEMMA4[name]
    src = write_checkpoint(tmp_path / name.split("/")[1], cfg, gemma4_real.tensors(cfg), n_shards=3, header_only=True)
    for tp, (heads, kv, global_kv, expert) in REAL[name].items():
        result = cli("plan", src, "--tp", str(tp), "--json")
        assert result.exit_code == 0, result.output
        plan = json.loads(result.output)
        dims = {d["name"]: d["after"] for d in plan["dims"]}
        assert (dims["attention heads"], dims["kv heads"], dims["global kv heads"]) == (heads, kv, global_kv)
        assert dims.get("expert intermediate") == expert
        assert all(r["ok"] for r in plan["rank_table"] if r["required"])
        text = plan["config_changes"]
        assert text["text_config.num_global_key_value_heads"] == [cfg["text_config"]["num_global_key_value_heads"],
                                                                  global_kv]
        print(name, tp, dims)


def test_gemma4_advisor_counts_kv_cache_per_layer_type(tmp_path):
    """31B: 50 sliding layers cache K and V of 16 kv heads x 256, 10 global layers K and V (vLLM allocates V even
    with attention_k_eq_v) of 4 x 512: 450,560 values per token. At TP 3 (24 / 6 kv heads) 675,840: +50 %; at TP 8
    the 4 global kv heads are replicated twice (+40,960 values), nothing padded."""
    from hubpad.plan.advisor import advise
    from hubpad.testing import write_checkpoint
    from tests import gemma4_real

    cfg = gemma4_real.GEMMA4_31B
    src = write_checkpoint(tmp_path / "31b", cfg, gemma4_real.tensors(cfg), n_shards=2, header_only=True)
    rows = {r.tp: r for r in advise(LocalSource(src), (1, 3, 8)).rows}
    assert rows[1].kv_bytes_per_token == 2 * (50 * 2 * 16 * 256 + 10 * 2 * 4 * 512) == 901_120
    assert rows[3].kv_bytes_per_token == 2 * (50 * 2 * 24 * 256 + 10 * 2 * 6 * 512)
    assert rows[3].extra_kv_bytes_per_token == 450_560
    assert (rows[8].verdict, rows[8].extra_kv_bytes_per_token, rows[8].padding_kv_bytes_per_token) == ("as is",
                                                                                                        81_920, 0)
