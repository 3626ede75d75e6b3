"""The serving tier's test side: run jobs in vLLM's CPU build (another venv) and compare what it generated.

vLLM lives in its own environment (requirements/serve.txt: it pins torch 2.13.0+cpu and transformers < 5.20, and
its own compressed-tensors), named by HUBPAD_VLLM_PYTHON. The tests build and pad models here, with the test
environment's transformers and hubpad, and hand vLLM only file paths: tests/vllm_runner.py runs in that venv and
writes JSON back. A derivative's vocab plugin is pip-installed into a folder of its own and put on PYTHONPATH for
the jobs that use it, so the serving venv itself stays stock.

How close "the same outputs" must be: identical greedy tokens, and every generated token's logprob within
LOGPROB_BOUND[dtype] of the original's. A padded model changes only the order of floating-point sums: GEMM shapes
grow, and each rank adds its partial sums before the all-reduce.
- float32 (every BF16 family; the checkpoints are BF16 on disk, upcast exactly): float32 keeps 24 bits (6e-8
  relative); a logprob is a log-sum-exp over a few hundred logits of magnitude up to ~20, each the end of a few
  layers of ~100-term sums, so reordering moves it by about 1e-6 to 1e-5 (measured: README, "Served by vLLM").
  The bound, 1e-4, is ten times the worst of those, and a single wrong padded value moves these models' logprobs by
  O(1) (test_serve_mutations.py). Equal tokens mean something only where the original's choice was no near-tie:
  every original step must lead its runner-up by MIN_MARGIN = 100 x the bound, or the fixture is too flat.
- float16 / bfloat16: the CPU kernels of the quantized formats compute in half precision only (cpu_gemm_wna16 takes
  no float32, fp8_scaled_mm_cpu bf16 or fp16 only). Rounding each layer's activations to 11 / 8 bits makes
  reordering noise about 1e-2 / 1e-1 on these logprobs (measured up to 4.6e-2 and 1.2e-1); the bounds are 0.1 and
  0.5, still well below what a wrong padded value does. Tokens must be identical all the same.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

LOGPROB_BOUND = {"float32": 1e-4, "float16": 0.1, "bfloat16": 0.5}
MIN_MARGIN = 100 * LOGPROB_BOUND["float32"]

# vLLM's CPU backend on a 2-core machine, with 3 or 6 ranks: no NUMA binding (the default "auto" wants one node per
# rank), one OpenMP thread per rank, 1 GiB of KV cache, and never a network call.
VLLM_ENV = {
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "OMP_NUM_THREADS": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
RUNNER = Path(__file__).with_name("vllm_runner.py")
PROMPTS = [[1, 17, 93, 205, 311, 402, 58], [9, 270, 133, 77], [400, 3, 3, 251, 199, 12, 480, 64, 31, 7]]


def vllm_python() -> str:
    """The serving venv's python (HUBPAD_VLLM_PYTHON); a test that needs it fails, never skips, without it."""
    python = os.environ.get("HUBPAD_VLLM_PYTHON")
    if not python:
        pytest.fail("the serving tier needs vLLM's CPU build: make its venv with `bash .ci/serve-venv DIR` and set "
                    "HUBPAD_VLLM_PYTHON=DIR/bin/python (docs/serving-tier.md)", pytrace=False)
    if not Path(python).exists():
        pytest.fail(f"HUBPAD_VLLM_PYTHON={python} does not exist", pytrace=False)
    return python


def vllm_env(plugins: Path | list[Path] | None = None, **extra: str) -> dict[str, str]:
    """The environment vLLM runs in: this one without Hub settings, plus VLLM_ENV, plus plugin folders if any."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUBPAD_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(VLLM_ENV)
    env["HF_HOME"] = str(Path(os.environ.get("HF_HOME", "/tmp")) / "vllm-hf-home")
    folders = [plugins] if isinstance(plugins, Path) else list(plugins or [])
    if folders:
        env["PYTHONPATH"] = os.pathsep.join(map(str, folders))
    env.update(extra)
    return env


# vLLM's CPU build all-reduces over tensor-parallel ranks in shared memory (cpu_communicator.py, torch.ops._C.
# shm_allreduce), and that kernel refuses six ranks: "RuntimeError: Invalid world size: 6". TP=6 jobs therefore run
# with this test-only vLLM plugin, which turns the shared-memory path off so that vLLM's own fallback, torch.distributed
# (gloo), all-reduces; the model code is vLLM's as ever. It is a general plugin, loaded in every vLLM process.
GLOO_PLUGIN = '''"""hubpad's serving tests: all-reduce through torch.distributed (gloo) in vLLM's CPU build."""


def register():
    from vllm.distributed.device_communicators import cpu_communicator

    cpu_communicator.CpuCommunicator._all_group_ranks_share_shm_group_name = lambda self: False
'''
SHM_WORLD_SIZES_REFUSED = {6}


def gloo_plugin(folder: Path) -> Path:
    """A folder holding GLOO_PLUGIN as an installed distribution (module, METADATA, a vllm.general_plugins entry
    point), ready to go on PYTHONPATH."""
    info = folder / "hubpad_test_cpu_gloo-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (folder / "hubpad_test_cpu_gloo.py").write_text(GLOO_PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hubpad-test-cpu-gloo\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\nhubpad_test_cpu_gloo = hubpad_test_cpu_gloo:register\n")
    return folder


@dataclass
class Run:
    """What one runner process returned: a result per job (until the first failure) and vLLM's log."""

    results: list[dict]
    log: str

    def ok(self, i: int) -> dict:
        if i >= len(self.results) or not self.results[i]["ok"]:
            tail = "\n".join(self.log.splitlines()[-40:])
            got = self.results[i]["error"] if i < len(self.results) else "no result"
            raise AssertionError(f"vLLM job {i} failed: {got}\n--- vLLM log (tail) ---\n{tail}")
        return self.results[i]


def run_vllm(jobs: list[dict], work: Path, plugins: Path | list[Path] | None = None, timeout: float = 900,
             env: dict[str, str] | None = None) -> Run:
    """Run `jobs` one after another in one vLLM process (tests/vllm_runner.py); a TP its shared-memory all-reduce
    refuses runs through gloo (GLOO_PLUGIN). `plugins`: folders for PYTHONPATH; `env`: extra environment."""
    work.mkdir(parents=True, exist_ok=True)
    folders = [plugins] if isinstance(plugins, Path) else list(plugins or [])
    if any(j["tp"] in SHM_WORLD_SIZES_REFUSED for j in jobs):
        folders.append(gloo_plugin(work / "gloo-plugin"))
    jobs_file, results_file, log_file = work / "jobs.json", work / "results.json", work / "vllm.log"
    jobs_file.write_text(json.dumps(jobs))
    with open(log_file, "w") as log:
        subprocess.run([vllm_python(), str(RUNNER), str(jobs_file), str(results_file)], stdout=log,
                       stderr=subprocess.STDOUT, env=vllm_env(folders, **(env or {})), cwd=work, timeout=timeout,
                       check=False)
    results = json.loads(results_file.read_text()) if results_file.exists() else []
    return Run(results, log_file.read_text(errors="replace"))


_KERNELS: dict[str, dict] = {}

# The CPU feature (as /proc/cpuinfo names it) without which each op is absent: vllm-cpu's AVX2 and plain AVX-512
# libraries lack the int4 / FP8 ops and the MXFP4 packing ops, and "amx" stands for the AMX tiles themselves
# (tests/vllm_runner.py `kernels`).
OP_FEATURE = {"cpu_gemm_wna16": "avx512_bf16", "fp8_scaled_mm_cpu": "avx512_bf16",
              "convert_weight_packed": "avx512_bf16", "convert_scale_packed": "avx512_bf16", "amx": "amx_tile"}
# A strict run (CI's serve job, .ci/serve) fails a row that cannot run here instead of skipping it, unless the
# machine is declared unable: HUBPAD_SERVE_CPU_LACKS names the features it lacks (comma-separated, e.g.
# "amx_tile" or "avx512_bf16,amx_tile"), and each must really be absent from /proc/cpuinfo.
STRICT_ENV, LACKS_ENV = "HUBPAD_SERVE_STRICT", "HUBPAD_SERVE_CPU_LACKS"
DECLARED = "declared unable"  # in the reason of a skip a strict run accepts


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {flag for line in text.splitlines() if line.startswith("flags") for flag in line.split(":", 1)[1].split()}


def declared_lacking() -> set[str]:
    """The CPU features HUBPAD_SERVE_CPU_LACKS declares missing; a feature declared but present fails the run."""
    declared = {f.strip() for f in os.environ.get(LACKS_ENV, "").split(",") if f.strip()}
    present = declared & cpu_flags()
    if present:
        pytest.fail(f"{LACKS_ENV} declares {', '.join(sorted(present))} missing, but /proc/cpuinfo has it",
                    pytrace=False)
    return declared


def require_kernels(*names: str) -> None:
    """Skip, naming what is missing, when the CPU kernel library vLLM loads on this machine lacks an op a format
    needs (vllm-cpu ships AVX2, AVX-512 and AVX-512-BF16 builds; only the last has every op used here). Under
    HUBPAD_SERVE_STRICT=1 the row fails instead, unless HUBPAD_SERVE_CPU_LACKS declares the feature it needs."""
    missing = [n for n in names if n not in _KERNELS]
    if missing:
        out = Path(os.environ.get("TMPDIR", "/tmp")) / f"hubpad-vllm-kernels-{os.getpid()}.json"
        subprocess.run([vllm_python(), str(RUNNER), "--kernels", str(out), *missing], env=vllm_env(), check=True,
                       capture_output=True, timeout=300)
        found = json.loads(out.read_text())
        out.unlink()
        _KERNELS.update({n: {"library": found["library"], "present": found["ops"][n]} for n in missing})
    absent = [n for n in names if not _KERNELS[n]["present"]]
    if not absent:
        return
    features = sorted({OP_FEATURE.get(n, n) for n in absent})
    reason = (f"vLLM's CPU kernels on this machine ({_KERNELS[absent[0]]['library']}) have no {', '.join(absent)} "
              f"(CPU feature {', '.join(features)})")
    if set(features) <= declared_lacking():
        pytest.skip(f"{reason}: {DECLARED} ({LACKS_ENV})")
    if os.environ.get(STRICT_ENV) == "1":
        pytest.fail(f"{reason}, and {LACKS_ENV} does not declare it: a row the README's matrix marks as served did "
                    f"not run", pytrace=False)
    pytest.skip(reason)


def job(model: Path, tp: int, prompts: list | None = None, max_tokens: int = 8, **extra) -> dict:
    return {"model": str(model), "tp": tp, "prompts": prompts or PROMPTS, "max_tokens": max_tokens, **extra}


def install_plugin(derivative: Path, into: Path) -> Path:
    """pip-install the derivative's `vllm_patch/` (as its card says) into a folder of its own, with the serving venv's
    pip and setuptools (no build isolation: nothing is downloaded)."""
    patch = derivative / "vllm_patch"
    assert (patch / "pyproject.toml").is_file(), f"{derivative} ships no vllm_patch/"
    proc = subprocess.run([vllm_python(), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                           "--no-build-isolation", "--no-index", "--target", str(into), str(patch)],
                          capture_output=True, text=True, env=vllm_env(), timeout=300)
    assert proc.returncode == 0, f"pip install {patch} failed:\n{proc.stdout}\n{proc.stderr}"
    return into


def assert_heads_padded(upstream: Path, derivative: Path, tp: int, keys: tuple[str, ...] = ()) -> dict:
    """The derivative's attention heads (and each of `keys`) really grew, and split evenly over `tp` ranks (or, kv
    heads fewer than the ranks, replicate evenly): a row whose derivative padded nothing would prove nothing about
    padding. Returns the derivative's (text) config."""
    def text(path: Path) -> dict:
        config = json.loads((path / "config.json").read_text())
        return config.get("text_config", config)

    before, after = text(upstream), text(derivative)
    for key in ("num_attention_heads", *keys):
        assert after[key] > before[key], f"{key}: {before[key]} -> {after[key]}: not padded"
        assert after[key] % tp == 0 or tp % after[key] == 0, f"{key} {after[key]} does not split over TP={tp}"
    return after


def assert_decisive(result: dict, label: str) -> None:
    """Every greedy step of the original leads its runner-up by MIN_MARGIN (else equal tokens would prove little)."""
    for p, steps in enumerate(result["outputs"]):
        for i, step in enumerate(steps):
            (_, first), (_, second) = step["top"]
            assert first - second >= MIN_MARGIN, (f"{label}: prompt {p} step {i}: the top two logprobs are "
                                                  f"{first - second:.2e} apart; the fixture is too flat to compare")


def min_margin(result: dict) -> float:
    """The smallest lead of a greedy step over its runner-up, over every prompt and step of `result`."""
    return min(step["top"][0][1] - step["top"][1][1] for steps in result["outputs"] for step in steps)


def compare(original: dict, served: dict) -> float:
    """Max |Δ logprob| over every generated token; raises when any greedy token differs, or when either run
    generated no token or not as many (equal lists prove nothing when both are short)."""
    worst = 0.0
    assert len(original["outputs"]) == len(served["outputs"])
    for p, (a, b) in enumerate(zip(original["outputs"], served["outputs"])):
        ta, tb = [s["token"] for s in a], [s["token"] for s in b]
        assert ta, f"prompt {p}: the original generated no token"
        assert len(ta) == len(tb), f"prompt {p}: {len(ta)} tokens from the original, {len(tb)} served"
        assert ta == tb, f"prompt {p}: greedy tokens differ: original {ta}, served {tb}"
        worst = max([worst] + [abs(x["logprob"] - y["logprob"]) for x, y in zip(a, b)])
    return worst


def assert_same_outputs(original: dict, served: dict, label: str, dtype: str = "float32") -> float:
    """Identical greedy tokens and logprobs within LOGPROB_BOUND[dtype]; returns the max |Δ logprob| (README)."""
    if dtype == "float32":
        assert_decisive(original, label)
    worst = compare(original, served)
    bound = LOGPROB_BOUND[dtype]
    assert worst <= bound, f"{label}: max |Δ logprob| = {worst:.2e} > {bound:.0e} ({dtype})"
    # half precision: no margin is required (docs/proofs.md says what such a row can and cannot show); the smallest
    # lead is printed, so a step within the bound's noise is on the record
    print(f"{label}: identical tokens, max |Δ logprob| = {worst:.2e} ({dtype}), smallest lead of a greedy step "
          f"{min_margin(original):.2e}")
    return worst


# ---------------------------------------------------------------------------------------------------------------------
# `vllm serve`, the user's way: the command line the derivative's card and recipe render, over HTTP

# What the test changes in the rendered command, and why (README: Served by vLLM):
# - the model: the Hub repo id becomes the local derivative (the same files; the Hub is not reachable here), and
#   `--revision` (a commit of that Hub repo) is dropped with it;
# - `--host` / `--port`: 127.0.0.1 and a free port;
# - GPU-only flags: `--gpu-memory-utilization` (a fraction of GPU memory; the CPU backend sizes its KV cache from
#   VLLM_CPU_KVCACHE_SPACE instead) and `--moe-backend` (its values name GPU kernels: marlin, ...) are removed;
# - CPU_SERVE_FLAGS are added: float32 compute, a short context, eager mode, multiprocessing workers.
GPU_ONLY_FLAGS = {"--gpu-memory-utilization": 1, "--moe-backend": 1}
CPU_SERVE_FLAGS = ["--dtype", "float32", "--max-model-len", "128", "--enforce-eager",
                   "--distributed-executor-backend", "mp"]


def card_serve_command(derivative: Path) -> list[str]:
    """The `vllm serve ...` command of the derivative's README.md, as argv."""
    text = (derivative / "README.md").read_text()
    m = re.search(r"```bash\n(vllm serve .*?)\n```", text, re.S)
    assert m, "the card has no `vllm serve` command"
    return shlex.split(m.group(1).replace("\\\n", " "))


def recipe_serve_command(derivative: Path) -> list[str]:
    """The sparkrun recipe's `command:`, with its {placeholders} filled from `defaults` as sparkrun fills them."""
    recipes = [p for p in derivative.glob("*.yaml")]
    assert len(recipes) == 1, recipes
    recipe = yaml.safe_load(recipes[0].read_text())
    values = {**{k: str(v) for k, v in recipe.get("defaults", {}).items()}, "model": recipe["model"]}
    command = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], recipe["command"])
    return shlex.split(command.replace("\\\n", " "))


# Card flags that change which model vLLM builds: the offline jobs pass them as engine arguments, as `vllm serve` does.
MODEL_FLAGS = {"--hf-overrides": ("hf_overrides", json.loads), "--model-impl": ("model_impl", str),
               "--mm-encoder-tp-mode": ("mm_encoder_tp_mode", str)}


def card_engine_args(derivative: Path) -> dict:
    """The engine arguments the derivative's card command carries for building the model (MODEL_FLAGS)."""
    argv = card_serve_command(derivative)
    return {key: parse(argv[argv.index(flag) + 1]) for flag, (key, parse) in MODEL_FLAGS.items() if flag in argv}


def flags_of(argv: list[str], drop: dict[str, int]) -> list[str]:
    """argv after `vllm serve MODEL`, without the flags in `drop` (flag -> how many values follow it)."""
    assert argv[:2] == ["vllm", "serve"], argv
    out, i = [], 3
    while i < len(argv):
        if argv[i] in drop:
            i += 1 + drop[argv[i]]
            continue
        out.append(argv[i])
        i += 1
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# vllm-cpu 0.32.0's `vllm` command stops before parsing anything: vllm/entrypoints/cli/main.py:99 asks
# importlib.metadata for the version of a distribution named "vllm", and this one is named "vllm-cpu"
# (PackageNotFoundError). The same OpenAI server, with the same argument parser (make_arg_parser), starts as
# `python -m vllm.entrypoints.openai.api_server --model MODEL FLAGS`, which is what `vllm serve MODEL FLAGS` runs.
SERVER_MODULE = "vllm.entrypoints.openai.api_server"


class Server:
    """vLLM's OpenAI-compatible server in the serving venv, with the given flags, until stopped."""

    def __init__(self, model: Path, flags: list[str], log: Path, plugins: Path | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        argv = [vllm_python(), "-m", SERVER_MODULE, "--model", str(model), *flags, *CPU_SERVE_FLAGS,
                "--host", "127.0.0.1", "--port", str(self.port)]
        self.argv = argv
        self._out = open(log, "w")
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, env=vllm_env(plugins),
                                     cwd=log.parent, start_new_session=True)

    def wait_ready(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"vllm serve exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(2)
        raise AssertionError(f"vllm serve not ready after {timeout} s:\n{self.tail()}")

    def post(self, path: str, body: dict, timeout: float = 300) -> dict:
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"POST {path}: HTTP {exc.code}: {exc.read()[:2000]!r}\n{self.tail()}") from None

    def tail(self, lines: int = 60) -> str:
        self._out.flush()
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._out.close()
