"""Vision-language models: pad the language model, copy the vision tower byte for byte, serve it data-parallel.

Tiny models built with transformers, padded at TP=3 and TP=6: Qwen3-VL dense and MoE (deepstack merger included),
GLM-4.5V (`glm4v_moe`) and Kimi-K2.5 (`kimi_k25`: MLA language model, MoonViT tower, projector). Their float64
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


# --------------------------------------------------------------------------------------------------
# GLM-4.5V and Kimi-K2.5


def _build_glm4v(path):
    torch.manual_seed(0)
    text = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, moe_intermediate_size=96, n_routed_experts=4,
                num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1,
                attention_bias=True, max_position_embeddings=256,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3],
                                 "partial_rotary_factor": 0.5})
    vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, patch_size=8, spatial_merge_size=2,
                  temporal_patch_size=2, out_hidden_size=128, image_size=32)
    cfg = transformers.Glm4vMoeConfig(text_config=text, vision_config=vision, image_token_id=5, video_token_id=6,
                                      image_start_token_id=7, image_end_token_id=8, video_start_token_id=9,
                                      video_end_token_id=10)
    model = transformers.AutoModelForImageTextToText.from_config(cfg).eval()
    randomize(model)
    model.save_pretrained(path)
    return path


def _build_kimi_k25(path):
    torch.manual_seed(0)
    text = dict(model_type="kimi_k2", vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=4, q_lora_rank=96, kv_lora_rank=64, qk_rope_head_dim=32,
                qk_nope_head_dim=32, v_head_dim=32, n_routed_experts=4, n_group=1, topk_group=1,
                first_k_dense_replace=1, n_shared_experts=1, num_experts_per_tok=2, moe_intermediate_size=64,
                max_position_embeddings=256, tie_word_embeddings=False)
    vision = dict(patch_size=4, pos_emb_height=8, pos_emb_width=8, pos_emb_time=2, num_attention_heads=2,
                  num_hidden_layers=1, hidden_size=32, intermediate_size=64)
    cfg = transformers.Kimi_K25Config(text_config=text, vision_config=vision, media_placeholder_token_id=5,
                                      image_token_id=5, video_token_id=6, projection_hidden_size=32)
    model = transformers.AutoModelForImageTextToText.from_config(cfg).eval()
    randomize(model)
    model.save_pretrained(path)
    tensors = load_file(path / "model.safetensors")
    hub = {k.replace("language_model.model.blocks.", "language_model.model.layers.")
            .replace("model.mm_projector.", "mm_projector."): v for k, v in tensors.items()}
    save_file(hub, path / "model.safetensors", metadata={"format": "pt"})
    return path


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


# family: (builder, image inputs, tensor prefixes that must be copied byte for byte, flags the card must carry)
OTHERS = {
    "glm4v_moe": (_build_glm4v, _glm4v_image, ("model.visual.",), ("--tool-call-parser glm45",)),
    "kimi_k25": (_build_kimi_k25, _kimi_image, ("vision_tower.", "mm_projector."),
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
