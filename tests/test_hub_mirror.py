"""Mirror from and to the Hub through the REAL huggingface_hub client and the project's Hub emulator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hubpad.testing import build_tiny_hy3, write_checkpoint
from hubpad.util.sizes import human
from tests.helpers import ROOT, cli

UP = "RedHatAI/Tiny-Hy3"
TARGET = "alice/Tiny-Hy3-TP3"
SHARD = "4MB"  # upstream shards are ~8.7 MB: output shards are re-cut smaller than upstream ones


def _seed_dir(hub, repo, path: Path) -> str:
    files = {p.relative_to(path).as_posix(): p for p in path.rglob("*") if p.is_file()}
    return hub.seed(repo, files, message="upload")


@pytest.fixture
def upstream(hub, tmp_path):
    src = build_tiny_hy3(tmp_path / "up")
    _seed_dir(hub, UP, src)
    hub.reset_log()
    return src


def _hubpad_commits(hub, repo=TARGET, branch="main"):
    return [c for c in hub.commits(repo, branch) if c.title.startswith("hubpad: pad")]


def _mirror(*extra, check=True):
    r = cli("mirror", UP, "--tp", "3", "--shard-size", SHARD, "--json", *extra)
    if check:
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout[r.stdout.index("{"):])
    return r


def _shards(hub, repo=TARGET, rev="main"):
    return {p: sha for p, sha in hub.files(repo, rev).items() if p.endswith(".safetensors")}


def test_full_mirror_publishes_once_and_equals_local_mode(hub, upstream, tmp_path):
    summary = _mirror()
    assert len(_hubpad_commits(hub)) == 1
    assert "hubpad-staging" not in hub.branches(TARGET)
    # Byte-identical to the local-mode result.
    local = tmp_path / "local"
    r = cli("mirror", upstream, "--tp", "3", "--to", local, "--shard-size", SHARD)
    assert r.exit_code == 0, r.output
    import hashlib

    local_shards = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in local.glob("*.safetensors")}
    assert _shards(hub) == local_shards
    for name in ("config.json", "model.safetensors.index.json"):
        assert hub.file_bytes(TARGET, name) == (local / name).read_bytes()
    # Each upstream shard crossed the wire about once (header reads + one streamed pass).
    for f in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        size = (upstream / f).stat().st_size
        assert hub.bytes_served(UP, f) <= 1.05 * size
    # Untouched files were copied server-side: present, identical, and never uploaded as file bodies.
    for f in ("LICENSE", "chat_template.jinja", "generation_config.json", "tokenizer_config.json"):
        assert hub.file_bytes(TARGET, f) == (upstream / f).read_bytes()
    shard_bytes = sum(s["size"] for s in json.loads(hub.file_bytes(TARGET, "hubpad.json"))["shards"])
    # Shards plus, at most, the tiny generated files the Hub's .gitattributes routes to LFS (vllm_patch/*.pth).
    assert shard_bytes <= hub.bytes_uploaded(TARGET) <= shard_bytes + 10_000
    # Provenance and pinning.
    manifest = json.loads(hub.file_bytes(TARGET, "hubpad.json"))
    assert manifest["upstream"]["commit"] == hub.head(UP)
    assert summary["commit"] == hub.head(TARGET)
    recipe = next(p for p in hub.files(TARGET) if p.endswith(".yaml"))
    assert "hubpad-tp3-" in hub.file_bytes(TARGET, recipe).decode()
    # The derivative verifies against its upstream, both read through the Hub.
    r = cli("verify", UP, TARGET)
    assert r.exit_code == 0, r.output


def test_bf16_checkpoint_mirror(hub, tmp_path):
    cfg = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
           "num_hidden_layers": 2, "vocab_size": 100}
    tensors = [("model.embed_tokens.weight", "BF16", (100, 64))]
    for i in range(2):
        p = f"model.layers.{i}"
        tensors += [(f"{p}.self_attn.q_proj.weight", "BF16", (64, 64)), (f"{p}.self_attn.k_proj.weight", "BF16", (32, 64)),
                    (f"{p}.self_attn.v_proj.weight", "BF16", (32, 64)), (f"{p}.self_attn.o_proj.weight", "BF16", (64, 64)),
                    (f"{p}.self_attn.q_norm.weight", "BF16", (16,)), (f"{p}.self_attn.k_norm.weight", "BF16", (16,)),
                    (f"{p}.mlp.gate_proj.weight", "BF16", (128, 64)), (f"{p}.mlp.up_proj.weight", "BF16", (128, 64)),
                    (f"{p}.mlp.down_proj.weight", "BF16", (64, 128)), (f"{p}.input_layernorm.weight", "BF16", (64,)),
                    (f"{p}.post_attention_layernorm.weight", "BF16", (64,))]
    tensors += [("model.norm.weight", "BF16", (64,)), ("lm_head.weight", "BF16", (100, 64))]
    src = write_checkpoint(tmp_path / "bf16", cfg, tensors, n_shards=2, extra_files={"README.md": "---\nlicense: mit\n---\n"})
    _seed_dir(hub, "org/tiny-qwen3", src)
    r = cli("mirror", "org/tiny-qwen3", "--tp", "3", "--to", "alice/tiny-qwen3-tp3")
    assert r.exit_code == 0, r.output
    cfg2 = json.loads(hub.file_bytes("alice/tiny-qwen3-tp3", "config.json"))
    assert (cfg2["num_attention_heads"], cfg2["num_key_value_heads"], cfg2["intermediate_size"]) == (6, 3, 384)
    assert cli("verify", "org/tiny-qwen3", "alice/tiny-qwen3-tp3").exit_code == 0


def test_rerun_is_up_to_date_and_commits_nothing(hub, upstream):
    _mirror()
    head = hub.head(TARGET)
    hub.reset_log()
    summary = _mirror()
    assert summary["up_to_date"] and not summary["changed"]
    assert hub.head(TARGET) == head
    assert hub.bytes_uploaded(TARGET) == 0
    for f in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        assert hub.bytes_served(UP, f) <= 100_000  # the header window only, never tensor data


def test_upstream_change_rebuilds_only_affected_shards(hub, upstream):
    first = _mirror()
    manifest = json.loads(hub.file_bytes(TARGET, "hubpad.json"))
    head = hub.head(TARGET)
    # Change tensor bytes (not the header) in the second upstream shard.
    f2 = upstream / "model-00002-of-00002.safetensors"
    data = bytearray(f2.read_bytes())
    data[-10] ^= 0xFF
    f2.write_bytes(bytes(data))
    hub.seed(UP, {f2.name: f2}, message="fix lm_head")
    hub.reset_log()
    summary = _mirror()
    affected = {s["name"] for s in manifest["shards"] if any(x["file"] == f2.name for x in s["sources"])}
    assert set(summary["shards_built"]) == affected
    assert set(summary["shards_reused"]) == {s["name"] for s in manifest["shards"]} - affected
    assert len(_hubpad_commits(hub)) == 2 and hub.commits(TARGET)[1].id == head  # exactly one new commit
    sizes = {s["name"]: s["size"] for s in manifest["shards"]}
    # Rebuilt shards whose bytes did not change are deduplicated by the Hub's LFS store: at most these bytes move.
    assert 0 < hub.bytes_uploaded(TARGET) <= sum(sizes[n] for n in affected) + 10_000
    assert hub.bytes_served(UP, "model-00001-of-00002.safetensors") <= 100_000 or \
        any(x["file"] == "model-00001-of-00002.safetensors" for s in manifest["shards"] if s["name"] in affected
            for x in s["sources"])
    assert first["shards_built"] != summary["shards_built"]


def _run_bg(*args, env=None):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.Popen([sys.executable, "-m", "hubpad.app.cli", *map(str, args)], cwd=ROOT, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill_9_after_first_staging_commit(hub) -> list[str]:
    """Start a mirror, kill -9 it once its first shard is staged; the staged shards (nothing is published)."""
    proc = _run_bg("mirror", UP, "--tp", "3", "--shard-size", SHARD)
    deadline = time.time() + 60
    while time.time() < deadline:
        if hub.repo_exists(TARGET) and "hubpad-staging" in hub.branches(TARGET) and \
                len(hub.commits(TARGET, "hubpad-staging")) >= 2:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    staged = [p for p in hub.files(TARGET, "hubpad-staging") if p.endswith(".safetensors")]
    assert staged and len(_hubpad_commits(hub)) == 0
    return staged


def test_kill_9_after_first_staging_commit_then_resume(hub, upstream):
    hub.set_throttle(up_bytes_per_s=4_000_000)  # ~1 s per shard upload: time to kill between stages
    staged = _kill_9_after_first_staging_commit(hub)
    hub.set_throttle(None, None)
    hub.reset_log()
    summary = _mirror()
    assert set(staged) <= set(summary["shards_reused"])
    assert not set(staged) & set(summary["shards_built"])
    manifest = json.loads(hub.file_bytes(TARGET, "hubpad.json"))
    sizes = {s["name"]: s["size"] for s in manifest["shards"]}
    built = sum(sizes[n] for n in summary["shards_built"])
    # An upload the killed process had already handed to the socket may land after the kill; the re-run then
    # finds that blob on the Hub and skips it, so up to one shard less can cross the wire.
    assert built - max(sizes.values()) <= hub.bytes_uploaded(TARGET) <= built + 10_000
    assert len(_hubpad_commits(hub)) == 1
    assert cli("verify", UP, TARGET).exit_code == 0


FAULTS = {
    "drop mid-body": lambda h: h.faults.drop(r"model-00002-of-00002", after=1_000_000, origin="cdn"),
    "503 once": lambda h: h.faults.status(503, r"model-00001-of-00002", origin="cdn"),
    "429 with Retry-After": lambda h: h.faults.status(429, r"model-00002-of-00002", origin="cdn", retry_after=1),
    "Range ignored": lambda h: h.faults.ignore_range(r"model-00002-of-00002", origin="cdn"),
    "slow link": lambda h: h.faults.slow(r"model-00001-of-00002", 20_000_000, origin="cdn"),
}


@pytest.fixture
def reference_shards(hub, upstream, tmp_path_factory):
    """The fault-free result, computed locally (identical to the Hub result, as the first test shows)."""
    import hashlib

    out = tmp_path_factory.mktemp("ref") / "ref"
    assert cli("mirror", upstream, "--tp", "3", "--to", out, "--shard-size", SHARD).exit_code == 0
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.glob("*.safetensors")}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_is_survived_with_identical_bytes(hub, upstream, reference_shards, fault, monkeypatch):
    monkeypatch.setenv("HUBPAD_RESUME_BACKOFF", "0.05")
    import hubpad.source.hub as hs

    monkeypatch.setattr(hs, "_BACKOFF", 0.05)
    FAULTS[fault](hub)
    _mirror()
    assert _shards(hub) == reference_shards
    assert len(_hubpad_commits(hub)) == 1
    assert all(f.fired for f in hub.faults.rules), "the fault never fired"


def test_corrupted_upstream_byte_fails_and_publishes_nothing(hub, upstream):
    hub.faults.corrupt(r"model-00001-of-00002", origin="cdn", at=500_000, times=None)  # past the header window
    r = _mirror(check=False)
    assert r.exit_code == 1
    assert "sha256 mismatch" in r.output and "Traceback" not in r.output
    assert len(_hubpad_commits(hub)) == 0
    assert not any(p.endswith(".safetensors") for p in hub.files(TARGET))


def test_concurrent_publisher_loses_cleanly_and_nothing_is_lost(hub, upstream):
    # Another writer lands a commit on main just before our publish commit.
    hub.faults.add("stale_parent", r"/api/models/alice/Tiny-Hy3-TP3/commit/main", method="POST", origin="api",
                   message="concurrent commit", files={})
    r = _mirror(check=False)
    assert r.exit_code == 1
    assert "changed while this run was publishing" in r.output
    assert len(_hubpad_commits(hub)) == 0
    staged = {p for p in hub.files(TARGET, "hubpad-staging") if p.endswith(".safetensors")}
    assert staged  # nothing lost: the next run reuses every staged shard
    summary = _mirror()
    assert set(summary["shards_reused"]) == staged and not summary["shards_built"]
    assert len(_hubpad_commits(hub)) == 1


class _DiskWatch:
    """Samples the scratch folder every millisecond on a thread: the real peak bytes and most files at once."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.peak, self.most_files = folder, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "_DiskWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.001):
            files = list(self.folder.glob("*.safetensors")) if self.folder.is_dir() else []
            try:
                sizes = [p.stat().st_size for p in files]
            except FileNotFoundError:  # uploaded and dropped meanwhile
                continue
            if not all(p.exists() for p in files):  # one left while the others were read: not one instant
                continue
            self.peak, self.most_files = max(self.peak, sum(sizes)), max(self.most_files, len(sizes))


@pytest.mark.parametrize("max_disk", [5_000_000, 10_000_000])
def test_scratch_disk_never_exceeds_max_disk(hub, upstream, max_disk, tmp_path):
    # --max-disk is a byte budget: the next shard fills whatever room the shards still uploading leave, and the real
    # scratch bytes never pass it (the reported peak counts bytes as they are produced: never below the real one).
    hub.set_throttle(up_bytes_per_s=8_000_000)  # uploads slower than padding: the builder presses on the budget
    with _DiskWatch(tmp_path / "work") as disk:
        summary = _mirror("--max-disk", str(max_disk), "--workdir", tmp_path / "work")
    assert 0 < disk.peak <= summary["peak_disk"] <= max_disk
    upstream_shard = (upstream / "model-00002-of-00002.safetensors").stat().st_size
    assert summary["peak_disk"] < upstream_shard  # whatever the upstream shard size
    if max_disk == 10_000_000:  # room for two shards of <= 4 MB and 2 MB more: a third starts while the first uploads
        assert disk.most_files >= 3
    assert cli("verify", UP, TARGET).exit_code == 0


def _report_free_disk(monkeypatch, free: int) -> None:
    """Make the Hub publisher see `free` bytes free on the workdir's filesystem (the rest of disk_usage is real)."""
    import hubpad.publish.hub as hub_publisher

    real = hub_publisher.shutil.disk_usage
    monkeypatch.setattr(hub_publisher.shutil, "disk_usage", lambda p: real(p)._replace(free=free))


@pytest.mark.parametrize("free_shards", [None, 2])
def test_without_max_disk_the_budget_follows_the_free_disk(hub, upstream, free_shards, tmp_path, monkeypatch):
    # No --max-disk: two shards of scratch (pipelined) where the workdir's filesystem has them with a tenth to spare,
    # else one. `free_shards` 2: the filesystem reports exactly two of the largest shards free.
    planned = json.loads(cli("plan", UP, "--tp", "3", "--shard-size", SHARD, "--json").stdout)
    biggest = max(s["size"] for s in planned["shards"])
    if free_shards is not None:
        _report_free_disk(monkeypatch, free_shards * biggest)
    hub.set_throttle(up_bytes_per_s=8_000_000)
    with _DiskWatch(tmp_path / "work") as disk:
        r = _mirror("--workdir", tmp_path / "work", check=False)
    assert r.exit_code == 0, r.output
    budget = biggest if free_shards is not None else 2 * biggest
    assert f"scratch disk: up to {human(budget)}" in r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert 0 < disk.peak <= summary["peak_disk"] <= budget
    if free_shards is None:
        assert disk.most_files >= 2 and disk.peak > biggest  # the next shard is padded while one uploads


def test_without_max_disk_too_little_free_disk_fails_before_any_shard(hub, upstream, tmp_path, monkeypatch):
    _report_free_disk(monkeypatch, 1_000_000)
    r = _mirror("--workdir", tmp_path / "work", check=False)
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "not enough disk for scratch shards: needs" in r.output and "1.0 MB free on " in r.output
    assert "the largest output shard is" in r.output and "--shard-size" in r.output
    assert r.output.count("error:") == 1 and hub.token not in r.output
    assert not hub.repo_exists(TARGET)  # refused before the target was even created


def test_refuses_foreign_target_and_never_logs_the_token(hub, upstream):
    hub.seed("alice/not-hubpad", {"precious.bin": b"x" * 10})
    r = cli("mirror", UP, "--tp", "3", "--to", "alice/not-hubpad")
    assert r.exit_code == 1 and "did not create" in r.output
    assert hub.file_bytes("alice/not-hubpad", "precious.bin") == b"x" * 10
    r = _mirror(check=False)
    assert hub.token not in r.output
    for path in hub.files(TARGET):
        assert hub.token.encode() not in hub.file_bytes(TARGET, path)


def test_default_target_is_users_name_tp(hub, upstream):
    r = cli("mirror", UP, "--tp", "3", "--shard-size", SHARD, "--private")
    assert r.exit_code == 0, r.output
    assert hub.repo_exists("alice/Tiny-Hy3-TP3")


def test_check_reports_missing_up_to_date_and_stale(hub, upstream):
    def check():
        r = cli("check", UP, "--tp", "3", "--json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    assert check()["status"] == "missing"
    _mirror()
    assert check()["status"] == "up-to-date"
    hub.seed(UP, {"generation_config.json": b'{"temperature": 0.5}'})
    c = check()
    assert c["status"] == "stale" and c["changed"] and c["upstream_sha"] == hub.head(UP)


def test_local_upstream_to_hub_target_resumes(hub, upstream):
    """A local SRC has no Hub hashes: hubpad hashes it up front so staged shards match on the re-run."""
    import hubpad.run.mirror as m
    from hubpad.plan.planner import make_plan
    from hubpad.publish.hub import HubPublisher
    from hubpad.run.mirror import run_mirror
    from hubpad.source.hub_api import api_for
    from hubpad.source.local import LocalSource

    plan = make_plan(LocalSource(upstream), 3, 4_000_000)
    calls = {"n": 0}
    real = m.build_shard

    def crash_after_two(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # as if killed
        return real(*a, **k)

    m.build_shard = crash_after_two
    try:
        with pytest.raises(KeyboardInterrupt):
            run_mirror(plan, HubPublisher(api_for(), "alice/local-tp3"))
    finally:
        m.build_shard = real
    staged = [p for p in hub.files("alice/local-tp3", "hubpad-staging") if p.endswith(".safetensors")]
    assert len(staged) == 2
    summary = run_mirror(make_plan(LocalSource(upstream), 3, 4_000_000), HubPublisher(api_for(), "alice/local-tp3"))
    assert set(summary.shards_reused) == set(staged) and len(summary.shards_built) == 3


def test_token_problems_are_one_plain_line(hub, upstream, monkeypatch):
    """A refused token, no token and a namespace the token cannot write: one line each, saying what to do."""
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token_0123456789")
    r = cli("plan", UP, "--tp", "3")
    assert r.exit_code == 1 and r.output.strip().splitlines()[-1] == (
        f"error: upstream {UP}@main: the Hub refused the token (401 Unauthorized); check HF_TOKEN, or log in "
        f"with `hf auth login`"), r.output
    assert "hf_not_a_real_token" not in r.output
    monkeypatch.delenv("HF_TOKEN")
    r = cli("mirror", UP, "--tp", "3", "--shard-size", SHARD)
    assert r.exit_code == 1 and r.output.strip().splitlines()[-1].startswith(
        "error: no Hugging Face token: set HF_TOKEN or run `hf auth login`"), r.output
    monkeypatch.setenv("HF_TOKEN", hub.read_token)
    r = cli("mirror", UP, "--tp", "3", "--to", "alice/x", "--shard-size", SHARD)
    last = r.output.strip().splitlines()[-1]
    assert r.exit_code == 1 and last.startswith("error: target alice/x: create: Hub error 403 Forbidden"), r.output
    assert hub.read_token not in r.output


def test_next_shard_uploads_while_the_last_one_is_committed(hub, upstream):
    # The real Hub takes a while to make a commit: the link must not wait for it.
    hub.faults.delay(r"/commit/hubpad-staging$", 0.5, method="POST", times=None)
    hub.set_throttle(up_bytes_per_s=8_000_000)  # a 4 MB shard uploads in about as long as a commit takes
    summary = _mirror("--max-disk", "10MB")
    log = hub.requests
    commits = [e for e in log if e.kind == "commit" and e.path.endswith("/commit/hubpad-staging")]
    uploads = [e for e in log if e.kind in ("lfs-upload", "lfs-part")]
    assert len(commits) == len(summary["shards_built"]) >= 3 and uploads
    overlapped = [c for c in commits if any(u.timestamp < c.timestamp + c.duration and c.timestamp < u.timestamp + u.duration
                                            for u in uploads)]
    assert len(overlapped) >= len(commits) - 1, [(c.timestamp, c.duration) for c in commits]  # all but the last
    assert len(_hubpad_commits(hub)) == 1
    assert cli("verify", UP, TARGET).exit_code == 0


def test_failed_staging_commit_fails_cleanly_and_the_rerun_resumes(hub, upstream):
    # Staging commits after the first fail for good (they now run beside the next upload): the run stops with one
    # line and publishes nothing; the next run reuses the staged shard and builds the rest.
    hub.faults.status(422, r"/commit/hubpad-staging$", method="POST", times=None, skip=1)
    r = _mirror(check=False)
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and ": stage model-" in r.output, r.output
    assert hub.token not in r.output
    assert len(_hubpad_commits(hub)) == 0
    staged = [p for p in hub.files(TARGET, "hubpad-staging") if p.endswith(".safetensors")]
    assert len(staged) == 1
    hub.faults.clear()
    summary = _mirror()
    assert summary["shards_reused"] == staged and staged[0] not in summary["shards_built"]
    assert len(_hubpad_commits(hub)) == 1
    assert cli("verify", UP, TARGET).exit_code == 0
