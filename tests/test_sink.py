"""The shard file path: staging buffers written with O_DIRECT (or through the page cache where refused), fsync only
for durable files, and upstream ranges read straight into staging, hashed in order."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os

import pytest

from hubpad.errors import HubpadError
from hubpad.source.base import FileEntry, VerifiedReader
from hubpad.source.local import LocalSource
from hubpad.write import sink as sink_mod
from hubpad.write.sink import BLOCK, STAGE, FileSink
from hubpad.write.writer import ShardWriter

SIZES = [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, STAGE - 1, STAGE, STAGE + 4097, 2 * STAGE + 123]


def _data(n: int, seed: int = 0) -> bytes:
    return hashlib.shake_256(f"{seed}:{n}".encode()).digest(n) if n else b""


def _sink_write(path, data: bytes, durable: bool = True) -> str:
    h = hashlib.sha256()
    s = FileSink(path, durable, h.update)
    view, pos = memoryview(data), 0
    while pos < len(data):  # alternate copying in and filling reserved slices, in odd sizes
        if (pos // 7777) % 2:
            n = min(7777, len(data) - pos)
            s.write(view[pos:pos + n])
        else:
            dst = s.reserve(min(300_001, len(data) - pos))
            n = len(dst)
            dst[:] = view[pos:pos + n]
            del dst
            s.commit(n)
        pos += n
    s.close()
    return h.hexdigest()


@pytest.mark.parametrize("n", SIZES)
def test_sink_writes_exact_bytes_and_hashes_them(tmp_path, n):
    data = _data(n)
    assert _sink_write(tmp_path / "f", data) == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "f").read_bytes() == data


def test_sink_falls_back_when_the_filesystem_refuses_o_direct_at_open(tmp_path, monkeypatch):
    real_open = os.open

    def no_direct(path, flags, *a):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "O_DIRECT refused")
        return real_open(path, flags, *a)

    monkeypatch.setattr(sink_mod.os, "open", no_direct)
    data = _data(STAGE + 5000, 1)
    s = FileSink(tmp_path / "f", True, lambda v: None)
    assert not s.direct
    s.write(memoryview(data))
    s.close()
    assert (tmp_path / "f").read_bytes() == data


def test_sink_falls_back_when_o_direct_writes_are_refused(tmp_path, monkeypatch):
    real_write, refused = os.write, []

    def picky(fd, data):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & getattr(os, "O_DIRECT", 0):
            refused.append(len(data))
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(sink_mod.os, "write", picky)
    data = _data(2 * STAGE + 77, 2)
    assert _sink_write(tmp_path / "f", data) == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "f").read_bytes() == data
    if getattr(os, "O_DIRECT", 0):
        assert refused, "the first O_DIRECT write was never tried"


@pytest.mark.parametrize("durable", [True, False])
def test_fsync_only_for_durable_files(tmp_path, monkeypatch, durable):
    synced = []
    real = os.fsync
    monkeypatch.setattr(sink_mod.os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    _sink_write(tmp_path / "f", _data(BLOCK * 3 + 1), durable=durable)
    assert bool(synced) == durable


def test_a_failed_write_is_a_one_line_error_and_nothing_is_left_open(tmp_path, monkeypatch):
    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sink_mod.os, "write", full)
    w = ShardWriter(tmp_path / "f")
    w.write(_data(STAGE + 1))
    with pytest.raises(HubpadError, match="No space left"):
        w.close()


def test_readinto_reads_local_ranges_in_place_and_hashes_every_byte(tmp_path):
    data = _data(3 * 1024 * 1024 + 17, 3)
    (tmp_path / "m.bin").write_bytes(data)
    src = LocalSource(tmp_path)
    r = VerifiedReader(src, src.files()["m.bin"])
    got = bytearray()
    pos = 0
    # gaps (read and hashed, not returned), in-place reads, and streamed pieces, interleaved
    for start, n, how in [(100, 5000, "into"), (6000, 2_000_000, "into"), (2_100_000, 10, "iter"),
                          (2_100_010, 700_000, "into"), (2_900_000, 0, "into"), (3_000_000, 1, "iter")]:
        buf = bytearray(n)
        if how == "into":
            r.readinto(start, memoryview(buf))
        else:
            buf = b"".join(r.iter_range(start, n))
        assert bytes(buf) == data[start:start + n]
        got += buf
        pos = start + n
    assert r.finish() == hashlib.sha256(data).hexdigest()
    assert r.bytes_read == len(data) and pos < len(data)


def test_readinto_checks_the_recorded_sha256(tmp_path):
    data = _data(2 * 1024 * 1024, 4)
    (tmp_path / "m.bin").write_bytes(data)
    src = LocalSource(tmp_path)
    wrong = FileEntry("m.bin", len(data), hashlib.sha256(data + b"x").hexdigest())
    r = VerifiedReader(src, wrong)
    r.readinto(0, memoryview(bytearray(len(data))))
    with pytest.raises(HubpadError, match="sha256 mismatch"):
        r.finish()
