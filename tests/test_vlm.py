"""Vision-language models: pad the language model, copy the vision tower byte for byte, serve it data-parallel.

Tiny models built with transformers, padded at TP=3 and TP=6: Qwen3-VL dense and MoE (deepstack merger included),
GLM-4.5V (`glm4v_moe`), Kimi-K2.5 (`kimi_k25`: MLA language model, MoonViT tower, projector) and EXAONE 4.5
(`exaone4_5`: EXAONE 4 inside, a Qwen2.5-VL-style GQA tower, one MTP layer). Their float64
logits on a prompt that holds an image (pixel values through the vision tower) must equal the original's exactly;
every vision-tower and projector tensor must be byte-identical; the card and recipe must serve them with
`--mm-encoder-tp-mode data`. Qwen3-VL-MoE's fused experts are checked in both layouts: the hub's (gate_up [E,
hidden, 2I], down [E, I, hidden], which vLLM reads) and the one transformers' save_pretrained writes ([E, 2I,
hidden], [E, hidden, I]); transformers loads both. Kimi-K2.5 is written in the hub's names (transformers 5.24 saves
its language model as `language_model.model.blocks.*` and the projector norm under `model.`; both renamed back).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors import safe_open  # noqa: E402

from tests.helpers import cli  # noqa: E402
from tests.vlm_models import (TOKENS, VISION, build_exaone4_5, build_glm4v, build_kimi_k25,  # noqa: E402
                               build_qwen3_vl)


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
    src = build_qwen3_vl(tmp_path / "upstream", moe, hub_layout)
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


# --------------------------------------------------------------------------------------------------
# GLM-4.5V and Kimi-K2.5



def _vlm_logits(path, image_inputs):
    model = transformers.AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float64).eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    with torch.no_grad():
        return model(**image_inputs(model.config)).logits


def _glm4v_image(cfg):
    ids = torch.tensor([[1, 20, cfg.image_start_token_id] + [cfg.image_token_id] * 4 + [cfg.image_end_token_id, 30]])
    pixels = torch.randn(16, 3 * 2 * 8 * 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return dict(input_ids=ids, pixel_values=pixels, image_grid_thw=torch.tensor([[1, 4, 4]]),
                mm_token_type_ids=(ids == cfg.image_token_id).long())


def _kimi_image(cfg):
    ids = torch.tensor([[1, 20] + [cfg.image_token_id] * 4 + [30, 40, 50]])
    pixels = torch.randn(16, 3, 4, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return dict(input_ids=ids, pixel_values=pixels, image_grid_thw=torch.tensor([[1, 4, 4]]))


def _exaone_image(cfg):
    """4 image tokens (a 4 x 4 patch grid merged 2 x 2) between text tokens; EXAONE 4.5's tower is Qwen2.5-VL's."""
    v = cfg.vision_config
    ids = torch.tensor([[1, 20, 7] + [cfg.image_token_id] * 4 + [8, 30, 40, 50]])
    pixels = torch.randn(16, 3 * v.temporal_patch_size * v.patch_size ** 2, generator=torch.Generator().manual_seed(1),
                         dtype=torch.float64)
    return dict(input_ids=ids, pixel_values=pixels, image_grid_thw=torch.tensor([[1, 4, 4]]),
                mm_token_type_ids=(ids == cfg.image_token_id).long())


# family: (builder, image inputs, tensor prefixes that must be copied byte for byte, flags the card must carry)
OTHERS = {
    # EXAONE 4 inside (tests/vlm_models.py adds one MTP layer at EXAONE MoE's names, padded, ignored by transformers)
    "exaone4_5": (build_exaone4_5, _exaone_image, ("model.visual.",), ("--tool-call-parser hermes",)),
    "glm4v_moe": (build_glm4v, _glm4v_image, ("model.visual.",), ("--tool-call-parser glm45",)),
    "kimi_k25": (build_kimi_k25, _kimi_image, ("vision_tower.", "mm_projector."),
                 ("--tool-call-parser kimi_k2", "--trust-remote-code")),
}


@pytest.mark.parametrize("tp", [3, 6])
@pytest.mark.parametrize("family", sorted(OTHERS))
def test_other_vision_language_models_pad_the_language_model_only(tmp_path, family, tp):
    build, image_inputs, tower, flags = OTHERS[family]
    src = build(tmp_path / "upstream")
    dst = tmp_path / "padded"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    assert cli("verify", src, dst).exit_code == 0
    text = json.loads((dst / "config.json").read_text())["text_config"]
    assert text["num_attention_heads"] % tp == 0 and text["num_attention_heads"] > 4

    before, after = _tensors(src / "model.safetensors"), _tensors(next(dst.glob("model-*.safetensors")))
    copied = [n for n in before if n.startswith(tower)]
    assert copied and all(after[n] == before[n] for n in copied)

    a, b = _vlm_logits(src, image_inputs), _vlm_logits(dst, image_inputs)
    delta = (a - b).abs().max().item()
    print(f"{family} TP={tp}: float64 max |Δ| = {delta}")
    assert delta == 0.0
    card = " ".join(line.strip().rstrip("\\").strip() for line in (dst / "README.md").read_text().splitlines())
    for flag in ("--mm-encoder-tp-mode data", *flags):
        assert flag in card, flag
