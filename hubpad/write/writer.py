"""Write one output safetensors shard while hashing it, on a writer thread, with bounded memory."""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

from hubpad.errors import HubpadError


class ShardWriter:
    """Writes one file and hashes it on a background thread, so padding and hashing overlap on two cores.

    Data is queued by reference, never copied. What the queue keeps alive is bounded by bytes, not by items:
    a queued slice keeps its whole buffer (a reader chunk, a fill block) alive, so each distinct buffer is
    counted once, whole, and the producer waits while more than MAX_INFLIGHT bytes of them are queued. Peak
    memory is then the same for a 0.5 GB shard and a 50 GB one, whatever the tensor sizes.
    """

    MAX_INFLIGHT = 48 * 1024 * 1024

    def __init__(self, path: Path | None, on_bytes: Callable[[int], None] | None = None) -> None:
        """`path` None: hash only, write nothing (checking a shard against bytes already somewhere else)."""
        self.path = path
        self.size = 0
        self._hash = hashlib.sha256()
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._file = open(path, "wb", buffering=0) if path is not None else None
        self._on_bytes = on_bytes
        self._cond = threading.Condition()
        self._live: dict[int, list] = {}  # id(buffer) -> [queued slices, bytes, the buffer (keeps its id unique)]
        self._inflight = 0
        name = path.name if path is not None else "hash-only"
        self._thread = threading.Thread(target=self._drain, name=f"write-{name}", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            key, view = item
            if self._error is None:
                try:
                    self._hash.update(view)
                    while self._file is not None and len(view):
                        written = self._file.write(view)
                        view = view[written:]
                except BaseException as exc:  # surfaced to the producer on the next write/close
                    self._error = exc
            del view, item
            with self._cond:
                entry = self._live[key]
                entry[0] -= 1
                if not entry[0]:
                    del self._live[key]
                    self._inflight -= entry[1]
                    self._cond.notify()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise HubpadError(f"{self.path}: write failed: {self._error}")
        view = memoryview(data)
        if not len(view):
            return
        owner = view.obj
        key = id(owner)
        with self._cond:
            entry = self._live.get(key)
            if entry is None:
                nbytes = memoryview(owner).nbytes
                while self._inflight and self._inflight + nbytes > self.MAX_INFLIGHT and self._error is None:
                    self._cond.wait()
                entry = self._live[key] = [0, nbytes, owner]
                self._inflight += nbytes
            entry[0] += 1
        self._queue.put((key, view))
        self.size += len(view)
        if self._on_bytes:
            self._on_bytes(len(view))

    def close(self) -> str:
        """Flush everything, fsync, and return the file's sha256."""
        self._queue.put(None)
        self._thread.join()
        if self._file is not None:
            try:
                if self._error is None:
                    os.fsync(self._file.fileno())
            finally:
                self._file.close()
        if self._error is not None:
            raise HubpadError(f"{self.path}: write failed: {self._error}")
        return self._hash.hexdigest()

    def abort(self) -> None:
        self._error = self._error or HubpadError("aborted")
        with self._cond:
            self._cond.notify_all()
        self._queue.put(None)
        self._thread.join()
        if self._file is not None:
            self._file.close()
