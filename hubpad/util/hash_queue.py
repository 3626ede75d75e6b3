"""Hash byte streams on a background thread, in the order the bytes were given, with bounded memory.

hashlib releases the GIL on large buffers, so a hash running here overlaps reading, padding and the other
hashes on a second core. Nothing is copied: a queued slice keeps its buffer alive (and a pooled buffer busy)
until it has been hashed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from hubpad.errors import HubpadError


class HashQueue:
    """Runs `update(view)` calls on one thread, in submission order (several hashes may share the thread).

    What the queue keeps alive is bounded by bytes, not by items: a queued slice keeps its whole buffer (a
    reader chunk, a staging buffer, a fill block) alive, so each distinct buffer is counted once, whole, and
    the producer waits while more than MAX_INFLIGHT bytes of them are queued. Peak memory is then the same
    for a 0.5 GB shard and a 50 GB one, whatever the tensor sizes.
    """

    MAX_INFLIGHT = 48 * 1024 * 1024

    def __init__(self, name: str) -> None:
        self.name = name
        self.error: BaseException | None = None
        self._queue: queue.Queue = queue.Queue()
        self._cond = threading.Condition()
        self._live: dict[int, list] = {}  # id(buffer) -> [queued slices, bytes, the buffer (keeps its id unique)]
        self._inflight = 0
        self._thread: threading.Thread | None = None

    def submit(self, update: Callable[[memoryview], None], data: bytes | bytearray | memoryview) -> None:
        """Queue `update(data)`; waits while too many bytes are queued. Raises an earlier update's error."""
        if self.error is not None:
            raise HubpadError(f"{self.name}: hashing failed: {self.error}")
        view = memoryview(data)
        if not len(view):
            return
        owner = view.obj
        key = id(owner)
        with self._cond:
            entry = self._live.get(key)
            if entry is None:
                nbytes = memoryview(owner).nbytes
                while self._inflight and self._inflight + nbytes > self.MAX_INFLIGHT and self.error is None:
                    self._cond.wait()
                entry = self._live[key] = [0, nbytes, owner]
                self._inflight += nbytes
            entry[0] += 1
        self._start()
        self._queue.put((key, update, view))

    def wait(self) -> None:
        """Return once every update submitted so far has run; raises the first error since the last wait (once:
        a queue shared by a long-lived process is not spoiled for later runs)."""
        if self._thread is not None:
            done = threading.Event()
            self._queue.put(done)
            done.wait()
        error, self.error = self.error, None
        if error is not None:
            raise HubpadError(f"{self.name}: hashing failed: {error}")

    def close(self) -> None:
        """wait(), then end the thread."""
        try:
            self.wait()
        finally:
            self.stop()

    def stop(self) -> None:
        """End the thread once what is queued has been dropped or run (after an error: dropped)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def abort(self) -> None:
        self.error = self.error or HubpadError("aborted")
        with self._cond:
            self._cond.notify_all()
        self.stop()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._drain, name=self.name, daemon=True)
            self._thread.start()

    def _drain(self) -> None:
        while (item := self._queue.get()) is not None:
            if isinstance(item, threading.Event):
                item.set()
                continue
            key, update, view = item
            if self.error is None:
                try:
                    update(view)
                except BaseException as exc:  # surfaced to the producer on the next submit/wait
                    self.error = exc
            del view, item
            with self._cond:
                entry = self._live[key]
                entry[0] -= 1
                if not entry[0]:
                    del self._live[key]
                    self._inflight -= entry[1]
                    self._cond.notify()
