"""The card's "Why the outputs do not change" (plan/lossless.py): every registered adapter gets sentences true of its own
mechanism, a declaration the module does not know gets no claim, and real layouts record what grew at their TP and
in which formats (a BF16 card says nothing of quantization codes)."""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hubpad.plan import lossless
from hubpad.plan.adapters import ADAPTERS
from hubpad.plan.adapters.base import ATTENTION, Adapter, Role
from hubpad.plan.heads import HeadShape
from hubpad.plan.planner import make_plan
from hubpad.render.card import render_derivative
from hubpad.source import open_source
from hubpad.testing import build_tiny_hy3, tiny_hy3_tensors, write_checkpoint
from tests import (dsv4_real, gpt_oss_real, inkling_real, linear_real, mimo_real, minimax_real, mla_real,
                   nemotron_h_real, qwen35_real, real_models)
from tests.helpers import cli

# One config every registered adapter's head_shape accepts (MLA, DeepSeek-V4, Gemma 4, MiMo, Step-3.7 keys included);
# the families that need kv heads get them from the second try.
_CONFIG = dict(num_attention_heads=8, hidden_size=128, head_dim=16, qk_nope_head_dim=16, qk_rope_head_dim=8,
               v_head_dim=16, kv_lora_rank=32, o_groups=2, o_lora_rank=16, q_lora_rank=32, num_hidden_layers=2,
               layer_types=["sliding_attention", "full_attention"], global_head_dim=32, num_global_key_value_heads=1,
               swa_num_attention_heads=8, swa_num_key_value_heads=2, swa_head_dim=16, swa_v_head_dim=16)


def _published_configs() -> list[dict]:
    """Every published config the tests hold (a dict with a model_type in tests/*_real.py, REAL_* tables included):
    a family whose head_shape needs keys of its own is read from its real config."""
    found = []
    for path in sorted(Path(__file__).parent.glob("*_real.py")):
        module = importlib.import_module(f"tests.{path.stem}")
        for value in vars(module).values():
            for item in (value.values() if isinstance(value, dict) and "model_type" not in value else [value]):
                item = item[0] if isinstance(item, tuple) and item and isinstance(item[0], dict) else item
                if isinstance(item, dict) and isinstance(item.get("model_type"), str):
                    found.append(item)
    return found


_PUBLISHED = _published_configs()


def _declared(adapter: Adapter) -> tuple[Adapter, HeadShape]:
    problem = None
    synthetic = []
    for extra in ({}, {"num_key_value_heads": 2}):
        config = {**_CONFIG, **extra}
        if adapter.text_config:
            config = {adapter.text_config: config, "model_type": adapter.model_types[0]}
        synthetic.append(config)
    for config in synthetic + [c for c in _PUBLISHED if c["model_type"] in adapter.model_types]:
        try:
            chosen = adapter.for_config(config)
            return chosen, chosen.head_shape(chosen.dims_config(config))
        except Exception as exc:  # noqa: BLE001 - the next config, or the failure below
            problem = exc
    raise AssertionError(f"{adapter.name}: no synthetic config fits ({problem})")


def _texts(keys: list[str]) -> dict[str, str]:
    return {s["key"]: s["text"] for s in lossless.sentences({"mechanisms": keys, "formats": []})}


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
def test_every_registered_adapter_says_what_its_declaration_does(adapter):
    """What each adapter declares decides its sentences, checked against the declaration itself (not against the
    module's own reading of it): heads that share kv (MLA, DeepSeek-V4) are never said to compute q = k = v = 0."""
    adapter, shape = _declared(adapter)
    keys = lossless.declared(adapter, shape)
    texts = _texts(keys)
    assert not [k for k in keys if k.startswith("unclaimed")], keys
    assert set(texts) == set(keys)
    if shape.group > 1:  # DeepSeek-V4: whole output groups, cancelled by zero wo_a rows
        assert "heads.o_groups" in keys and not {"heads.own_kv", "heads.shared_kv", "heads.latent"} & set(keys)
        assert "wo_a" in texts["heads.o_groups"] and "is not zero" in texts["heads.o_groups"]
    elif not shape.kv_heads:  # MLA: a shared latent, no kv heads to pad
        assert "heads.latent" in keys and not {"heads.own_kv", "heads.shared_kv"} & set(keys)
        assert "latent" in texts["heads.latent"] and "kv_b_proj" in texts["heads.latent"]
    else:
        assert {"heads.own_kv", "heads.shared_kv"} <= set(keys)
        assert "is not zero" in texts["heads.shared_kv"] and "exactly 0" in texts["heads.own_kv"]
    # only heads with zero k/v of their own are said to output exactly 0 for want of anything to attend to
    assert [k for k, t in texts.items() if "q, k and v rows are zero" in t] == (
        ["heads.own_kv"] if "heads.own_kv" in keys else [])
    assert ("heads.sinks" in keys) == bool(adapter.head_vectors)
    assert ("heads.presharded" in keys) == bool(adapter.presharded_qkv)
    assert ("norm.rescale" in keys) == bool(adapter.layer_qk_norms)
    if adapter.layer_qk_norms:
        assert "√r" in texts["norm.rescale"] and "1/√r" in texts["norm.rescale"]
    family = adapter.linear_attention_family if adapter.linear_attention else None
    assert [k for k in keys if k.startswith("linear.")] == ([f"linear.{family}"] if family else [])
    if family:
        assert {"gdn": "Gated DeltaNet", "kda": "Kimi Delta Attention", "mamba2": "Mamba2",
                "lightning": "Lightning attention"}[family] in texts[
            f"linear.{family}"]
    assert ("heads.head_rows" in keys) == bool(adapter.head_rows)
    tower = adapter.vision_tower
    assert ("tower.heads" in keys) == bool(tower and "heads" in tower.shards)
    assert ("tower.mlp" in keys) == bool(tower and "heads" not in tower.shards)
    grows_mlp = any(role.kind in ("rows", "cols") for _, role in adapter.linear_patterns) or adapter.fused_experts
    assert ("mlp.channels" in keys) == bool(grows_mlp)
    copies_indexer = any("indexer" in p for p in adapter.copy_modules)
    assert ("heads.indexer" in keys) == copies_indexer, "a copied indexer is said so (Adapter.lossless)"
    assert ("heads.index_kv" in keys) == bool(set(shape.per_kv) - {"kv"})


def test_every_adapter_and_headshape_field_is_classified():
    """A new Adapter or HeadShape field must be read by plan/lossless.py (a mechanism, or not one); until then a set
    value of it makes the card claim nothing for it (next test)."""
    for cls, known in ((Adapter, lossless.ADAPTER_FIELDS), (HeadShape, lossless.SHAPE_FIELDS)):
        names = {f.name for f in dataclasses.fields(cls)}
        assert not known["mechanism"] & known["other"]
        assert names == known["mechanism"] | known["other"], (cls.__name__, names ^ (known["mechanism"] | known["other"]))
    assert all(key in lossless.MECHANISMS for a in ADAPTERS for key in a.lossless)


@dataclass
class _NewFamilyAdapter(Adapter):
    mamba_groups: dict = field(default_factory=dict)  # a field plan/lossless.py has never seen


def test_an_unknown_declaration_claims_nothing():
    adapter = _NewFamilyAdapter(name="new", model_types=("new",), mamba_groups={"x": 1},
                                linear_patterns=ATTENTION + [(r"^model\.layers\.(\d+)\.mixer\.in_proj$", Role("ssm"))],
                                lossless=("heads.future",))
    keys = lossless.declared(adapter, HeadShape.uniform(16))
    assert [k for k in keys if k.startswith("unclaimed:")] == [
        "unclaimed:role kind ssm", "unclaimed:_NewFamilyAdapter.mamba_groups", "unclaimed:mechanism heads.future"]
    record = lossless.record(adapter, HeadShape.uniform(16), heads=True, kv=True, mlp=False, linear=False,
                             layouts={"dense"}, found=set())
    texts = [s["text"] for s in lossless.sentences(record)]
    assert texts[0].startswith("**Attention heads.**") and len(texts) == 4
    assert all("states no reason" in t and "docs/families" in t for t in texts[1:])
    assert "mamba_groups" in texts[2]
    # a mechanism a newer hubpad wrote into hubpad.json is not claimed either
    (unknown,) = lossless.sentences({"mechanisms": ["ssm.groups"], "formats": ["fp9"]})
    assert "states no reason" in unknown["text"] and "ssm.groups" in unknown["text"]


def _plan(tmp_path, name, config, tensors, tp=3):
    return make_plan(open_source(str(write_checkpoint(tmp_path / name, config, tensors, n_shards=1,
                                                      header_only=True))), tp)


def _small_mimo_pro() -> dict:
    cfg = dict(mimo_real.MIMO_V2_5_PRO, num_hidden_layers=3, hybrid_layer_pattern=[0, 1, 1], moe_layer_freq=[0, 1, 1],
               n_routed_experts=8)
    cfg["quantization_config"] = dict(cfg["quantization_config"],
                                      ignored_layers=[f"model.layers.{i}.self_attn.o_proj" for i in range(3)])
    return cfg


def _real(name):
    """(config, tensors) of a published layout, header-only (fewer layers where the config allows)."""
    if name == "Llama-3.3-70B (BF16)":
        cfg = real_models.LLAMA33_70B
        return cfg, real_models.header_only_tensors(cfg)
    if name == "Llama MQA (BF16)":
        cfg = dict(real_models.LLAMA33_70B, num_key_value_heads=1, num_hidden_layers=2)
        return cfg, real_models.header_only_tensors(cfg)
    if name == "gpt-oss-20b":
        return gpt_oss_real.gpt_oss_real(24, 32)
    if name == "Qwen3.5-27B-FP8":
        return qwen35_real.QWEN35_27B_FP8_CONFIG, qwen35_real.qwen35_27b_fp8_tensors(qwen35_real.QWEN35_27B_FP8_CONFIG)
    if name == "Kimi-Linear-48B":
        return linear_real.KIMI_LINEAR_48B_CONFIG, linear_real.kimi_tensors(linear_real.KIMI_LINEAR_48B_CONFIG)
    if name == "MiMo-V2.5-Pro (3 layers)":
        cfg = _small_mimo_pro()
        return cfg, mimo_real.pro_tensors(cfg)
    if name.startswith("Nemotron 3 Super"):  # its -NVFP4 release stores some Mamba2 in_proj as per-tensor FP8
        cfg = dict(nemotron_h_real.SUPER, hybrid_override_pattern="MEM*E", num_hidden_layers=5, n_routed_experts=8,
                   num_nextn_predict_layers=0)
        return cfg, nemotron_h_real.tensors(cfg, nvfp4="NVFP4" in name)
    if name == "Inkling":
        return inkling_real.INKLING, inkling_real.tensors(inkling_real.INKLING)
    cfg, fn = {"DeepSeek-V4-Flash": (dsv4_real.FLASH_CONFIG, dsv4_real.v4_tensors),
               "MiniMax-M2 (FP8)": (minimax_real.M2_CONFIG, minimax_real.m2_tensors),
               "MiniMax-M3": (None, None),
               "DeepSeek-V3 (FP8)": (mla_real.DEEPSEEK_V3_CONFIG, mla_real.mla_tensors)}[name]
    if name == "MiniMax-M3":
        return minimax_real.M3_CONFIG, minimax_real.m3_tensors()
    cfg = dict(cfg, num_hidden_layers=5)
    return cfg, fn(cfg)


# layout -> (mechanisms at TP 3, formats of what grew)
REAL = {
    "Llama-3.3-70B (BF16)": (["heads.own_kv", "mlp.channels"], ["dense"]),
    "Llama MQA (BF16)": (["heads.shared_kv", "mlp.channels"], ["dense"]),
    "gpt-oss-20b": (["heads.own_kv", "heads.sinks"], ["dense"]),  # MXFP4 experts copied: not said
    "DeepSeek-V4-Flash": (["heads.o_groups", "heads.sinks", "heads.indexer", "mlp.channels"], ["fp8-block", "mxfp4"]),
    "MiniMax-M2 (FP8)": (["heads.own_kv", "norm.rescale"], ["fp8-block"]),
    "MiniMax-M3": (["heads.own_kv", "heads.index_kv"], ["dense"]),
    "DeepSeek-V3 (FP8)": (["heads.latent", "mlp.channels"], ["fp8-block"]),
    "Qwen3.5-27B-FP8": (["heads.own_kv", "linear.gdn", "mlp.channels"], ["dense", "fp8-block"]),
    "Kimi-Linear-48B": (["heads.latent", "linear.kda", "mlp.channels"], ["dense"]),
    "MiMo-V2.5-Pro (3 layers)": (["heads.own_kv", "heads.sinks", "heads.presharded", "mlp.channels"],
                                 ["dense", "fp8-block"]),
    "Nemotron 3 Super (5 layers)": (["heads.own_kv", "linear.mamba2"], ["dense"]),
    "Nemotron 3 Super-NVFP4 (5 layers)": (["heads.own_kv", "linear.mamba2"], ["dense", "fp8-tensor"]),
    "Inkling": (["heads.own_kv", "heads.head_rows"], ["dense"]),
}


@pytest.mark.parametrize("name", REAL)
def test_real_layouts_record_what_grew_and_its_formats(tmp_path, name):
    plan = _plan(tmp_path, "up", *_real(name))
    mechanisms, formats = REAL[name]
    assert plan.lossless == {"mechanisms": mechanisms, "formats": formats}
    texts = " ".join(s["text"] for s in lossless.sentences(plan.lossless))
    if formats == ["dense"]:  # a BF16 card says nothing of codes or scales
        assert "codes" not in texts and "scale" not in texts
    assert ("FP8 with block scales" in texts) == ("fp8-block" in formats)
    assert ("FP8 with one scale per tensor" in texts) == ("fp8-tensor" in formats)
    assert ("MXFP4" in texts) == ("mxfp4" in formats)


def test_a_fused_qkv_and_a_padded_vision_tower_are_said(tmp_path):
    """Ling's fused query_key_value (role kind qkv) pads attention heads like separate q/k/v; MiMo-V2.5's vision tower,
    padded at TP 5 (its merger divides 5, not 3 or 6), gets its own sentence, and only where it grew."""
    from tests import bailing_models

    bailing_models.build(tmp_path / "ling")
    plan = make_plan(open_source(str(tmp_path / "ling")), 3)
    assert plan.lossless == {"mechanisms": ["heads.own_kv", "mlp.channels"], "formats": ["dense"]}
    vision = dict(mimo_real.MIMO_V2_5["vision_config"], depth=2, fullatt_block_indexes=[0])
    cfg = dict(mimo_real.MIMO_V2_5, num_hidden_layers=3, hybrid_layer_pattern=[0, 1, 1], moe_layer_freq=[0, 1, 1],
               n_routed_experts=10, vision_config=vision)
    cfg["quantization_config"] = dict(cfg["quantization_config"],
                                      ignored_layers=[f"model.layers.{i}.self_attn.o_proj" for i in range(3)])
    plan = _plan(tmp_path, "v25", cfg, mimo_real.pro_tensors(cfg), tp=5)
    assert {d.name: (d.before, d.after) for d in plan.dims}["vision kv heads"] == (8, 10)
    assert plan.lossless["mechanisms"][-1] == "tower.heads"
    texts = {s["key"]: s["text"] for s in lossless.sentences(plan.lossless)}
    assert "Vision tower" in texts["tower.heads"] and "sink" in texts["tower.heads"]
    small = dict(cfg, vision_config=dict(vision, num_heads=40, num_key_value_heads=10, intermediate_size=4610))
    plan = _plan(tmp_path, "v25-even", small, mimo_real.pro_tensors(small), tp=5)  # a tower TP 5 already divides
    assert "tower.heads" not in plan.lossless["mechanisms"]


def test_the_card_says_it_and_an_older_hubpad_json_gets_no_claim(tmp_path):
    up = build_tiny_hy3(tmp_path / "up")
    dst = tmp_path / "out"
    assert cli("mirror", str(up), "--tp", "3", "--to", str(dst)).exit_code == 0
    card = (dst / "README.md").read_text()
    why = card.split("Why the outputs do not change:", 1)[1].split("Tensors:", 1)[0]
    for key in ("heads.own_kv", "mlp.channels"):
        assert lossless.MECHANISMS[key][1].split(" (", 1)[0].split(".**")[0] in why
    assert "query heads per key/value head before and after" in why
    assert lossless.FORMATS["fp8-block"] in why and lossless.FORMATS["nvfp4"] in why
    import json

    manifest = json.loads((dst / "hubpad.json").read_text())
    assert manifest["lossless"] == {"mechanisms": ["heads.own_kv", "mlp.channels"],
                                    "formats": ["dense", "fp8-block", "nvfp4"]}
    del manifest["lossless"]  # written by an older hubpad: the card claims nothing it cannot
    manifest["tensors"]["padded_groups"][0]["scale"] = 1.5  # ... except the rescale its groups record
    files = render_derivative(manifest, target_repo="alice/x", upstream_card=None).files
    why = files["README.md"].split("Why the outputs do not change:", 1)[1].split("Tensors:", 1)[0]
    assert lossless.FALLBACK in why and "Rescaled, not only padded" in why and "× 1.500000" in why
    assert "Attention heads" not in why and "FP8 with block scales" not in why


def test_a_bf16_card_says_nothing_of_quantization(tmp_path):
    from hubpad.testing import TINY_HY3

    up = write_checkpoint(tmp_path / "up", dict(TINY_HY3), tiny_hy3_tensors(dict(TINY_HY3), "bf16"), n_shards=1)
    dst = tmp_path / "out"
    assert cli("mirror", str(up), "--tp", "3", "--to", str(dst)).exit_code == 0
    why = (dst / "README.md").read_text().split("Why the outputs do not change:", 1)[1].split("Tensors:", 1)[0]
    assert "codes" not in why and "scale" not in why and "Attention heads" in why
