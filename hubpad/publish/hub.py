"""Publish to a Hub repo: shards staged one commit at a time on a branch, then ONE commit on the target branch.

Staging makes every finished shard durable on the Hub as soon as it exists (a killed run resumes from the
staging manifest), while readers of the target branch never see a half-updated repo: the publish commit
copies the staged shards server-side and adds the small files, guarded by `parent_commit`. The published
commit is then tagged, so the recipe's `model_revision` pins exactly the weights it was rendered for.

Untouched upstream files are copied server-side too (cross-repo `CommitOperationCopy`). The Hub can do that for
an LFS file only when it is stored in Xet (its paths-info entry has a `xetHash`) and both repos share a storage
region; otherwise the file is streamed from the upstream (sha256 checked), staged like a shard and copied from
the staging branch, with one log line saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from hubpad import FORMAT_VERSION
from hubpad.errors import ConfigError, ConflictError, HubpadError, NetworkError, TargetTakenError
from hubpad.formats.manifest import dumps, same_build
from hubpad.formats.names import MANIFEST
from hubpad.plan.model import Plan, ShardPlan
from hubpad.publish.base import Publisher, Summary, check_replace, read_existing_manifest
from hubpad.source.base import FileEntry, Source, VerifiedReader
from hubpad.source.hub_api import (
    CONFLICT_STATUS,
    api_for,
    copy_without_xet_hash,
    duplication_failure,
    duplication_failures,
    hub_errors,
    read_repo_file,
    whoami_name,
)
from hubpad.util.disk import Room, room, writing
from hubpad.util.hashing import file_sha256
from hubpad.util.log import log
from hubpad.util.refs import both_readings, derive_target, is_repo_id
from hubpad.util.run_lock import RunLock, abandoned, gone, recorded_pid
from hubpad.util.sizes import human

STAGING_BRANCH = "hubpad-staging"
# One small record per staged shard (not one shared file), so parallel part jobs never overwrite each other.
STAGING_DIR = ".hubpad-staging"
PATHS_INFO_BATCH = 500  # paths per paths-info request (what huggingface_hub itself sends)
WORKDIR_PREFIX = "hubpad-"  # hubpad's own scratch folders under $TMPDIR, each held by a RunLock inside
WORKDIR_LOCK = ".hubpad-lock"


def default_target(source: Source, tp: int, api) -> str:
    """`<token's user>/<upstream name>-TP<N>`, named as the mirrors file names it."""

    return derive_target(source.label, tp, whoami_name(api))


def release_tag(upstream_commit: str | None, tp: int) -> str:
    """The tag that pins a published derivative commit (the recipe's model_revision)."""
    return f"hubpad-tp{tp}-{(upstream_commit or 'local')[:12]}"


def staging_records(api, repo_id: str, tp: int) -> list[dict]:
    """The per-shard records on `repo_id`'s staging branch that a run at `tp` (this format version) can reuse: shards
    staged by a run that has not published yet (interrupted, or one part of a fan-out). None without the branch."""
    from huggingface_hub import errors as e

    try:
        entries = list(api.list_repo_tree(repo_id, path_in_repo=STAGING_DIR, revision=STAGING_BRANCH))
    except (e.EntryNotFoundError, e.RevisionNotFoundError, e.RepositoryNotFoundError):
        entries = []
    except e.HfHubHTTPError:
        with hub_errors(f"target {repo_id}: read {STAGING_BRANCH}"):
            raise
    records = []
    for item in entries:
        if not item.path.endswith(".json"):
            continue
        try:
            record = json.loads(read_repo_file(api, repo_id, item.path, STAGING_BRANCH) or b"")
        except (HubpadError, ValueError):
            continue
        shard = record.get("shard") if isinstance(record, dict) else None
        if same_build(record, tp) and isinstance(shard, dict) and isinstance(shard.get("name"), str):
            records.append(record)  # anything else: nothing to reuse
    return records


class HubPublisher(Publisher):
    """Stages shards on `hubpad-staging` of `repo_id`, then publishes with one commit on `branch`."""

    stages = True

    def __init__(self, api, repo_id: str, *, branch: str = "main", force: bool = False, private: bool = False,
                 workdir: str | os.PathLike[str] | None = None, max_disk: int | None = None) -> None:
        if not is_repo_id(repo_id):
            raise ConfigError(f"{repo_id!r} is not a Hub repo id (namespace/name)")
        self.api, self.repo_id, self.label, self.branch = api, repo_id, repo_id, branch
        self.force, self.private, self.max_disk = force, private, max_disk
        self.summary = Summary()
        self._own_workdir = workdir is None
        # Our own scratch folder is made only once the target has been checked (`prepare`): a run that fails
        # before (an unreachable Hub, a refused target) or a dry run leaves no hubpad-* folder behind.
        self.workdir = Path(tempfile.gettempdir()) if workdir is None else Path(workdir)
        self._made_workdir = False
        self.base_commit: str | None = None
        self.existing: dict | None = None
        self.staged: dict[str, dict] = {}
        self.staged_files: dict[str, dict[str, dict]] = {}  # path -> sha256 -> record left by a part run
        self.files: dict[str, bytes] = {}
        self.copies: list = []  # uploads of a local upstream's untouched files
        self.upstream_copies: dict[str, FileEntry] = {}  # untouched files of a Hub upstream: copied server-side
        self.copy_source: Source | None = None
        self.streamed: dict[str, str] = {}  # upstream files staged by streaming instead: path -> why
        self.kept_from_staging: list[str] = []
        self.kept_from_target: list[str] = []
        self.built: list[str] = []
        self.existing_files: set[str] = set()
        self.plan: Plan | None = None
        # A shard's bytes go up on `upload`; its staging commit then runs on `stage-commit`, in shard order, while
        # the next shard uploads: the link never waits for a commit.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="upload")
        self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stage-commit")
        self._uploads: list[Future] = []  # queued in shard order; one runs at a time
        self._commits: list[Future] = []
        # Scratch bytes count against --max-disk from the moment they are written until their shard leaves the
        # disk; `_disk_freed` wakes a writer waiting for room.
        self._disk_freed = threading.Condition()
        self._on_disk = 0
        self._scratch: dict[Path, int] = {}
        self._budget = 0  # bytes of scratch: --max-disk, or what `prepare` chose
        self._budget_note = ""
        self._workdir_lock: RunLock | None = None

    @classmethod
    def for_target(cls, source: Source, dst: str | None, tp: int, **kw) -> "HubPublisher":
        api = api_for()
        return cls(api, dst or default_target(source, tp, api), **kw)

    # ------------------------------------------------------------------------------------------ setup

    def inspect(self, plan: Plan) -> dict | None:
        """What the target holds (its hubpad.json) and everything `prepare` refuses, with no side effect (nothing
        created, no scratch folder): a dry run's verdict, and the Space's checks before it queues a run."""
        from huggingface_hub import errors as e

        self.plan = plan
        if plan.source.kind == "hub" and plan.source.label.casefold() == self.repo_id.casefold():
            raise HubpadError(f"target {self.repo_id}: destination is the source; choose another --to "
                              f"(default: <your user>/<name>-TP<N>)")
        biggest = max(s.size for s in plan.shards)
        if self.max_disk is not None and biggest > self.max_disk:
            raise HubpadError(f"--max-disk {human(self.max_disk)} is smaller than the largest output shard "
                              f"({human(biggest)}); lower --shard-size or raise --max-disk")
        try:
            info = self.api.model_info(self.repo_id, revision=self.branch)
        except e.RepositoryNotFoundError:
            info = None  # `prepare` creates it
        except e.RevisionNotFoundError:
            raise HubpadError(f"target {self.repo_id}: branch {self.branch!r} does not exist") from None
        except Exception:
            try:
                with hub_errors(f"target {self.repo_id}"):
                    raise
            except NetworkError as exc:  # --to may have meant a local directory that does not exist yet
                raise NetworkError(f"{exc}; {both_readings(self.repo_id)}") from None
        self.base_commit = info.sha if info is not None else None
        self.existing_files = {s.rfilename for s in info.siblings or []} if info is not None else set()
        if MANIFEST in self.existing_files:
            self.existing = read_existing_manifest(self._download(MANIFEST, self.base_commit), f"target {self.repo_id}",
                                                   self.force)
        elif self.existing_files - {".gitattributes"} and not self.force:
            raise TargetTakenError(f"target {self.repo_id} already has files and no {MANIFEST}: hubpad did not create "
                                   f"it (use --force to publish into it anyway; hubpad never deletes files it did not "
                                   f"create)", "files hubpad did not create")
        if self.existing is not None:
            check_replace(self.existing, plan, f"target {self.repo_id}", self.force)
        return self.existing

    def prepare(self, plan: Plan) -> dict | None:
        """`inspect`, the scratch budget (before anything is created), the repo if it is new, the workdir."""
        self.inspect(plan)
        self._budget = self._scratch_budget(plan)
        if self.base_commit is None:
            with hub_errors(f"target {self.repo_id}: create"):
                self.api.create_repo(self.repo_id, private=self.private, exist_ok=True)
                self.base_commit = self.api.model_info(self.repo_id, revision=self.branch).sha
            log(f"created {'private' if self.private else 'public'} repo {self.repo_id}")
        self._make_workdir()
        log(f"scratch disk: {self._budget_note} under {self.workdir}")
        self._load_staging()
        return self.existing

    def room(self, plan: Plan, to_build: list[ShardPlan] | None = None) -> Room:
        """Scratch under the workdir: --max-disk, else two of the largest output shards (the next one is padded while
        one uploads); one is the least that works."""
        biggest = max(s.size for s in plan.shards)
        return room(self.workdir, self.max_disk if self.max_disk is not None else 2 * biggest, least=biggest,
                    what="scratch")

    def _scratch_budget(self, plan: Plan) -> int:
        """The scratch disk budget, chosen before anything is created: --max-disk, lowered to what the workdir's
        filesystem has free; without it two shards when free with a tenth to spare, else one. Less than one shard
        free fails now, not at the first shard's end."""
        have = self.room(plan)
        biggest = have.least  # `inspect` refused a --max-disk below it
        if not have.enough:
            raise HubpadError(f"{self.workdir}: not enough disk for scratch shards: {have.line()} (the largest output "
                              f"shard is {human(biggest)}); point --workdir elsewhere or lower --shard-size")
        if self.max_disk is not None:
            wanted = min(self.max_disk, sum(s.size for s in plan.shards))
            if have.free >= wanted:
                self._budget_note = f"up to {human(self.max_disk)} (--max-disk)"
                return self.max_disk
            budget = max(biggest, have.free - have.free // 10)
            log(f"warning: --max-disk {human(self.max_disk)}, but {human(have.free)} free on {have.where}: scratch "
                f"kept to {human(budget)}")
        else:
            two = 2 * biggest
            budget = two if have.free >= two + two // 10 else biggest
        self._budget_note = f"up to {human(budget)} ({human(have.free)} free; --max-disk sets it)"
        return budget

    def _make_workdir(self) -> None:
        """The workdir: --workdir as given, or a fresh `hubpad-*` folder of our own under $TMPDIR, held by a RunLock
        while this run lives. Our own folders that runs killed before they could remove them (their lock is free)
        are removed first, each said once."""
        if not (self._own_workdir and not self._made_workdir):
            with writing(self.workdir):
                self.workdir.mkdir(parents=True, exist_ok=True)
            return
        base = Path(tempfile.gettempdir())
        for stale in sorted(base.glob(f"{WORKDIR_PREFIX}*")):
            lock = stale / WORKDIR_LOCK
            if stale.is_dir() and abandoned(lock):
                pid = recorded_pid(lock)
                shutil.rmtree(stale, ignore_errors=True)
                log(f"removed {stale}, the scratch of a run that stopped ({gone(pid)})")
        with writing(base):
            self.workdir, self._made_workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX)), True
            self._workdir_lock = RunLock(self.workdir / WORKDIR_LOCK)
            self._workdir_lock.acquire()

    def _download(self, path: str, revision: str) -> bytes:
        data = read_repo_file(self.api, self.repo_id, path, revision)
        if data is None:
            raise HubpadError(f"target {self.repo_id}: {path} not found at {revision}")
        return data

    def _load_staging(self) -> None:
        """Read what earlier (interrupted, or parallel part) runs staged; create the staging branch if needed."""
        from huggingface_hub import errors as e

        with hub_errors(f"target {self.repo_id}: refs"):
            refs = self.api.list_repo_refs(self.repo_id)
        if not any(b.name == STAGING_BRANCH for b in refs.branches):
            try:
                self.api.create_branch(self.repo_id, branch=STAGING_BRANCH, revision=self.base_commit, exist_ok=True)
            except e.HfHubHTTPError:
                with hub_errors(f"target {self.repo_id}: create branch {STAGING_BRANCH}"):
                    raise
            return
        self.refresh_staged()
        if self.staged:
            log(f"resuming: {len(self.staged)} shard(s) already staged on {STAGING_BRANCH}")

    def refresh_staged(self) -> None:
        """Reload the per-shard staging records (valid only for this format version and tp)."""
        staged, files = {}, {}
        for record in staging_records(self.api, self.repo_id, self.plan.tp):
            shard = record["shard"]
            staged[shard["name"]] = shard
            files_read = record.get("upstream_files")
            for path, rec in (files_read.items() if isinstance(files_read, dict) else ()):
                if isinstance(rec, dict) and isinstance(rec.get("sha256"), str):  # usable_record checks the rest
                    files.setdefault(path, {})[rec.get("sha256")] = rec
        self.staged, self.staged_files = staged, files

    # ------------------------------------------------------------------------------------------ shards

    def find_reusable(self, planned: dict, on_bytes=None) -> dict | None:
        name, inputs = planned["name"], planned["inputs"]
        for entry in (self.existing or {}).get("shards", []):
            if entry["name"] == name and entry.get("inputs") == inputs and name in self.existing_files:
                self.kept_from_target.append(name)
                return dict(entry)
        entry = self.staged.get(name)
        if entry and entry.get("inputs") == inputs:
            self.kept_from_staging.append(name)
            return dict(entry)
        return None

    def shard_path(self, name: str) -> Path:
        return self.workdir / name

    def reserve_disk(self, path: Path, n: int) -> None:
        """Wait until `n` more bytes of `path` fit in the scratch budget beside the shards still waiting for their
        upload or staging commit. Byte by byte, not shard by shard: shard k+2 starts filling the room that shards k
        and k+1 leave, so it is nearly built when shard k has gone up and the link never waits for it."""
        with self._disk_freed:
            while self._on_disk + n > self._budget:
                self._raise_failures()
                if not any(not f.done() for f in self._uploads + self._commits):
                    raise HubpadError(f"internal error: {path.name} needs {n} bytes over the scratch disk budget "
                                      f"{human(self._budget)} and nothing is left to free them")
                self._disk_freed.wait(0.05)
            self._on_disk += n
            self._scratch[path] = self._scratch.get(path, 0) + n
            self.summary.peak_disk = max(self.summary.peak_disk, self._on_disk)

    def put_shard(self, entry: dict, path: Path) -> None:
        self._raise_failures()
        self._uploads.append(self._pool.submit(self._stage, dict(entry), path))  # one worker: in shard order
        self.built.append(entry["name"])

    def _raise_failures(self) -> None:
        """Raise the first failure of an upload or staging commit that has ended."""
        for future in self._uploads + self._commits:
            if future.done():
                future.result()
        self._uploads = [f for f in self._uploads if not f.done()]  # ours; `_commits` grows on the upload thread

    def _wait_uploads(self) -> None:
        """Wait for every queued upload; raise the first failure of them or of any staging commit so far."""
        uploads, self._uploads = self._uploads, []
        for future in uploads:
            future.result()
        self._raise_failures()

    def _wait_staged(self) -> None:
        """Wait until every built shard is uploaded and its staging commit made."""
        self._wait_uploads()
        commits, self._commits = self._commits, []
        for commit in commits:
            commit.result()

    def _record(self, entry: dict, upstream_files: dict[str, dict] | None = None) -> tuple[str, bytes]:
        record = {"format_version": FORMAT_VERSION, "tp": self.plan.tp, "upstream": self.plan.source.ref,
                  "upstream_commit": self.plan.source.commit, "shard": entry}
        if upstream_files:
            record["upstream_files"] = upstream_files
        return f"{STAGING_DIR}/{entry['name']}.json", dumps(record).encode()

    def _stage(self, entry: dict, path: Path) -> None:
        """Upload one shard's bytes, free its disk, and queue the staging commit (the shard with its record)."""
        from huggingface_hub import CommitOperationAdd

        try:
            op = CommitOperationAdd(path_in_repo=entry["name"], path_or_fileobj=str(path))
            op.upload_info.sha256 = bytes.fromhex(entry["sha256"])  # hashed while writing: the file is read once
            with hub_errors(f"target {self.repo_id}: stage {entry['name']}"):
                self.api.preupload_lfs_files(self.repo_id, [op], revision=STAGING_BRANCH)
        except BaseException:
            self._drop_scratch(path)
            raise
        self.summary.bytes_uploaded += entry["size"]
        # A file the Hub takes inline (not LFS/Xet) is read again by the commit: it stays on disk until then.
        uploaded = getattr(op, "_is_uploaded", False)
        if uploaded:
            self._drop_scratch(path)
        self._commits.append(self._committer.submit(self._commit_stage, entry, op, None if uploaded else path))

    def _commit_stage(self, entry: dict, op, path: Path | None) -> None:
        from huggingface_hub import CommitOperationAdd

        try:
            record_path, record = self._record(entry)
            with hub_errors(f"target {self.repo_id}: stage {entry['name']}"):
                self.api.create_commit(self.repo_id, [op, CommitOperationAdd(record_path, record)],
                                       revision=STAGING_BRANCH, commit_message=f"hubpad: stage {entry['name']}")
            self.staged[entry["name"]] = entry
        finally:
            if path is not None:
                self._drop_scratch(path)

    def _drop_scratch(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        with self._disk_freed:
            self._on_disk -= self._scratch.pop(path, 0)
            self._disk_freed.notify_all()

    def settle_published(self) -> None:
        """Up to date: a run that made the publish commit but stopped before tagging it (or before dropping the
        staging branch) is finished here, so the recipe's model_revision tag exists."""
        tag = self.published_revision()
        with hub_errors(f"target {self.repo_id}: refs"):
            refs = self.api.list_repo_refs(self.repo_id)
        if tag not in {t.name for t in refs.tags}:
            with hub_errors(f"target {self.repo_id}: tag {tag}"):
                self.api.create_tag(self.repo_id, tag=tag, revision=self.base_commit, exist_ok=True)
            log(f"tagged {self.repo_id}@{self.base_commit[:12]} as {tag} (an earlier run stopped before it)")
        if any(b.name == STAGING_BRANCH for b in refs.branches):
            with hub_errors(f"target {self.repo_id}: delete {STAGING_BRANCH}"):
                self.api.delete_branch(self.repo_id, branch=STAGING_BRANCH)

    def mark_verified(self, entries: list[dict], upstream_files: dict[str, dict] | None = None) -> None:
        """After a stage-only run: record that the staged shards' upstream files were fully hashed and matched,
        and, in each built shard's record, the block hashes of its upstream files (the publish step's hubpad.json
        needs them, and it reads no upstream file itself)."""
        from huggingface_hub import CommitOperationAdd

        self._wait_staged()
        ops = []
        for entry in entries:
            if entry["name"] not in self.built:
                continue
            read = upstream_files or {}
            files = {s["file"]: read[s["file"]] for s in entry["sources"] if s["file"] in read}
            if files or not self.staged.get(entry["name"], {}).get("verified"):
                ops.append(CommitOperationAdd(*self._record(entry, files)))
        if ops:
            with hub_errors(f"target {self.repo_id}: stage records"):
                self.api.create_commit(self.repo_id, ops, revision=STAGING_BRANCH,
                                       commit_message="hubpad: staged shards verified")

    # ------------------------------------------------------------------------------------------ files

    def staged_upstream_file(self, path: str, sha256: str | None) -> dict | None:
        return self.staged_files.get(path, {}).get(sha256) if sha256 else None

    def put_file(self, path: str, data: bytes) -> None:
        self.files[path] = data

    def existing_readme(self) -> str | None:
        if self.existing is not None and "README.md" in self.existing_files:
            return self._download("README.md", self.base_commit).decode("utf-8", errors="replace")
        return None

    def copy_file(self, source: Source, path: str) -> dict:
        """Server-side copy from an upstream Hub repo (made in the publish commit); a local upstream's file is
        uploaded."""
        from huggingface_hub import CommitOperationAdd

        entry = source.files()[path]
        if source.kind == "hub":
            self.copy_source = source
            self.upstream_copies[path] = entry
            record = {"size": entry.size}
            if entry.sha256:
                record["sha256"] = entry.sha256
            elif entry.git_oid:
                record["git_oid"] = entry.git_oid
            return record

        local = source.local_path(path)
        self.copies.append(CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(local)))
        return {"size": entry.size, "sha256": file_sha256(local)}

    def _copy_ops(self) -> list:
        """Fresh copy operations for the upstream's untouched files (huggingface_hub mutates them while committing,
        so a retried commit gets new ones): server-side from the upstream, or from staging when streamed."""
        from huggingface_hub import CommitOperationCopy

        ops = []
        for path in self.upstream_copies:
            if path in self.streamed:
                ops.append(CommitOperationCopy(src_path_in_repo=path, path_in_repo=path, src_revision=STAGING_BRANCH))
            else:
                ops.append(CommitOperationCopy(src_path_in_repo=path, path_in_repo=path,
                                               src_revision=self.copy_source.commit,
                                               src_repo_id=self.copy_source.repo_id, src_repo_type="model"))
        return ops

    def _check_copyable(self) -> None:
        """Before publishing: LFS files of the upstream that are not in Xet cannot be copied between repos."""
        source = self.copy_source
        lfs = [p for p, entry in self.upstream_copies.items() if entry.sha256 and p not in self.streamed]
        for i in range(0, len(lfs), PATHS_INFO_BATCH):
            with hub_errors(f"upstream {source.repo_id}: paths-info"):
                infos = self.api.get_paths_info(source.repo_id, lfs[i:i + PATHS_INFO_BATCH], revision=source.commit)
            for info in infos:
                if getattr(info, "lfs", None) is not None and not getattr(info, "xet_hash", None):
                    self._stream_upstream_file(info.path, "it is stored as classic LFS, not in Xet: no xetHash")

    def _stream_upstream_file(self, path: str, why: str) -> None:
        """Stage an upstream file the Hub cannot copy server-side: stream it (sha256 checked) and upload it to the
        staging branch, so the publish commit copies it from there; disk holds one such file at a time."""
        from huggingface_hub import CommitOperationAdd

        source, entry = self.copy_source, self.upstream_copies[path]
        if not self._staged_as(path, entry.sha256):
            if self.max_disk is not None and entry.size > self.max_disk:
                raise HubpadError(f"{path} ({human(entry.size)}) must be streamed and re-uploaded ({why}) but is "
                                  f"larger than --max-disk {human(self.max_disk)}")
            local = self.workdir / f".upstream-{len(self.streamed)}-{Path(path).name}"
            try:
                reader = VerifiedReader(source, entry)
                with writing(local), open(local, "wb") as f:
                    for piece in reader.iter_range(0, entry.size):
                        f.write(piece)
                digest = reader.finish()  # sha256 checked against the upstream's LFS oid
                self.summary.bytes_read += reader.bytes_read
                op = CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(local))
                op.upload_info.sha256 = bytes.fromhex(digest)
                with hub_errors(f"target {self.repo_id}: stage upstream file {path}"):
                    self.api.create_commit(self.repo_id, [op], revision=STAGING_BRANCH,
                                           commit_message=f"hubpad: stage upstream file {path}")
                self.summary.bytes_uploaded += entry.size
            finally:
                local.unlink(missing_ok=True)
        self.streamed[path] = why
        log(f"{path}: the Hub cannot copy it server-side from {source.repo_id} ({why}); streamed it from the "
            f"upstream (sha256 checked) and uploaded it instead")

    def _staged_as(self, path: str, sha256: str | None) -> bool:
        """Whether an earlier run already staged this exact upstream file (a resumed publish)."""
        from huggingface_hub import errors as e

        try:
            infos = self.api.get_paths_info(self.repo_id, [path], revision=STAGING_BRANCH)
        except e.HfHubHTTPError:
            return False
        return any(getattr(getattr(i, "lfs", None), "sha256", None) == sha256 for i in infos)

    def _not_copied(self, exc: BaseException) -> dict[str, str]:
        """The upstream files a failed server-side copy names ({path: why}); {} when it names none of ours."""
        remaining = {p: entry for p, entry in self.upstream_copies.items() if entry.sha256 and p not in self.streamed}
        no_xet = copy_without_xet_hash(exc)
        if no_xet is not None:
            return {p: "it is stored as classic LFS, not in Xet: no xetHash"
                    for p in remaining if f"'{p}'" in str(exc)} or {p: no_xet for p in remaining}
        failed = duplication_failures(exc)
        named = {p: f"the Hub refused: {failed[entry.sha256]}" for p, entry in remaining.items()
                 if entry.sha256 in failed}
        return named or {p: f"the Hub refused: {duplication_failure(exc)}" for p in remaining}

    def target_info(self) -> dict:
        return {"repo": self.repo_id, "kind": "hub", "branch": self.branch}

    def _published_head(self) -> str:
        """The branch head this publisher works against (read once)."""
        if self.base_commit is None:
            with hub_errors(f"target {self.repo_id}"):
                self.base_commit = self.api.model_info(self.repo_id, revision=self.branch).sha
        return self.base_commit

    def read_published(self, path: str) -> bytes | None:
        return read_repo_file(self.api, self.repo_id, path, self._published_head())

    def pinned_revision(self, manifest: dict) -> str | None:
        """The release tag of the published commit when it exists, else the head commit."""
        tag = release_tag(manifest.get("upstream", {}).get("commit"), manifest.get("tp", 0))
        with hub_errors(f"target {self.repo_id}: refs"):
            tags = {t.name for t in self.api.list_repo_refs(self.repo_id).tags}
        return tag if tag in tags else self._published_head()

    def update_files(self, files: dict[str, str], message: str, removed: list[str] = ()) -> dict:
        """One commit guarded by parent_commit: a concurrent change makes it fail with nothing committed."""
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        ops = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=t.encode()) for p, t in sorted(files.items())]
        ops += [CommitOperationDelete(path_in_repo=p) for p in sorted(removed)]
        try:
            # An upload failure (vllm_patch/*.pth go through Xet/LFS) is one line too; nothing is committed.
            with hub_errors(f"target {self.repo_id}: commit"):
                info = self.api.create_commit(self.repo_id, ops, revision=self.branch,
                                              parent_commit=self._published_head(), commit_message=message)
        except ConflictError:
            raise ConflictError(f"{self.repo_id} changed during the update; nothing committed, re-run") from None
        return {"commit": info.oid, "url": info.commit_url}

    def published_revision(self) -> str:
        return release_tag(self.plan.source.commit, self.plan.tp)

    # ------------------------------------------------------------------------------------------ publish

    def publish(self, manifest: dict) -> None:
        """One commit on the branch: staged shards copied in, upstream files copied server-side (streamed where the
        Hub cannot copy them), small files added, hubpad's own stale files deleted; then tag it, drop staging."""
        self._wait_staged()
        if self.upstream_copies:
            self._check_copyable()
        info = self._commit_publish(manifest)
        self.summary.commit = info.oid
        self.summary.url = info.commit_url
        tag = self.published_revision()
        with hub_errors(f"target {self.repo_id}: tag {tag}"):
            self.api.create_tag(self.repo_id, tag=tag, revision=info.oid, exist_ok=True)
        with hub_errors(f"target {self.repo_id}: delete {STAGING_BRANCH}"):
            self.api.delete_branch(self.repo_id, branch=STAGING_BRANCH)
        log(f"published {self.repo_id}@{info.oid[:12]} (tag {tag})")
        self._cleanup()

    def _commit_publish(self, manifest: dict):
        """The publish commit, guarded by parent_commit; a refused server-side copy is streamed, then retried once."""
        from huggingface_hub import errors as e

        upstream = manifest["upstream"]
        message = f"hubpad: pad {upstream['repo']}@{(upstream.get('commit') or 'local')[:12]} for TP={manifest['tp']}"
        description = (f"{len(self.built)} shard(s) built, {len(self.kept_from_target) + len(self.kept_from_staging)}"
                       f" reused. Provenance in {MANIFEST}.")
        for attempt in (1, 2):
            try:
                return self.api.create_commit(self.repo_id, self._publish_ops(manifest), revision=self.branch,
                                              parent_commit=self.base_commit, commit_message=message,
                                              commit_description=description)
            except e.HfHubHTTPError as exc:
                status = getattr(getattr(exc, "response", None), "status_code", None)
                if status in CONFLICT_STATUS:
                    raise ConflictError(f"target {self.repo_id} changed while this run was publishing (another "
                                        f"publisher?): nothing was published; staged shards are kept, re-run to retry",
                                        status) from None
                with hub_errors(f"target {self.repo_id}: publish"):
                    raise
            except (e.FileDuplicationError, ValueError) as exc:
                # The server-side copy of some upstream files was refused before anything was committed: stream
                # those files instead and commit again (once).
                not_copied = self._not_copied(exc) if attempt == 1 and self.upstream_copies else {}
                if not not_copied or (isinstance(exc, ValueError) and copy_without_xet_hash(exc) is None):
                    with hub_errors(f"target {self.repo_id}: publish"):
                        raise
                for path, why in not_copied.items():
                    self._stream_upstream_file(path, why)
            except BaseException:
                with hub_errors(f"target {self.repo_id}: publish"):
                    raise
        raise HubpadError(f"target {self.repo_id}: publish: internal error, no commit after retrying")  # unreachable

    def _publish_ops(self, manifest: dict) -> list:
        """What the publish commit does, in order: shard copies from staging, upstream copies, adds, deletions."""
        from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete

        names = [s["name"] for s in manifest["shards"]]
        keep = set(names) | set(self.files) | {op.path_in_repo for op in self.copies} | set(self.upstream_copies)
        ours = set()
        if self.existing:
            ours |= {s["name"] for s in self.existing.get("shards", [])}
            ours |= set(self.existing.get("files", {}).get("copied", []))
            ours |= set(self.existing.get("files", {}).get("generated", []))
        ops: list = [CommitOperationCopy(src_path_in_repo=name, path_in_repo=name, src_revision=STAGING_BRANCH)
                     for name in names if name in self.built or name in self.kept_from_staging]
        ops += self.copies + self._copy_ops()
        ops += [CommitOperationAdd(path_in_repo=path, path_or_fileobj=data) for path, data in self.files.items()]
        # Deletions: only files hubpad itself published before and no longer ships.
        ops += [CommitOperationDelete(path_in_repo=path) for path in sorted((ours & self.existing_files) - keep)]
        return ops

    def abort(self) -> None:
        """Staged shards stay on the staging branch for the next run; local scratch files go (in a --workdir of
        the user's too)."""
        try:
            self._wait_staged()
        except BaseException:
            pass
        self._cleanup()

    def _cleanup(self) -> None:
        self._pool.shutdown(wait=True)
        self._committer.shutdown(wait=True)
        for path in list(self._scratch):
            self._drop_scratch(path)
        if self._made_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            if self._workdir_lock is not None:
                self._workdir_lock.release()
