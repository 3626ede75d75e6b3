"""pytest fixtures around the offline Hub emulator (imported by tests/conftest.py).

huggingface_hub reads most settings (``HF_HUB_DISABLE_XET``, ``HF_ENDPOINT``, ``HF_HOME``, telemetry, offline mode)
into ``huggingface_hub.constants`` **once, at import time**. So:

* the env defaults below are set before anything imports huggingface_hub (this module is imported from conftest.py);
* the ``hub`` fixture additionally patches the already-imported constants, because the emulator's port is only
  known per test;
* hubpad itself must pass ``endpoint=`` explicitly (``HfApi(endpoint=...)``, ``hf_hub_url(..., endpoint=...)``,
  ``HfFileSystem(endpoint=..., skip_instance_cache=True)``) rather than rely on ``HF_ENDPOINT`` being read at call time.

By default Xet is off for uploads: the client decides on its own (never asking the server) to upload through xet
when ``hf_xet`` is importable, and the default emulator is a classic LFS Hub. ``HF_HUB_DISABLE_XET=1`` before import,
plus ``constants.HF_HUB_DISABLE_XET = True`` (read at call time by ``is_xet_available()``), guarantee the LFS path.
:func:`xet_client` turns both back on for one test, against an emulator that speaks Xet (``hub.enable_xet()``: the
real hf_xet uploads to a ``local://`` store the emulator hands out from its token routes).
"""

from __future__ import annotations

import gc
import os
import tempfile
from contextlib import contextmanager

# Before huggingface_hub is imported anywhere (constants are frozen at import).
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="hubpad-tests-hf-home-"))
os.environ.pop("HF_HUB_OFFLINE", None)  # offline mode blocks requests to 127.0.0.1 too
os.environ.pop("TRANSFORMERS_OFFLINE", None)
for _var in ("NO_PROXY", "no_proxy"):
    _hosts = [h for h in os.environ.get(_var, "").split(",") if h]
    os.environ[_var] = ",".join(dict.fromkeys([*_hosts, "127.0.0.1", "localhost"]))

import pytest  # noqa: E402
from huggingface_hub import constants as hf_constants  # noqa: E402
from huggingface_hub.utils import close_session  # noqa: E402

if __package__:  # tests/ is a package (tests/__init__.py): import as tests.hub_emulator
    from .hub_emulator import HubEmulator
else:  # pragma: no cover - tests/ itself on sys.path
    from hub_emulator import HubEmulator

hf_constants.HF_HUB_DISABLE_XET = True

__all__ = ["hub", "hub_api", "HubEmulator", "ALICE", "ALICE_TOKEN", "READER", "READER_TOKEN", "ORG", "xet_client",
           "release_xet_session"]

ALICE = "alice"
ALICE_TOKEN = "hf_test_alice_token_0123456789abcdef"
READER = "bob"
READER_TOKEN = "hf_test_bob_readonly_token_0123456789"
ORG = "hubpad-org"  # alice writes here too; bob can read its private repos


def _patch_hf_constants(monkeypatch: pytest.MonkeyPatch, endpoint: str, hf_home: str) -> None:
    """Point the already-imported huggingface_hub constants at this test's emulator and HF_HOME."""
    hub_cache = os.path.join(hf_home, "hub")
    values = {
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HUB_DISABLE_XET": True,
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_OFFLINE": False,
        "HF_HOME": hf_home,
        "HF_HUB_CACHE": hub_cache,
        "HUGGINGFACE_HUB_CACHE": hub_cache,
        "HF_ASSETS_CACHE": os.path.join(hf_home, "assets"),
        "HF_XET_CACHE": os.path.join(hf_home, "xet"),
        "HF_TOKEN_PATH": os.path.join(hf_home, "token"),
        "HF_STORED_TOKENS_PATH": os.path.join(hf_home, "stored_tokens"),
    }
    for name, value in values.items():
        if hasattr(hf_constants, name):
            monkeypatch.setattr(hf_constants, name, value)


def _clear_client_caches() -> None:
    """Drop pooled connections (to a previous emulator) and cached HfFileSystem instances."""
    close_session()
    try:
        from huggingface_hub import HfFileSystem

        HfFileSystem.clear_instance_cache()
    except Exception:  # noqa: BLE001 - best effort
        pass


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A fresh emulator per test: users ``alice`` (write, token ``ALICE_TOKEN``, member of ``ORG``) and ``bob``
    (read-only token ``READER_TOKEN``, member of ``ORG``). Env and constants point the client at it.

    Extra attributes for convenience: ``hub.user``, ``hub.token``, ``hub.read_user``, ``hub.read_token``, ``hub.org``.
    """
    hf_home = tmp_path / "hf_home"
    hf_home.mkdir()
    emu = HubEmulator(tmp_path / "hub-store")
    emu.add_user(ALICE, ALICE_TOKEN, role="write", orgs=[ORG], fullname="Alice Tester")
    emu.add_user(READER, READER_TOKEN, role="read", orgs=[ORG], fullname="Bob Reader")
    emu.user, emu.token = ALICE, ALICE_TOKEN
    emu.read_user, emu.read_token = READER, READER_TOKEN
    emu.org = ORG
    emu.start()

    monkeypatch.setenv("HF_ENDPOINT", emu.endpoint)
    monkeypatch.setenv("HF_TOKEN", ALICE_TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    _patch_hf_constants(monkeypatch, emu.endpoint, str(hf_home))
    _clear_client_caches()
    try:
        yield emu
    finally:
        _clear_client_caches()
        emu.stop()


@pytest.fixture
def hub_api(hub):
    """``HfApi`` bound to the emulator with alice's token."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub.endpoint, token=ALICE_TOKEN)


@contextmanager
def xet_client(emu: HubEmulator, monkeypatch: pytest.MonkeyPatch):
    """For one test: the emulator speaks Xet and the client uploads through the REAL hf_xet.

    ``HF_HUB_DISABLE_XET`` is unset (for subprocesses) and ``constants.HF_HUB_DISABLE_XET`` is False (read at call
    time in-process). The client's process-wide ``XetSession`` is replaced by a fresh one and dropped at the end:
    hf_xet's ``local://`` store admits one process at a time and a live session holds it, so a session left over
    would lock out the subprocesses of later steps (and tests).
    """
    pytest.importorskip("hf_xet")
    from huggingface_hub.utils import _xet

    emu.enable_xet()
    monkeypatch.delenv("HF_HUB_DISABLE_XET", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_XET", False)
    monkeypatch.setenv("HF_XET_CACHE", hf_constants.HF_XET_CACHE)
    holder = _xet.XetSessionHolder()
    monkeypatch.setattr(_xet, "_GLOBAL_XET_HOLDER", holder)
    _xet.XET_CONNECTION_INFO_CACHE.clear()
    try:
        yield emu
    finally:
        release_xet_session()


def release_xet_session() -> None:
    """Drop this process's hf_xet session (releasing the ``local://`` store for another process)."""
    from huggingface_hub.utils import _xet

    holder = _xet._GLOBAL_XET_HOLDER
    with holder._lock:
        holder._session = None
        holder._session_pid = None
    gc.collect()
