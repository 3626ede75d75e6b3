"""The Space's settings, from its environment (Space variables), with the defaults a free CPU Space can hold."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hubpad.errors import ConfigError
from hubpad.run import hf_jobs
from hubpad.run.job_install import ENV_INSTALL, resolve_install
from hubpad.source.hub_api import endpoint
from hubpad.util.sizes import parse_size_floor

# What a checkout's Action reference looks like until the Space is told its own (HUBPAD_ACTION).
ACTION_PLACEHOLDER = "OWNER/hubpad@COMMIT"
# The hubpad a job installs, as space/publish.py pinned it when it published this Space (job_install's spec).
JOBS_INSTALL_FILE = Path(__file__).resolve().parents[1] / "JOBS_INSTALL"
CHECKOUT = Path(__file__).resolve().parents[2]  # the repository, when the app runs from one (not on a Space)


@dataclass(frozen=True)
class Settings:
    shard_size: int  # output shard size (HUBPAD_SPACE_SHARD_SIZE, default 5GB)
    max_disk: int  # scratch disk a run may hold at once: hubpad's --max-disk (HUBPAD_SPACE_MAX_DISK, default 12GB)
    workdir: Path | None  # where shards wait for their upload (HUBPAD_SPACE_WORKDIR, default a temp dir)
    action: str  # the hubpad Action the "keep it up to date" workflow uses (HUBPAD_ACTION, OWNER/hubpad@SHA)
    tps: tuple[int, ...] = tuple(range(1, 9))  # the advisor's rows and the sizes a user may pick
    # Jobs in the user's namespace (run it there, keep it up to date): flavor, timeout, the hubpad they install
    jobs_flavor: str = hf_jobs.DEFAULT_FLAVOR  # HUBPAD_SPACE_JOBS_FLAVOR
    jobs_timeout: str = hf_jobs.DEFAULT_TIMEOUT  # HUBPAD_SPACE_JOBS_TIMEOUT
    jobs_install: str | None = None  # HUBPAD_JOBS_INSTALL, else JOBS_INSTALL_FILE; None: this checkout's commit

    @classmethod
    def from_env(cls, env: dict | None = None) -> "Settings":
        env = os.environ if env is None else env
        workdir = env.get("HUBPAD_SPACE_WORKDIR")
        pinned = JOBS_INSTALL_FILE.read_text().strip() if JOBS_INSTALL_FILE.is_file() else None
        return cls(shard_size=parse_size_floor(env.get("HUBPAD_SPACE_SHARD_SIZE") or "5GB", "HUBPAD_SPACE_SHARD_SIZE"),
                   max_disk=parse_size_floor(env.get("HUBPAD_SPACE_MAX_DISK") or "12GB", "HUBPAD_SPACE_MAX_DISK"),
                   workdir=Path(workdir) if workdir else None,
                   action=env.get("HUBPAD_ACTION") or ACTION_PLACEHOLDER,
                   jobs_flavor=env.get("HUBPAD_SPACE_JOBS_FLAVOR") or hf_jobs.DEFAULT_FLAVOR,
                   jobs_timeout=env.get("HUBPAD_SPACE_JOBS_TIMEOUT") or hf_jobs.DEFAULT_TIMEOUT,
                   jobs_install=env.get(ENV_INSTALL) or pinned)

    @staticmethod
    def hub_url() -> str:
        """Where links on the page point: the Hub the Space talks to (HF_ENDPOINT, else huggingface.co)."""
        return endpoint()

    def scratch(self) -> Path:
        """The folder runs stage shards in (made on first use)."""
        path = self.workdir or Path(tempfile.gettempdir()) / "hubpad-space"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def jobs(self) -> hf_jobs.Settings:
        """How the user's jobs run (hubpad's own Jobs settings; the namespace is the signed-in user's)."""
        return hf_jobs.Settings(flavor=self.jobs_flavor, timeout=self.jobs_timeout, install=self.jobs_install)

    def jobs_off(self) -> str | None:
        """Why this Space cannot start jobs (no pinned hubpad for them to install), or None when it can. A published
        Space has its pin from publish.py; a checkout pins its own pushed commit (job_install's rule)."""
        if not self.jobs_install and not (CHECKOUT / "pyproject.toml").is_file():
            return (f"this Space names no hubpad for its jobs to install (space/publish.py writes "
                    f"{JOBS_INSTALL_FILE.name}; or set {ENV_INSTALL})")
        try:
            resolve_install(self.jobs_install)
        except ConfigError as exc:
            return str(exc)
        return None
