"""Text-only checkpoints of VLM families vLLM serves as `*ForCausalLM` (issue 33): MiniMax-M3 (`minimax_m3_vl_text`,
MiniMaxM3SparseForCausalLM) and Qwen4-Exp (`qwen4_exp_text`, Qwen4ExpForCausalLM), padded by the same rules as their
multimodal checkpoints, with the language model at `model.` instead of the multimodal one's prefix.

Each tiny text-only checkpoint is its multimodal one (tests/test_minimax_m3.py, tests/linear_models.py) with the tower
dropped, the language model's names at `model.` / `lm_head` (the names vLLM's text-only class reads) and text_config
lifted to the top. The proof: mirror + verify the text-only form at TP 3 and 6, then put the derivative back under
the multimodal names beside the original tower and compare float64 logits with the original through transformers'
multimodal class (the same language model; the tower is copied by both adapters). The derivative's bytes also equal
the multimodal derivative's language-model bytes, tensor for tensor.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hubpad.plan.adapters import adapter_for  # noqa: E402
from hubpad.plan.adapters.vllm import min_vllm  # noqa: E402
from tests.helpers import assert_same_logits, folder_tensors, mirror_and_verify  # noqa: E402


# family -> (prefix of the language model's `model.` names in the multimodal checkpoint, of lm_head, tower prefixes,
#            the text-only model_type and architecture)
FORMS = {
    "minimax_m3": ("language_model.model.", "language_model.", ("vision_tower.", "multi_modal_projector.",
                                                                "patch_merge_mlp."),
                   "minimax_m3_vl_text", "MiniMaxM3SparseForCausalLM"),
    "qwen4_exp": ("model.language_model.", "", ("model.visual.",), "qwen4_exp_text", "Qwen4ExpForCausalLM"),
}


def _save(tensors: dict, config: dict, into):
    from safetensors.torch import save_file

    into.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(into / "model.safetensors"), metadata={"format": "pt"})
    (into / "config.json").write_text(json.dumps(config, indent=2))
    return into


def text_only(family: str, vl, into):
    """The multimodal checkpoint at `vl` as its text-only form (what vLLM's *ForCausalLM reads)."""
    lm, head, towers, model_type, arch = FORMS[family]
    tensors = {}
    for name, t in folder_tensors(vl).items():
        if name.startswith(towers):
            continue
        if name.startswith(lm):
            name = "model." + name[len(lm):]
        elif head and name.startswith(head + "lm_head"):
            name = name[len(head):]
        tensors[name] = t
    config = json.loads((vl / "config.json").read_text())
    text = {**config["text_config"], "model_type": model_type, "architectures": [arch]}
    return _save(tensors, text, into)


def multimodal(family: str, text, vl, into):
    """A text-only checkpoint put back under the multimodal names, beside the tower of the multimodal one at `vl`."""
    lm, head, towers, _, _ = FORMS[family]
    tensors = {k: v for k, v in folder_tensors(vl).items() if k.startswith(towers)}
    for name, t in folder_tensors(text).items():
        if name.startswith("model."):
            name = lm + name[len("model."):]
        elif name.startswith("lm_head"):
            name = head + name
        tensors[name] = t
    config = json.loads((vl / "config.json").read_text())
    lifted = json.loads((text / "config.json").read_text())
    config["text_config"] = {**lifted, "model_type": config["text_config"]["model_type"]}
    config["text_config"].pop("architectures", None)
    return _save(tensors, config, into)


def _minimax_m3(tmp_path):
    from tests import test_minimax_m3 as m3

    model, path = m3._build(tmp_path)

    def logits(p):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(m3.m3.MiniMaxM3VLRMSNorm, "forward", m3._norm64)
            loaded = transformers.AutoModelForImageTextToText.from_pretrained(p, dtype=torch.float64,
                                                                             experts_implementation="eager").eval()
            return m3._logits(loaded)
    return path, logits


def _qwen4_exp(tmp_path):
    if not hasattr(transformers, "Qwen4ExpForConditionalGeneration"):
        pytest.skip("transformers has no Qwen4-Exp (5.24+)")
    from tests import linear_models

    return linear_models.build_qwen4_exp(tmp_path / "upstream"), linear_models.qwen4_logits


BUILDERS = {"minimax_m3": _minimax_m3, "qwen4_exp": _qwen4_exp}


@pytest.mark.parametrize("tp", [3, 6])
@pytest.mark.parametrize("family", sorted(FORMS))
def test_text_only_checkpoint_pads_as_its_multimodal_one(tmp_path, family, tp):
    vl, logits = BUILDERS[family](tmp_path)
    src = text_only(family, vl, tmp_path / "text")
    dst, vl_dst = tmp_path / f"text-tp{tp}", tmp_path / f"vl-tp{tp}"
    mirror_and_verify(src, dst, tp)
    mirror_and_verify(vl, vl_dst, tp)
    config = json.loads((dst / "config.json").read_text())
    assert config["model_type"] == FORMS[family][3] and "text_config" not in config
    assert config == {**json.loads((vl_dst / "config.json").read_text())["text_config"],
                      "model_type": FORMS[family][3], "architectures": [FORMS[family][4]]}
    padded, vl_padded = folder_tensors(dst), folder_tensors(text_only(family, vl_dst, tmp_path / "vl-as-text"))
    assert padded.keys() == vl_padded.keys()
    assert all(torch.equal(padded[k], vl_padded[k]) for k in padded)
    a = logits(vl)
    b = logits(multimodal(family, dst, vl, tmp_path / f"back-tp{tp}"))
    assert_same_logits(a, b, f"{family} text-only tp{tp}")


def test_text_only_cards_name_the_causal_lm_class():
    """No encoder mode (no tower), the text-only class in the features; Qwen4-Exp keeps its MTP drafter."""
    m3 = adapter_for({"model_type": "minimax_m3_vl_text", "architectures": ["MiniMaxM3SparseForCausalLM"]})
    out = m3.serving({})
    assert "mm_encoder_tp_mode" not in out and out["vllm_features"][0] == "arch:MiniMaxM3SparseForCausalLM"
    assert min_vllm(out["vllm_features"])["version"] is not None
    cfg = {"model_type": "qwen4_exp_text", "architectures": ["Qwen4ExpForCausalLM"], "mtp_num_hidden_layers": 1}
    out = adapter_for(cfg).serving(cfg)
    assert "mm_encoder_tp_mode" not in out and out["speculative_config"] == {"method": "mtp",
                                                                          "num_speculative_tokens": 1}
    assert {"arch:Qwen4ExpForCausalLM", "spec:qwen4_exp_mtp"} <= set(out["vllm_features"])
    assert min_vllm(out["vllm_features"])["version"] is not None
