"""Qwen3-VL (dense and MoE): pad the language model, copy the vision tower byte for byte, serve it data-parallel.

Tiny Qwen3-VL models built with transformers (deepstack merger included) are padded at TP=3 and TP=6. Their float64
logits on a prompt that holds an image (pixel values through the vision tower, M-RoPE positions) must equal the
original's exactly; every `model.visual.*` tensor must be byte-identical; the card and recipe must serve it with
`--mm-encoder-tp-mode data`. The MoE's fused experts are checked in both layouts: the hub's (gate_up [E, hidden,
2I], down [E, I, hidden], which vLLM reads) and the one transformers' save_pretrained writes ([E, 2I, hidden],
[E, hidden, I]); transformers loads both.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from tests.helpers import cli  # noqa: E402
from tests.tiny_moe import randomize  # noqa: E402

TEXT = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, max_position_embeddings=256, rms_norm_eps=1e-6,
            tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                        "mrope_section": [4, 6, 6], "mrope_interleaved": True})
MOE = dict(moe_intermediate_size=96, num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1)
VISION = dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=2, patch_size=8, spatial_merge_size=2,
              temporal_patch_size=2, out_hidden_size=128, num_position_embeddings=64, deepstack_visual_indexes=[0])
TOKENS = dict(image_token_id=5, video_token_id=6, vision_start_token_id=7, vision_end_token_id=8)


def _build(path, moe: bool, hub_layout: bool = False):
    torch.manual_seed(0)
    cls = transformers.Qwen3VLMoeConfig if moe else transformers.Qwen3VLConfig
    cfg = cls(text_config={**TEXT, **(MOE if moe else {})}, vision_config=VISION, **TOKENS)
    model = transformers.AutoModelForImageTextToText.from_config(cfg).eval()
    randomize(model)
    model.save_pretrained(path)
    if hub_layout:  # the layout Qwen ships and vLLM reads: the last two axes of each fused expert tensor swapped
        tensors = load_file(path / "model.safetensors")
        for name in [n for n in tensors if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
            tensors[name] = tensors[name].transpose(1, 2).contiguous()
        save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    return path


def _logits(path, ids, pixels, grid):
    model = transformers.AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float64).eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    with torch.no_grad():
        return model(input_ids=ids, pixel_values=pixels, image_grid_thw=grid,
                     mm_token_type_ids=(ids == TOKENS["image_token_id"]).long()).logits


def _image_prompt():
    """A 1 x 4 x 4 patch image (merged 2 x 2 into 4 image tokens) between text tokens."""
    v = VISION
    pixels = torch.randn(16, 3 * v["temporal_patch_size"] * v["patch_size"] ** 2,
                         generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ids = torch.tensor([[1, 20, TOKENS["vision_start_token_id"]] + [TOKENS["image_token_id"]] * 4
                        + [TOKENS["vision_end_token_id"], 30, 40, 50]])
    return ids, pixels, torch.tensor([[1, 4, 4]])


def _tensors(path) -> dict[str, bytes]:
    with safe_open(path, "pt") as f:
        return {k: f.get_tensor(k).numpy().tobytes() for k in f.keys()}


CASES = {
    # name: (moe, hub layout, tp, heads after, kv after, expert intermediate after)
    "dense-tp3": (False, False, 3, 6, 3, None),
    "dense-tp6": (False, False, 6, 6, 3, None),
    "moe-hub-layout-tp3": (True, True, 3, 6, 3, 192),
    "moe-transformers-layout-tp6": (True, False, 6, 6, 3, 384),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_qwen3_vl_pads_the_language_model_only(tmp_path, case):
    moe, hub_layout, tp, heads, kv, expert = CASES[case]
    src = _build(tmp_path / "upstream", moe, hub_layout)
    dst = tmp_path / "padded"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    assert cli("verify", src, dst).exit_code == 0

    config = json.loads((dst / "config.json").read_text())
    text = config["text_config"]
    assert (text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"]) == (heads, kv, 32)
    assert config["vision_config"] == json.loads((src / "config.json").read_text())["vision_config"]
    if expert:
        assert text["moe_intermediate_size"] == expert

    before, after = _tensors(src / "model.safetensors"), _tensors(next(dst.glob("model-*.safetensors")))
    visual = [n for n in before if n.startswith("model.visual.")]
    assert visual and all(after[n] == before[n] for n in visual)  # the vision tower, byte for byte
    assert any("deepstack_merger_list" in n for n in visual)

    ids, pixels, grid = _image_prompt()
    a, b = _logits(src, ids, pixels, grid), _logits(dst, ids, pixels, grid)
    delta = (a - b).abs().max().item()
    print(f"{case}: float64 max |Δ| = {delta}")
    assert delta == 0.0

    argv = [line.strip().rstrip("\\").strip() for line in (dst / "README.md").read_text().splitlines()]
    assert "--mm-encoder-tp-mode data" in argv
    recipe = next(dst.glob("*.yaml")).read_text()
    assert "--mm-encoder-tp-mode {mm_encoder_tp_mode}" in recipe and "mm_encoder_tp_mode: data" in recipe
    manifest = json.loads((dst / "hubpad.json").read_text())
    assert manifest["serving"]["min_vllm"]["version"] == "0.19.0"  # the vocab plugin; Qwen3-VL itself 0.11.0
