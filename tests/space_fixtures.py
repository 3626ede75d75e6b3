"""The Space's world for its tests, and for trying the page by hand against the Hub emulator:

    python -m tests.space_fixtures          # seeds an emulator and serves space/app.py on http://localhost:7860

Repos (tiny Hy3-shaped checkpoints, a few MB each): `RedHatAI/Tiny-Hy3` (pads at TP 3), `acme/Tiny-Hy3-Gated` (gated;
alice has not accepted its terms), `acme/Tiny-Hy3-Two-Experts` (2 routed experts: TP 3 is refused, with vLLM's
reason), and `someone/Tiny-Hy3-TP3` (a repo alice cannot write to); its Jobs run this checkout's hubpad as local
processes (tests/jobs_fixtures.py), pinned to PIN. Users: alice (write, the machine's login, so the
page's mocked sign-in is hers), bob (read-only token), carol (write; a second user of the queue).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from hubpad.testing import TINY_HY3, build_tiny_hy3, quant_config, tiny_hy3_tensors, write_checkpoint
from tests.jobs_fixtures import PIN, job_image

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = "RedHatAI/Tiny-Hy3"
GATED = "acme/Tiny-Hy3-Gated"
REFUSED = "acme/Tiny-Hy3-Two-Experts"
FOREIGN = "someone/Tiny-Hy3-TP3"
CAROL, CAROL_TOKEN = "carol", "hf_test_carol_token_0123456789abcdef"
SHARD = "4MB"  # output shards of the ~17 MB tiny Hy3: several, so progress has shards to move through


def seed_space_repos(hub, tmp: Path) -> None:
    """The repos above, on `hub` (an emulator with alice and bob already added)."""
    src = build_tiny_hy3(tmp / "tiny-hy3")
    files = {p.relative_to(src).as_posix(): p for p in src.rglob("*") if p.is_file()}
    hub.seed(UPSTREAM, files, message="upload")
    hub.set_downloads(UPSTREAM, 1000)
    hub.seed(GATED, files, message="upload")
    hub.set_gated(GATED, "manual")
    two = dict(TINY_HY3, num_experts=2, num_experts_per_tok=1, quantization_config=quant_config(2))
    refused = write_checkpoint(tmp / "two-experts", two, tiny_hy3_tensors(two), n_shards=1,
                               extra_files={"README.md": "---\nlicense: apache-2.0\n---\n# two experts\n"})
    hub.seed(REFUSED, {p.relative_to(refused).as_posix(): p for p in refused.rglob("*") if p.is_file()})
    hub.seed(FOREIGN, {"README.md": "someone else's repo\n"})
    if hub.user_for_token(CAROL_TOKEN) is None:
        hub.add_user(CAROL, CAROL_TOKEN, role="write", fullname="Carol Queue")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_env(hub, hf_home: Path, port: int, **extra: str) -> dict:
    """The environment `python space/app.py` runs in against `hub`: alice's login is the machine's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "SPACE_", "SYSTEM"))}
    env.update({"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": hub.token, "HF_HOME": str(hf_home),
                "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                "GRADIO_SERVER_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "False",
                "HUBPAD_SPACE_SHARD_SIZE": SHARD, "HUBPAD_SPACE_MAX_DISK": "10MB", "PYTHONUNBUFFERED": "1",
                "HUBPAD_JOBS_INSTALL": PIN, "HUBPAD_SPACE_JOBS_FLAVOR": "cpu-basic"})
    env.update(extra)
    return env


def start_app(env: dict, log: Path) -> subprocess.Popen:
    """`python space/app.py` in its own process, its output in `log`; returns once it answers."""
    out = open(log, "ab")
    proc = subprocess.Popen([sys.executable, str(ROOT / "space" / "app.py")], env=env, stdout=out,
                            stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"http://127.0.0.1:{env['GRADIO_SERVER_PORT']}/"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"space/app.py exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", int(env["GRADIO_SERVER_PORT"])), timeout=1):
                import urllib.request

                urllib.request.urlopen(url, timeout=5).read(1)
                return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"space/app.py did not answer on {url} within 120 s:\n{log.read_text()[-3000:]}")


def space_world(tmp: Path):
    """A started emulator of its own with the fixture's users and repos (the page's process reaches it over HTTP);
    `hub.tmp` is `tmp`, with an `hf_home/` for the page. The caller stops it."""
    from tests.emulator_fixtures import ALICE, ALICE_TOKEN, ORG, READER, READER_TOKEN
    from tests.hub_emulator import HubEmulator

    hub = HubEmulator(tmp / "hub")
    hub.add_user(ALICE, ALICE_TOKEN, role="write", orgs=[ORG], fullname="Alice Tester")
    hub.add_user(READER, READER_TOKEN, role="read", orgs=[ORG], fullname="Bob Reader")
    hub.user, hub.token = ALICE, ALICE_TOKEN
    hub.start()
    job_image(hub, tmp / "image-bin")  # the page's jobs run this checkout's hubpad (tests/hub_jobs.py)
    seed_space_repos(hub, tmp)
    (tmp / "hf_home").mkdir()
    hub.tmp = tmp
    return hub


def main() -> None:  # pragma: no cover - by hand
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="hubpad-space-dev-"))
    hub = space_world(tmp)
    port = int(os.environ.get("GRADIO_SERVER_PORT") or 7860)
    env = app_env(hub, tmp / "hf_home", port, HUBPAD_SPACE_MAX_DISK="12GB")
    proc = start_app(env, tmp / "app.log")
    print(json.dumps({"page": f"http://localhost:{port}/", "hub": hub.endpoint, "log": str(tmp / "app.log")}))
    try:
        proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
    finally:
        hub.stop()


if __name__ == "__main__":  # pragma: no cover
    main()
