"""Bad input: one clear `error:` line, exit code 1, no traceback, and no destination that looks finished."""

from __future__ import annotations

import json
import shutil
import struct

import pytest

from hubpad.testing import build_tiny_hy3
from tests.helpers import cli_subprocess


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return build_tiny_hy3(tmp_path_factory.mktemp("good") / "up")


def _copy(good, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(good, src)
    return src


def _shard(src):
    return src / "model-00001-of-00002.safetensors"


def _rewrite_header(path, mutate):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    mutate(header)
    body = json.dumps(header).encode()
    body += b" " * (-(8 + len(body)) % 8)
    path.write_bytes(struct.pack("<Q", len(body)) + body + data[8 + n:])


def truncated(src):
    p = _shard(src)
    p.write_bytes(p.read_bytes()[:-1000])


def header_past_eof(src):
    p = _shard(src)
    data = bytearray(p.read_bytes())
    data[:8] = struct.pack("<Q", len(data) + 10)
    p.write_bytes(bytes(data))


def header_not_json(src):
    p = _shard(src)
    data = bytearray(p.read_bytes())
    data[8:12] = b"nope"
    p.write_bytes(bytes(data))


def overlapping(src):
    def mutate(h):
        names = [k for k in h if k != "__metadata__"]
        a, b = sorted(names, key=lambda k: h[k]["data_offsets"][0])[:2]
        h[b]["data_offsets"] = [h[a]["data_offsets"][0], h[a]["data_offsets"][0] + (h[b]["data_offsets"][1] - h[b]["data_offsets"][0])]
    _rewrite_header(_shard(src), mutate)


def dtype_shape_mismatch(src):
    def mutate(h):
        name = next(k for k in h if k.endswith("q_proj.weight"))
        h[name]["dtype"] = "BF16"  # same offsets, twice the bytes needed
    _rewrite_header(_shard(src), mutate)


def missing_config(src):
    (src / "config.json").unlink()


def unknown_tensor(src):
    def mutate(h):
        name = next(k for k in h if k.endswith("q_proj.weight"))
        h["model.layers.0.self_attn.mystery_proj.weight"] = h.pop(name)
    _rewrite_header(_shard(src), mutate)
    index = json.loads((src / "model.safetensors.index.json").read_text())
    wm = index["weight_map"]
    old = next(k for k in wm if k.endswith("q_proj.weight") and wm[k] == _shard(src).name)
    wm["model.layers.0.self_attn.mystery_proj.weight"] = wm.pop(old)
    (src / "model.safetensors.index.json").write_text(json.dumps(index))


def config_disagrees(src):
    cfg = json.loads((src / "config.json").read_text())
    cfg["intermediate_size"] = 1024
    (src / "config.json").write_text(json.dumps(cfg))


def _config_value(key, value):
    def damage(src):
        cfg = json.loads((src / "config.json").read_text())
        cfg[key] = value
        (src / "config.json").write_text(json.dumps(cfg))
    return damage


def _quant_value(key, value):
    def damage(src):
        cfg = json.loads((src / "config.json").read_text())
        cfg["quantization_config"][key] = value
        (src / "config.json").write_text(json.dumps(cfg))
    return damage


def index_metadata_not_an_object(src):
    index = json.loads((src / "model.safetensors.index.json").read_text())
    index["metadata"] = "x"
    (src / "model.safetensors.index.json").write_text(json.dumps(index))


CASES = {
    # config.json values of the wrong JSON type are named, never an internal error deep in planning
    "hidden_size a string": (_config_value("hidden_size", "xxx"), "config.json: hidden_size must be an integer, got 'xxx'"),
    "num_attention_heads a list": (_config_value("num_attention_heads", []), "num_attention_heads must be an integer"),
    "expert size a string": (_config_value("moe_intermediate_size", "64"), "moe_intermediate_size must be an integer"),
    "intermediate_size an object": (_config_value("intermediate_size", {}), "intermediate_size must be an integer"),
    "model_type a list": (_config_value("model_type", []), "model_type must be a string, got []"),
    "architectures a string": (_config_value("architectures", "X"), "architectures must be a list of strings"),
    "quantization_config a string": (_config_value("quantization_config", "x"), "quantization_config must be an object"),
    "config_groups a string": (_quant_value("config_groups", "x"), "quantization_config is malformed"),
    "index metadata a string": (index_metadata_not_an_object, "metadata must be an object"),
    "truncated file": (truncated, "outside"),
    "header length past EOF": (header_past_eof, "past the end"),
    "non-JSON header": (header_not_json, "not valid JSON"),
    "overlapping offsets": (overlapping, "overlap"),
    "dtype/shape mismatch": (dtype_shape_mismatch, "needs"),
    "missing config": (missing_config, "no config.json"),
    "unknown tensor": (unknown_tensor, "mystery_proj"),
    "config disagrees with headers": (config_disagrees, "disagrees with config.json"),
}


def _assert_clean_failure(result, needle, dst):
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    assert needle in lines[0], lines[0]
    assert not dst.exists()
    assert not any(p.name.startswith(f".{dst.name}") for p in dst.parent.iterdir()), "temp dir left behind"


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_fails_cleanly(good, tmp_path, case):
    damage, needle = CASES[case]
    src = _copy(good, tmp_path)
    damage(src)
    dst = tmp_path / "out"
    for args in (("plan", src, "--tp", "3"), ("mirror", src, "--tp", "3", "--to", dst)):
        _assert_clean_failure(cli_subprocess(*args), needle, dst)


def test_impossible_tp_says_why(tmp_path):
    from hubpad.testing import write_checkpoint

    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 96,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24, "intermediate_size": 128,
           "num_hidden_layers": 1, "vocab_size": 64, "attention_bias": True}
    tensors = [("model.embed_tokens.weight", "BF16", (64, 96)),
               *[(f"model.layers.0.self_attn.{p}_proj.bias", "BF16", (n,)) for p, n in zip("qkvo", (96, 48, 48, 96))],
               ("model.layers.0.self_attn.q_proj.weight", "BF16", (96, 96)),
               ("model.layers.0.self_attn.k_proj.weight", "BF16", (48, 96)),
               ("model.layers.0.self_attn.v_proj.weight", "BF16", (48, 96)),
               ("model.layers.0.self_attn.o_proj.weight", "BF16", (96, 96)),
               ("model.layers.0.mlp.gate_proj.weight", "BF16", (128, 96)),
               ("model.layers.0.mlp.up_proj.weight", "BF16", (128, 96)),
               ("model.layers.0.mlp.down_proj.weight", "BF16", (96, 128)),
               ("model.norm.weight", "BF16", (96,)), ("lm_head.weight", "BF16", (64, 96))]
    src = write_checkpoint(tmp_path / "llama", cfg, tensors, n_shards=1)
    dst = tmp_path / "out"
    # 96 = 2^5·3: no whole-group head count that is a multiple of 7 divides the hidden size, which
    # transformers' LlamaConfig insists on; and the MistralForCausalLM label that would accept it has no
    # attention biases (plan/relabel.py), so nothing can hold the padded heads.
    result = cli_subprocess("mirror", src, "--tp", "7", "--to", dst)
    _assert_clean_failure(result, "no valid head padding", dst)
    assert "hidden_size" in result.stderr and "cannot express attention_bias" in result.stderr


def test_destination_not_made_by_hubpad_is_refused(good, tmp_path):
    dst = tmp_path / "someone-elses"
    dst.mkdir()
    (dst / "precious.txt").write_text("keep me")
    result = cli_subprocess("mirror", good, "--tp", "3", "--to", dst)
    assert result.returncode == 1 and "not made by hubpad" in result.stderr
    assert (dst / "precious.txt").read_text() == "keep me"


def test_no_padding_needed_is_said(good, tmp_path):
    result = cli_subprocess("plan", good, "--tp", "1")
    assert result.returncode == 0 and "No padding needed" in result.stdout
