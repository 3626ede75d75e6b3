"""The InternViT family (adapters/internvl.py, adapters/nested_lm.py): float64 proofs at TP 3 and 6.

Tiny models built with transformers' InternVLForConditionalGeneration (tests/internvl_models.py), Qwen2 (the
InternVL3-78B / NVLM-D / Skywork-R1V line: heads padded, served through the nested LlamaForCausalLM route) and
Qwen3-MoE (InternVL3.5-241B, Intern-S1) language models, a 40-wide InternViT MLP. Each is mirrored, verified, and its
float64 logits on a prompt holding an image (pixel values through the tower) must equal the original's exactly:

- `internvl` (transformers' layout; Intern-S1's too): the tower's MLP grows zero neurons (vLLM's interns1_vit.py
  shards it), the rest of the tower and the projector are byte-identical, and no --mm-encoder-tp-mode.
- `internvl_chat` / `NVLM_D` (InternVL-Chat's layout, renamed from the same weights): the tower is copied byte for
  byte and served --mm-encoder-tp-mode data; `skywork_chat`: the same layout with its tower's MLP padded. Their proof
  renames the derivative back to transformers' names (InternVL-Chat's modules are transformers' InternVL modules).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402

from tests.helpers import cli, folder_tensors  # noqa: E402
from tests.internvl_models import (IMAGE_TOKEN, IMAGE_TOKENS, QWEN2, QWEN3_MOE, build_internvl,  # noqa: E402
                                   chat_checkpoint, hf_from_chat)


def _logits(path):
    model = transformers.InternVLForConditionalGeneration.from_pretrained(path, dtype=torch.float64).eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")  # torch's grouped_mm takes no float64
    ids = torch.tensor([[1, 20] + [IMAGE_TOKEN] * IMAGE_TOKENS + [30, 40, 50]])
    pixels = torch.randn(1, 3, 56, 56, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        return model(input_ids=ids, pixel_values=pixels).logits


def _card(dst) -> str:
    return " ".join(line.strip().rstrip("\\").strip() for line in (dst / "README.md").read_text().splitlines())


def _mirror(src, dst, tp):
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    assert cli("verify", src, dst).exit_code == 0


TEXTS = {"qwen2": QWEN2, "qwen3_moe": QWEN3_MOE}


@pytest.mark.parametrize("tp", [3, 6])
@pytest.mark.parametrize("text", sorted(TEXTS))
def test_internvl_pads_the_language_model_and_the_towers_mlp(tmp_path, text, tp):
    src = build_internvl(tmp_path / "upstream", TEXTS[text])
    dst = tmp_path / "padded"
    _mirror(src, dst, tp)
    config = json.loads((dst / "config.json").read_text())
    assert config["text_config"]["num_attention_heads"] == 6 and config["text_config"]["head_dim"] == 16
    assert config["vision_config"]["intermediate_size"] == 42  # 40 -> a multiple of 3 and of 6
    before, after = load_file(src / "model.safetensors"), folder_tensors(dst)
    copied = [n for n in before if n.startswith(("model.vision_tower.", "model.multi_modal_projector."))
              and ".mlp.fc" not in n]
    assert copied and all(torch.equal(after[n], before[n]) for n in copied)
    fc1 = "model.vision_tower.encoder.layer.0.mlp.fc1.weight"
    assert after[fc1].shape == (42, 32) and not after[fc1][40:].any()

    delta = (_logits(src) - _logits(dst)).abs().max().item()
    print(f"internvl/{text} TP={tp}: float64 max |Δ| = {delta}")
    assert delta == 0.0
    card = _card(dst)
    assert "--mm-encoder-tp-mode" not in card  # vLLM's InternS1 class has no data-parallel encoder
    assert "--trust-remote-code" not in card  # transformers' own config class
    if text == "qwen2":
        assert '"text_config": {"architectures": ["LlamaForCausalLM"], "qkv_bias": true}' in card


# model_type: (architecture, the tower copied and served data-parallel)
CHAT = {"internvl_chat": ("InternVLChatModel", True), "NVLM_D": ("NVLM_D", True),
        "skywork_chat": ("SkyworkR1VChatModel", False)}


@pytest.mark.parametrize("tp", [3, pytest.param(6, marks=pytest.mark.slow)])  # TP 6: the same code path
@pytest.mark.parametrize("model_type", sorted(CHAT))
def test_internvl_chat_layout(tmp_path, model_type, tp):
    arch, data_parallel = CHAT[model_type]
    hf = build_internvl(tmp_path / "hf", QWEN2)
    src = chat_checkpoint(hf, tmp_path / "upstream", model_type, arch)
    dst = tmp_path / "padded"
    _mirror(src, dst, tp)
    config = json.loads((dst / "config.json").read_text())
    assert config["llm_config"]["num_attention_heads"] == 6 and config["llm_config"]["num_key_value_heads"] == 3
    assert config["vision_config"]["intermediate_size"] == (40 if data_parallel else 42)
    before, after = load_file(src / "model.safetensors"), folder_tensors(dst)
    tower = [n for n in before if n.startswith(("vision_model.", "mlp1.")) and not (".mlp.fc" in n and not data_parallel)]
    assert tower and all(torch.equal(after[n], before[n]) for n in tower)

    delta = (_logits(hf) - _logits(hf_from_chat(dst, tmp_path / "back"))).abs().max().item()
    print(f"{model_type} TP={tp}: float64 max |Δ| = {delta}")
    assert delta == 0.0
    card = _card(dst)
    assert ("--mm-encoder-tp-mode data" in card) == data_parallel
    assert "--trust-remote-code" in card  # the checkpoint's own config class
    assert '--hf-overrides \'{"text_config": {"architectures": ["LlamaForCausalLM"], "qkv_bias": true}}\'' in card


def test_internvl_chat_refuses_an_internlm2_language_model(tmp_path):
    hf = build_internvl(tmp_path / "hf", QWEN2)
    src = chat_checkpoint(hf, tmp_path / "upstream")
    config = json.loads((src / "config.json").read_text())
    config["llm_config"]["model_type"] = "internlm2"
    (src / "config.json").write_text(json.dumps(config))
    for command in ("plan", "mirror"):
        result = cli(command, src, "--tp", 3, *(("--to", tmp_path / "out") if command == "mirror" else ()))
        assert result.exit_code != 0
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "llm_config" in lines[0] and "InternLM2" in lines[0], result.output


@pytest.mark.parametrize("tp", [3, pytest.param(6, marks=pytest.mark.slow)])
def test_interns2_preview_pads_as_qwen35_moe_and_copies_its_time_series_encoder(tmp_path, tp):
    """Intern-S2-Preview: a tiny Qwen3.5-MoE (tests/gdn_models.py) labelled `interns2_preview`, with a time-series
    tensor beside it; the proof runs transformers' Qwen3.5-MoE on both (the label put back, the extra tensor left
    out)."""
    from safetensors.torch import save_file

    from tests import gdn_models
    from tests.test_gdn import _logits as gdn_logits

    src = gdn_models.build("qwen3_5_moe", tmp_path / "upstream")
    tensors = load_file(src / "model.safetensors")
    series = torch.arange(24, dtype=torch.bfloat16).reshape(4, 6)
    save_file({**tensors, "model.time_series.proj.weight": series}, src / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "model_type": "interns2_preview",
                                                 "architectures": ["InternS2PreviewForConditionalGeneration"]}))
    dst = tmp_path / "padded"
    _mirror(src, dst, tp)
    after = folder_tensors(dst)
    assert torch.equal(after["model.time_series.proj.weight"], series)
    assert json.loads((dst / "config.json").read_text())["text_config"]["num_attention_heads"] == 6
    assert "--mm-encoder-tp-mode data" in _card(dst) and "--trust-remote-code" in _card(dst)

    for path in (src, dst):  # back to transformers' label, without the tensor it has no module for
        cfg = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**cfg, "model_type": "qwen3_5_moe",
                                                      "architectures": ["Qwen3_5MoeForConditionalGeneration"]}))
        for f in path.glob("*.safetensors"):
            t = load_file(f)
            t.pop("model.time_series.proj.weight", None)
            save_file(t, f, metadata={"format": "pt"})
    delta = (gdn_logits(src, True) - gdn_logits(dst, True)).abs().max().item()
    print(f"interns2_preview TP={tp}: float64 max |Δ| = {delta}")
    assert delta == 0.0
