"""The Space's settings, from its environment (Space variables), with the defaults a free CPU Space can hold."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hubpad.source.hub_api import endpoint
from hubpad.util.sizes import parse_size_floor

# What a checkout's Action reference looks like until the Space is told its own (HUBPAD_ACTION).
ACTION_PLACEHOLDER = "OWNER/hubpad@COMMIT"


@dataclass(frozen=True)
class Settings:
    shard_size: int  # output shard size (HUBPAD_SPACE_SHARD_SIZE, default 5GB)
    max_disk: int  # scratch disk a run may hold at once: hubpad's --max-disk (HUBPAD_SPACE_MAX_DISK, default 12GB)
    workdir: Path | None  # where shards wait for their upload (HUBPAD_SPACE_WORKDIR, default a temp dir)
    action: str  # the hubpad Action the "keep it up to date" workflow uses (HUBPAD_ACTION, OWNER/hubpad@SHA)
    tps: tuple[int, ...] = tuple(range(1, 9))  # the advisor's rows and the sizes a user may pick

    @classmethod
    def from_env(cls, env: dict | None = None) -> "Settings":
        env = os.environ if env is None else env
        workdir = env.get("HUBPAD_SPACE_WORKDIR")
        return cls(shard_size=parse_size_floor(env.get("HUBPAD_SPACE_SHARD_SIZE") or "5GB", "HUBPAD_SPACE_SHARD_SIZE"),
                   max_disk=parse_size_floor(env.get("HUBPAD_SPACE_MAX_DISK") or "12GB", "HUBPAD_SPACE_MAX_DISK"),
                   workdir=Path(workdir) if workdir else None,
                   action=env.get("HUBPAD_ACTION") or ACTION_PLACEHOLDER)

    @staticmethod
    def hub_url() -> str:
        """Where links on the page point: the Hub the Space talks to (HF_ENDPOINT, else huggingface.co)."""
        return endpoint()

    def scratch(self) -> Path:
        """The folder runs stage shards in (made on first use)."""
        path = self.workdir or Path(tempfile.gettempdir()) / "hubpad-space"
        path.mkdir(parents=True, exist_ok=True)
        return path
