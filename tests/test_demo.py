"""The README's first command keeps working: `hubpad demo` builds, pads, verifies and prints the plan."""

import json

from tests.helpers import cli_subprocess


def test_demo_runs_offline_and_verifies(tmp_path):
    r = cli_subprocess("demo", "--out", tmp_path, env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr
    assert "Per-rank divisibility at TP=3" in r.stdout and "verified" in r.stdout
    # A newcomer's first run says nothing alarming about hubpad's own example.
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stderr
    out = tmp_path / "Tiny-Hy3-NVFP4-FP8-TP3"
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (6, 3, 128)
    assert (out / "README.md").is_file() and (out / "vllm_patch" / "hubpad_vocab_patch.py").is_file()
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temp dirs left behind
