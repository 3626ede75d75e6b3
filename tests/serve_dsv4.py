"""What vLLM 0.32's CPU build needs to run DeepSeek-V4 at all, for the serving tests only (vLLM itself is not changed).

Stock, a V4 stops on its first step on the CPU (TP 1 already) with `TypeError: 'function' object is not
subscriptable` at `_token_request_mapping_kernel[grid](...)` (vllm/v1/attention/ops/metadata.py, reached from
sparse_swa.py's metadata builder; measured here with vLLM 0.32.0; the issue saw `TypeError: Cannot inspect kernel
parameters for function` from jit_warmup_triton_helper.py, the same cause reached through the JIT warm-up): the CPU
wheel ships no triton (its placeholder's `jit` returns a plain function), and the V4 attention metadata (the token
to request map, the SWA indices, the compressor's slot mapping, the indexer's) is computed by Triton kernels even on
the CPU. Two test-only shims get past that:

1. Triton's interpreter: a stock `triton` wheel installed into a folder of its own (never into the serving venv) and
   put on the vLLM job's PYTHONPATH with TRITON_INTERPRET=1, so those kernels run in Triton's numpy interpreter.
   HUBPAD_TRITON_TARGET names that folder (`triton_target()` says how to make it). vLLM's CPU build takes Triton only
   with a "cpu" backend (triton-cpu; vllm/triton_utils/importing.py: "Triton is installed, but doesn't include CPU
   backend. Disabling Triton."), which the interpreter never calls: SITECUSTOMIZE (loaded by Python at start-up from
   the plugin folder, before vLLM imports Triton) registers an inert one. VLLM_USE_V2_MODEL_RUNNER=0 keeps the V1
   model runner the stock CPU build uses (vLLM picks V2 whenever it sees Triton).
2. DSV4_CPU_PLUGIN, a vLLM general plugin (loaded in every vLLM process), for the next stop:
   `KeyError: 'c1a'` in DeepseekSparseSWAMetadataBuilder.build (sparse_swa.py), which reads the tile-scheduler slots
   of the V4.1 layer types c1a / c2a from the dict the CPU builder's build_tile_scheduler returns (cpu_mla.py), which
   has only swaonly / c4a / c128a. The plugin adds the two missing keys as None, the value every CPU slot has.

vLLM's other CPU limits shape the fixture (tests/dsv4_models.py SERVE): bfloat16 only (float32 is refused by
`hc_pre_fused_cpu: x must be bf16/fp16`, float16 by `flash_mla_with_kvcache_cpu: out must be bf16 and contiguous`,
measured), the CPU router's 64 / 128 / 256 / 384 experts with top-k 6 or 8, o_lora_rank a multiple of 32, the CPU
compressor's head_dim 512 / 128, and the CPU MoE's n_routed_experts % tp == 0. The MTP layers are dropped by the CPU model ("No MTP support on CPU yet"): the float64
MTP harness covers them (tests/mtp_dsv4.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DSV4_CPU_PLUGIN = '''"""hubpad's serving tests: DeepSeek-V4's CPU metadata builder lacks the c1a / c2a tile-scheduler slots."""


def register():
    from vllm.models.deepseek_v4.cpu import cpu_mla

    builder = cpu_mla.DeepseekV4CPUSparseSWAMetadataBuilder
    original = builder.build_tile_scheduler
    if getattr(original, "_hubpad_shim", False):
        return

    def build_tile_scheduler(self, num_decode_tokens):
        out = original(self, num_decode_tokens)
        for key in ("c1a", "c2a"):
            out.setdefault(key, None)
        return out

    build_tile_scheduler._hubpad_shim = True
    builder.build_tile_scheduler = build_tile_scheduler
'''
SITECUSTOMIZE = '''"""hubpad's serving tests: let vLLM's CPU build accept a stock Triton run by its interpreter (TRITON_INTERPRET=1)."""
import os

if os.environ.get("TRITON_INTERPRET") == "1":
    try:
        from triton.backends import Backend, backends
    except ImportError:
        backends = None
    if backends is not None and "cpu" not in backends:
        class _InterpreterOnly:  # never used: the interpreter runs every kernel in numpy, on no device
            @staticmethod
            def is_active():
                return False

        backends["cpu"] = Backend(compiler=None, driver=_InterpreterOnly)
'''
TRITON_ENV = {"TRITON_INTERPRET": "1", "VLLM_USE_V2_MODEL_RUNNER": "0"}


def dsv4_plugin(folder: Path) -> Path:
    """A folder holding DSV4_CPU_PLUGIN as an installed distribution with a vllm.general_plugins entry point."""
    info = folder / "hubpad_test_dsv4_cpu-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (folder / "hubpad_test_dsv4_cpu.py").write_text(DSV4_CPU_PLUGIN)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hubpad-test-dsv4-cpu\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\nhubpad_test_dsv4_cpu = hubpad_test_dsv4_cpu:register\n")
    return folder


def triton_target() -> Path:
    """The folder with a `triton` wheel installed for the vLLM jobs (HUBPAD_TRITON_TARGET); fails, saying how to make
    it, when it is not set."""
    target = os.environ.get("HUBPAD_TRITON_TARGET")
    how = ("install Triton beside (not into) the serving venv: `$HUBPAD_VLLM_PYTHON -m pip install --no-deps "
           "--require-hashes --target DIR -r requirements/serve-triton.txt` and set HUBPAD_TRITON_TARGET=DIR "
           "(.ci/serve does both; tests/serve_dsv4.py says why)")
    if not target:
        pytest.fail(f"DeepSeek-V4 on vLLM's CPU build needs Triton's interpreter: {how}", pytrace=False)
    if not (Path(target) / "triton").is_dir():
        pytest.fail(f"HUBPAD_TRITON_TARGET={target} holds no triton package: {how}", pytrace=False)
    return Path(target)
