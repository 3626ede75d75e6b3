"""Issue 32's performance item, as behaviour: hubpad hashes every byte twice (each upstream file's sha256, which
hubpad.json records and `check` compares; each shard's sha256, which `verify` and reuse check), and neither pass runs
on the thread that reads and pads. The upstream bytes are hashed on the `hash-in` thread, the shard's bytes on the
sink's `hash-<shard>` thread, so on two cores both overlap the copy. How fast that is: docs/benchmarks.md."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from types import SimpleNamespace

from hubpad.testing import build_tiny_hy3
from tests.helpers import cli


class _Recording:
    """A real sha256 that counts the bytes each thread gave it."""

    seen: Counter = Counter()

    def __init__(self, data: bytes = b"") -> None:
        self._h = hashlib.sha256()
        self.update(data)

    def update(self, data) -> None:
        n = memoryview(data).nbytes
        if n:
            _Recording.seen[threading.current_thread().name.split("-")[0]] += n
        self._h.update(data)

    def digest(self) -> bytes:
        return self._h.digest()

    def hexdigest(self) -> str:
        return self._h.hexdigest()

    def copy(self):
        twin = _Recording()
        twin._h = self._h.copy()
        return twin


def test_both_hash_passes_run_beside_the_padding_thread(tmp_path, monkeypatch):
    src = build_tiny_hy3(tmp_path / "up")
    recording = SimpleNamespace(sha256=_Recording)
    for module in ("hubpad.source.base", "hubpad.write.writer"):
        monkeypatch.setattr(f"{module}.hashlib", recording)
    _Recording.seen.clear()

    r = cli("mirror", str(src), "--tp", "3", "--to", str(tmp_path / "out"), "--shard-size", "2MB")
    assert r.exit_code == 0, r.output

    weights_in = sum(p.stat().st_size for p in src.glob("*.safetensors"))
    weights_out = sum(p.stat().st_size for p in (tmp_path / "out").glob("*.safetensors"))
    seen = dict(_Recording.seen)
    assert seen.get("hash", 0) >= weights_in + weights_out - 1024 * 64, seen  # hash-in + hash-<shard>: nearly all
    on_padding_thread = seen.get(threading.main_thread().name.split("-")[0], 0)
    assert on_padding_thread <= 0.02 * (weights_in + weights_out), seen  # headers at most
