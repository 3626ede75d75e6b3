"""Cosmos3 (`cosmos3_omni`, nvidia/Cosmos3-Super 65B, Cosmos3-Nano 16B): a unified Diffusers repo, padded whole.

The tiny repo (tests/cosmos3_models.py) has the published layout: the root config.json vLLM reads, `transformer/`
(two shards and diffusers' index and config.json: the reasoner's language model beside the generator's
mixture-of-transformers weights), `vision_encoder/` (one file, no index), a VAE folder with its own safetensors, a
tokenizer folder, model_index.json. `hubpad mirror` + `hubpad verify` at TP 3 and 6, then:

- the reasoner, as vLLM 0.32 loads it (`[tv]*er/*.safetensors` through Cosmos3ForConditionalGeneration's mapper,
  which drops the generator), in transformers' Cosmos3OmniForConditionalGeneration in float64 on a prompt with an
  image: max |Δ| 0.0;
- the generator, padded alike, through a float64 reference written after diffusers' Cosmos3OmniTransformer (both
  pathways of every layer: the joint attention, the MLPs, the norms): equal to the last bits of float64 sums whose
  width padding changed;
- every padded tensor's original bytes in place and zeros beyond (verify; checked here for the generator too),
  the vision tower and the other folders byte for byte, each folder's index and config.json padded where it has one.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers.models.cosmos3_omni")

from safetensors.torch import load_file  # noqa: E402

from hubpad.plan.adapters import adapter_for  # noqa: E402
from hubpad.plan.adapters.vllm import min_vllm  # noqa: E402
from hubpad.plan.planner import plan_for, survey  # noqa: E402
from hubpad.source.local import LocalSource  # noqa: E402
from tests import cosmos3_models, cosmos3_real  # noqa: E402
from tests.helpers import assert_same_logits, cli, mirror_and_verify  # noqa: E402
from tests.test_vlm import _image_prompt  # noqa: E402


def _folder(path) -> dict:
    return {k: v for f in sorted(path.glob("*.safetensors")) for k, v in load_file(f).items()}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    src = tmp_path_factory.mktemp("cosmos3") / "upstream"
    cosmos3_models.build(src)
    return src


@pytest.mark.parametrize("tp, heads, kv, inter", [(3, 6, 3, 384), (6, 6, 3, 768)])
def test_cosmos3_pads_exactly(upstream, tmp_path, tp, heads, kv, inter):
    dst = tmp_path / "padded"
    mirror_and_verify(upstream, dst, tp, "--shard-size", "3MB")
    text = json.loads((dst / "config.json").read_text())["text_config"]
    assert (text["num_attention_heads"], text["num_key_value_heads"], text["intermediate_size"]) == (heads, kv, inter)
    diffusers = json.loads((dst / "transformer" / "config.json").read_text())
    assert (diffusers["num_attention_heads"], diffusers["num_key_value_heads"], diffusers["intermediate_size"],
            diffusers["head_dim"]) == (heads, kv, inter, 32)
    # transformer/ cut at the shard size under its index's stem, its index regenerated; vision_encoder/ keeps its file
    index = json.loads((dst / "transformer" / cosmos3_models.INDEX).read_text())
    shards = sorted(p.name for p in (dst / "transformer").glob("*.safetensors"))
    assert len(shards) > 2 and sorted(set(index["weight_map"].values())) == shards
    assert all(s.startswith("diffusion_pytorch_model-") for s in shards)
    assert index["metadata"]["total_size"] == sum(v.nbytes for v in _folder(dst / "transformer").values())
    assert sorted(p.name for p in (dst / "vision_encoder").iterdir()) == ["config.json", "model.safetensors"]
    assert not (dst / "model.safetensors.index.json").exists()
    for same in ("vision_encoder/model.safetensors", "vision_encoder/config.json", "vae/config.json",
                 "vae/diffusion_pytorch_model.safetensors", "tokenizer/tokenizer_config.json", "model_index.json"):
        assert (dst / same).read_bytes() == (upstream / same).read_bytes(), same
    # the generator's joint attention and MLP padded as the reasoner's: original rows / columns, then zeros
    a, b = _folder(upstream / "transformer"), _folder(dst / "transformer")
    for name, axis in (("layers.1.self_attn.add_q_proj.weight", 0), ("layers.1.self_attn.add_k_proj.weight", 0),
                       ("layers.1.self_attn.add_v_proj.weight", 0), ("layers.1.self_attn.to_add_out.weight", 1),
                       ("layers.1.mlp_moe_gen.gate_proj.weight", 0), ("layers.1.mlp_moe_gen.down_proj.weight", 1)):
        n, grown = a[name].shape[axis], b[name].shape[axis]
        assert torch.equal(b[name].narrow(axis, 0, n), a[name]) and not b[name].narrow(axis, n, grown - n).any()
    copied = [k for k in a if k.startswith(("time_embedder.", "proj_", "audio_", "action_", "norm"))
              or "layernorm" in k or ".norm_" in k]
    assert copied and all(torch.equal(a[k], b[k]) for k in copied)

    ids, pixels, grid = _image_prompt()
    before, after = (cosmos3_models.logits(p, ids, pixels, grid) for p in (upstream, dst))
    assert_same_logits(before, after, f"cosmos3 reasoner tp{tp}", rel=0.0)
    gen = torch.randn(6, 128, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for part, x, y in zip(("reasoner", "generator"), cosmos3_models.generator_hidden(upstream, ids[0], gen),
                          cosmos3_models.generator_hidden(dst, ids[0], gen)):
        assert_same_logits(x, y, f"cosmos3 MoT {part} tp{tp}")


def test_verify_checks_every_folder(upstream, tmp_path):
    """A stray weight file in a weight folder (vLLM loads every `*.safetensors` there), or a folder's config.json
    that lost its padded dims, fails `hubpad verify`."""
    dst = tmp_path / "padded"
    mirror_and_verify(upstream, dst, 3)
    stray = dst / "vision_encoder" / "extra.safetensors"
    stray.write_bytes((dst / "vision_encoder" / "model.safetensors").read_bytes())
    report = cli("verify", upstream, dst)
    assert report.exit_code == 1 and "vision_encoder/extra.safetensors" in report.output
    stray.unlink()
    config = dst / "transformer" / "config.json"
    config.write_text(config.read_text().replace('"num_attention_heads": 6', '"num_attention_heads": 4'))
    report = cli("verify", upstream, dst)
    assert report.exit_code == 1 and "transformer/config.json differs from the plan" in report.output


def test_rerun_and_card_refresh_keep_the_folders(upstream, tmp_path):
    """A second run is up to date; `hubpad card --repo-id` renames the recipe and drops the old one, but leaves the
    weight folders' index and config.json (a mirror builds them, a card render does not) and verify still passes."""
    dst = tmp_path / "padded"
    mirror_and_verify(upstream, dst, 6)
    again = cli("mirror", upstream, "--tp", 6, "--to", dst)
    assert again.exit_code == 0 and "up to date" in again.output
    card = cli("card", dst, "--repo-id", "me/cosmos3-tp6")
    assert card.exit_code == 0 and "removed padded.yaml" in card.output, card.output
    assert (dst / "transformer" / "config.json").is_file() and (dst / "transformer" / cosmos3_models.INDEX).is_file()
    assert cli("verify", upstream, dst).exit_code == 0


@pytest.mark.parametrize("cfg, tp, dims, extra_gb", [
    (cosmos3_real.SUPER, 3, {"num_attention_heads": 72, "num_key_value_heads": 9, "intermediate_size": 25728}, 3.52),
    (cosmos3_real.SUPER, 6, {"num_attention_heads": 96, "num_key_value_heads": 12, "intermediate_size": 26112}, 14.09),
    (cosmos3_real.NANO, 3, {"num_attention_heads": 36, "num_key_value_heads": 9}, 0.75),
    (cosmos3_real.NANO, 6, {"num_attention_heads": 48, "num_key_value_heads": 12}, 3.02),
])
def test_published_layout(tmp_path, cfg, tp, dims, extra_gb):
    """The published layouts (tests/cosmos3_real.py, header-only), planned as docs/families.md's row says."""
    plan = plan_for(survey(LocalSource(str(cosmos3_real.write_unified(tmp_path / "src", cfg)))), tp)
    assert {d.config_keys[0]: d.after for d in plan.dims if d.before != d.after} == dims
    assert round((plan.bytes_out - plan.bytes_in) / 1e9, 2) == extra_gb
    assert {k: plan.folder_configs["transformer/config.json"][k] for k in dims} == dims
    assert all(r["ok"] for r in plan.rank_table if r["required"])


def test_cosmos3_card():
    cfg = {**cosmos3_models.CONFIG, "text_config": dict(cosmos3_models.TEXT)}
    out = adapter_for(cfg).serving(cfg)
    assert out["mm_encoder_tp_mode"] == "data"
    assert min_vllm(out["vllm_features"])["version"] == "0.23.0"


def test_a_killed_run_resumes_from_its_folder_shards(upstream, tmp_path):
    """A local run killed after its first finished shard (transformer/...): the next run reuses that shard from the
    record kept in the same folder of the scratch build, builds the rest, and the result verifies."""
    from tests.test_killed_runs import _killed

    dst = tmp_path / "dst"
    pid, _ = _killed("record", "mirror", upstream, "--tp", 3, "--to", dst, "--shard-size", "3MB")
    staged = tmp_path / f".dst.hubpad-tmp-{pid}" / ".hubpad-staged"
    records = sorted(p.relative_to(staged).as_posix().removesuffix(".json") for p in staged.rglob("*.json"))
    assert records and all(r.startswith("transformer/") for r in records)
    result = cli("mirror", upstream, "--tp", 3, "--to", dst, "--shard-size", "3MB", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    assert summary["shards_reused"] == records and summary["shards_built"]
    assert cli("verify", upstream, dst).exit_code == 0


def test_cosmos3_through_the_hub(hub, upstream, tmp_path):
    """Hub to Hub (the project's emulator, the real client): the folders' shards are staged and published at their
    paths, and the published repo equals a local mirror's file for file."""
    files = {p.relative_to(upstream).as_posix(): p for p in upstream.rglob("*") if p.is_file()}
    hub.seed("nvidia/Tiny-Cosmos3", files, message="upload")
    result = cli("mirror", "nvidia/Tiny-Cosmos3", "--tp", 3, "--to", "alice/Tiny-Cosmos3-TP3", "--shard-size", "3MB")
    assert result.exit_code == 0, result.output
    assert cli("verify", "nvidia/Tiny-Cosmos3", "alice/Tiny-Cosmos3-TP3").exit_code == 0
    local = tmp_path / "local"
    mirror_and_verify(upstream, local, 3, "--shard-size", "3MB")
    published = hub.files("alice/Tiny-Cosmos3-TP3", "main")
    weights = sorted(p for p in published if p.endswith(".safetensors"))
    assert weights == sorted(p.relative_to(local).as_posix() for p in local.rglob("*.safetensors"))
    assert any(p.startswith("transformer/") for p in weights) and "vision_encoder/model.safetensors" in weights
