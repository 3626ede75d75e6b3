"""Shared helpers for the bench/ scripts: synthetic checkpoints, timing, tables and the Hub emulator.

Every script is run as `python bench/<name>.py` (so this directory is on sys.path); the repository root is
added too, for `hubpad` (when not installed) and `tests.hub_emulator`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HUBPAD = [sys.executable, "-m", "hubpad.app.cli"]

# --------------------------------------------------------------------------------------------------------------
# output


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A GitHub-markdown table (pasteable into README.md)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells]
    return "\n".join(out)


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def finish(checks: list[tuple[str, bool]]) -> None:
    """Print the bars and exit 1 when one is missed."""
    failed = [name for name, ok in checks if not ok]
    for name, ok in checks:
        print(f"  [{verdict(ok)}] {name}")
    if failed:
        print(f"{len(failed)} bar(s) missed", file=sys.stderr)
        sys.exit(1)


def bench_dir(arg: str | None, name: str) -> tuple[Path, bool]:
    """The data folder: --dir, or a fresh one under $TMPDIR (removed at the end unless --keep)."""
    if arg:
        p = Path(arg).expanduser().absolute()
        p.mkdir(parents=True, exist_ok=True)
        return p, False
    return Path(tempfile.mkdtemp(prefix=f"hubpad-bench-{name}-")), True


def clean_up(work: Path, temp: bool, keep: bool, *scratch: Path) -> None:
    """End of a bench: remove its scratch outputs, and the data folder when bench_dir made it (unless --keep)."""
    for p in scratch:
        shutil.rmtree(p, ignore_errors=True)
    if temp and not keep:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------------------------------------------
# synthetic Hy3-shaped checkpoints (RedHatAI layout: FP8-block attention, NVFP4 MLP/experts, BF16 MTP layer)


def hy3_config(layers: int, experts: int, vocab: int = 16384) -> dict:
    """tencent/Hy3's real shapes (hidden 4096, 64 heads, 8 kv heads, 13312 dense, 1536 per expert), fewer layers
    and experts, in RedHatAI's quantization layout."""
    from hubpad.testing import quant_config
    from tests.hy3_real import HY3_CONFIG

    cfg = dict(HY3_CONFIG, num_hidden_layers=layers, num_experts=experts, vocab_size=vocab)
    cfg["quantization_config"] = quant_config(layers)
    return cfg


def hy3_tensors(cfg: dict, layout: str = "redhat") -> list[tuple[str, str, tuple[int, ...]]]:
    from hubpad.testing import tiny_hy3_tensors

    return tiny_hy3_tensors(cfg, layout)


def nbytes_of(dtype: str, shape: tuple[int, ...]) -> int:
    from hubpad.testing import nbytes

    return nbytes(dtype, shape)


class _Pools:
    """64 MiB of random bytes, plus variants that are valid FP8 (no NaN codes) and finite BF16, written by
    slicing (os.urandom once, numpy masks once): GBs of checkpoint per few seconds, limited by the disk."""

    SIZE = 64 * 1024 * 1024

    def __init__(self, seed: int) -> None:
        import numpy as np

        rng = np.random.default_rng(seed)
        raw = rng.integers(0, 256, self.SIZE, dtype=np.uint8)
        fp8 = raw & 0x76
        bf16 = raw.copy()
        bf16[1::2] &= 0x3F
        self.pools = {"raw": raw.tobytes(), "fp8": fp8.tobytes(), "bf16": bf16.tobytes()}
        self.pos = 0

    def write(self, f, dtype: str, n: int) -> None:
        if dtype == "F32" and n <= 16:
            f.write(b"\x00\x00\x80\x3f" * (n // 4))
            return
        kind = "fp8" if dtype == "F8_E4M3" else "bf16" if dtype == "BF16" else "raw"
        pool = memoryview(self.pools[kind])
        while n > 0:
            self.pos %= self.SIZE - 16
            self.pos -= self.pos % 2  # keep BF16 element alignment
            take = min(n, self.SIZE - self.pos)
            f.write(pool[self.pos:self.pos + take])
            self.pos += take + 4099 * 2  # drift so tensors do not start on the same bytes
            n -= take


class _UniqueBytes(_Pools):
    """Like _Pools, but every byte is freshly drawn: no tensor repeats another's bytes (real weights do not), so
    chunk-level deduplication measured on the checkpoint is not flattered by the pool's reuse."""

    BLOCK = 16 * 1024 * 1024

    def __init__(self, seed: int) -> None:
        import numpy as np

        self.rng = np.random.default_rng(seed)

    def write(self, f, dtype: str, n: int) -> None:
        if dtype == "F32" and n <= 16:
            f.write(b"\x00\x00\x80\x3f" * (n // 4))
            return
        while n > 0:
            take = min(n, self.BLOCK)
            buf = self.rng.integers(0, 256, take, dtype="uint8")
            if dtype == "F8_E4M3":
                buf &= 0x76  # no NaN codes
            elif dtype == "BF16":
                buf[1::2] &= 0x3F  # finite (BLOCK is even, so element alignment holds across blocks)
            f.write(buf.tobytes())
            n -= take


def write_checkpoint(path: Path, config: dict, tensors: list[tuple[str, str, tuple[int, ...]]], n_shards: int,
                     *, seed: int = 0, header_only: bool = False, extra_files: dict[str, str] | None = None,
                     unique: bool = False) -> Path:
    """A sharded safetensors checkpoint cut into `n_shards` of about equal BYTES (upstream order kept).

    header_only: real headers over sparse (truncated) data sections: full-size files that cost no disk.
    unique: fresh random bytes everywhere (slower to write), instead of slices of a reused 64 MiB pool.
    """
    from hubpad.formats.safetensors import encode_header

    path.mkdir(parents=True, exist_ok=True)
    sizes = [(n, d, s, nbytes_of(d, s)) for n, d, s in tensors]
    total = sum(x[3] for x in sizes)
    per = total / n_shards
    groups: list[list] = [[]]
    acc = 0
    for item in sizes:
        if groups[-1] and acc >= per * len(groups) and len(groups) < n_shards:
            groups.append([])
        groups[-1].append(item)
        acc += item[3]
    pools = None if header_only else (_UniqueBytes if unique else _Pools)(seed)
    weight_map = {}
    n = len(groups)
    for i, group in enumerate(groups, 1):
        name = f"model-{i:05d}-of-{n:05d}.safetensors"
        header = encode_header(group, {"format": "pt"})
        with open(path / name, "wb") as f:
            f.write(header)
            if header_only:
                f.truncate(len(header) + sum(x[3] for x in group))
            else:
                for _, dtype, _, nb in group:
                    pools.write(f, dtype, nb)
        for t in group:
            weight_map[t[0]] = name
    from hubpad.testing import write_model_files

    return write_model_files(path, config, weight_map, total, extra_files)


def cached_checkpoint(path: Path, config: dict, n_shards: int, seed: int = 0, layout: str = "redhat",
                      header_only: bool = False, extra_files: dict[str, str] | None = None,
                      unique: bool = False) -> Path:
    """write_checkpoint(), reused when `path` already holds exactly this checkpoint (a stamp file says so)."""
    stamp = json.dumps({"config": config, "n_shards": n_shards, "seed": seed, "layout": layout,
                        "header_only": header_only, "extra": extra_files or {}, "v": 2}
                       | ({"unique": True} if unique else {}), sort_keys=True)
    marker = path.parent / f".{path.name}.stamp"
    if path.is_dir() and marker.is_file() and marker.read_text() == stamp:
        return path
    if path.exists():
        shutil.rmtree(path)
    marker.unlink(missing_ok=True)
    write_checkpoint(path, config, hy3_tensors(config, layout), n_shards, seed=seed, header_only=header_only,
                     extra_files=extra_files, unique=unique)
    if not header_only:
        os.sync()
    marker.write_text(stamp)
    return path


def bf16_checkpoint(path: Path, gb: float) -> Path:
    """A BF16 Llama-shaped checkpoint of about `gb` GB (layers added until it is), written once and reused."""
    h, heads, kv, hd, inter, vocab = 2048, 16, 8, 128, 5632, 32000
    per_layer = 2 * (2 * h * heads * hd + 2 * h * kv * hd + 3 * h * inter + 2 * h)
    layers = max(1, round((gb * 1e9 - 2 * 2 * vocab * h) / per_layer))
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": h, "num_attention_heads": heads,
           "num_key_value_heads": kv, "head_dim": hd, "intermediate_size": inter, "num_hidden_layers": layers,
           "vocab_size": vocab, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    tensors = [("model.embed_tokens.weight", "BF16", (vocab, h))]
    for i in range(layers):
        p = f"model.layers.{i}"
        tensors += [(f"{p}.input_layernorm.weight", "BF16", (h,)),
                    (f"{p}.self_attn.q_proj.weight", "BF16", (heads * hd, h)),
                    (f"{p}.self_attn.k_proj.weight", "BF16", (kv * hd, h)),
                    (f"{p}.self_attn.v_proj.weight", "BF16", (kv * hd, h)),
                    (f"{p}.self_attn.o_proj.weight", "BF16", (h, heads * hd)),
                    (f"{p}.post_attention_layernorm.weight", "BF16", (h,)),
                    (f"{p}.mlp.gate_proj.weight", "BF16", (inter, h)), (f"{p}.mlp.up_proj.weight", "BF16", (inter, h)),
                    (f"{p}.mlp.down_proj.weight", "BF16", (h, inter))]
    tensors += [("model.norm.weight", "BF16", (h,)), ("lm_head.weight", "BF16", (vocab, h))]
    stamp = json.dumps({"bf16": cfg, "v": 1}, sort_keys=True)
    marker = path.parent / f".{path.name}.stamp"
    if path.is_dir() and marker.is_file() and marker.read_text() == stamp:
        return path
    shutil.rmtree(path, ignore_errors=True)
    write_checkpoint(path, cfg, tensors, 2, extra_files={"README.md": "---\nlicense: apache-2.0\n---\n"})
    os.sync()
    marker.write_text(stamp)
    return path


def shard_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.safetensors"))


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return total


# --------------------------------------------------------------------------------------------------------------
# running things


TIME = shutil.which("time") or ("/usr/bin/time" if os.path.exists("/usr/bin/time") else None)


class Run:
    """One child process: wall seconds, its own max RSS, exit code.

    Max RSS comes from GNU time's wait4 on a grandchild: the rusage of a process forked straight from this one
    starts from THIS process's RSS (Linux keeps the pre-exec high-water mark), which a benchmark that just
    generated data would pass on. Without /usr/bin/time, wait4 on the direct child is used (an upper bound).
    """

    def __init__(self, cmd: list[str], *, env: dict | None = None, cwd: Path | None = None, quiet: bool = True,
                 timeout: float | None = None) -> None:
        full = dict(os.environ)
        full.update(env or {})
        cmd = [str(c) for c in cmd]
        rss_file = None
        if TIME:
            fd, rss_file = tempfile.mkstemp(prefix="hubpad-bench-rss-")
            os.close(fd)
            cmd = [TIME, "-q", "-f", "%M", "-o", rss_file, *cmd]
        t0 = time.perf_counter()
        out = subprocess.PIPE if quiet else None
        # with a timeout, its own process group: a kill must reach the command under `time` too (it holds the pipes)
        proc = subprocess.Popen(cmd, env=full, cwd=cwd or ROOT, stdout=out, stderr=out,
                                start_new_session=timeout is not None)
        self.proc = proc
        if quiet:
            import threading

            self._chunks = {"stdout": [], "stderr": []}
            readers = [threading.Thread(target=self._pump, args=(proc.stdout, "stdout"), daemon=True),
                       threading.Thread(target=self._pump, args=(proc.stderr, "stderr"), daemon=True)]
            for r in readers:
                r.start()
        deadline = None if timeout is None else t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.005)
        self.seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.rc = proc.returncode
        self.max_rss = usage.ru_maxrss * 1024  # Linux reports KiB
        if rss_file:
            try:
                self.max_rss = int(Path(rss_file).read_text().split()[-1]) * 1024
            except (ValueError, IndexError):
                pass
            os.unlink(rss_file)
        self.user, self.sys = usage.ru_utime, usage.ru_stime
        if quiet:
            for r in readers:
                r.join()
            self.stdout = b"".join(self._chunks["stdout"]).decode(errors="replace")
            self.stderr = b"".join(self._chunks["stderr"]).decode(errors="replace")
        else:
            self.stdout = self.stderr = ""

    def _pump(self, stream, key) -> None:
        for chunk in iter(lambda: stream.read(65536), b""):
            self._chunks[key].append(chunk)

    def check(self, what: str) -> "Run":
        if self.rc != 0:
            sys.stderr.write(self.stdout[-4000:] + self.stderr[-4000:])
            raise SystemExit(f"{what} failed with exit code {self.rc}")
        return self

    def json(self) -> dict:
        return json.loads(self.stdout[self.stdout.index("{"):])


def warm(paths: list[Path]) -> float:
    """Read files once so the measured command finds them in the page cache (the cache cannot be dropped here)."""
    t0 = time.perf_counter()
    buf = bytearray(8 * 1024 * 1024)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
    return time.perf_counter() - t0


# --------------------------------------------------------------------------------------------------------------
# the Hub emulator (tests/hub_emulator.py), with huggingface_hub configured BEFORE it is imported

ALICE, ALICE_TOKEN = "alice", "hf_test_alice_token_0123456789abcdef"


def _client_env(hf_home: Path, xet: bool = False) -> None:
    if xet:
        os.environ.pop("HF_HUB_DISABLE_XET", None)
    else:
        os.environ["HF_HUB_DISABLE_XET"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_HOME"] = str(hf_home)
    os.environ.pop("HF_HUB_OFFLINE", None)
    for var in ("NO_PROXY", "no_proxy"):
        hosts = [h for h in os.environ.get(var, "").split(",") if h]
        os.environ[var] = ",".join(dict.fromkeys([*hosts, "127.0.0.1", "localhost"]))


class Emulator:
    """A started HubEmulator plus what a hubpad subprocess needs to talk to it (`env`)."""

    def __init__(self, root: Path, *, client: bool = True, xet: bool = False) -> None:
        """client: also point THIS process's huggingface_hub at the emulator (benchmarks that download/upload
        themselves); without it only `env`, for hubpad subprocesses, is set up (safe inside a pytest run).
        xet: the emulator speaks Xet and clients (this one, and `env`'s) upload through the real hf_xet to its
        `local://` store; hf_xet admits one process at a time to that store (see `release_xet`)."""
        hf_home = root / "hf_home"
        hf_home.mkdir(parents=True, exist_ok=True)
        if client:
            if "huggingface_hub" in sys.modules and (os.environ.get("HF_HUB_DISABLE_XET") != "1") != xet:
                raise RuntimeError("huggingface_hub was imported before the emulator env was set")
            _client_env(hf_home, xet)
        from tests.hub_emulator import HubEmulator

        self.client = client
        self.hub = HubEmulator(root / "hub-store", xet=xet)
        self.hub.add_user(ALICE, ALICE_TOKEN, role="write", fullname="Alice Bench")
        self.hub.start()
        endpoint = self.hub.endpoint
        if client:
            from huggingface_hub import constants

            os.environ["HF_ENDPOINT"] = endpoint
            os.environ["HF_TOKEN"] = ALICE_TOKEN
            constants.ENDPOINT = endpoint
            constants.HUGGINGFACE_CO_URL_TEMPLATE = endpoint + "/{repo_id}/resolve/{revision}/{filename}"
            constants.HF_HUB_DISABLE_XET = not xet
        no_proxy = ",".join(dict.fromkeys([*[h for h in os.environ.get("NO_PROXY", "").split(",") if h],
                                           "127.0.0.1", "localhost"]))
        self.env = {"HF_ENDPOINT": endpoint, "HF_TOKEN": ALICE_TOKEN, "HF_HOME": str(hf_home),
                    "HF_HUB_DISABLE_XET": "0" if xet else "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                    "HF_HUB_DISABLE_PROGRESS_BARS": "1", "NO_PROXY": no_proxy, "no_proxy": no_proxy,
                    "HF_HUB_OFFLINE": "0"}

    def api(self):
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.hub.endpoint, token=ALICE_TOKEN)

    def seed_dir(self, repo: str, path: Path, message: str = "upload") -> str:
        files = {p.relative_to(path).as_posix(): p for p in path.rglob("*") if p.is_file()}
        return self.hub.seed(repo, files, message=message)

    @staticmethod
    def release_xet() -> None:
        """Drop this process's hf_xet session so a hubpad subprocess can open the emulator's Xet store."""
        import gc

        from huggingface_hub.utils import _xet

        holder = _xet._GLOBAL_XET_HOLDER
        with holder._lock:
            holder._session = None
        gc.collect()

    def stop(self) -> None:
        if self.client:
            from huggingface_hub.utils import close_session

            close_session()
        self.hub.stop()


def hubpad(*args, env: dict | None = None, timeout: float | None = None) -> Run:
    return Run([*HUBPAD, *args], env=env, timeout=timeout)
