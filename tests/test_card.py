"""What the derivative carries: model card, sparkrun recipe and vLLM vocab patch rendered from hubpad.json.

Every expected value below is read from the fixture manifests, never retyped, so the tests pin the wiring manifest → files.
The vocab patch is exercised in subprocesses against a fake `vllm` package built in tmp_path (vLLM itself is never imported).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml

from hubpad.render import card as card_mod
from hubpad.errors import HubpadError
from tests import sparkrun_tool
from tests.helpers import tool_missing
from hubpad.render.card import render_derivative
from hubpad.render.upstream_card import OWNER_END, OWNER_START

HY3_TARGET = "alice/Hy3-NVFP4-FP8-TP3"
LLAMA_TARGET = "bob/Llama-3.1-8B-Instruct-TP3"
PUBLISHED = "fedcba9876543210fedcba9876543210fedcba98"


def hy3_manifest() -> dict:
    """A Hy3-like manifest: heads 64→72, kv 8→9, dense MLP 13312→13440, vocab 120832 needs the runtime patch at TP 3."""
    return {
        "hubpad_version": "0.1.0",
        "format_version": 1,
        "created": "2026-11-29T12:00:00Z",
        "upstream": {
            "repo": "RedHatAI/Hy3-NVFP4-FP8",
            "kind": "hub",
            "revision": "main",
            "commit": "0123456789abcdef0123456789abcdef01234567",
            "files": {
                "model-00001-of-00002.safetensors": {"size": 10, "sha256": "1" * 64},
                "model-00002-of-00002.safetensors": {"size": 10, "sha256": "2" * 64},
                "tokenizer.json": {"size": 10, "sha256": "3" * 64},
                "LICENSE": {"size": 10, "sha256": "4" * 64},
            },
        },
        "target": {"repo": HY3_TARGET, "kind": "hub"},
        "tp": 3,
        "architecture": {"adapter": "hy_v3", "model_type": "hy_v3", "architectures": ["HYV3ForCausalLM"]},
        "quantization": {"method": "compressed-tensors", "formats": ["fp8-block", "nvfp4"], "weight_only_nvfp4": False},
        "lossless": {"mechanisms": ["heads.own_kv", "mlp.channels"], "formats": ["fp8-block", "nvfp4"]},
        "dims": [
            {"name": "attention heads", "config_key": "num_attention_heads", "before": 64, "after": 72},
            {"name": "kv heads", "config_key": "num_key_value_heads", "before": 8, "after": 9},
            {"name": "head dim", "config_key": "head_dim", "before": 128, "after": 128},
            {"name": "dense intermediate", "config_key": "intermediate_size", "before": 13312, "after": 13440},
        ],
        "config_changes": {"num_attention_heads": [64, 72], "num_key_value_heads": [8, 9], "intermediate_size": [13312, 13440]},
        "tensors": {
            "total": 46000,
            "padded": 300,
            "copied": 45700,
            "padded_groups": [  # as hubpad.json records them (Plan.padded_groups)
                {"pattern": "model.layers.*.self_attn.q_proj.weight", "before": [8192, 4096],
                 "after": [9216, 4096], "count": 80, "bytes_added": 167772160},
                {"pattern": "model.layers.*.self_attn.k_proj.weight", "before": [1024, 4096],
                 "after": [1152, 4096], "count": 80, "bytes_added": 41943040},
                {"pattern": "model.layers.0.mlp.down_proj.weight_packed", "before": [4096, 6656],
                 "after": [4096, 6720], "count": 1, "bytes_added": 262144},
            ],
        },
        "vocab": {
            "size": 120832,
            "padded_to_64": 120832,
            "divisible_by_tp": False,
            "patch_needed": True,
            "patch_pad_to": 192,
            "patched_size": 120960,
        },
        "rank_table": [
            {"dim": "attention heads", "total": 72, "per_rank": 24, "ok": True, "rule": "72 % 3 == 0"},
            {"dim": "kv heads", "total": 9, "per_rank": 3, "ok": True, "rule": "9 % 3 == 0"},
        ],
        "serving": {
            "tool_call_parser": "hy_v3",
            "reasoning_parser": "hy_v3",
            "speculative_config": {"method": "mtp", "num_speculative_tokens": 1},
            "extra_args": [],
            "upstream_tp_values": [1, 2, 4, 8],
        },
        "shards": [
            {"name": "model-00001-of-00002.safetensors", "size": 4_900_000_000, "sha256": "ab" * 32, "tensors": 20000, "sources": []},
            {"name": "model-00002-of-00002.safetensors", "size": 4_100_000_000, "sha256": "cd" * 32, "tensors": 26000, "sources": []},
        ],
        "files": {
            "copied": ["tokenizer.json", "tokenizer_config.json"],
            "generated": ["config.json", "model.safetensors.index.json", "README.md", "hubpad.json"],
        },
    }


def llama_manifest() -> dict:
    """A Llama-like manifest at TP 3 whose vocab (128256) already divides 3: no vLLM patch."""
    m = hy3_manifest()
    m["upstream"].update(repo="meta-llama/Llama-3.1-8B-Instruct", commit="89abcdef0123456789abcdef0123456789abcdef")
    m["target"]["repo"] = LLAMA_TARGET
    m["architecture"] = {"adapter": "llama", "model_type": "llama", "architectures": ["LlamaForCausalLM"]}
    m["quantization"] = {"method": None, "formats": [], "weight_only_nvfp4": False}
    m["dims"] = [
        {"name": "attention heads", "config_key": "num_attention_heads", "before": 32, "after": 36},
        {"name": "kv heads", "config_key": "num_key_value_heads", "before": 8, "after": 9},
        {"name": "intermediate", "config_key": "intermediate_size", "before": 14336, "after": 14592},
    ]
    m["config_changes"] = {d["config_key"]: [d["before"], d["after"]] for d in m["dims"]}
    m["rank_table"] = [
        {"dim": d["name"], "total": d["after"], "per_rank": d["after"] // 3, "ok": True, "rule": f"{d['after']} % 3 == 0"}
        for d in m["dims"]
    ]
    m["tensors"] = {
        "total": 291,
        "padded": 160,
        "copied": 131,
        "padded_groups": [
            {"pattern": "model.layers.*.self_attn.q_proj.weight", "before": [4096, 4096], "after": [4608, 4096],
             "count": 32, "bytes_added": 134217728},
            {"pattern": "model.layers.*.mlp.down_proj.weight", "before": [4096, 14336], "after": [4096, 14592],
             "count": 32, "bytes_added": 67108864},
        ],
    }
    m["vocab"] = {
        "size": 128256,
        "padded_to_64": 128256,
        "divisible_by_tp": True,
        "patch_needed": False,
        "patch_pad_to": 64,
        "patched_size": 128256,
    }
    m["serving"] = {"tool_call_parser": "llama3_json", "extra_args": ["--max-num-seqs", "64"], "upstream_tp_values": [1, 2, 4, 8]}
    return m


HY3_CARD = """---
license: mit
base_model:
- tencent/Hy3
library_name: transformers
tags:
- compressed-tensors
- vllm
- llm-compressor
model-index:
- name: Hy3-NVFP4-FP8
  results: []
---
# Hy3-NVFP4-FP8
"""
BASE_CARD_APACHE = "---\nlicense: apache-2.0\npipeline_tag: text-generation\n---\n# Hy3\n"
BASE_CARD_MIT = "---\nlicense: mit\n---\n"
LLAMA_CARD = """---
license: llama3.1
base_model: meta-llama/Llama-3.1-8B
pipeline_tag: text-generation
tags: [facebook, meta, llama-3]
---
"""


def split_card(readme: str) -> tuple[dict, str]:
    """(front matter, body) of a rendered README."""
    assert readme.startswith("---\n")
    head, body = readme[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


def render(manifest=None, *, target=HY3_TARGET, card=HY3_CARD, base_card=None, **kw):
    manifest = manifest or hy3_manifest()
    return render_derivative(manifest, target_repo=target, upstream_card=card, upstream_base_card=base_card, **kw)


# ---------------------------------------------------------------------------------------------------------------------
# Model card


def test_front_matter_fields_come_from_manifest_and_upstream_card():
    m = hy3_manifest()
    meta, _ = split_card(render(m).files["README.md"])
    up = yaml.safe_load(HY3_CARD.split("---")[1])
    assert meta["base_model"] == m["upstream"]["repo"]
    assert meta["base_model_relation"] == "quantized"
    assert meta["license"] == up["license"]
    assert meta["library_name"] == up["library_name"]
    assert meta["pipeline_tag"] == "text-generation"
    for tag in up["tags"] + [f"tensor-parallel-{m['tp']}", "hubpad", "nvfp4", "fp8", m["quantization"]["method"]]:
        assert tag in meta["tags"]
    assert len(meta["tags"]) == len(set(meta["tags"]))
    assert "model-index" not in meta and "eval_results" not in meta
    hp = meta["hubpad"]
    assert hp["upstream"] == m["upstream"]["repo"]
    assert hp["upstream_revision"] == m["upstream"]["commit"]
    assert hp["tp"] == m["tp"]
    assert hp["hubpad_version"] == m["hubpad_version"]
    assert hp["padded"] == m["config_changes"]


def test_library_and_pipeline_defaults_and_inheritance():
    meta, _ = split_card(render(card="---\nlicense: mit\n---\n").files["README.md"])
    assert (meta["library_name"], meta["pipeline_tag"]) == ("transformers", "text-generation")
    meta, _ = split_card(render(card="---\nlicense: mit\nlibrary_name: vllm\npipeline_tag: image-text-to-text\n---\n").files["README.md"])
    assert (meta["library_name"], meta["pipeline_tag"]) == ("vllm", "image-text-to-text")


def test_body_attribution_first_then_dims_groups_files_provenance():
    m = hy3_manifest()
    _, body = split_card(render(m).files["README.md"])
    sections = [line for line in body.splitlines() if line.startswith("## ")]
    assert sections[0] == "## Attribution"
    attribution = body.split("## Attribution", 1)[1].split("## ", 1)[0]
    assert f"https://huggingface.co/{m['upstream']['repo']}" in attribution
    assert "https://huggingface.co/tencent/Hy3" in attribution  # base model from the upstream card
    for ns in ("RedHatAI", "tencent"):  # authors credited by namespace
        assert f"[{ns}](https://huggingface.co/{ns})" in attribution
    for d in m["dims"]:
        after = f"**{d['after']}**" if d["after"] != d["before"] else str(d["after"])
        assert f"| {d['before']} | {after} |" in body
        assert f"`{d['config_key']}`" in body
    for r in m["rank_table"]:
        assert f"| {r['total']} | {r['per_rank']} |" in body
    for g in m["tensors"]["padded_groups"]:
        assert f"`{g['pattern']}`: {' × '.join(map(str, g['before']))} → {' × '.join(map(str, g['after']))}" in body
    for f in m["files"]["copied"]:
        assert f"`{f}`" in body
    assert f"{m['tensors']['copied']} copied byte for byte" in body
    for s in m["shards"]:
        assert f"| `{s['name']}` |" in body and f"`{s['sha256'][:16]}`" in body
    assert m["upstream"]["commit"] in body and m["created"] in body
    assert f"hubpad mirror {m['upstream']['repo']} --tp {m['tp']} --to {HY3_TARGET}" in body
    gqa = m["dims"][0]["after"] // m["dims"][1]["after"]
    assert f"{gqa} query heads per key/value head" in body


def test_body_quick_start_uses_serving_flags_and_ring_topology():
    m = hy3_manifest()
    files = render(m, published_commit=PUBLISHED).files
    _, body = split_card(files["README.md"])
    recipe = f"{HY3_TARGET.split('/')[1].lower()}.yaml"
    assert re.search(rf"sparkrun run \S*/{re.escape(recipe)} --cluster (\S+)", body)
    cluster = re.search(rf"sparkrun run \S*/{re.escape(recipe)} --cluster (\S+)", body).group(1)
    assert f"sparkrun cluster update {cluster} --topology ring" in body
    create = next(line for line in body.splitlines() if "sparkrun cluster create" in line)
    assert "--topology" not in create
    serve = body.split("vllm serve ", 1)[1].split("```", 1)[0]
    s = m["serving"]
    for expected in (
        HY3_TARGET,
        f"--tensor-parallel-size {m['tp']}",
        f"--revision {PUBLISHED}",
        f"--tool-call-parser {s['tool_call_parser']}",
        f"--reasoning-parser {s['reasoning_parser']}",
        "--enable-auto-tool-choice",
        f"--speculative-config '{json.dumps(s['speculative_config'])}'",
    ):
        assert expected in serve
    assert "`--tensor-parallel-size` " + ", ".join(str(v) for v in s["upstream_tp_values"]) in body
    v = m["vocab"]
    for number in (v["size"], v["patch_pad_to"], v["patched_size"], v["patched_size"] // m["tp"]):
        assert str(number) in body
    assert "docker build" in body and "pip install ./hubpad-patch/vllm_patch" in body


def test_llama_card_has_no_patch_and_its_own_flags():
    m = llama_manifest()
    result = render(m, target=LLAMA_TARGET, card=LLAMA_CARD)
    meta, body = split_card(result.files["README.md"])
    assert meta["license"] == "llama3.1" and meta["base_model"] == m["upstream"]["repo"]
    assert meta["tags"][:3] == ["facebook", "meta", "llama-3"] and "nvfp4" not in meta["tags"]
    assert "vllm_patch" not in body and "docker build" not in body and "hy_v3" not in body
    serve = body.split("vllm serve ", 1)[1].split("```", 1)[0]
    assert f"--tool-call-parser {m['serving']['tool_call_parser']}" in serve
    assert " ".join(m["serving"]["extra_args"]) in serve.replace(" \\\n  ", " ")
    assert "--revision" not in serve  # nothing published yet, nothing to pin
    assert "https://huggingface.co/meta-llama/Llama-3.1-8B" in body


# ---------------------------------------------------------------------------------------------------------------------
# Licenses


def test_license_other_relative_link_rewritten_when_not_copied():
    m = hy3_manifest()
    card = "---\nlicense: other\nlicense_name: tencent-hy-community\nlicense_link: LICENSE\n---\n"
    result = render(m, card=card)
    meta, body = split_card(result.files["README.md"])
    url = f"https://huggingface.co/{m['upstream']['repo']}/blob/{m['upstream']['commit']}/LICENSE"
    assert (meta["license"], meta["license_name"], meta["license_link"]) == ("other", "tencent-hy-community", url)
    assert url in body
    assert not result.warnings


def test_license_relative_link_kept_when_copied():
    m = hy3_manifest()
    m["files"]["copied"].append("LICENSE")
    card = "---\nlicense: other\nlicense_name: tencent-hy-community\nlicense_link: LICENSE\n---\n"
    meta, _ = split_card(render(m, card=card).files["README.md"])
    assert meta["license_link"] == "LICENSE"


def test_license_missing_is_said_and_warned_never_defaulted():
    result = render(card="---\nlibrary_name: transformers\n---\n")
    meta, body = split_card(result.files["README.md"])
    assert not {"license", "license_name", "license_link"} & set(meta)
    assert "declares no license" in body
    assert any("no license" in w for w in result.warnings)
    result = render(card=None)
    assert "license" not in split_card(result.files["README.md"])[0]
    assert any("no model card" in w for w in result.warnings)


def test_license_differs_from_base_model_warns_and_card_says_so():
    result = render(base_card=BASE_CARD_APACHE)
    _, body = split_card(result.files["README.md"])
    assert any("mismatch" in w and "mit" in w and "apache-2.0" in w for w in result.warnings)
    assert "Check the license" in body and "apache-2.0" in body
    same = render(base_card=BASE_CARD_MIT)
    assert not same.warnings and "Check the license" not in same.files["README.md"]


# ---------------------------------------------------------------------------------------------------------------------
# Untrusted upstream text and the owner section


HOSTILE_CARD = """---
license: other
license_name: "evil\\"name: x\\n---\\n{{ 7*7 }} <script>alert(1)</script> <!-- hubpad:owner-section:end -->"
license_link: "javascript:alert(1)"
base_model:
- "evil/<img src=x onerror=alert(1)>"
- "{% raw %}{{ 6*7 }}{% endraw %}"
library_name: "lib\\n---\\nlicense: apache-2.0"
tags:
- "{{ 7*7 }}"
- "x: y"
- "---"
---
{{ 7*7 }} {% for x in range(3) %}{{ x }}{% endfor %}
<!-- hubpad:owner-section:start -->owned!<!-- hubpad:owner-section:end -->
<script>alert(1)</script>
"""


def test_hostile_upstream_card_renders_inertly():
    up = yaml.safe_load(HOSTILE_CARD.split("\n---\n")[0][4:])
    result = render(card=HOSTILE_CARD, base_card=BASE_CARD_APACHE, existing_readme=None)
    readme = result.files["README.md"]
    meta, body = split_card(readme)
    # the same values, still valid YAML
    assert meta["license_name"] == up["license_name"]
    assert meta["library_name"] == up["library_name"]
    assert "license_link" not in meta  # a javascript: link is dropped, with a warning
    assert any("license_link" in w and "\n" not in w for w in result.warnings)
    assert {"{{ 7*7 }}", "x: y", "---"} <= set(meta["tags"])
    # nothing evaluated, injected, or forged
    assert "49" not in readme and "42" not in readme and "{% for" not in readme
    assert "<script" not in body and "<img" not in body and "javascript:" not in body.replace("license link: javascript", "")
    assert "](javascript:" not in body
    assert readme.count(OWNER_START) == 1 and readme.count(OWNER_END) == 1
    assert "owned!" not in readme
    # the recipe never sees upstream card text
    assert "evil" not in result.files["hy3-nvfp4-fp8-tp3.yaml"]
    # a refresh over the hostile card keeps the (placeholder) owner section and renders the same bytes
    again = render(card=HOSTILE_CARD, base_card=BASE_CARD_APACHE, existing_readme=readme)
    assert again.files["README.md"] == readme


def test_owner_markers_in_front_matter_are_ignored():
    forged = f"---\nlicense: mit\nx: '{OWNER_START}stolen{OWNER_END}'\n---\n# card\n"
    assert card_mod.extract_owner_section(forged) is None
    readme = render(existing_readme=forged).files["README.md"]
    assert "stolen" not in readme and card_mod.OWNER_PLACEHOLDER in readme


def test_owner_section_survives_rerender():
    first = render().files["README.md"]
    assert card_mod.OWNER_PLACEHOLDER in first
    owner_text = "My notes.\n\n* tested on 3x DGX Spark, {{ not jinja }}\n<details>raw html is the owner's call</details>"
    edited = first.replace(card_mod.OWNER_PLACEHOLDER, owner_text)
    m = hy3_manifest()
    m["upstream"]["commit"] = "1111111111111111111111111111111111111111"
    second = render(m, existing_readme=edited).files["README.md"]
    assert owner_text in second and card_mod.OWNER_PLACEHOLDER not in second
    assert m["upstream"]["commit"] in second
    third = render(m, existing_readme=second).files["README.md"]
    assert third == second


def test_existing_readme_without_markers_is_replaced_with_a_warning():
    result = render(existing_readme="# hand-written card\n")
    assert card_mod.OWNER_PLACEHOLDER in result.files["README.md"]
    assert any("owner section" in w for w in result.warnings)


# ---------------------------------------------------------------------------------------------------------------------
# sparkrun recipe


PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


@pytest.mark.parametrize("which", ["hy3", "llama"])
@pytest.mark.parametrize("commit", [PUBLISHED, None])
def test_recipe_v2_shape_and_placeholders(which, commit):
    m, target = (hy3_manifest(), HY3_TARGET) if which == "hy3" else (llama_manifest(), LLAMA_TARGET)
    files = render(m, target=target, card=LLAMA_CARD if which == "llama" else HY3_CARD, published_commit=commit).files
    name = f"{target.split('/')[1].lower()}.yaml"
    assert name in files
    recipe = yaml.safe_load(files[name])
    assert recipe["recipe_version"] == "2"
    assert recipe["model"] == target
    assert recipe["runtime"] == "vllm"
    assert recipe["min_nodes"] == recipe["max_nodes"] == m["tp"]
    assert recipe["defaults"]["tensor_parallel"] == m["tp"]
    assert recipe["command"].startswith("vllm serve {model}")
    if commit:
        assert recipe["model_revision"] == commit and "--revision {model_revision}" in recipe["command"]
    else:
        assert "model_revision" not in recipe and "model_revision" not in recipe["command"]
    placeholders = set(PLACEHOLDER.findall(recipe["command"]))
    assert placeholders - {"model"} <= set(recipe["defaults"]), placeholders - set(recipe["defaults"])
    assert {"tensor_parallel", "host", "port"} <= placeholders
    s = m["serving"]
    assert recipe["defaults"]["tool_call_parser"] == s["tool_call_parser"]
    if s.get("speculative_config"):
        assert json.loads(recipe["defaults"]["speculative_config"]) == s["speculative_config"]
        assert "--speculative-config '{speculative_config}'" in recipe["command"]
    if s.get("reasoning_parser"):
        assert recipe["defaults"]["reasoning_parser"] == s["reasoning_parser"]
    for arg in s.get("extra_args", []):
        assert arg in recipe["command"]
    # the rendered command (placeholders filled the way sparkrun does) has no braces left but the JSON
    rendered = PLACEHOLDER.sub(lambda mm: str({**recipe["defaults"], "model": target}[mm.group(1)]), recipe["command"])
    assert not PLACEHOLDER.search(rendered)
    assert recipe["container"] == card_mod.DEFAULT_CONTAINER  # the stock image: no custom container to build
    if m["vocab"]["patch_needed"]:  # the plugin is installed into it by the pre_exec hook, on every node
        hook = "\n".join(recipe["pre_exec"])
        assert '"$SPARKRUN_MODEL_PATH/vllm_patch"' in hook and "pip install --no-cache-dir --no-deps" in hook
        assert "import hubpad_vocab_patch" in hook and "{" not in hook  # sparkrun renders {placeholders} in hooks
    else:
        assert "pre_exec" not in recipe


def test_recipe_images_are_configurable():
    m = hy3_manifest()
    m["serving"].update(container="example.org/vllm:2026", patched_image="example.org/hy3-tp3:1")
    files = render(m).files
    assert yaml.safe_load(files["hy3-nvfp4-fp8-tp3.yaml"])["container"] == "example.org/vllm:2026"
    assert "ARG BASE_IMAGE=example.org/vllm:2026" in files["vllm_patch/Containerfile"]
    assert "docker build -t example.org/hy3-tp3:1 --build-arg BASE_IMAGE=example.org/vllm:2026" in files["README.md"]


def test_card_says_trust_and_minimum_vllm():
    m = hy3_manifest()
    m["serving"]["min_vllm"] = {"version": "0.20.0", "because": ["tool-call parser hy_v3"]}
    readme = render(m).files["README.md"]
    assert "--cluster mycluster --trust\n```" in readme and "`pre_exec` hook" in readme
    assert "**vLLM 0.20.0 or newer**: the first release with tool-call parser hy\\_v3." in readme
    llama = render(llama_manifest(), target=LLAMA_TARGET, card=LLAMA_CARD).files["README.md"]
    assert "--trust" not in llama and "or newer" not in llama
    m["serving"]["min_vllm"] = {"version": "0.20; rm", "because": []}
    with pytest.raises(HubpadError):
        render(m)


@pytest.fixture(scope="module")
def sparkrun_venv():
    """The real sparkrun (pyenv's Python 3.12, see tests/sparkrun_tool.py); skips where none can be made."""
    venv = sparkrun_tool.sparkrun_venv()
    if venv is None:
        tool_missing("no Python >= 3.12 with sparkrun here (pyenv 3.12 and a package registry are needed)")
    return venv


def test_recipe_validates_with_real_sparkrun(tmp_path, sparkrun_venv):
    """sparkrun 0.4.2 itself: `recipe validate` (no errors, no warnings), its loader renders the serve command with
    the family's flags, and `run --dry-run` runs the pre_exec hook that installs the vocab plugin on every node."""
    hy3 = hy3_manifest()
    hy3["serving"]["min_vllm"] = {"version": "0.20.0", "because": ["tool-call parser hy_v3"]}
    cases = [({"published_commit": PUBLISHED, "manifest": hy3}, True), ({}, True),
             ({"manifest": llama_manifest(), "target": LLAMA_TARGET, "card": LLAMA_CARD}, False)]
    for kw, patch in cases:
        files = render(**kw).files
        name, text = next((k, v) for k, v in files.items() if k.endswith(".yaml"))
        recipe_path = tmp_path / name
        recipe_path.write_text(text)
        report = sparkrun_tool.validate(sparkrun_venv, recipe_path, tmp_path / "home")
        assert report["valid"] and report["errors"] == report["warnings"] == 0, report
        # the one suggestion sparkrun makes is about installing a package in pre_exec, which is the point here
        assert {i["code"] for i in report["issues"]} <= ({"inline-script"} if patch else set()), report
        loaded = json.loads(sparkrun_tool.python(sparkrun_venv, SPARKRUN_LOAD, str(recipe_path)))
        assert loaded["min_nodes"] == loaded["max_nodes"] == 3
        assert ("--revision " + PUBLISHED in loaded["command"]) == bool(kw.get("published_commit"))
        assert not PLACEHOLDER.search(loaded["command"].replace(loaded["spec"], "")), loaded["command"]
        serving = (kw.get("manifest") or hy3_manifest())["serving"]
        assert f"--tool-call-parser {serving['tool_call_parser']}" in loaded["command"]
        assert bool(loaded["pre_exec"]) == patch
        if kw.get("manifest") is hy3:
            assert loaded["runtime_version"] == ">=0.20.0" and "--reasoning-parser hy_v3" in loaded["command"]
        if not patch:
            continue
        result = sparkrun_tool.run_sparkrun(sparkrun_venv, ["-v", "run", "--dry-run", "--no-auto-detect",
                                                            str(recipe_path), "-H", "n1,n2,n3"], tmp_path / "home")
        out = result.stdout + result.stderr
        assert result.returncode == 0, out[-3000:]
        for node in ("n1", "n2", "n3"):  # the hook runs in every node's container before vLLM starts
            assert f'pre_exec[2] on {node}/' in out and 'pip install --no-cache-dir --no-deps' in out, out[-3000:]
        assert "Pre-serve hooks done" in out and "Starting head node serve" in out


def test_recipe_header_runs_as_the_card_says(tmp_path, sparkrun_venv):
    """The recipe's `# Run:` line is the card's `sparkrun run` line (issue 32: it lacked --trust, which the vocab
    plugin's pre_exec hook needs), and sparkrun 0.4.2 runs it as written (a local folder's recipe, --dry-run)."""
    import shlex

    folder = tmp_path / "Hy3-TP3"
    for manifest, kw, trust in ((hy3_manifest(), {}, True), (llama_manifest(), {"card": LLAMA_CARD}, False)):
        hub = render(manifest, **kw).files
        local = render(manifest, target=None, target_path=str(folder), **kw).files
        for files in (hub, local):
            name, recipe = next((k, v) for k, v in files.items() if k.endswith(".yaml"))
            header = next(line for line in recipe.splitlines() if line.startswith("# Run: "))
            words = shlex.split(header[len("# Run: "):].split(" (", 1)[0])
            card = next(shlex.split(line) for line in files["README.md"].splitlines()
                        if line.startswith("sparkrun run "))
            assert words[:3] == card[:3] and words[3:5] == ["--cluster", "NAME"] and card[3:5] == ["--cluster",
                                                                                                "mycluster"]
            assert ("--trust" in words) == ("--trust" in card) == trust, (header, card)
        folder.mkdir(exist_ok=True)
        (folder / name).write_text(recipe)  # the local one: run its header's words, hosts for the cluster
        args = [w for w in words[1:] if w not in ("--cluster", "NAME")]
        result = sparkrun_tool.run_sparkrun(sparkrun_venv, ["-v", *args[:1], "--dry-run", "--no-auto-detect",
                                                            *args[1:], "-H", "n1,n2,n3"], tmp_path / "home")
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        assert ("pre_exec[2] on n3/" in result.stdout + result.stderr) == trust  # the plugin's hook ran


SPARKRUN_LOAD = """
import json, sys
from sparkrun.core.recipe import Recipe
r = Recipe.load(sys.argv[1])
assert r.validate() == [], r.validate()
command = r.render_command(r.build_config_chain())
spec = str(r.defaults.get("speculative_config") or "")
print(json.dumps({"min_nodes": r.min_nodes, "max_nodes": r.max_nodes, "command": command, "spec": spec,
                  "pre_exec": list(r.pre_exec or []), "runtime_version": r.runtime_version}))
"""


def test_bad_serving_values_are_refused():
    for bad in (
        {"tool_call_parser": "x; rm -rf /"},
        {"extra_args": ["--x", "a\nb"]},
        {"extra_args": ["{oops}"]},
        {"speculative_config": {"method": "it's"}},
    ):
        m = hy3_manifest()
        m["serving"].update(bad)
        with pytest.raises(HubpadError):
            render(m)
    with pytest.raises(HubpadError):
        render(target="not a repo")


# ---------------------------------------------------------------------------------------------------------------------
# Templates


def test_patch_files_only_when_needed():
    assert set(render().files) == {"README.md", "hy3-nvfp4-fp8-tp3.yaml", *card_mod.PATCH_TEMPLATES}
    assert set(render(llama_manifest(), target=LLAMA_TARGET, card=LLAMA_CARD).files) == {"README.md", "llama-3.1-8b-instruct-tp3.yaml"}


def test_override_templates_dir(tmp_path):
    (tmp_path / "README.md.j2").write_text(
        "---\n{{ front_matter }}---\ncustom {{ tp }}\n{{ owner_start }}\n{{ owner_section }}\n{{ owner_end }}\n"
    )
    files = render(templates_dir=tmp_path).files
    assert "custom 3" in files["README.md"]
    assert files["hy3-nvfp4-fp8-tp3.yaml"] == render().files["hy3-nvfp4-fp8-tp3.yaml"]  # others stay built-in


@pytest.mark.parametrize("template", ["{{ no_such_value }}", "{{ ''.__class__.__mro__[1].__subclasses__() }}"])
def test_override_templates_are_strict_and_sandboxed(tmp_path, template):
    (tmp_path / "recipe.yaml.j2").write_text(template)
    with pytest.raises(HubpadError):
        render(templates_dir=tmp_path)


def test_missing_templates_dir_is_an_error(tmp_path):
    with pytest.raises(HubpadError):
        render(templates_dir=tmp_path / "nope")


# ---------------------------------------------------------------------------------------------------------------------
# vLLM vocab patch against a fake vLLM


FAKE_VLLM = {
    "vllm/__init__.py": "",
    "vllm/distributed/__init__.py": """
        _TP = 1
        def get_tensor_model_parallel_world_size():
            return _TP
        def divide(numerator, denominator):
            assert numerator % denominator == 0, "{} is not divisible by {}".format(numerator, denominator)
            return numerator // denominator
    """,
    "vllm/model_executor/__init__.py": "",
    "vllm/model_executor/layers/__init__.py": "",
    # Mirrors vLLM's signature and its pad/divide arithmetic (layers/vocab_parallel_embedding.py).
    "vllm/model_executor/layers/vocab_parallel_embedding.py": """
        from vllm.distributed import divide, get_tensor_model_parallel_world_size

        DEFAULT_VOCAB_PADDING_SIZE = 64

        def pad_vocab_size(vocab_size, pad_to=DEFAULT_VOCAB_PADDING_SIZE):
            return ((vocab_size + pad_to - 1) // pad_to) * pad_to

        class VocabParallelEmbedding:
            def __init__(self, num_embeddings, embedding_dim, params_dtype=None, org_num_embeddings=None,
                         padding_size=DEFAULT_VOCAB_PADDING_SIZE, quant_config=None, prefix=""):
                tp = get_tensor_model_parallel_world_size()
                self.org_vocab_size = org_num_embeddings or num_embeddings
                num_added = num_embeddings - self.org_vocab_size
                self.padding_size = padding_size
                self.org_vocab_size_padded = pad_vocab_size(self.org_vocab_size, padding_size)
                self.num_embeddings_padded = pad_vocab_size(self.org_vocab_size_padded + num_added, padding_size)
                divide(self.org_vocab_size_padded, tp)
                self.num_embeddings_per_partition = divide(self.num_embeddings_padded, tp)

        class ParallelLMHead(VocabParallelEmbedding):
            def __init__(self, num_embeddings, embedding_dim, bias=False, params_dtype=None, org_num_embeddings=None,
                         padding_size=DEFAULT_VOCAB_PADDING_SIZE, quant_config=None, prefix=""):
                super().__init__(num_embeddings, embedding_dim, params_dtype, org_num_embeddings, padding_size,
                                 quant_config, prefix)
    """,
}

DRIVER = r"""
import importlib, json, sys
args = json.loads(sys.argv[1])
if args["pth"]:
    import site
    site.addsitedir(args["site"])
else:
    sys.path.insert(0, args["site"])
import vllm.distributed
vllm.distributed._TP = args["tp"]
out = {}
if args["register"]:
    import hubpad_vocab_patch
    hubpad_vocab_patch.register()
    vpe = importlib.import_module("vllm.model_executor.layers.vocab_parallel_embedding")
    first = vpe.VocabParallelEmbedding.__init__
    for _ in range(args["register"] - 1):
        hubpad_vocab_patch.register()
    out["idempotent"] = vpe.VocabParallelEmbedding.__init__ is first and not hasattr(first.__wrapped__, "__wrapped__")
vpe = importlib.import_module("vllm.model_executor.layers.vocab_parallel_embedding")
out["patched"] = bool(getattr(vpe.VocabParallelEmbedding.__init__, "__hubpad_vocab_patch__", False))
try:
    emb = vpe.VocabParallelEmbedding(args["vocab"], 16, prefix="model.embed_tokens")
    head = vpe.ParallelLMHead(args["vocab"], 16, prefix="lm_head")
    out.update(padded=emb.num_embeddings_padded, per_rank=emb.num_embeddings_per_partition,
               head_padded=head.num_embeddings_padded, head_per_rank=head.num_embeddings_per_partition)
except AssertionError as exc:
    out["error"] = str(exc)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def patch_site(tmp_path_factory) -> Path:
    """A site dir holding the fake vLLM and the rendered patch module (the .pth lives in its own dir, see pth_site)."""
    site = tmp_path_factory.mktemp("site")
    for rel, text in FAKE_VLLM.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(textwrap.dedent(text))
    files = render().files
    (site / "hubpad_vocab_patch.py").write_text(files["vllm_patch/hubpad_vocab_patch.py"])
    (site / "hubpad_vocab_patch.pth.txt").write_text(files["vllm_patch/hubpad_vocab_patch.pth"])
    return site


def run_driver(site: Path, *, tp: int, vocab: int, register: int = 0, pth: bool = False) -> dict:
    args = json.dumps({"site": str(site), "tp": tp, "vocab": vocab, "register": register, "pth": pth})
    proc = subprocess.run([sys.executable, "-c", DRIVER, args], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_fake_vllm_unpatched_fails_at_tp3(patch_site):
    m = hy3_manifest()
    out = run_driver(patch_site, tp=m["tp"], vocab=m["vocab"]["size"])
    assert not out["patched"]
    assert out["error"] == f"{m['vocab']['padded_to_64']} is not divisible by {m['tp']}"


def test_fake_vllm_patched_pads_to_lcm_and_is_idempotent(patch_site):
    m = hy3_manifest()
    out = run_driver(patch_site, tp=m["tp"], vocab=m["vocab"]["size"], register=2)
    assert out["patched"] and out["idempotent"]
    assert out["padded"] == out["head_padded"] == m["vocab"]["patched_size"]
    assert out["per_rank"] == out["head_per_rank"] == m["vocab"]["patched_size"] // m["tp"]


def test_fake_vllm_patch_is_a_noop_when_vocab_divides(patch_site):
    m = hy3_manifest()
    for tp in (1, 4):
        out = run_driver(patch_site, tp=tp, vocab=m["vocab"]["size"], register=1)
        assert out["patched"] and out["padded"] == m["vocab"]["padded_to_64"]
        assert out["per_rank"] == m["vocab"]["padded_to_64"] // tp


def test_pth_hook_patches_on_import_and_never_breaks_startup(patch_site, tmp_path):
    m = hy3_manifest()
    (patch_site / "hubpad_vocab_patch.pth").write_text((patch_site / "hubpad_vocab_patch.pth.txt").read_text())
    try:
        out = run_driver(patch_site, tp=m["tp"], vocab=m["vocab"]["size"], pth=True)
        assert out["patched"] and out["padded"] == m["vocab"]["patched_size"]
        out = run_driver(patch_site, tp=m["tp"], vocab=m["vocab"]["size"], pth=True, register=2)  # both paths together
        assert out["idempotent"] and out["padded"] == m["vocab"]["patched_size"]
    finally:
        (patch_site / "hubpad_vocab_patch.pth").unlink()
    # the .pth alone (module missing): Python still starts
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    (lonely / "hubpad_vocab_patch.pth").write_text((patch_site / "hubpad_vocab_patch.pth.txt").read_text())
    proc = subprocess.run(
        [sys.executable, "-c", f"import site; site.addsitedir({str(lonely)!r}); print('alive')"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "alive"
    assert "not active" in proc.stderr


def test_patch_module_is_import_safe_without_vllm(tmp_path):
    (tmp_path / "hubpad_vocab_patch.py").write_text(render().files["vllm_patch/hubpad_vocab_patch.py"])
    code = (
        "import sys; import hubpad_vocab_patch as p; hubpad_vocab_patch_ok = p.apply() is False;"
        "p.register(); p.install_import_hook(); p.install_import_hook();"
        "print(hubpad_vocab_patch_ok, 'vllm' in sys.modules, sum(type(f).__name__ == '_ImportHook' for f in sys.meta_path))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "False", "1"]


def test_padding_for_arithmetic(tmp_path):
    path = tmp_path / "hubpad_vocab_patch.py"
    path.write_text(render().files["vllm_patch/hubpad_vocab_patch.py"])
    spec = importlib.util.spec_from_file_location("hubpad_vocab_patch_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = hy3_manifest()
    assert mod.padding_for(m["vocab"]["size"], None, 64, m["tp"]) == m["vocab"]["patch_pad_to"]
    assert mod.padding_for(m["vocab"]["size"], None, 64, 4) == 64
    assert mod.padding_for(llama_manifest()["vocab"]["size"], None, 64, 3) == 64
    assert mod.padding_for(120832 + 5, 120832, 64, 3) == 192  # added (LoRA) tokens must split too


def test_patch_package_declares_the_vllm_plugin_entry_point():
    files = render().files
    pyproject = tomllib.loads(files["vllm_patch/pyproject.toml"])
    assert pyproject["project"]["entry-points"]["vllm.general_plugins"] == {"hubpad_vocab_patch": "hubpad_vocab_patch:register"}
    assert pyproject["tool"]["setuptools"]["py-modules"] == ["hubpad_vocab_patch"]
    pth = files["vllm_patch/hubpad_vocab_patch.pth"]
    assert pth.count("\n") == 1 and pth.startswith("import ")
    containerfile = files["vllm_patch/Containerfile"]
    assert re.search(r"^ARG BASE_IMAGE=\S+", containerfile, re.MULTILINE) and "FROM ${BASE_IMAGE}" in containerfile
    assert "hubpad_vocab_patch.pth" in containerfile


def test_card_mentions_nothing_model_specific_that_is_not_in_the_manifest():
    """The serving flags are data: swap them in the manifest and the card and recipe follow."""
    m = copy.deepcopy(hy3_manifest())
    m["serving"].update(
        tool_call_parser="other_parser",
        reasoning_parser="other_reasoner",
        speculative_config={"method": "eagle", "num_speculative_tokens": 3},
    )
    files = render(m).files
    text = files["README.md"] + files["hy3-nvfp4-fp8-tp3.yaml"]
    assert "hy_v3" not in text and "mtp" not in text
    assert "other_parser" in text and "other_reasoner" in text and '"eagle"' in text


def test_local_upstream():
    """A local upstream has no Hub URL: base_model comes from its card, a relative license link cannot be rewritten."""
    m = hy3_manifest()
    m["upstream"].update(repo="/data/models/Hy3-NVFP4-FP8", kind="local", commit=None, files={})
    card = "---\nlicense: other\nlicense_name: x\nlicense_link: LICENSE\nbase_model: tencent/Hy3\n---\n"
    result = render(m, card=card)
    meta, body = split_card(result.files["README.md"])
    # a card for a Hub repo is meant for upload: it names the local upstream by its folder's name, never its path
    assert meta["base_model"] == "tencent/Hy3" and meta["hubpad"]["upstream"] == "Hy3-NVFP4-FP8"
    assert meta["license_link"] == "LICENSE"
    assert any("broken" in w for w in result.warnings)
    assert "https://huggingface.co//data" not in body and "`Hy3-NVFP4-FP8` (a local folder)" in body
    assert all("/data/models" not in text for text in result.files.values())
    assert "hubpad mirror ./Hy3-NVFP4-FP8 --tp 3" in body
    local = render(m, card=card, target=None, target_path="/data/out/Hy3-TP3").files  # a local card names it
    assert "`/data/models/Hy3-NVFP4-FP8` (a local folder)" in local["README.md"]
    assert "hubpad mirror /data/models/Hy3-NVFP4-FP8 --tp 3" in local["README.md"]


def test_card_lists_padded_groups_from_a_real_run(tmp_path):
    """The padded tensor groups section renders from the hubpad.json a real mirror writes (not a fixture)."""
    from hubpad.app.demo import run_demo

    run_demo(tmp_path)
    target = tmp_path / "Tiny-Hy3-NVFP4-FP8-TP3"
    manifest = json.loads((target / "hubpad.json").read_text())
    groups = manifest["tensors"]["padded_groups"]
    assert groups and all(isinstance(g, dict) for g in groups)
    body = (target / "README.md").read_text()
    assert "Padded tensor groups:" in body
    for g in groups:
        line = f"* `{g['pattern']}`: {' × '.join(map(str, g['before']))} → {' × '.join(map(str, g['after']))}"
        assert line in body, line


def test_mirrors_file_recipe_overrides_reach_the_recipe_and_survive_a_refresh(tmp_path):
    """`recipe:` in hubpad.yaml is merged into the generated sparkrun recipe (mappings key by key)."""
    import yaml

    from hubpad.testing import build_tiny_hy3
    from tests.helpers import cli

    upstream, target = build_tiny_hy3(tmp_path / "up"), tmp_path / "out"
    (tmp_path / "hubpad.yaml").write_text(
        "mirrors:\n  - upstream: ./up\n    target: ./out\n    tp: 3\n"
        "    recipe: {container: 'example/vllm:1', env: {VLLM_MARLIN_USE_ATOMIC_ADD: '1'}, defaults: {max_num_seqs: 8}}\n")
    r = cli("mirror", str(upstream), "--to", str(target), "--config", str(tmp_path / "hubpad.yaml"))
    assert r.exit_code == 0, r.output
    (recipe_path,) = target.glob("*.yaml")
    recipe = yaml.safe_load(recipe_path.read_text())
    assert recipe["container"] == "example/vllm:1" and recipe["env"] == {"VLLM_MARLIN_USE_ATOMIC_ADD": "1"}
    assert recipe["defaults"]["max_num_seqs"] == 8 and recipe["defaults"]["tensor_parallel"] == 3  # merged, not replaced
    assert recipe["command"].startswith("vllm serve {model}") and recipe_path.read_text().startswith("# sparkrun recipe")
    before = recipe_path.read_text()
    r = cli("card", str(target))
    assert r.exit_code == 0, r.output
    assert recipe_path.read_text() == before  # hubpad card renders the same recipe from hubpad.json


def test_mirrors_file_recipe_cannot_repoint_the_model(tmp_path):
    from tests.helpers import cli

    (tmp_path / "hubpad.yaml").write_text("mirrors:\n  - upstream: org/model\n    recipe: {model: evil/other}\n")
    r = cli("check", "--config", str(tmp_path / "hubpad.yaml"))
    assert r.exit_code == 1 and "recipe.model cannot be overridden" in r.stderr and "Traceback" not in r.stderr
