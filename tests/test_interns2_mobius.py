"""Intern-S2-Mobius (`interns2_mobius`, adapters/interns2.py): float64 proofs at TP 3 and 6.

A tiny checkpoint in vLLM's interns2_mobius.py layout (tests/interns2_mobius_models.py: 4 hybrid layers sharing 2
routed banks `meta_mlp.{b}`, fused or per expert, a shared expert per layer, layer scales, an MTP layer) is mirrored
and verified; its banks are padded once, to the routed experts' padded width. The reference is transformers'
Qwen3.5-MoE with each layer's routed block read from its bank and the layer scales hooked in (what vLLM's module
computes): original and derivative give equal float64 logits on a prompt holding an image.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests import interns2_mobius_models as mobius  # noqa: E402
from tests.helpers import cli, folder_tensors  # noqa: E402
from tests.test_gdn import _logits  # noqa: E402


def _card(dst) -> str:
    return " ".join(line.strip().rstrip("\\").strip() for line in (dst / "README.md").read_text().splitlines())


def _reference_logits(path, tmp):
    return _logits(mobius.to_qwen35(path, tmp), True, prepare=mobius.layer_scales(path))


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_expert"])
@pytest.mark.parametrize("tp", [3, 6])
def test_interns2_mobius_pads_each_shared_bank_once(tmp_path, tp, fused):
    src = mobius.build(tmp_path / "upstream", fused=fused)
    dst = tmp_path / "padded"
    result = cli("mirror", src, "--tp", tp, "--to", dst)
    assert result.exit_code == 0, result.output
    assert cli("verify", src, dst).exit_code == 0

    before, after = folder_tensors(src), folder_tensors(dst)
    assert sorted(before) == sorted(after)  # the published names, nothing added or dropped
    text = json.loads((dst / "config.json").read_text())["text_config"]
    inter = text["moe_intermediate_size"]
    assert inter > 96 and inter % tp == 0 and text["num_attention_heads"] == 6
    assert {k: text[k] for k in ("num_blocks", "layer_scale", "mtp_num_experts")} == {
        "num_blocks": 2, "layer_scale": True, "mtp_num_experts": 8}
    for b in range(2):  # each bank once, at the routed experts' padded width, zeros past the original 96
        bank = f"{mobius.LM}meta_mlp.{b}."
        assert torch.equal(after[bank + "gate.weight"], before[bank + "gate.weight"])
        down = (after[bank + "experts.down_proj"] if fused
                else torch.stack([after[f"{bank}experts.{e}.down_proj.weight"] for e in range(8)]))
        assert down.shape[-1] == inter and not down[..., 96:].any()
    for name in [n for n in before if mobius.SCALE.match(n)]:
        assert torch.equal(after[name], before[name])
    card = _card(dst)
    assert "--mm-encoder-tp-mode data" in card and "--trust-remote-code" in card

    delta = (_reference_logits(src, tmp_path / "ref_src") - _reference_logits(dst, tmp_path / "ref_dst")).abs().max()
    print(f"interns2_mobius TP={tp} {'fused' if fused else 'per-expert'} banks: float64 max |Δ| = {delta.item()}")
    assert delta.item() == 0.0


def test_the_reference_reads_the_banks_and_the_layer_scales(tmp_path):
    """With a bank per layer and no layer scales the reference is transformers' Qwen3.5-MoE on the checkpoint the
    banks were taken from; sharing banks, or the layer scales, change its logits."""
    from tests import gdn_models

    own = mobius.build(tmp_path / "own", num_blocks=4, layer_scale=False)
    qwen = gdn_models.build("qwen3_5_moe", tmp_path / "qwen")  # the same seed: the same weights
    assert (_reference_logits(own, tmp_path / "a") - _logits(qwen, True)).abs().max().item() == 0.0
    shared = mobius.build(tmp_path / "shared")
    scaled = _reference_logits(shared, tmp_path / "b")
    assert (scaled - _logits(mobius.to_qwen35(shared, tmp_path / "c"), True)).abs().max().item() > 0
    config = json.loads((shared / "config.json").read_text())
    config["text_config"]["num_blocks"] = 1  # every layer on bank 0
    (shared / "config.json").write_text(json.dumps(config))
    assert (scaled - _reference_logits(shared, tmp_path / "d")).abs().max().item() > 0


def test_a_tp_larger_than_the_banks_experts_is_refused(tmp_path):
    """vLLM's InternS2MobiusMetaMoeBlock refuses a TP larger than num_experts, which padding cannot change: plan and
    mirror stop with one error line."""
    src = mobius.build(tmp_path / "upstream")
    config = json.loads((src / "config.json").read_text())
    config["text_config"]["num_experts"] = 4
    (src / "config.json").write_text(json.dumps(config))
    for command in ("plan", "mirror"):
        result = cli(command, src, "--tp", 6, *(("--to", tmp_path / "out") if command == "mirror" else ()))
        assert result.exit_code != 0
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "4 routed experts < tp 6" in lines[0], result.output
        assert "Traceback" not in result.output


def test_the_mtp_layers_experts_bound_the_tp_its_card_offers_mtp_at():
    """vLLM's InternS2MobiusMTP builds Qwen3.5-MoE's MoE block with mtp_num_experts experts: a TP above it is said."""
    from hubpad.plan.adapters import adapter_for

    config = {"model_type": "interns2_mobius", "architectures": [mobius.ARCH],
              "text_config": {"mtp_num_hidden_layers": 1, "mtp_num_experts": 4, "hidden_size": 2048}}
    adapter = adapter_for(config)
    assert adapter.tp_notes(config, 4) == []
    assert "mtp_num_experts (4)" in adapter.tp_notes(config, 8)[0]
    features = adapter.serving(config)["vllm_features"]
    assert "spec:interns2_mobius_mtp" in features and "arch:InternS2MobiusForConditionalGeneration" in features


def test_a_layers_own_routed_expert_is_not_a_mobius_tensor(tmp_path):
    """A Mobius decoder layer has no routed experts of its own (vLLM's InternS2MobiusDecoderLayer builds only the
    shared expert under `mlp.`): such a tensor is refused by name, not padded."""
    from safetensors.torch import load_file, save_file

    src = mobius.build(tmp_path / "upstream")
    file = src / "model.safetensors"
    tensors = load_file(file)
    stray = f"{mobius.LM}layers.0.mlp.experts.0.gate_proj.weight"
    tensors[stray] = torch.zeros(96, 128, dtype=torch.bfloat16)
    save_file(tensors, file, metadata={"format": "pt"})
    result = cli("plan", src, "--tp", 3)
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code != 0 and len(lines) == 1 and stray.rpartition(".")[0] in lines[0], result.output
