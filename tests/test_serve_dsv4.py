"""DeepSeek-V4 in vLLM's CPU build: stock it cannot run a V4 at all (the test expects its exact message); with the two
test-only shims of tests/serve_dsv4.py (Triton's interpreter, the c1a / c2a slots), the original at TP 1 and
`hubpad mirror`'s derivative at TP 3 and at TP 6 generate the same greedy tokens.

The fixture is the tiny V4 of tests/dsv4_models.py at vLLM's CPU limits (64 experts, top-6, o_lora_rank 32) in
bfloat16 (the CPU path refuses float32), so the bfloat16 bound of tests/serving.py applies. The card's MTP
speculative config is left out: vLLM's CPU model drops `mtp.*` ("No MTP support on CPU yet"); the float64 MTP
harness proves that layer (tests/test_deepseek_v4.py).
"""

from __future__ import annotations

import pytest

from tests import serving
from tests.serve_dsv4 import TRITON_ENV, dsv4_plugin, triton_target

pytestmark = pytest.mark.serve
torch = pytest.importorskip("torch")

PROMPTS = [[1, 17, 93, 105, 31, 42, 58], [9, 70, 133, 77], [140, 3, 3, 151, 99, 12, 48, 64, 31, 7]]  # vocab 160


@pytest.fixture(scope="module")
def dsv4(tmp_path_factory):
    from hubpad.plan.planner import make_plan
    from hubpad.publish.local import LocalPublisher
    from hubpad.run.mirror import run_mirror
    from hubpad.source.local import LocalSource
    from tests.dsv4_models import SERVE, build_model, save_published

    root = tmp_path_factory.mktemp("serve-dsv4")
    save_published(build_model(dtype=torch.float32, **SERVE), root / "upstream", dtype=torch.bfloat16)
    for tp in (3, 6):
        run_mirror(make_plan(LocalSource(root / "upstream"), tp), LocalPublisher(root / f"tp{tp}"))
    shims = {"plugins": [triton_target(), dsv4_plugin(root / "dsv4-plugin")], "env": TRITON_ENV}
    original = serving.run_vllm([serving.job(root / "upstream", 1, PROMPTS, dtype="bfloat16")], root / "run-tp1",
                                **shims).ok(0)
    return root, shims, original


def test_stock_cpu_build_cannot_run_deepseek_v4(dsv4):
    root = dsv4[0]
    run = serving.run_vllm([serving.job(root / "upstream", 1, PROMPTS, dtype="bfloat16")], root / "run-stock")
    assert not run.results or not run.results[0]["ok"]
    # the first Triton kernel the V4 attention metadata launches (vllm/v1/attention/ops/metadata.py), on the placeholder
    # that stands for Triton in the CPU wheel
    assert "TypeError: 'function' object is not subscriptable" in run.log
    assert "_token_request_mapping_kernel[" in run.log


@pytest.mark.parametrize("tp", [3, 6])
def test_dsv4_derivative_serves_the_originals_outputs(dsv4, tp):
    root, shims, original = dsv4
    served = serving.run_vllm([serving.job(root / f"tp{tp}", tp, PROMPTS, dtype="bfloat16")], root / f"run-tp{tp}",
                              **shims).ok(0)
    serving.assert_same_outputs(original, served, f"deepseek_v4 TP=1 vs derivative TP={tp}", dtype="bfloat16")
