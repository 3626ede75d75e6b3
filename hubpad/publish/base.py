"""The publisher interface and the run summary: where a derivative goes, and what a run did."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hubpad.errors import HubpadError, TargetTakenError
from hubpad.formats.manifest import parse_manifest
from hubpad.plan.model import Plan, ShardPlan
from hubpad.source.base import Source
from hubpad.util.disk import Room
from hubpad.util.log import log


@dataclass
class Summary:
    """What a run did, for the final report and `--json`."""

    target: str = ""
    changed: bool = False
    up_to_date: bool = False
    commit: str | None = None
    url: str | None = None
    upstream_commit: str | None = None
    shards_built: list[str] = field(default_factory=list)
    shards_reused: list[str] = field(default_factory=list)
    bytes_read: int = 0
    bytes_written: int = 0
    bytes_uploaded: int = 0
    peak_disk: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict:
        return dict(self.__dict__)


class Publisher(ABC):
    """Where the derivative goes. Implementations: `LocalPublisher`, `HubPublisher`."""

    label: str
    stages: bool = False  # True when finished shards are kept durably before the publish (resume across runs)
    repo_id: str | None  # the Hub id the card and recipe name (local target: the id given with --repo-id, else None)
    local_path: Path | None = None  # a local target's absolute path (what its card names without a repo id)
    summary: Summary

    @abstractmethod
    def inspect(self, plan: Plan) -> dict | None:
        """The checks `prepare` makes before it writes anything (a refused target raises the same error), reading
        only: the target's current manifest, if any, and what a run would find to reuse (the dry run's verdict and
        disk figure). No lock, no scratch, nothing created or removed; a dry run stops here (then `abort`)."""

    @abstractmethod
    def prepare(self, plan: Plan) -> dict | None:
        """Check the target can take this derivative (`inspect`), then get it ready; return its current manifest."""

    def has_staged_shards(self) -> bool:
        """Whether finished shards of an earlier run may be waiting (a local upstream is then hashed first, so
        their records can be matched)."""
        return self.stages

    def may_reuse(self, planned: dict) -> bool:
        """A cheap guess, from records only, that `find_reusable` will find this shard (the room a run needs)."""
        return False

    def find_reusable(self, planned: dict, on_bytes: Callable[[int], None] | None = None) -> dict | None:
        """The entry of a shard with exactly these inputs already on the target (published or staged), if any;
        `on_bytes(n)` as local bytes are read to check it (progress)."""
        return None

    @abstractmethod
    def room(self, plan: Plan, to_build: list[ShardPlan]) -> Room:
        """The local disk this run needs for building `to_build` (and the rest), and what is free there."""

    def short_of_room(self, have: Room) -> str | None:
        """Why a run with `have` stops before writing (what a dry run adds to its figure), else None."""
        return None if have.enough else "not enough"

    def check_room(self, plan: Plan, to_build: list[ShardPlan]) -> None:
        """Refuse, before the first byte is written, a run that the disk cannot hold."""

    @abstractmethod
    def shard_path(self, name: str) -> Path:
        """Where to write an output shard before handing it over."""

    def reserve_disk(self, path: Path, n: int) -> None:
        """Called before `n` more bytes of the shard at `path` are written: may wait for room (Hub: --max-disk)."""

    @abstractmethod
    def put_shard(self, entry: dict, path: Path) -> None:
        """Take a finished shard (its sha256 is in `entry`)."""

    def keep_shard(self, entry: dict) -> None:
        """Keep an already-present shard as it is."""

    def record_shard(self, entry: dict) -> None:
        """A built shard whose inputs are now all checked (its entry's `inputs` final): what a later run needs to
        reuse it if this one is killed (local targets; the Hub stages its own records)."""

    @abstractmethod
    def put_file(self, path: str, data: bytes) -> None:
        """Add a small generated file (config, index, card, manifest)."""

    @abstractmethod
    def copy_file(self, source: Source, path: str) -> dict:
        """Copy an unchanged upstream file; return {size, sha256 or oid} for the manifest."""

    @abstractmethod
    def publish(self, manifest: dict) -> None:
        """Make everything visible at once."""

    def abort(self) -> None:
        """Undo whatever is not yet published."""

    def settle_published(self) -> None:
        """The target is up to date: finish what a run that published, then stopped, left undone (Hub: tag)."""

    def mark_verified(self, entries: list[dict], upstream_files: dict[str, dict] | None = None) -> None:
        """Record that staged shards' inputs are now fully verified (Hub staging only), with the records
        ({size, sha256, blocks}) of the upstream files this run read in full, for the publish step's hubpad.json."""

    def staged_upstream_file(self, path: str, sha256: str | None) -> dict | None:
        """The record of upstream file `path` with this sha256 that a staging run left (Hub staging only)."""
        return None

    def target_info(self) -> dict:
        info = {"repo": self.label, "kind": "local"}
        if self.repo_id:
            info["repo_id"] = self.repo_id  # `hubpad card` renders the card for it again
        return info

    def published_revision(self) -> str | None:
        """What the recipe pins (`model_revision`): a tag on the publish commit for the Hub, nothing locally."""
        return None

    def existing_readme(self) -> str | None:
        return None

    # A published derivative's small files, read and replaced in place (`hubpad card`: no plan, no shard).

    def read_published(self, path: str) -> bytes | None:
        """A file of the published derivative, or None when it has none."""
        raise NotImplementedError

    def pinned_revision(self, manifest: dict) -> str | None:
        """What the recipe of the already-published derivative pins (None: nothing to pin)."""
        return None

    def update_files(self, files: dict[str, str], message: str, removed: list[str] = ()) -> dict:
        """Replace these small files of the published derivative, and delete `removed` (files hubpad wrote there
        before), in one step; returns {commit, url}."""
        raise NotImplementedError


def check_replace(existing: dict, plan: Plan, where: str, force: bool) -> None:
    """A target holding a derivative of another TP or another upstream is replaced only with --force; either way the
    run says what is there now."""
    upstream = existing.get("upstream") or {}
    was_repo, was_tp = upstream.get("repo"), existing.get("tp")
    other_tp = isinstance(was_tp, int) and was_tp != plan.tp
    other_source = isinstance(was_repo, str) and not _same_upstream(was_repo, upstream.get("kind"), plan.source)
    if not (other_tp or other_source):
        return
    holds = f"a derivative of {was_repo} for TP={was_tp}"
    now = f"{where} holds {holds}"
    if force:
        log(f"warning: {now}; --force: replacing it with {plan.source.label} for TP={plan.tp}")
        return
    raise TargetTakenError(f"{now}; this run would replace it with {plan.source.label} for TP={plan.tp}: pass --force "
                           f"to replace it, or choose another --to", holds)


def _same_upstream(recorded: str, kind: str | None, source: Source) -> bool:
    if (kind or "hub") != source.kind:
        return False
    if source.kind == "local":
        return Path(recorded).expanduser().resolve() == Path(source.label).expanduser().resolve()
    return recorded.casefold() == source.label.casefold()


def read_existing_manifest(data: bytes, where: str, force: bool) -> dict | None:
    """The target's hubpad.json before a run. A malformed one stops the run, unless --force: then the run
    goes on as for a target without one (everything is rebuilt; nothing hubpad cannot name is deleted)."""
    try:
        return parse_manifest(data, where)
    except HubpadError as exc:
        if not force:
            raise
        log(f"warning: {exc}; --force: rebuilding the derivative without it")
        return None
