"""Offline Hugging Face Hub emulator for hubpad's tests and benchmarks.

The real ``huggingface_hub`` client (2.4.0, HTTP via httpx2) talks to it over 127.0.0.1, so the tests exercise the
exact requests hubpad makes in production instead of a mock of them. By default it is a classic LFS Hub (clients run
with xet disabled); ``HubEmulator(xet=True)`` / :meth:`HubEmulator.enable_xet` make it speak Xet too, with the real
``hf_xet`` uploading to a ``local://`` store (see :class:`XetStorage`).

Two origins are served by the same process:

* the **API origin** ``http://127.0.0.1:P1`` (``emu.endpoint``): ``/api/...``, ``/{repo}/resolve/...`` and the LFS
  batch/verify/completion routes;
* the **CDN origin** ``http://localhost:P2`` (``emu.cdn_endpoint``): LFS file bodies (``/cdn/...``, with ``Range``)
  and LFS upload targets (``/upload/...``, the "S3" of the real Hub).

The CDN must be another *origin* (another host name, not only another port): ``HEAD /resolve`` of an LFS file
answers a 302 that carries the file metadata, and the client only stops on a redirect that leaves the Hub's origin.

Design (one class per concern):

* :class:`BlobStore` - content-addressed blobs on disk (sha256), streamed in and out, never held whole in memory;
* :class:`RepoStore` - repos, branches, tags, a chain of commits per branch (each a full ``path -> blob`` snapshot);
* :class:`LfsUploads` - LFS uploads in flight (basic and multipart), checked against their sha256 oid;
* :class:`XetStorage` - Xet: hf_xet's ``local://`` store handed out by the token routes, indexed from its shards;
* :class:`RepoViews` - the JSON the client parses (repo info, tree and paths-info entries);
* :class:`Faults` - on-demand fault injection (drop, status, ignore_range, slow, stale_parent, corrupt, delay);
* :class:`RateLimiter` - the global link throttle and per-request ``slow`` faults;
* :class:`RequestLog` - every request with byte counts, for assertions on traffic;
* :class:`ApiHandler` / :class:`CdnHandler` - HTTP front-ends of the two origins;
* :class:`HubEmulator` - starts/stops both servers and offers the test-side helper API (``seed``, ``files``...);
* ``HubEmulator.jobs`` - Hugging Face Jobs (``/api/jobs``, ``/api/scheduled-jobs``), in tests/hub_jobs.py.

Only the standard library is used, except PyYAML (a dependency of huggingface_hub itself) to read README front
matter, and hf_xet (another of its dependencies) when Xet is enabled. Self-contained: it reads no reference material
at runtime, only what the tests hand it.
"""

from __future__ import annotations

import base64
import dataclasses
import fnmatch
import hashlib
import json
import os
import re
import shutil
import socket
import struct
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

__all__ = [
    "HubEmulator",
    "HubError",
    "FileEntry",
    "Commit",
    "LogEntry",
    "Fault",
    "Faults",
    "RateLimiter",
    "BlobStore",
    "RepoStore",
    "LfsUploads",
    "RepoViews",
    "XetFile",
    "XetStorage",
    "parse_xet_shard",
    "DEFAULT_GITATTRIBUTES",
]

MiB = 1024 * 1024
_IO_CHUNK = 1 * MiB  # read/write granularity for bodies (keeps memory flat for multi-GB files)
_SENDFILE_CHUNK = 8 * MiB
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

_TYPE_FROM_PLURAL = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}

# What huggingface.co puts in the initial commit of every new repo (same bytes: 1519 bytes, git blob a6344aac...);
# its ``filter=lfs`` rules are the ones preupload honours.
DEFAULT_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in (
        "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.lfs.*",
        "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
        "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*",
        "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*",
    )
)


# --------------------------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------------------------


def _git_blob_sha1(data: bytes) -> str:
    """Git object id of a blob: what the Hub calls ``oid``/``blobId`` of a regular file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file the repo stores in git in place of an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _iso(ts: float) -> str:
    """Hub date format: ISO 8601 with milliseconds and a Z."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ts * 1000) % 1000:03d}Z"


def _header_safe(text: str) -> str:
    """X-Error-Message must be one latin-1 line."""
    return " ".join(str(text).split()).encode("latin-1", "replace").decode("latin-1")[:500]


def _front_matter(text: str) -> tuple[str | None, str]:
    """Split README text into (YAML front matter or None, rest), the way the Hub reads model cards."""
    if not text.startswith("---"):
        return None, text
    m = re.match(r"^---[ \t]*\r?\n(.*?)(?:\r?\n)?^---[ \t]*(?:\r?\n|$)", text, re.S | re.M)
    if not m:
        return None, text
    return m.group(1), text[m.end():]


def _gitattributes_lfs_patterns(text: str) -> list[str]:
    """Patterns of a .gitattributes file that route paths to LFS (``filter=lfs``)."""
    patterns = []
    for line in text.splitlines():
        parts = line.strip().split()
        if len(parts) >= 2 and not parts[0].startswith("#") and "filter=lfs" in parts[1:]:
            patterns.append(parts[0])
    return patterns


def _path_matches(path: str, pattern: str) -> bool:
    """Approximate gitattributes/gitignore matching: basename match without '/', full-path match otherwise."""
    pattern = pattern.lstrip("/")
    if "/" not in pattern:
        return fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern)
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, pattern.replace("**/", ""))


def _bool_param(values: list[str] | None, default: bool = False) -> bool:
    if not values:
        return default
    return values[-1].lower() in ("1", "true", "yes", "on")


def validate_readme(content: str) -> list[str]:
    """Errors the Hub's /api/validate-yaml would report (YAML syntax, non-mapping metadata)."""
    fm, _ = _front_matter(content)
    if fm is None:
        return []
    try:
        import yaml

        data = yaml.safe_load(fm)
    except Exception as err:  # noqa: BLE001
        return [f"Invalid YAML in README.md metadata: {err}".replace("\n", " ")]
    if data is not None and not isinstance(data, dict):
        return ["README.md metadata must be a YAML mapping"]
    return []


# --------------------------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------------------------


class HubError(Exception):
    """An error answer, shaped the way ``hf_raise_for_status`` maps it (X-Error-Code / X-Error-Message)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        body: dict | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = dict(headers or {})
        self.body = body

    @classmethod
    def repo_not_found(cls, repo_id: str) -> HubError:
        return cls(404, f"Repository not found: {repo_id}", code="RepoNotFound")

    @classmethod
    def revision_not_found(cls, rev: str) -> HubError:
        return cls(404, f"Invalid rev id: {rev}", code="RevisionNotFound")

    @classmethod
    def entry_not_found(cls, path: str, commit: str | None = None) -> HubError:
        headers = {"X-Repo-Commit": commit} if commit else {}
        return cls(404, f"Entry not found: {path}", code="EntryNotFound", headers=headers)


# --------------------------------------------------------------------------------------------------------------
# blob storage
# --------------------------------------------------------------------------------------------------------------


class BlobStore:
    """Content-addressed blobs on disk, keyed by sha256. Blobs are immutable once stored."""

    def __init__(self, root: Path):
        self.root = root
        self.tmp = root / "tmp"
        self.root.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self._git_sha1: dict[str, str] = {}
        self._lock = threading.Lock()

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def size(self, sha256: str) -> int:
        return self.path(sha256).stat().st_size

    def temp_path(self) -> Path:
        return self.tmp / uuid.uuid4().hex

    def adopt(self, tmp: Path, sha256: str) -> None:
        """Move a fully written and verified temp file into place (or drop it if the blob already exists)."""
        dst = self.path(sha256)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists():
            tmp.unlink(missing_ok=True)
        else:
            os.replace(tmp, dst)

    def put_bytes(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        if not self.exists(sha):
            tmp = self.temp_path()
            tmp.write_bytes(data)
            self.adopt(tmp, sha)
        with self._lock:
            self._git_sha1.setdefault(sha, _git_blob_sha1(data))
        return sha

    def put_chunks(self, chunks: Iterable[bytes]) -> tuple[str, int]:
        """Stream chunks into a new blob while hashing; returns (sha256, size)."""
        tmp = self.temp_path()
        h = hashlib.sha256()
        size = 0
        try:
            with open(tmp, "wb") as f:
                for chunk in chunks:
                    h.update(chunk)
                    f.write(chunk)
                    size += len(chunk)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        sha = h.hexdigest()
        self.adopt(tmp, sha)
        return sha, size

    def put_file(self, src: Path) -> tuple[str, int]:
        with open(src, "rb") as f:
            return self.put_chunks(iter(lambda: f.read(_IO_CHUNK), b""))

    def read(self, sha256: str) -> bytes:
        return self.path(sha256).read_bytes()

    def git_sha1(self, sha256: str) -> str:
        """Git blob id of the raw content (regular files). Computed once, streamed."""
        with self._lock:
            if sha256 in self._git_sha1:
                return self._git_sha1[sha256]
        h = hashlib.sha1(b"blob %d\0" % self.size(sha256))
        with open(self.path(sha256), "rb") as f:
            for chunk in iter(lambda: f.read(_IO_CHUNK), b""):
                h.update(chunk)
        with self._lock:
            self._git_sha1[sha256] = h.hexdigest()
        return self._git_sha1[sha256]

    def sample(self, sha256: str, n: int = 512) -> bytes:
        with open(self.path(sha256), "rb") as f:
            return f.read(n)


# --------------------------------------------------------------------------------------------------------------
# repositories and commits
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FileEntry:
    """One file in a commit snapshot. ``git_oid`` is the Hub's ``oid``/``blobId`` (sha1 of the pointer for LFS).

    ``xet_hash`` is set for Xet-backed LFS files (uploaded through Xet, or seeded into a Xet-enabled emulator); a
    classic LFS file has none, like a repo not yet migrated to Xet on the Hub.
    """

    sha256: str
    size: int
    lfs: bool
    git_oid: str
    xet_hash: str | None = None

    @property
    def pointer_size(self) -> int:
        return len(_lfs_pointer(self.sha256, self.size))

    @property
    def preupload_oid(self) -> str:
        """The ``oid`` the preupload endpoint reports: sha256 for LFS, git sha1 for regular files."""
        return self.sha256 if self.lfs else self.git_oid


@dataclasses.dataclass
class Commit:
    """A commit: a full snapshot of the tree plus its first parent (history is linear per branch)."""

    id: str
    parent: str | None
    title: str
    message: str
    author: str
    date: float
    files: dict[str, FileEntry]

    @property
    def date_iso(self) -> str:
        return _iso(self.date)


@dataclasses.dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    created: float
    branches: dict[str, str] = dataclasses.field(default_factory=dict)
    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    prs: dict[int, str] = dataclasses.field(default_factory=dict)
    commits: dict[str, Commit] = dataclasses.field(default_factory=dict)
    lfs_oids: set[str] = dataclasses.field(default_factory=set)  # LFS objects this repo may reference
    region: str = "us"  # storage region: server-side copies (lfs-files/duplicate) only work within one region
    gated: str | bool = False  # False, "auto" or "manual": files are served only to users in `granted`
    downloads: int = 0  # what search results are sorted by
    granted: set[str] = dataclasses.field(default_factory=set)  # users whose access request was accepted

    @property
    def namespace(self) -> str:
        return self.repo_id.split("/", 1)[0]

    def resolve(self, rev: str) -> str | None:
        """Branch, tag, ``refs/...`` name, PR ref, full or abbreviated (>= 7 hex) commit sha -> commit sha."""
        if rev.startswith("refs/heads/"):
            return self.branches.get(rev[len("refs/heads/"):])
        if rev.startswith("refs/tags/"):
            return self.tags.get(rev[len("refs/tags/"):])
        m = re.fullmatch(r"refs/pr/(\d+)", rev)
        if m:
            return self.prs.get(int(m.group(1)))
        if rev in self.branches:
            return self.branches[rev]
        if rev in self.tags:
            return self.tags[rev]
        if rev in self.commits:
            return rev
        if re.fullmatch(r"[0-9a-f]{7,39}", rev):
            hits = [sha for sha in self.commits if sha.startswith(rev)]
            if len(hits) == 1:
                return hits[0]
        return None

    def branch_ref(self, rev: str) -> tuple[str, Any] | None:
        """Where a commit to ``rev`` lands: ("branch", name) or ("pr", num); None if not committable."""
        if rev.startswith("refs/heads/"):
            rev = rev[len("refs/heads/"):]
        m = re.fullmatch(r"refs/pr/(\d+)", rev)
        if m and int(m.group(1)) in self.prs:
            return ("pr", int(m.group(1)))
        if rev in self.branches:
            return ("branch", rev)
        return None

    def history(self, sha: str) -> list[Commit]:
        out = []
        cur: str | None = sha
        while cur is not None:
            c = self.commits[cur]
            out.append(c)
            cur = c.parent
        return out


class RepoStore:
    """All repos, keyed by (type, id). One lock guards metadata; file bodies are never read under it."""

    def __init__(self, blobs: BlobStore, *, initial_gitattributes: bool = True):
        self.blobs = blobs
        self.repos: dict[tuple[str, str], Repo] = {}
        self.lock = threading.RLock()
        self.initial_gitattributes = initial_gitattributes
        self._counter = 0
        self._last_ts = 0.0

    # -- lookup ------------------------------------------------------------------------------------------------

    def get(self, repo_type: str, repo_id: str) -> Repo | None:
        with self.lock:
            return self.repos.get((repo_type, repo_id))

    def all(self, repo_type: str) -> list[Repo]:
        with self.lock:
            return [r for (t, _), r in self.repos.items() if t == repo_type]

    def require(self, repo_type: str, repo_id: str) -> Repo:
        repo = self.get(repo_type, repo_id)
        if repo is None:
            raise HubError.repo_not_found(repo_id)
        return repo

    def commit_at(self, repo: Repo, rev: str) -> Commit:
        with self.lock:
            sha = repo.resolve(rev)
            if sha is None:
                raise HubError.revision_not_found(rev)
            return repo.commits[sha]

    # -- mutation ----------------------------------------------------------------------------------------------

    def _now(self) -> float:
        """Strictly increasing timestamps so commit dates order like the chain."""
        ts = max(time.time(), self._last_ts + 0.001)
        self._last_ts = ts
        return ts

    def _new_commit(self, repo: Repo, parent: str | None, files: dict[str, FileEntry], title: str, message: str,
                    author: str) -> Commit:
        self._counter += 1
        ts = self._now()
        tree = hashlib.sha1("\n".join(f"{p}\0{e.git_oid}" for p, e in sorted(files.items())).encode()).hexdigest()
        fields = (f"{repo.repo_type}/{repo.repo_id}", parent, tree, author, ts, title, message, self._counter)
        sha = hashlib.sha1("\n".join(map(str, fields)).encode()).hexdigest()
        commit = Commit(id=sha, parent=parent, title=title, message=message, author=author, date=ts, files=files)
        repo.commits[sha] = commit
        return commit

    def create_repo(self, repo_type: str, repo_id: str, *, private: bool = False) -> tuple[Repo, bool]:
        """Create a repo with its "initial commit" (.gitattributes, as the Hub does). Returns (repo, created)."""
        with self.lock:
            existing = self.repos.get((repo_type, repo_id))
            if existing is not None:
                return existing, False
            repo = Repo(repo_type=repo_type, repo_id=repo_id, private=private, created=self._now())
            files: dict[str, FileEntry] = {}
            if self.initial_gitattributes:
                files[".gitattributes"] = self.regular_entry(DEFAULT_GITATTRIBUTES.encode())
            initial = self._new_commit(repo, None, files, "initial commit", "", "system")
            repo.branches["main"] = initial.id
            self.repos[(repo_type, repo_id)] = repo
            return repo, True

    def delete_repo(self, repo_type: str, repo_id: str) -> None:
        with self.lock:
            if self.repos.pop((repo_type, repo_id), None) is None:
                raise HubError.repo_not_found(repo_id)

    def regular_entry(self, data: bytes) -> FileEntry:
        sha = self.blobs.put_bytes(data)
        return FileEntry(sha256=sha, size=len(data), lfs=False, git_oid=self.blobs.git_sha1(sha))

    def entry_for_blob(self, sha256: str, size: int, lfs: bool, xet_hash: str | None = None) -> FileEntry:
        if lfs:
            return FileEntry(sha256=sha256, size=size, lfs=True, git_oid=_git_blob_sha1(_lfs_pointer(sha256, size)),
                             xet_hash=xet_hash)
        return FileEntry(sha256=sha256, size=size, lfs=False, git_oid=self.blobs.git_sha1(sha256))

    def apply_commit(
        self,
        repo: Repo,
        rev: str,
        operations: list[tuple],
        *,
        title: str,
        message: str = "",
        author: str,
        parent_commit: str | None = None,
        create_pr: bool = False,
    ) -> tuple[Commit, int | None]:
        """Apply ("put", path, FileEntry) / ("delete", path) / ("delete_folder", path) ops atomically.

        Returns (new commit, pr number or None). ``parent_commit`` (a sha or a >= 5-char prefix) must be the current
        head of the target ref, else 412 - the optimistic-concurrency guard hubpad's publish relies on.
        """
        with self.lock:
            if create_pr:  # a new PR ref, based on ``rev``, registered only if the commit succeeds
                head = repo.resolve(rev or "main")
                if head is None:
                    raise HubError.revision_not_found(rev)
                target: tuple[str, Any] = ("pr", max([0, *repo.prs]) + 1)
            else:
                ref = repo.branch_ref(rev)
                if ref is None:
                    if repo.resolve(rev) is not None:
                        raise HubError(400, f"Invalid rev id: {rev} is not a branch", code="RevisionNotFound")
                    raise HubError.revision_not_found(rev)
                target = ref
                head = repo.branches[target[1]] if target[0] == "branch" else repo.prs[target[1]]
            if parent_commit is not None and not (len(parent_commit) >= 5 and head.startswith(parent_commit)):
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            files = dict(repo.commits[head].files)
            for op in operations:
                kind, path = op[0], op[1]
                if kind == "put":
                    entry: FileEntry = op[2]
                    if entry.lfs and entry.sha256 not in repo.lfs_oids:
                        raise HubError(
                            400,
                            f"LFS object {entry.sha256} for '{path}' was never uploaded to {repo.repo_id}",
                            code="LfsObjectNotFound",
                        )
                    files[path] = entry
                elif kind == "delete":
                    if path not in files:
                        raise HubError(404, f"A file with this name doesn't exist: {path}", code="EntryNotFound")
                    del files[path]
                elif kind == "delete_folder":
                    prefix = path.rstrip("/") + "/"
                    doomed = [p for p in files if p.startswith(prefix)]
                    if not doomed:
                        raise HubError(404, f"A folder with this name doesn't exist: {path}", code="EntryNotFound")
                    for p in doomed:
                        del files[p]
                else:  # pragma: no cover - programming error
                    raise ValueError(kind)
            commit = self._new_commit(repo, head, files, title, message, author)
            if target[0] == "branch":
                repo.branches[target[1]] = commit.id
            else:
                repo.prs[target[1]] = commit.id
            return commit, (target[1] if target[0] == "pr" else None)

    def create_branch(self, repo: Repo, branch: str, starting_point: str | None) -> str:
        with self.lock:
            if branch in repo.branches:
                raise HubError(409, f"Reference already exists: refs/heads/{branch}")
            if branch.startswith("refs/") or not branch or branch.endswith("/"):
                raise HubError(400, f"Invalid reference for a branch: {branch}")
            sha = repo.resolve(starting_point or "main")
            if sha is None:
                raise HubError.revision_not_found(starting_point or "main")
            repo.branches[branch] = sha
            return sha

    def delete_branch(self, repo: Repo, branch: str) -> None:
        with self.lock:
            if branch == "main":
                raise HubError(403, "Cannot delete the default branch 'main'")
            if branch not in repo.branches:
                raise HubError(404, f"Invalid rev id: {branch}", code="RevisionNotFound")
            del repo.branches[branch]

    # -- upload-mode policy ------------------------------------------------------------------------------------

    def lfs_patterns(self, commit: Commit | None) -> list[str]:
        if commit is None:
            return _gitattributes_lfs_patterns(DEFAULT_GITATTRIBUTES)
        entry = commit.files.get(".gitattributes")
        if entry is None or entry.lfs:
            return []
        return _gitattributes_lfs_patterns(self.blobs.read(entry.sha256).decode("utf-8", "replace"))


# --------------------------------------------------------------------------------------------------------------
# throttling, faults, request log
# --------------------------------------------------------------------------------------------------------------


class RateLimiter:
    """A byte-rate limiter; shared by all connections when used as the global link throttle.

    Each chunk reserves its transmission time on a virtual link clock. A sender that falls slightly behind (sleep
    overshoot, GIL) may catch up within ``slack`` seconds, so the long-run average matches the configured rate.
    """

    slack = 0.05

    def __init__(self, bytes_per_s: float | None):
        self.rate = bytes_per_s or None
        self._next = 0.0
        self._lock = threading.Lock()

    def chunk_size(self) -> int:
        """Chunks of ~10 ms of link time (1 B .. 256 KiB), so throttling is smooth."""
        if not self.rate:
            return _IO_CHUNK
        return int(max(1, min(256 * 1024, self.rate / 100)))

    def wait(self, nbytes: int) -> None:
        """Block until ``nbytes`` may pass (the link is busy until their transmission time has elapsed)."""
        if not self.rate or nbytes <= 0:
            return
        with self._lock:
            now = time.monotonic()
            start = max(self._next, now - self.slack)
            self._next = start + nbytes / self.rate
            until = self._next
        delay = until - now
        if delay > 0:
            time.sleep(delay)


@dataclasses.dataclass
class Fault:
    """One injected fault: fires on up to ``times`` matching requests (``times=None``: forever), after letting the
    first ``params["skip"]`` of them through (``skip``: 0 unless given)."""

    kind: str
    path: str = ".*"
    method: str | None = None
    origin: str | None = None  # "api", "cdn" or None for both
    times: int | None = 1
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    fired: int = 0
    skipped: int = 0

    def __post_init__(self):
        self._path_re = re.compile(self.path)

    @property
    def remaining(self) -> int | None:
        return None if self.times is None else max(0, self.times - self.fired)

    def matches(self, method: str, path: str, origin: str) -> bool:
        if self.times is not None and self.fired >= self.times:
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        if self.origin is not None and self.origin != origin:
            return False
        return self._path_re.search(path) is not None


class Faults:
    """Thread-safe registry of injected faults.

    A fault matches on the HTTP method, the origin ("api"/"cdn") and a regex searched in the request path
    (percent-decoded, no query string). LFS file bodies are served from ``/cdn/{models|datasets}/{repo}/{path}``
    on the CDN origin, regular files from ``/{repo}/resolve/{rev}/{path}``, so a regex on the file name matches both.

    Body faults (``drop``, ``corrupt``, ``ignore_range``, ``slow``) only fire - and only count - on responses that
    carry a file body (GET of a regular file via resolve, GET on the CDN); ``slow`` also throttles upload bodies
    (PUTs to ``/upload/...``). ``status`` and ``delay`` fire on any matching request; ``stale_parent`` on commit
    POSTs.
    """

    BODY_KINDS = ("drop", "corrupt", "ignore_range", "slow")

    def __init__(self):
        self._rules: list[Fault] = []
        self._lock = threading.Lock()

    # -- registration ------------------------------------------------------------------------------------------

    def add(self, kind: str, path: str = ".*", *, method: str | None = None, origin: str | None = None,
            times: int | None = 1, **params: Any) -> Fault:
        if kind not in (*self.BODY_KINDS, "status", "stale_parent", "delay"):
            raise ValueError(f"unknown fault kind {kind!r}")
        fault = Fault(kind=kind, path=path, method=method, origin=origin, times=times, params=params)
        with self._lock:
            self._rules.append(fault)
        return fault

    def drop(self, path: str, *, after: int = 0, times: int | None = 1, method: str | None = "GET",
             origin: str | None = None) -> Fault:
        """Close the connection after ``after`` body bytes of a file download."""
        return self.add("drop", path, method=method, origin=origin, times=times, after=int(after))

    def status(self, code: int, path: str = ".*", *, times: int | None = 1, method: str | None = None,
               origin: str | None = None, retry_after: float | None = None, headers: dict[str, str] | None = None,
               message: str | None = None, skip: int = 0) -> Fault:
        """Answer ``code`` instead of serving the request (after letting ``skip`` matching requests through). 429 gets
        ``Retry-After: 1`` unless told otherwise."""
        if retry_after is None and code == 429:
            retry_after = 1
        return self.add("status", path, method=method, origin=origin, times=times, code=int(code),
                        retry_after=retry_after, headers=dict(headers or {}),
                        message=message or f"Injected fault: HTTP {code}", skip=int(skip))

    def delay(self, path: str, seconds: float, *, times: int | None = 1, method: str | None = None,
              origin: str | None = None) -> Fault:
        """Hold matching requests for ``seconds`` before serving them (a slow Hub, or time to kill a client)."""
        return self.add("delay", path, method=method, origin=origin, times=times, seconds=float(seconds))

    def ignore_range(self, path: str, *, times: int | None = 1, method: str | None = "GET",
                     origin: str | None = None) -> Fault:
        """Answer 200 with the full body even when the request carried ``Range``."""
        return self.add("ignore_range", path, method=method, origin=origin, times=times)

    def slow(self, path: str, bytes_per_s: float, *, times: int | None = 1, method: str | None = None,
             origin: str | None = None) -> Fault:
        """Throttle the file body (download) or upload body of matching requests."""
        return self.add("slow", path, method=method, origin=origin, times=times, bytes_per_s=float(bytes_per_s))

    def corrupt(self, path: str, *, at: int | None = None, times: int | None = 1, method: str | None = "GET",
                origin: str | None = None) -> Fault:
        """Flip (xor 0xFF) one byte of the served body: index ``at`` within the body sent, default its middle."""
        return self.add("corrupt", path, method=method, origin=origin, times=times, at=at)

    def stale_parent(self, repo_id: str | None = None, *, times: int | None = 1, message: str = "concurrent commit",
                     files: dict[str, bytes] | None = None) -> Fault:
        """Before the next matching commit POST, land a concurrent commit on its branch.

        A commit guarded by ``parent_commit`` then fails with 412 exactly as on the Hub; an unguarded one succeeds on
        top of the concurrent commit. ``files`` (default: none, an empty commit) lets the concurrent commit change
        content.
        """
        path = rf"/api/[a-z]+/{re.escape(repo_id)}/commit/" if repo_id else r"/commit/"
        return self.add("stale_parent", path, method="POST", origin="api", times=times, message=message,
                        files=dict(files or {}))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> list[Fault]:
        with self._lock:
            return list(self._rules)

    # -- consumption (called by the handlers) ------------------------------------------------------------------

    def take(self, kinds: Iterable[str], method: str, path: str, origin: str) -> dict[str, Fault]:
        """Fire (and count) the first matching rule of each kind."""
        out: dict[str, Fault] = {}
        with self._lock:
            for kind in kinds:
                for rule in self._rules:
                    if rule.kind == kind and rule.matches(method, path, origin):
                        if rule.skipped < rule.params.get("skip", 0):  # let the first `skip` requests through
                            rule.skipped += 1
                            continue
                        rule.fired += 1
                        out[kind] = rule
                        break
        return out


@dataclasses.dataclass
class LogEntry:
    """One request as the emulator saw it."""

    method: str
    path: str  # percent-decoded, no query
    query: str
    origin: str  # "api" or "cdn"
    status: int | None = None
    range: str | None = None  # the request's Range header
    bytes_sent: int = 0  # response body bytes actually written
    bytes_received: int = 0  # request body bytes read
    timestamp: float = 0.0  # time.time() at request start
    duration: float = 0.0
    kind: str = ""  # route name: "resolve", "cdn", "lfs-upload", "lfs-part", "commit", "tree", ...
    repo_type: str | None = None
    repo_id: str | None = None
    file: str | None = None  # path in repo for file bodies
    faults: tuple[str, ...] = ()
    authorization: bool = False  # whether an Authorization header was sent
    headers: dict[str, str] = dataclasses.field(default_factory=dict)  # request headers (names lower-cased)


class RequestLog:
    """Entries in request start order. Reads wait briefly for in-flight requests to finish, because the client can
    return as soon as the last body byte arrives, before the server thread has recorded the request's outcome."""

    settle_timeout = 2.0

    def __init__(self):
        self._entries: list[LogEntry] = []
        self._inflight = 0
        self._cond = threading.Condition()

    def begin(self, entry: LogEntry) -> None:
        with self._cond:
            self._entries.append(entry)
            self._inflight += 1

    def end(self, entry: LogEntry) -> None:
        with self._cond:
            self._inflight -= 1
            self._cond.notify_all()

    def snapshot(self) -> list[LogEntry]:
        with self._cond:
            self._cond.wait_for(lambda: self._inflight == 0, timeout=self.settle_timeout)
            return list(self._entries)

    def clear(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._inflight == 0, timeout=self.settle_timeout)
            self._entries.clear()


# --------------------------------------------------------------------------------------------------------------
# users
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class User:
    name: str
    token: str
    role: str = "write"  # "write" or "read": the token's role
    orgs: tuple[str, ...] = ()
    fullname: str = ""
    email: str = ""

    def can_write(self, namespace: str) -> bool:
        return self.role == "write" and (namespace == self.name or namespace in self.orgs)

    def can_read_private(self, namespace: str) -> bool:
        return namespace == self.name or namespace in self.orgs


# --------------------------------------------------------------------------------------------------------------
# HTTP plumbing shared by both origins
# --------------------------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, addr, handler, emu: HubEmulator, origin: str):
        self.emu = emu
        self.origin = origin
        self.conns: set[socket.socket] = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, handler)

    def close_all_connections(self) -> None:
        with self.conns_lock:
            conns = list(self.conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _BaseHandler(BaseHTTPRequestHandler):
    """Request parsing, body streaming (both directions), throttling, faults and logging."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: avoid 40 ms delayed-ACK stalls
    server: _Server
    server_version = "hubpad-hub-emulator/1"

    # -- connection bookkeeping --------------------------------------------------------------------------------

    def setup(self):
        super().setup()
        with self.server.conns_lock:
            self.server.conns.add(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            with self.server.conns_lock:
                self.server.conns.discard(self.connection)

    def log_message(self, format, *args):  # noqa: A002 - silence stderr access log
        pass

    @property
    def emu(self) -> HubEmulator:
        return self.server.emu

    def do_GET(self):
        self._handle("GET")

    def do_HEAD(self):
        self._handle("HEAD")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_DELETE(self):
        self._handle("DELETE")

    def do_PATCH(self):
        self._handle("PATCH")

    # -- request lifecycle -------------------------------------------------------------------------------------

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        self.method = method
        self.raw_path = url.path
        self.query = parse_qs(url.query, keep_blank_values=True)
        self.entry = LogEntry(
            method=method,
            path=unquote(url.path),
            query=url.query,
            origin=self.server.origin,
            range=self.headers.get("Range"),
            timestamp=time.time(),
            authorization=self.headers.get("Authorization") is not None,
            headers={k.lower(): v for k, v in self.headers.items()},
        )
        self._headers_sent = False
        self._body_remaining = self._initial_body_length()
        self._body_limiter: RateLimiter | None = None
        t0 = time.monotonic()
        self.emu.log.begin(self.entry)
        try:
            fired = self.emu.faults.take(("delay", "status"), method, self.entry.path, self.server.origin)
            if "delay" in fired:
                self.entry.faults += ("delay",)
                time.sleep(fired["delay"].params["seconds"])
            if "status" in fired:
                self._answer_status_fault(fired["status"])
            else:
                self.route()
        except HubError as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, socket.timeout):
            self.close_connection = True
        except Exception:  # noqa: BLE001 - surface server bugs as 500 + emu.server_errors
            tb = traceback.format_exc()
            self.emu.server_errors.append(tb)
            self._send_error(HubError(500, "Internal emulator error: " + tb.strip().splitlines()[-1]))
        finally:
            if not self.close_connection:
                try:
                    self._drain()
                except Exception:  # noqa: BLE001 - a broken body: give up on this connection
                    self.close_connection = True
            self.entry.duration = time.monotonic() - t0
            self.emu.log.end(self.entry)

    def route(self) -> None:  # pragma: no cover - overridden
        raise HubError(404, "Not found")

    def _answer_status_fault(self, fault: Fault) -> None:
        self.entry.faults += ("status",)
        headers = dict(fault.params.get("headers") or {})
        if fault.params.get("retry_after") is not None:
            headers.setdefault("Retry-After", str(fault.params["retry_after"]))
        self._drain()
        self._send_error(HubError(fault.params["code"], fault.params["message"], headers=headers))

    # -- request bodies ----------------------------------------------------------------------------------------

    def _initial_body_length(self) -> int | str:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return "chunked"
        try:
            return max(0, int(self.headers.get("Content-Length") or 0))
        except ValueError:
            self.close_connection = True  # unknown framing: never reuse this connection
            return 0

    def _raw_chunks(self, size: int) -> Iterator[bytes]:
        """Yield the request body in pieces of at most ``size`` bytes (Content-Length or chunked)."""
        if self._body_remaining == "chunked":
            while True:
                line = self.rfile.readline(65537)
                n = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    self._body_remaining = 0
                    return
                while n > 0:
                    data = self.rfile.read(min(n, size))
                    if not data:
                        raise ConnectionResetError("client closed mid-body")
                    n -= len(data)
                    yield data
                self.rfile.readline(3)
        else:
            while self._body_remaining > 0:  # type: ignore[operator]
                data = self.rfile.read(min(self._body_remaining, size))  # type: ignore[type-var]
                if not data:
                    raise ConnectionResetError("client closed mid-body")
                self._body_remaining -= len(data)  # type: ignore[operator]
                yield data

    def body_chunks(self) -> Iterator[bytes]:
        """Request body, streamed, through the global upload throttle and any ``slow`` fault."""
        limiters = [lim for lim in (self.emu.up_limiter, self._body_limiter) if lim is not None and lim.rate]
        size = min([lim.chunk_size() for lim in limiters] or [_IO_CHUNK])
        for chunk in self._raw_chunks(size):
            for lim in limiters:
                lim.wait(len(chunk))
            self.entry.bytes_received += len(chunk)
            yield chunk

    def read_body(self, limit: int = 2 * 1024 * MiB) -> bytes:
        parts = []
        total = 0
        for chunk in self.body_chunks():
            total += len(chunk)
            if total > limit:
                raise HubError(413, "Request body too large for this endpoint")
            parts.append(chunk)
        return b"".join(parts)

    def read_json(self) -> Any:
        body = self.read_body()
        if not body:
            return {}
        try:
            return json.loads(body)
        except ValueError as err:
            raise HubError(400, f"Invalid JSON body: {err}") from None

    def _drain(self) -> None:
        if self._body_remaining:
            for chunk in self._raw_chunks(_IO_CHUNK):
                self.entry.bytes_received += len(chunk)

    # -- responses ---------------------------------------------------------------------------------------------

    def _start(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self._headers_sent = True
        self.entry.status = status

    def _write(self, data: bytes) -> None:
        """Write a (small) response body through the global download throttle."""
        if self.method == "HEAD" or not data:
            return
        lim = self.emu.down_limiter
        if lim.rate:
            step = lim.chunk_size()
            for i in range(0, len(data), step):
                piece = data[i:i + step]
                lim.wait(len(piece))
                self.wfile.write(piece)
                self.entry.bytes_sent += len(piece)
        else:
            self.wfile.write(data)
            self.entry.bytes_sent += len(data)

    def send_bytes(self, status: int, data: bytes, headers: dict[str, str] | None = None,
                   content_type: str = "application/octet-stream") -> None:
        h = {"Content-Type": content_type, "Content-Length": str(len(data)), **(headers or {})}
        self._start(status, h)
        self._write(data)

    def send_json(self, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.send_bytes(status, json.dumps(obj).encode(), headers, content_type="application/json; charset=utf-8")

    def _send_error(self, err: HubError) -> None:
        if self._headers_sent:  # too late for a clean error: make the client see a broken response
            self.close_connection = True
            return
        headers = dict(err.headers)
        if err.code:
            headers["X-Error-Code"] = err.code
        headers["X-Error-Message"] = _header_safe(err.message)
        body = err.body if err.body is not None else {"error": err.message}
        try:
            self.send_json(body, status=err.status, headers=headers)
        except OSError:
            self.close_connection = True

    # -- file bodies (Range, faults, throttle) -----------------------------------------------------------------

    @staticmethod
    def _parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
        """Single byte range -> (start, end_exclusive); None if absent/unsupported; "416" if unsatisfiable."""
        if not header:
            return None
        m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
        if not m or (m.group(1) == "" and m.group(2) == ""):
            return None  # malformed or multi-range: serve the whole body, as many servers do
        if m.group(1) == "":
            n = int(m.group(2))
            if n == 0:
                return "416"
            return max(0, size - n), size
        start = int(m.group(1))
        end = int(m.group(2)) + 1 if m.group(2) else size
        if start >= size or end <= start:
            return "416"
        return start, min(end, size)

    def send_file(self, blob_path: Path, size: int, headers: dict[str, str]) -> None:
        """Serve a stored blob with Range support and the body faults of this request."""
        fired: dict[str, Fault] = {}
        if self.method == "GET":
            fired = self.emu.faults.take(Faults.BODY_KINDS, self.method, self.entry.path, self.server.origin)
        self.entry.faults += tuple(fired)
        headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream", **headers}
        rng = None if "ignore_range" in fired else self._parse_range(self.headers.get("Range"), size)
        if rng == "416":
            self.send_bytes(416, b"", {**headers, "Content-Range": f"bytes */{size}"})
            return
        if rng is None:
            start, end, status = 0, size, 200
        else:
            start, end = rng  # type: ignore[misc]
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        length = end - start
        headers["Content-Length"] = str(length)
        self._start(status, headers)
        if self.method == "HEAD" or length == 0:
            return
        limiters = [self.emu.down_limiter]
        if "slow" in fired:
            limiters.append(RateLimiter(fired["slow"].params["bytes_per_s"]))
        limiters = [lim for lim in limiters if lim.rate]
        drop_after = fired["drop"].params["after"] if "drop" in fired else None
        corrupt_at = None
        if "corrupt" in fired:
            at = fired["corrupt"].params.get("at")
            corrupt_at = min(max(0, at if at is not None else length // 2), length - 1)
        with open(blob_path, "rb") as f:
            if not limiters and drop_after is None and corrupt_at is None:
                self._sendfile(f, start, length)
                return
            f.seek(start)
            sent = 0
            step = min([lim.chunk_size() for lim in limiters] or [_IO_CHUNK])
            budget = length if drop_after is None else min(length, drop_after)
            while sent < budget:
                chunk = f.read(min(step, budget - sent))
                if not chunk:
                    break
                if corrupt_at is not None and sent <= corrupt_at < sent + len(chunk):
                    i = corrupt_at - sent
                    chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1:]
                for lim in limiters:
                    lim.wait(len(chunk))
                self.wfile.write(chunk)
                sent += len(chunk)
                self.entry.bytes_sent += len(chunk)
            if drop_after is not None:
                self._cut_connection()

    def _sendfile(self, f, offset: int, count: int) -> None:
        """Zero-copy body for the unthrottled, fault-free case (multi-GB benchmarks)."""
        out = self.connection.fileno()
        in_fd = f.fileno()
        while count > 0:
            try:
                n = os.sendfile(out, in_fd, offset, min(count, _SENDFILE_CHUNK))
            except (AttributeError, OSError) as err:
                if isinstance(err, (BrokenPipeError, ConnectionResetError)):
                    raise
                # no sendfile on this platform/socket: fall back to plain writes
                f.seek(offset)
                while count > 0:
                    chunk = f.read(min(count, _IO_CHUNK))
                    if not chunk:
                        return
                    self.wfile.write(chunk)
                    self.entry.bytes_sent += len(chunk)
                    count -= len(chunk)
                return
            if n == 0:
                return
            offset += n
            count -= n
            self.entry.bytes_sent += n

    def _cut_connection(self) -> None:
        """Simulate a network cut: the client sees a short body (RemoteProtocolError)."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


# --------------------------------------------------------------------------------------------------------------
# the API origin
# --------------------------------------------------------------------------------------------------------------


class ApiHandler(_BaseHandler):
    """The Hub itself: /api/..., /{repo}/resolve/..., /{repo}.git/info/lfs/..."""

    # -- auth --------------------------------------------------------------------------------------------------

    def user(self) -> User | None:
        """The caller, None if anonymous; an unknown token is a 401 like on the Hub."""
        auth = self.headers.get("Authorization")
        if not auth:
            return None
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HubError(401, "Invalid credentials in Authorization header")
        user = self.emu.user_for_token(token.strip())
        if user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        return user

    def readable_repo(self, repo_type: str, repo_id: str) -> Repo:
        user = self.user()
        repo = self.emu.store.get(repo_type, repo_id)
        if repo is None or (repo.private and (user is None or not user.can_read_private(repo.namespace))):
            raise HubError.repo_not_found(repo_id)
        return repo

    def writable_repo(self, repo_type: str, repo_id: str) -> tuple[Repo, User]:
        user = self.user()
        repo = self.emu.store.get(repo_type, repo_id)
        if repo is None or (repo.private and (user is None or not user.can_read_private(repo.namespace))):
            raise HubError.repo_not_found(repo_id)
        if user is None:
            raise HubError(401, "You must be authenticated to write to this repository")
        if not user.can_write(repo.namespace):
            raise HubError(403, f"You don't have the rights to write to {repo_type}s/{repo_id} "
                                f"(token role: {user.role})")
        return repo, user

    def check_gate(self, repo: Repo) -> None:
        """A gated repo's files go only to users granted access (its own namespace's members too), as on the Hub:
        401 to the anonymous, 403 to anyone else, both X-Error-Code GatedRepo (its info stays public)."""
        if not repo.gated:
            return
        user = self.user()
        kind = repo.repo_type
        if user is None:
            raise HubError(401, f"Access to {kind} {repo.repo_id} is restricted. You must have access to it and be "
                                f"authenticated to access it. Please log in.", code="GatedRepo")
        if user.name not in repo.granted and not user.can_read_private(repo.namespace):
            raise HubError(403, f"Access to {kind} {repo.repo_id} is restricted and you are not in the authorized "
                                f"list. Visit {self._repo_url(kind, repo.repo_id)} to ask for access.", code="GatedRepo")

    def ep(self) -> str:
        return self.emu.endpoint

    # -- routing -----------------------------------------------------------------------------------------------

    def route(self) -> None:
        segs = [unquote(s) for s in self.raw_path.split("/")[1:]]
        m = self.method
        if segs[:1] == ["api"]:
            self._route_api(m, segs[1:])
            return
        repo_type = "model"
        if segs and segs[0] in ("datasets", "spaces") and len(segs) > 3:
            repo_type = _TYPE_FROM_PLURAL[segs[0]]
            segs = segs[1:]
        if len(segs) >= 4 and segs[2] == "resolve" and m in ("GET", "HEAD"):
            rev, rest = self._split_rev(segs[3:])
            self.entry.kind = "resolve"
            self.resolve(repo_type, f"{segs[0]}/{segs[1]}", rev, "/".join(rest))
            return
        if len(segs) >= 5 and segs[1].endswith(".git") and segs[2:4] == ["info", "lfs"] and m == "POST":
            repo_id = f"{segs[0]}/{segs[1][:-4]}"
            tail = segs[4:]
            if tail == ["objects", "batch"]:
                self.entry.kind = "lfs-batch"
                return self.lfs_batch(repo_type, repo_id)
            if tail == ["objects", "verify"]:
                self.entry.kind = "lfs-verify"
                return self.lfs_verify(repo_type, repo_id)
            if len(tail) == 2 and tail[0] == "complete":
                self.entry.kind = "lfs-complete"
                return self.lfs_complete(repo_type, repo_id, tail[1])
        raise HubError(404, f"Not found: {self.method} {self.entry.path}")

    @staticmethod
    def _split_rev(segs: list[str]) -> tuple[str, list[str]]:
        """Revision segment(s) then the rest; ``refs/pr/N`` may arrive unquoted (HfFileSystem)."""
        if len(segs) >= 3 and segs[0] == "refs" and segs[1] in ("pr", "heads", "tags", "convert"):
            return "/".join(segs[:3]), segs[3:]
        return segs[0], segs[1:]

    def _route_api(self, m: str, segs: list[str]) -> None:
        if segs[:1] in (["jobs"], ["scheduled-jobs"]):  # Hugging Face Jobs: tests/hub_jobs.py
            return self.emu.jobs.handle(self, m, segs)
        if segs == ["whoami-v2"] and m == "GET":
            self.entry.kind = "whoami"
            return self.whoami()
        if segs == ["repos", "create"] and m == "POST":
            self.entry.kind = "create-repo"
            return self.create_repo()
        if segs == ["repos", "delete"] and m == "DELETE":
            self.entry.kind = "delete-repo"
            return self.delete_repo()
        if segs == ["models"] and m == "GET":
            self.entry.kind = "search"
            return self.search_models()
        if segs == ["validate-yaml"] and m == "POST":
            self.entry.kind = "validate-yaml"
            return self.validate_yaml()
        if len(segs) >= 3 and segs[0] in _TYPE_FROM_PLURAL:
            repo_type = _TYPE_FROM_PLURAL[segs[0]]
            repo_id = f"{segs[1]}/{segs[2]}"
            self.entry.repo_type, self.entry.repo_id = repo_type, repo_id
            rest = segs[3:]
            action = rest[0] if rest else ""
            if not rest and m == "GET":
                self.entry.kind = "info"
                return self.repo_info(repo_type, repo_id, None)
            if action == "revision" and len(rest) >= 2 and m == "GET":
                self.entry.kind = "info"
                rev, _ = self._split_rev(rest[1:])
                return self.repo_info(repo_type, repo_id, rev)
            if action == "tree" and len(rest) >= 2 and m == "GET":
                self.entry.kind = "tree"
                rev, path = self._split_rev(rest[1:])
                return self.tree(repo_type, repo_id, rev, "/".join(path))
            if action == "paths-info" and len(rest) >= 2 and m == "POST":
                self.entry.kind = "paths-info"
                rev, _ = self._split_rev(rest[1:])
                return self.paths_info(repo_type, repo_id, rev)
            if action == "commits" and len(rest) >= 2 and m == "GET":
                self.entry.kind = "commits"
                rev, _ = self._split_rev(rest[1:])
                return self.list_commits(repo_type, repo_id, rev)
            if action == "refs" and m == "GET":
                self.entry.kind = "refs"
                return self.refs(repo_type, repo_id)
            if action == "preupload" and len(rest) >= 2 and m == "POST":
                self.entry.kind = "preupload"
                rev, _ = self._split_rev(rest[1:])
                return self.preupload(repo_type, repo_id, rev)
            if action == "commit" and len(rest) >= 2 and m == "POST":
                self.entry.kind = "commit"
                rev, _ = self._split_rev(rest[1:])
                return self.commit(repo_type, repo_id, rev)
            if action == "branch" and len(rest) >= 2 and m in ("POST", "DELETE"):
                self.entry.kind = "branch"
                return self.branch(repo_type, repo_id, "/".join(rest[1:]))
            if action == "tag" and len(rest) >= 2 and m in ("POST", "DELETE"):
                self.entry.kind = "tag"
                return self.tag(repo_type, repo_id, "/".join(rest[1:]))
            if rest[:2] == ["lfs-files", "duplicate"] and m == "POST":
                self.entry.kind = "lfs-duplicate"
                return self.lfs_duplicate(repo_type, repo_id)
            if action in ("xet-write-token", "xet-read-token"):
                if not self.emu.xet_enabled:
                    raise HubError(
                        400,
                        "This hubpad Hub emulator does not speak xet: set HF_HUB_DISABLE_XET=1 "
                        "(or huggingface_hub.constants.HF_HUB_DISABLE_XET = True) before uploading, "
                        "or start it with xet=True",
                    )
                if m == "GET" and len(rest) >= 2:
                    self.entry.kind = action
                    rev, _ = self._split_rev(rest[1:])
                    return self.xet_token(repo_type, repo_id, rev, write=action == "xet-write-token")
        raise HubError(404, f"Not found: {self.method} {self.entry.path}")

    # -- account and repo lifecycle ----------------------------------------------------------------------------

    def whoami(self) -> None:
        user = self.user()
        if user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        self.send_json({
            "type": "user",
            "id": hashlib.sha1(user.name.encode()).hexdigest()[:24],
            "name": user.name,
            "fullname": user.fullname or user.name,
            "email": user.email or f"{user.name}@example.com",
            "emailVerified": True,
            "isPro": False,
            "canPay": False,
            "periodEnd": None,
            "avatarUrl": "",
            "orgs": [{"type": "org", "id": hashlib.sha1(o.encode()).hexdigest()[:24], "name": o, "fullname": o,
                      "avatarUrl": "", "roleInOrg": "write" if user.role == "write" else "read"} for o in user.orgs],
            "auth": {"type": "access_token",
                     "accessToken": {"displayName": f"{user.name}-token", "role": user.role}},
        })

    def _repo_url(self, repo_type: str, repo_id: str) -> str:
        return f"{self.ep()}/{_URL_PREFIX[repo_type]}{repo_id}"

    def create_repo(self) -> None:
        body = self.read_json()
        user = self.user()
        repo_type = body.get("type") or "model"
        if repo_type not in _URL_PREFIX:
            raise HubError(400, f"Invalid repo type: {repo_type}")
        if user is None:
            raise HubError(401, "You must be authenticated to create a repository")
        name = body.get("name") or ""
        namespace = body.get("organization") or user.name
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}", name) or ".." in name or name.endswith(".git"):
            raise HubError(400, f"Invalid repo name: {name!r}")
        repo_id = f"{namespace}/{name}"
        self.entry.repo_type, self.entry.repo_id = repo_type, repo_id
        url = self._repo_url(repo_type, repo_id)
        if not user.can_write(namespace):
            raise HubError(403, f"You don't have the rights to create a {repo_type} under the namespace {namespace!r}")
        private = body.get("private")
        if body.get("visibility") is not None:
            private = body["visibility"] in ("private", "protected")
        repo, created = self.emu.store.create_repo(repo_type, repo_id, private=bool(private))
        if not created:
            raise HubError(409, f"You already created this {repo_type} repo: {repo_id}",
                           body={"error": f"You already created this {repo_type} repo", "url": url})
        self.send_json({"url": url, "name": repo_id, "id": hashlib.sha1(repo_id.encode()).hexdigest()[:24]})

    def delete_repo(self) -> None:
        body = self.read_json()
        user = self.user()
        repo_type = body.get("type") or "model"
        if user is None:
            raise HubError(401, "You must be authenticated to delete a repository")
        repo_id = f"{body.get('organization') or user.name}/{body.get('name')}"
        self.entry.repo_type, self.entry.repo_id = repo_type, repo_id
        self.writable_repo(repo_type, repo_id)
        self.emu.store.delete_repo(repo_type, repo_id)
        self.send_json({})

    def validate_yaml(self) -> None:
        body = self.read_json()
        errors = validate_readme(body.get("content") or "")
        if errors:
            self.send_json({"errors": [{"message": e} for e in errors], "warnings": []}, status=400)
        else:
            self.send_json({"errors": [], "warnings": []})

    # -- reading -----------------------------------------------------------------------------------------------

    def repo_info(self, repo_type: str, repo_id: str, rev: str | None) -> None:
        repo = self.readable_repo(repo_type, repo_id)
        commit = self.emu.store.commit_at(repo, rev or "main")
        blobs = _bool_param(self.query.get("blobs"))
        expand = self.query.get("expand") or self.query.get("expand[]")
        info = self.emu.views.repo_info_dict(repo, commit, blobs=blobs)
        if _bool_param(self.query.get("securityStatus")):
            info["securityRepoStatus"] = {"scansDone": True, "filesWithIssues": []}
        if expand:
            info = {k: v for k, v in info.items() if k in ("_id", "id") or k in expand}
        self.send_json(info)

    def search_models(self) -> None:
        """``GET /api/models?search=&author=&sort=&limit=``: the model repos the caller can see whose id contains
        ``search`` (case-insensitive), most downloaded first (the Hub's own ranking is its business)."""
        user = self.user()
        text = (self.query.get("search") or [""])[-1].casefold()
        author = (self.query.get("author") or [None])[-1]
        try:
            limit = int((self.query.get("limit") or ["1000"])[-1])
        except ValueError:
            raise HubError(400, "Invalid limit") from None
        found = []
        for repo in self.emu.store.all("model"):
            if repo.private and (user is None or not user.can_read_private(repo.namespace)):
                continue
            if text in repo.repo_id.casefold() and (author is None or repo.namespace == author):
                found.append(repo)
        found.sort(key=lambda r: (-r.downloads, r.repo_id.casefold()))
        page, headers = self._page(found[:limit], 1000)
        self.send_json([{"_id": hashlib.sha1(f"model/{r.repo_id}".encode()).hexdigest()[:24], "id": r.repo_id,
                         "modelId": r.repo_id, "private": r.private, "gated": r.gated, "downloads": r.downloads,
                         "likes": 0, "tags": [], "createdAt": _iso(r.created)} for r in page], headers=headers)

    def _page(self, items: list, page_size: int) -> tuple[list, dict[str, str]]:
        """Cursor pagination with a ``Link: <next>; rel="next"`` header, as the Hub does."""
        try:
            cursor = int((self.query.get("cursor") or ["0"])[-1])
        except ValueError:
            raise HubError(400, "Invalid cursor") from None
        page = items[cursor:cursor + page_size]
        headers = {}
        if cursor + page_size < len(items):
            q = {k: v[-1] for k, v in self.query.items() if k != "cursor"}
            q["cursor"] = str(cursor + page_size)
            headers["Link"] = f'<{self.ep()}{self.raw_path}?{urlencode(q)}>; rel="next"'
        return page, headers

    def tree(self, repo_type: str, repo_id: str, rev: str, path: str) -> None:
        repo = self.readable_repo(repo_type, repo_id)
        commit = self.emu.store.commit_at(repo, rev)
        path = path.strip("/")
        recursive = _bool_param(self.query.get("recursive"))
        expand = _bool_param(self.query.get("expand"))
        entries = self.emu.views.tree_entries(repo, commit, path, recursive=recursive)
        if entries is None:
            raise HubError.entry_not_found(path, commit.id)
        page_size = self.emu.tree_page_size_expand if expand else self.emu.tree_page_size
        page, headers = self._page(entries, page_size)
        self.send_json([self.emu.views.entry_json(repo, commit, e, expand=expand, xet_hash=self.emu.xet_stand_in)
                        for e in page], headers=headers)

    def paths_info(self, repo_type: str, repo_id: str, rev: str) -> None:
        body = self.read_body()
        repo = self.readable_repo(repo_type, repo_id)
        commit = self.emu.store.commit_at(repo, rev)
        ctype = self.headers.get("Content-Type", "")
        if "json" in ctype:
            data = json.loads(body or b"{}")
            paths, expand = data.get("paths") or [], bool(data.get("expand"))
        else:
            form = parse_qs(body.decode(), keep_blank_values=True)
            paths, expand = form.get("paths", []), _bool_param(form.get("expand"))
        out = []
        for p in paths:
            e = self.emu.views.path_entry(commit, p.strip("/"))
            if e is not None:
                out.append(self.emu.views.entry_json(repo, commit, e, expand=expand, xet_hash=self.emu.xet_stand_in))
        self.send_json(out)

    def list_commits(self, repo_type: str, repo_id: str, rev: str) -> None:
        repo = self.readable_repo(repo_type, repo_id)
        commit = self.emu.store.commit_at(repo, rev)
        with self.emu.store.lock:
            history = repo.history(commit.id)
        items = [{
            "id": c.id,
            "title": c.title,
            "message": c.message,
            "date": c.date_iso,
            "authors": [{"user": c.author, "avatar": ""}],
            "parents": [c.parent] if c.parent else [],
        } for c in history]
        page, headers = self._page(items, self.emu.commits_page_size)
        self.send_json(page, headers=headers)

    def refs(self, repo_type: str, repo_id: str) -> None:
        repo = self.readable_repo(repo_type, repo_id)
        with self.emu.store.lock:
            data = {
                "branches": [{"name": b, "ref": f"refs/heads/{b}", "targetCommit": s}
                             for b, s in repo.branches.items()],
                "converts": [],
                "tags": [{"name": t, "ref": f"refs/tags/{t}", "targetCommit": s} for t, s in repo.tags.items()],
            }
            if _bool_param(self.query.get("include_prs")):
                data["pullRequests"] = [{"name": f"refs/pr/{n}", "ref": f"refs/pr/{n}", "targetCommit": s}
                                        for n, s in repo.prs.items()]
        self.send_json(data)

    def resolve(self, repo_type: str, repo_id: str, rev: str, path: str) -> None:
        self.entry.repo_type, self.entry.repo_id, self.entry.file = repo_type, repo_id, path
        repo = self.readable_repo(repo_type, repo_id)
        self.check_gate(repo)
        commit = self.emu.store.commit_at(repo, rev)
        entry = commit.files.get(path)
        if entry is None:
            raise HubError.entry_not_found(path, commit.id)
        headers = {"X-Repo-Commit": commit.id, "ETag": f'"{entry.git_oid}"', "Accept-Ranges": "bytes"}
        if entry.lfs:
            location = self.emu.cdn_url(repo_type, repo_id, path, entry.sha256, commit.id)
            body = f"Found. Redirecting to {location}".encode()
            headers.update({
                "Location": location,
                "X-Linked-Etag": f'"{entry.sha256}"',
                "X-Linked-Size": str(entry.size),
                "Content-Type": "text/plain; charset=utf-8",
                "Content-Length": str(len(body)),
            })
            if entry.xet_hash and self.emu.xet_enabled:  # a Xet-backed file: what the client needs to use hf_xet
                refresh = f"{self.ep()}/api/{repo_type}s/{repo_id}/xet-read-token/{commit.id}"
                headers["X-Xet-Hash"] = entry.xet_hash
                headers["Link"] = f'<{refresh}>; rel="xet-auth"'
            self._start(302, headers)
            self._write(body)
            return
        self.send_file(self.emu.blobs.path(entry.sha256), entry.size, headers)

    # -- uploads -----------------------------------------------------------------------------------------------

    def preupload(self, repo_type: str, repo_id: str, rev: str) -> None:
        body = self.read_json()
        repo, _ = self.writable_repo(repo_type, repo_id)
        create_pr = _bool_param(self.query.get("create_pr"))
        with self.emu.store.lock:
            sha = repo.resolve(rev)
            if sha is None and not create_pr:
                raise HubError.revision_not_found(rev)
            commit = repo.commits[sha] if sha else repo.commits[repo.branches["main"]]
        gitignore = body.get("gitIgnore")
        ignore_patterns = [ln.strip() for ln in (gitignore or "").splitlines()
                           if ln.strip() and not ln.strip().startswith("#")]
        lfs_patterns = self.emu.store.lfs_patterns(commit)
        files = []
        for f in body.get("files") or []:
            path = f["path"]
            sample = base64.b64decode(f.get("sample") or "")
            size = int(f.get("size") or 0)
            lfs = self.emu.wants_lfs(path, size, sample, lfs_patterns)
            existing = commit.files.get(path)
            files.append({
                "path": path,
                "uploadMode": "lfs" if lfs else "regular",
                "shouldIgnore": any(_path_matches(path, p) for p in ignore_patterns),
                "oid": existing.preupload_oid if existing else None,
            })
        self.send_json({"files": files, "commitOid": commit.id})

    def lfs_batch(self, repo_type: str, repo_id: str) -> None:
        self.entry.repo_type, self.entry.repo_id = repo_type, repo_id
        body = self.read_json()
        repo, _ = self.writable_repo(repo_type, repo_id)
        if body.get("operation") != "upload":
            raise HubError(400, "The emulator's LFS batch endpoint only supports operation=upload")
        objects = []
        transfer = "basic"
        for obj in body.get("objects") or []:
            oid, size = obj.get("oid"), obj.get("size")
            if not isinstance(oid, str) or not _HEX64.match(oid) or not isinstance(size, int) or size < 0:
                objects.append({"oid": str(oid), "size": size if isinstance(size, int) else 0,
                                "error": {"code": 422, "message": "Invalid oid or size"}})
                continue
            with self.emu.store.lock:
                present = oid in repo.lfs_oids and self.emu.blobs.exists(oid)
            if present:
                objects.append({"oid": oid, "size": size})  # no actions: already stored
                continue
            action = self._upload_actions(repo, oid, size, multipart_ok="multipart" in (body.get("transfers") or []))
            if "chunk_size" in action["upload"].get("header", {}):
                transfer = "multipart"
            objects.append({"oid": oid, "size": size, "authenticated": True, "actions": action})
        self.send_json({"transfer": transfer, "objects": objects, "hash_algo": "sha256"},
                       headers={"Content-Type": "application/vnd.git-lfs+json"})

    def _upload_actions(self, repo: Repo, oid: str, size: int, *, multipart_ok: bool) -> dict:
        """LFS batch ``actions`` for one object: a presigned-style PUT URL, or numbered part URLs + completion."""
        emu = self.emu
        chunk = emu.multipart_chunk_size if multipart_ok and size > emu.multipart_threshold else None
        upload_id, num_parts = emu.uploads.register(repo, oid, size, chunk)
        base = f"{emu.cdn_endpoint}/upload/{repo.repo_type}s/{repo.repo_id}/{oid}/{upload_id}"
        git = f"{emu.endpoint}/{_URL_PREFIX[repo.repo_type]}{repo.repo_id}.git/info/lfs"
        verify = {"href": f"{git}/objects/verify"}
        if chunk is None:
            return {"upload": {"href": base}, "verify": verify}
        header = {"chunk_size": str(chunk)}
        for n in range(1, num_parts + 1):
            header[f"{n:05d}"] = f"{base}/part/{n}"
        return {"upload": {"href": f"{git}/complete/{upload_id}", "header": header}, "verify": verify}

    def lfs_complete(self, repo_type: str, repo_id: str, upload_id: str) -> None:
        self.entry.repo_type, self.entry.repo_id = repo_type, repo_id
        body = self.read_json()
        self.emu.uploads.complete(upload_id, body)
        self.send_json({"success": True})

    def lfs_verify(self, repo_type: str, repo_id: str) -> None:
        self.entry.repo_type, self.entry.repo_id = repo_type, repo_id
        body = self.read_json()
        repo, _ = self.writable_repo(repo_type, repo_id)
        oid, size = body.get("oid"), body.get("size")
        with self.emu.store.lock:
            ok = oid in repo.lfs_oids
        if not ok or not self.emu.blobs.exists(oid) or self.emu.blobs.size(oid) != size:
            raise HubError(404, f"LFS object {oid} (size {size}) not found after upload")
        self.send_json({"success": True})

    def lfs_duplicate(self, repo_type: str, repo_id: str) -> None:
        """Cross-repo CommitOperationCopy: make the source's LFS objects referencable from the target repo.

        Failures are per file (``{"failed": [{"sha256", "error"}]}``, HTTP 200), as on the Hub: an object the source
        does not hold, a Xet hash that is not the object's (when the emulator speaks Xet), or a copy between two
        storage regions (:meth:`HubEmulator.set_storage_region`).
        """
        body = self.read_json()
        src = self.readable_repo(repo_type, repo_id)
        target = body.get("target") or {}
        dst, _ = self.writable_repo(target.get("type") or "model", target.get("name") or "")
        failed = []
        for f in body.get("files") or []:
            sha, xet_hash = f.get("sha256"), f.get("xetHash")
            with self.emu.store.lock:
                in_source = sha in src.lfs_oids
            known = self.emu.xet.lookup(sha) if self.emu.xet_enabled and isinstance(sha, str) else None
            if not in_source or not (self.emu.blobs.exists(sha) or known):
                failed.append({"sha256": sha, "error": "LFS object not found in source repository"})
            elif self.emu.xet_enabled and (known is None or known.xet_hash != xet_hash):
                failed.append({"sha256": sha, "error": f"xet hash {xet_hash} does not match the stored file"})
            elif src.region != dst.region:
                failed.append({"sha256": sha, "error": f"cannot duplicate across storage regions "
                                                      f"({src.region} -> {dst.region})"})
            else:
                with self.emu.store.lock:
                    dst.lfs_oids.add(sha)
        self.send_json({"failed": failed})

    def xet_token(self, repo_type: str, repo_id: str, rev: str, *, write: bool) -> None:
        """``xet-write-token`` / ``xet-read-token``: a short-lived Xet token and the CAS address, as the Hub gives
        them (response headers, which huggingface_hub reads; the same as JSON, which hf_xet reads)."""
        if write:
            repo, _ = self.writable_repo(repo_type, repo_id)
        else:
            repo = self.readable_repo(repo_type, repo_id)
        if rev != "None":  # "None": a token for a PR that does not exist yet (create_pr)
            with self.emu.store.lock:
                if repo.resolve(rev) is None:
                    raise HubError.revision_not_found(rev)
        token, exp = self.emu.xet.issue_token(repo, write)
        cas = self.emu.xet.address
        self.send_json({"accessToken": token, "exp": exp, "casUrl": cas},
                       headers={"X-Xet-Cas-Url": cas, "X-Xet-Access-Token": token,
                                "X-Xet-Token-Expiration": str(exp)})

    def commit(self, repo_type: str, repo_id: str, rev: str) -> None:
        lines = self.read_body().splitlines()
        repo, user = self.writable_repo(repo_type, repo_id)
        create_pr = _bool_param(self.query.get("create_pr"))
        header: dict | None = None
        ops: list[tuple] = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                item = json.loads(raw)
                key, value = item["key"], item["value"]
            except (ValueError, KeyError, TypeError):
                raise HubError(400, f"Malformed ndjson commit line: {raw[:200]!r}") from None
            if key == "header":
                header = value
            elif key == "file":
                if value.get("encoding", "base64") != "base64":
                    raise HubError(400, f"Unsupported encoding {value.get('encoding')!r}")
                data = base64.b64decode(value.get("content") or "")
                ops.append(("put", self._clean_path(value["path"]), self.emu.store.regular_entry(data)))
            elif key == "lfsFile":
                oid = value.get("oid") or ""
                if value.get("algo", "sha256") != "sha256" or not _HEX64.match(oid):
                    raise HubError(400, f"Invalid lfsFile entry: {value}")
                # Uploaded through Xet? Then the uploaded shards name it (Xet hash, size) by this sha256.
                xf = self.emu.xet.lookup(oid) if self.emu.xet_enabled else None
                if xf is not None:
                    self.emu.xet_uploaded(repo, oid)
                if self.emu.blobs.exists(oid):
                    size = self.emu.blobs.size(oid)
                elif xf is not None:
                    size = xf.size
                else:
                    raise HubError(400, f"LFS object {oid} for '{value.get('path')}' was never uploaded",
                                   code="LfsObjectNotFound")
                if value.get("size") is not None and int(value["size"]) != size:
                    raise HubError(400, f"LFS object {oid}: size {value['size']} != stored size {size}")
                entry = self.emu.store.entry_for_blob(oid, size, True, xet_hash=xf.xet_hash if xf else None)
                ops.append(("put", self._clean_path(value["path"]), entry))
            elif key == "deletedFile":
                ops.append(("delete", self._clean_path(value["path"])))
            elif key == "deletedFolder":
                ops.append(("delete_folder", self._clean_path(value["path"])))
            else:
                raise HubError(400, f"Unknown commit operation key {key!r}")
        if header is None or not (header.get("summary") or "").strip():
            raise HubError(400, "Commit header with a non-empty summary is required")
        fired = self.emu.faults.take(("stale_parent",), self.method, self.entry.path, self.server.origin)
        if "stale_parent" in fired:
            self.entry.faults += ("stale_parent",)
            self.emu.concurrent_commit(repo, "main" if create_pr else rev, fired["stale_parent"])
        commit, pr_num = self.emu.store.apply_commit(
            repo, rev, ops,
            title=header["summary"], message=header.get("description") or "", author=user.name,
            parent_commit=header.get("parentCommit"), create_pr=create_pr,
        )
        url = self._repo_url(repo_type, repo_id)
        self.send_json({
            "success": True,
            "commitOid": commit.id,
            "commitUrl": f"{url}/commit/{commit.id}",
            "pullRequestUrl": f"{url}/discussions/{pr_num}" if pr_num is not None else None,
        })

    @staticmethod
    def _clean_path(path: str) -> str:
        path = (path or "").strip("/")
        if not path or any(part in ("", ".", "..") for part in path.split("/")):
            raise HubError(400, f"Invalid path in repo: {path!r}")
        return path

    # -- refs --------------------------------------------------------------------------------------------------

    def branch(self, repo_type: str, repo_id: str, branch: str) -> None:
        body = self.read_json() if self.method == "POST" else {}
        repo, _ = self.writable_repo(repo_type, repo_id)
        if self.method == "POST":
            self.emu.store.create_branch(repo, branch, body.get("startingPoint"))
        else:
            self.emu.store.delete_branch(repo, branch)
        self.send_json({})

    def tag(self, repo_type: str, repo_id: str, rev_or_tag: str) -> None:
        body = self.read_json() if self.method == "POST" else {}
        repo, _ = self.writable_repo(repo_type, repo_id)
        with self.emu.store.lock:
            if self.method == "POST":
                tag = body.get("tag") or ""
                sha = repo.resolve(rev_or_tag)
                if sha is None:
                    raise HubError.revision_not_found(rev_or_tag)
                if tag in repo.tags:
                    raise HubError(409, f"Tag {tag} already exists")
                repo.tags[tag] = sha
            else:
                if repo.tags.pop(rev_or_tag, None) is None:
                    raise HubError.revision_not_found(rev_or_tag)
        self.send_json({})


# --------------------------------------------------------------------------------------------------------------
# the CDN origin
# --------------------------------------------------------------------------------------------------------------


class CdnHandler(_BaseHandler):
    """The "CDN"/"S3" side: LFS bodies with Range, and LFS upload targets (no auth, like presigned URLs)."""

    def route(self) -> None:
        segs = [unquote(s) for s in self.raw_path.split("/")[1:]]
        if segs[:1] == ["cdn"] and len(segs) >= 5 and self.method in ("GET", "HEAD"):
            self.entry.kind = "cdn"
            return self.download(_TYPE_FROM_PLURAL.get(segs[1], "model"), f"{segs[2]}/{segs[3]}", "/".join(segs[4:]))
        if segs[:1] == ["upload"] and self.method == "PUT" and len(segs) in (6, 8):
            repo_type = _TYPE_FROM_PLURAL.get(segs[1], "model")
            self.entry.repo_type, self.entry.repo_id = repo_type, f"{segs[2]}/{segs[3]}"
            upload_id = segs[5]
            part = int(segs[7]) if len(segs) == 8 and segs[6] == "part" else None
            self.entry.kind = "lfs-part" if part is not None else "lfs-upload"
            return self.upload(upload_id, part)
        raise HubError(404, f"Not found: {self.method} {self.entry.path}")

    def download(self, repo_type: str, repo_id: str, path: str) -> None:
        self.entry.repo_type, self.entry.repo_id, self.entry.file = repo_type, repo_id, path
        oid = (self.query.get("oid") or [""])[-1]
        blob = self.emu.blob_path(oid) if _HEX64.match(oid) else None
        if blob is None:
            raise HubError(404, "NoSuchKey: the specified key does not exist")
        size = blob.stat().st_size
        name = path.rsplit("/", 1)[-1]
        headers = {
            "ETag": f'"{oid}"',
            "Content-Disposition": f"inline; filename*=UTF-8''{quote(name)}; filename=\"{name}\";",
            "Cache-Control": "public, max-age=604800, immutable",
        }
        self.send_file(blob, size, headers)

    def upload(self, upload_id: str, part: int | None) -> None:
        fired = self.emu.faults.take(("slow",), self.method, self.entry.path, self.server.origin)
        if "slow" in fired:
            self.entry.faults += ("slow",)
            self._body_limiter = RateLimiter(fired["slow"].params["bytes_per_s"])
        etag = self.emu.uploads.receive(upload_id, part, self.body_chunks())
        self.send_bytes(200, b"", {"ETag": f'"{etag}"'})


# --------------------------------------------------------------------------------------------------------------
# the emulator
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _PendingUpload:
    """An LFS upload between the batch call and its last PUT (basic) or its completion POST (multipart).

    Multipart parts are written in place into one assembly file and hashed on the fly while they arrive in
    order (the client sends them sequentially), so completing a multi-GB upload needs no second copy.
    """

    repo_key: tuple[str, str]
    oid: str
    size: int
    chunk_size: int | None  # None: single PUT
    assembly: Path | None = None
    parts: dict[int, str] = dataclasses.field(default_factory=dict)  # part number -> etag
    hasher: Any = dataclasses.field(default_factory=hashlib.sha256)
    hashed_upto: int = 0  # bytes of the assembly already fed to ``hasher``, in order
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def num_parts(self) -> int:
        if self.chunk_size is None:
            return 1
        return max(1, -(-self.size // self.chunk_size))


class LfsUploads:
    """LFS objects in flight: registered by the batch call, received by PUTs on the CDN origin, checked against
    their sha256 oid, then stored and made referencable by the repo that asked for them."""

    def __init__(self, blobs: BlobStore, store: RepoStore):
        self.blobs = blobs
        self.store = store
        self._uploads: dict[str, _PendingUpload] = {}
        self._uploads_lock = threading.Lock()

    def register(self, repo: Repo, oid: str, size: int, chunk_size: int | None) -> tuple[str, int]:
        """Expect an upload of ``oid`` (multipart when ``chunk_size``). Returns (upload id, number of parts)."""
        pending = _PendingUpload(repo_key=(repo.repo_type, repo.repo_id), oid=oid, size=size, chunk_size=chunk_size)
        upload_id = uuid.uuid4().hex
        with self._uploads_lock:
            self._uploads[upload_id] = pending
        return upload_id, pending.num_parts

    def _pending(self, upload_id: str) -> _PendingUpload:
        with self._uploads_lock:
            pending = self._uploads.get(upload_id)
        if pending is None:
            raise HubError(404, f"Unknown or finished upload {upload_id}")
        return pending

    def _accept_blob(self, pending: _PendingUpload, tmp: Path, sha: str, size: int) -> None:
        """Check the content against its oid (the LFS contract), then store it and let the repo reference it."""
        if size != pending.size or sha != pending.oid:
            tmp.unlink(missing_ok=True)
            raise HubError(400, f"Uploaded content does not match its oid: expected sha256 {pending.oid} "
                                f"size {pending.size}, got sha256 {sha} size {size}")
        self.blobs.adopt(tmp, sha)
        with self.store.lock:
            repo = self.store.repos.get(pending.repo_key)
            if repo is not None:
                repo.lfs_oids.add(sha)

    def receive(self, upload_id: str, part: int | None, chunks: Iterator[bytes]) -> str:
        """Stream an upload PUT (whole object, or part ``part``) to disk. Returns the ETag for the response."""
        pending = self._pending(upload_id)
        if part is None:
            if pending.chunk_size is not None:
                raise HubError(400, "This upload is multipart: PUT the numbered parts")
            tmp = self.blobs.temp_path()
            h, size = hashlib.sha256(), 0
            try:
                with open(tmp, "wb") as f:
                    for chunk in chunks:
                        f.write(chunk)
                        h.update(chunk)
                        size += len(chunk)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            self._accept_blob(pending, tmp, h.hexdigest(), size)
            with self._uploads_lock:
                self._uploads.pop(upload_id, None)
            return h.hexdigest()[:32]

        if pending.chunk_size is None or not 1 <= part <= pending.num_parts:
            raise HubError(400, f"Invalid part number {part}")
        offset = (part - 1) * pending.chunk_size
        expected = min(pending.chunk_size, pending.size - offset)
        with pending.lock:
            if pending.assembly is None:
                pending.assembly = self.blobs.temp_path()
                pending.assembly.touch()
            in_order = offset == pending.hashed_upto
            if offset < pending.hashed_upto:  # a part rewritten after hashing: re-hash everything at completion
                pending.hasher, pending.hashed_upto = hashlib.sha256(), 0
            h = pending.hasher.copy() if in_order else None
        size = 0
        with open(pending.assembly, "r+b") as f:
            f.seek(offset)
            for chunk in chunks:
                if size + len(chunk) > expected:
                    raise HubError(400, f"Part {part} is larger than {expected} bytes")
                f.write(chunk)
                if h is not None:
                    h.update(chunk)
                size += len(chunk)
        if size != expected:
            raise HubError(400, f"Part {part} has {size} bytes, expected {expected}")
        etag = uuid.uuid4().hex
        with pending.lock:
            if h is not None and pending.hashed_upto == offset:
                pending.hasher, pending.hashed_upto = h, offset + size
            pending.parts[part] = etag
        return etag

    def complete(self, upload_id: str, body: dict) -> None:
        """All parts present with the ETags the client got? Then verify sha256 == oid and store the blob."""
        pending = self._pending(upload_id)
        if body.get("oid") != pending.oid:
            raise HubError(400, f"Completion oid {body.get('oid')} does not match upload oid {pending.oid}")
        listed = {int(p["partNumber"]): str(p["etag"]).strip('"') for p in body.get("parts") or []}
        with pending.lock:
            for n in range(1, pending.num_parts + 1):
                if n not in pending.parts:
                    raise HubError(400, f"Part {n} was never uploaded")
                if listed.get(n) != pending.parts[n]:
                    raise HubError(400, f"ETag mismatch for part {n}")
            h, done, assembly = pending.hasher.copy(), pending.hashed_upto, pending.assembly
        with self._uploads_lock:
            self._uploads.pop(upload_id, None)
        assert assembly is not None
        with open(assembly, "r+b") as f:
            f.truncate(pending.size)
            f.seek(done)
            for chunk in iter(lambda: f.read(_IO_CHUNK), b""):
                h.update(chunk)
        self._accept_blob(pending, assembly, h.hexdigest(), pending.size)


# --------------------------------------------------------------------------------------------------------------
# Xet storage
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class XetFile:
    """One file as Xet storage knows it: its Xet (merkle) hash, size and the sha256 the client gave or computed."""

    xet_hash: str
    sha256: str
    size: int


def _xet_hex(raw: bytes) -> str:
    """xet-core's hex form of a 32-byte hash: four little-endian u64 words, each printed as 16 hex digits."""
    return "".join(f"{w:016x}" for w in struct.unpack("<4Q", raw))


_SHARD_HEADER_TAG_LEN = 32
_SHARD_ENTRY = 48  # every record of a shard's file-info section is 48 bytes
_FILE_FLAG_VERIFICATION = 1 << 31  # one verification record per segment follows the segments
_FILE_FLAG_METADATA_EXT = 1 << 30  # one metadata record (sha256 + padding) follows


def parse_xet_shard(data: bytes) -> list[XetFile]:
    """The files of one xet-core metadata shard (``*.mdb``, version 2) that carry a sha256.

    Layout of the file-info section (xet-core ``metadata_shard``): a 48-byte header (32-byte tag, version u64,
    footer size u64), then per file a 48-byte header (file hash, flags u32, segment count u32, padding), its
    segments (xorb hash, flags u32, unpacked bytes u32, chunk range u32 × 2), the verification records when
    flagged, the metadata extension (the sha256) when flagged; a header whose hash is all 0xFF ends the section.
    """
    if len(data) < 2 * _SHARD_ENTRY or struct.unpack_from("<Q", data, _SHARD_HEADER_TAG_LEN)[0] != 2:
        raise ValueError("not a version-2 xet shard")
    out, pos = [], _SHARD_ENTRY
    while pos + _SHARD_ENTRY <= len(data):
        file_hash = data[pos:pos + 32]
        flags, n = struct.unpack_from("<II", data, pos + 32)
        pos += _SHARD_ENTRY
        if file_hash == b"\xff" * 32:
            return out
        size = sum(struct.unpack_from("<I", data, pos + i * _SHARD_ENTRY + 36)[0] for i in range(n))
        pos += n * _SHARD_ENTRY
        if flags & _FILE_FLAG_VERIFICATION:
            pos += n * _SHARD_ENTRY
        if flags & _FILE_FLAG_METADATA_EXT:
            out.append(XetFile(_xet_hex(file_hash), _xet_hex(data[pos:pos + 32]), size))
            pos += _SHARD_ENTRY
    raise ValueError("xet shard ends inside its file-info section")


class XetStorage:
    """The emulator's Xet storage: a real hf_xet ``local://`` store, and what the Hub knows about it.

    Clients upload with the real hf_xet: the ``xet-write-token`` route hands them ``local://<root>`` as the CAS
    address, and hf_xet chunks, deduplicates and writes xorbs and shards there itself. A commit then names an
    uploaded file only by its sha256 (``lfsFile``); the Hub learns which Xet file that is from the uploaded shards,
    whose file records carry the Xet hash, the segments and (metadata extension) the sha256 - exactly what
    :func:`parse_xet_shard` reads. File bodies are rebuilt from the store with hf_xet's own download API, lazily,
    the first time a body is needed.

    hf_xet's local store admits one process at a time (its dedup index is a locked redb file, held while a session
    lives). So the emulator opens it only for the duration of one call, retries while another process holds it,
    and tests never run two client processes that upload through Xet at the same time.
    """

    LOCK_WAIT_S = 30.0

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._shards_read: set[str] = set()
        self._by_sha256: dict[str, XetFile] = {}
        self.tokens: dict[str, tuple[str, str, bool]] = {}  # issued xet token -> (repo type, repo id, write)

    @property
    def address(self) -> str:
        """The CAS address the token routes answer (``X-Xet-Cas-Url``)."""
        return f"local://{self.root}"

    def issue_token(self, repo: Repo, write: bool) -> tuple[str, int]:
        """A short-lived Xet token for one repo (never the Hub token) and its expiry (unix seconds)."""
        token = f"xet_{'write' if write else 'read'}_{uuid.uuid4().hex}"
        with self._lock:
            self.tokens[token] = (repo.repo_type, repo.repo_id, write)
        return token, int(time.time()) + 3600

    # -- the index the Hub keeps ---------------------------------------------------------------------------------

    def _shard_files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*.mdb") if p.parent.name == "shards" and p.is_file())

    def refresh(self) -> None:
        """Read the shards uploaded since the last call."""
        with self._lock:
            for path in self._shard_files():
                if path.name in self._shards_read:
                    continue
                try:
                    files = parse_xet_shard(path.read_bytes())
                except (OSError, ValueError, struct.error):
                    continue  # a shard still being written: read it next time
                self._shards_read.add(path.name)
                for f in files:
                    self._by_sha256.setdefault(f.sha256, f)

    def lookup(self, sha256: str) -> XetFile | None:
        """The Xet file whose content has this sha256, if any client (or :meth:`put`) stored one."""
        with self._lock:
            hit = self._by_sha256.get(sha256)
        if hit is None:
            self.refresh()
            with self._lock:
                hit = self._by_sha256.get(sha256)
        return hit

    def stored_bytes(self) -> dict[str, int]:
        """Bytes of the server side of the store: xorbs (chunk data) and shards (metadata)."""
        xorbs = sum(p.stat().st_size for p in self.root.rglob("*")
                    if p.is_file() and p.parent.name == "xorbs" and not p.name.endswith((".tagset", ".redb")))
        shards = sum(p.stat().st_size for p in self._shard_files())
        return {"xorbs": xorbs, "shards": shards, "total": xorbs + shards}

    # -- hf_xet calls (one short session each) ---------------------------------------------------------------------

    def _with_session(self, fn):
        import gc

        import hf_xet

        deadline = time.monotonic() + self.LOCK_WAIT_S
        with self._io_lock:
            while True:
                session = hf_xet.XetSession()
                try:
                    return fn(hf_xet, session)
                except RuntimeError as err:
                    if "already open" not in str(err) or time.monotonic() > deadline:
                        raise
                finally:
                    del session
                    gc.collect()  # drop the session now: it holds the store's lock while it lives
                time.sleep(0.1)

    def put(self, source: Path | bytes, sha256: str) -> XetFile:
        """Store a file through hf_xet (what seeding a Xet-backed repo does); returns its Xet identity."""

        def upload(hf_xet, session):
            with session.new_upload_commit(endpoint=self.address) as commit:
                if isinstance(source, Path):
                    handle = commit.start_upload_file(str(source), sha256=sha256)
                else:
                    handle = commit.start_upload_bytes(bytes(source), sha256=sha256)
            info = handle.result().xet_info
            return XetFile(info.hash, sha256, int(info.file_size))

        xf = self._with_session(upload)
        with self._lock:
            self._by_sha256.setdefault(sha256, xf)
        return xf

    def fetch(self, xf: XetFile, dest: Path) -> None:
        """Rebuild a file's bytes from the store with hf_xet's download API."""

        def download(hf_xet, session):
            with session.new_file_download_group(endpoint=self.address) as group:
                group.start_download_file(hf_xet.XetFileInfo(xf.xet_hash, xf.size), str(dest))

        self._with_session(download)


class RepoViews:
    """The JSON shapes the client parses (model_info, tree/paths-info entries), computed from a commit snapshot."""

    def __init__(self, blobs: BlobStore, store: RepoStore):
        self.blobs = blobs
        self.store = store

    def path_entry(self, commit: Commit, path: str) -> tuple[str, str, FileEntry | None] | None:
        """("file", path, entry) or ("directory", path, None) for a path of the snapshot, else None."""
        if path in commit.files:
            return ("file", path, commit.files[path])
        prefix = path + "/"
        if path == "" or any(p.startswith(prefix) for p in commit.files):
            return ("directory", path, None)
        return None

    def tree_entries(self, repo: Repo, commit: Commit, path: str, *, recursive: bool) -> list | None:
        """Entries under a folder ("" = root), folders included; None if the folder does not exist."""
        prefix = path + "/" if path else ""
        if path and not any(p.startswith(prefix) for p in commit.files):
            return None
        seen_dirs: set[str] = set()
        out = []
        for p in sorted(commit.files):
            if not p.startswith(prefix):
                continue
            rel = p[len(prefix):].split("/")
            for depth in range(1, len(rel)):
                d = prefix + "/".join(rel[:depth])
                if d not in seen_dirs and (recursive or depth == 1):
                    seen_dirs.add(d)
                    out.append(("directory", d, None))
                if not recursive:
                    break
            if recursive or len(rel) == 1:
                out.append(("file", p, commit.files[p]))
        return out

    def _tree_oid(self, commit: Commit, path: str) -> str:
        prefix = path + "/"
        listing = "\n".join(f"{p}\0{e.git_oid}" for p, e in sorted(commit.files.items()) if p.startswith(prefix))
        return hashlib.sha1(listing.encode()).hexdigest()

    def _last_commit(self, repo: Repo, commit: Commit, path: str, is_dir: bool) -> Commit:
        """Newest commit (first-parent history) that changed the path."""
        with self.store.lock:
            history = repo.history(commit.id)

        def view(c: Commit):
            if not is_dir:
                return c.files.get(path)
            return tuple(sorted((p, e.git_oid) for p, e in c.files.items() if p.startswith(path + "/")))

        for c, parent in zip(history, history[1:] + [None]):
            if parent is None or view(c) != view(parent):
                return c
        return history[-1]

    def entry_json(self, repo: Repo, commit: Commit, item: tuple, *, expand: bool = False,
                   xet_hash: bool = True) -> dict:
        kind, path, e = item
        if kind == "directory":
            out: dict[str, Any] = {"type": "directory", "oid": self._tree_oid(commit, path), "size": 0, "path": path}
        else:
            out = {"type": "file", "oid": e.git_oid, "size": e.size, "path": path}
            if e.lfs:
                out["lfs"] = {"oid": e.sha256, "size": e.size, "pointerSize": e.pointer_size}
                if e.xet_hash:
                    out["xetHash"] = e.xet_hash
                elif xet_hash:  # stand-in (see HubEmulator's emit_xet_hash)
                    out["xetHash"] = e.sha256
        if expand:
            last = self._last_commit(repo, commit, path, kind == "directory")
            out["lastCommit"] = {"id": last.id, "title": last.title, "date": last.date_iso}
            if kind == "file":
                out["securityFileStatus"] = {"status": "safe", "avScan": {"virusFound": False, "virusNames": None},
                                             "pickleImportScan": None}
        return out

    def _card_data(self, commit: Commit) -> dict | None:
        entry = commit.files.get("README.md")
        if entry is None or entry.lfs or entry.size > 1 * MiB:
            return None
        fm, _ = _front_matter(self.blobs.read(entry.sha256).decode("utf-8", "replace"))
        if fm is None:
            return None
        try:
            import yaml

            data = yaml.safe_load(fm)
        except Exception:  # noqa: BLE001 - a broken card is simply not parsed, like on the Hub
            return None
        return data if isinstance(data, dict) else None

    def _config(self, commit: Commit) -> dict | None:
        entry = commit.files.get("config.json")
        if entry is None or entry.size > 4 * MiB:
            return None
        try:
            cfg = json.loads(self.blobs.read(entry.sha256))
        except ValueError:
            return None
        if not isinstance(cfg, dict):
            return None
        keys = ("architectures", "model_type", "quantization_config")
        return {k: cfg[k] for k in keys if k in cfg}

    def repo_info_dict(self, repo: Repo, commit: Commit, *, blobs: bool = False) -> dict:
        card = self._card_data(commit)
        tags: list[str] = []
        if card:
            if card.get("library_name"):
                tags.append(str(card["library_name"]))
            card_tags = card.get("tags") or []
            tags += [str(t) for t in (card_tags if isinstance(card_tags, list) else [card_tags])]
        if any(p.endswith(".safetensors") for p in commit.files):
            tags.append("safetensors")
        tags = list(dict.fromkeys(tags))
        siblings = []
        for path in sorted(commit.files):
            e = commit.files[path]
            s: dict[str, Any] = {"rfilename": path}
            if blobs:
                s.update({"blobId": e.git_oid, "size": e.size})
                if e.lfs:
                    s["lfs"] = {"sha256": e.sha256, "size": e.size, "pointerSize": e.pointer_size}
            siblings.append(s)
        info: dict[str, Any] = {
            "_id": hashlib.sha1(f"{repo.repo_type}/{repo.repo_id}".encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "author": repo.namespace,
            "sha": commit.id,
            "lastModified": commit.date_iso,
            "createdAt": _iso(repo.created),
            "private": repo.private,
            "disabled": False,
            "gated": repo.gated,
            "downloads": repo.downloads,
            "likes": 0,
            "tags": tags,
            "siblings": siblings,
            "usedStorage": sum(e.size for e in commit.files.values()),
        }
        if repo.repo_type == "model":
            info["modelId"] = repo.repo_id
            cfg = self._config(commit)
            if cfg is not None:
                info["config"] = cfg
        if card is not None:
            info["cardData"] = card
            for key in ("library_name", "pipeline_tag"):
                if card.get(key):
                    info[key] = card[key]
        return info


class HubEmulator:
    """An offline Hugging Face Hub for the real ``huggingface_hub`` client. See the module docstring.

    >>> with HubEmulator(users={"alice": "hf_alice"}) as emu:
    ...     HfApi(endpoint=emu.endpoint, token="hf_alice").create_repo("alice/m")
    """

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        users: dict[str, str] | None = None,
        host: str = "127.0.0.1",
        cdn_host: str = "localhost",
        lfs_threshold: int = 10 * MiB,
        multipart_threshold: int = 100 * MiB,
        multipart_chunk_size: int = 50 * MiB,
        tree_page_size: int = 1000,
        tree_page_size_expand: int = 50,
        commits_page_size: int = 50,
        initial_gitattributes: bool = True,
        emit_xet_hash: bool = True,
        xet: bool = False,
    ):
        """
        Args:
            root: directory for blobs (a fresh temp dir, removed on stop, when None).
            users: ``{name: token}`` write users; more with :meth:`add_user` (read-only tokens, orgs).
            host / cdn_host: host names of the two origins. They must differ (see module docstring); both
                listen on 127.0.0.1.
            lfs_threshold: preupload answers "lfs" above this size (the Hub uses 10 MiB), for binary samples
                (a NUL byte) and for paths matched by the repo's ``.gitattributes`` ``filter=lfs`` rules.
            multipart_threshold / multipart_chunk_size: LFS uploads larger than the threshold get the multipart
                transfer (``chunk_size`` + numbered part URLs + completion URL). Settable at runtime.
            tree_page_size(_expand) / commits_page_size: pagination (``Link: rel="next"``).
            initial_gitattributes: new repos get the Hub's "initial commit" with a ``.gitattributes``.
            emit_xet_hash: without ``xet``, tree/paths-info entries of LFS files carry a stand-in ``xetHash`` (their
                sha256): the client needs one for cross-repo copies. Harmless as long as the client runs with xet
                disabled. Ignored with ``xet``, where only Xet-backed files carry their real Xet hash.
            xet: speak Xet (see :meth:`enable_xet`); also switchable later with :meth:`enable_xet`.
        """
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="hub-emulator-")) if root is None else Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.blobs = BlobStore(self.root / "blobs")
        self.store = RepoStore(self.blobs, initial_gitattributes=initial_gitattributes)
        self.uploads = LfsUploads(self.blobs, self.store)
        self.views = RepoViews(self.blobs, self.store)
        self.faults = Faults()
        self.log = RequestLog()
        self.server_errors: list[str] = []
        self.up_limiter = RateLimiter(None)
        self.down_limiter = RateLimiter(None)
        self.host = host
        self.cdn_host = cdn_host
        self.lfs_threshold = lfs_threshold
        self.multipart_threshold = multipart_threshold
        self.multipart_chunk_size = multipart_chunk_size
        self.tree_page_size = tree_page_size
        self.tree_page_size_expand = tree_page_size_expand
        self.commits_page_size = commits_page_size
        self.emit_xet_hash = emit_xet_hash
        self.xet_enabled = False
        self._xet: XetStorage | None = None
        self._blob_lock = threading.Lock()
        if xet:
            self.enable_xet()
        self._users: dict[str, User] = {}
        # Conveniences filled by the test fixture (tests/emulator_fixtures.py): default user/token etc.
        self.user: str | None = None
        self.token: str | None = None
        self.read_user: str | None = None
        self.read_token: str | None = None
        self.org: str | None = None
        self._api: _Server | None = None
        self._cdn: _Server | None = None
        self._threads: list[threading.Thread] = []
        self._jobs = None
        for name, token in (users or {}).items():
            self.add_user(name, token)

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> HubEmulator:
        if self._api is not None:
            return self
        self._api = _Server(("127.0.0.1", 0), ApiHandler, self, "api")
        self._cdn = _Server(("127.0.0.1", 0), CdnHandler, self, "cdn")
        for srv in (self._api, self._cdn):
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                                 name=f"hub-emulator-{srv.origin}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        if self._jobs is not None:
            self._jobs.shutdown()
        for srv in (self._api, self._cdn):
            if srv is not None:
                srv.shutdown()
                srv.close_all_connections()
                srv.server_close()
        for t in self._threads:
            t.join(timeout=5)
        self._threads.clear()
        self._api = self._cdn = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> HubEmulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def jobs(self):
        """Hugging Face Jobs (tests/hub_jobs.py ``JobsService``): jobs run as local subprocesses."""
        if self._jobs is None:
            if __package__:
                from .hub_jobs import JobsService
            else:  # pragma: no cover - tests/ itself on sys.path
                from hub_jobs import JobsService
            self._jobs = JobsService(self)
        return self._jobs

    @property
    def port(self) -> int:
        assert self._api is not None, "emulator not started"
        return self._api.server_address[1]

    @property
    def cdn_port(self) -> int:
        assert self._cdn is not None, "emulator not started"
        return self._cdn.server_address[1]

    @property
    def endpoint(self) -> str:
        """``HF_ENDPOINT`` / ``HfApi(endpoint=...)`` value."""
        return f"http://{self.host}:{self.port}"

    @property
    def cdn_endpoint(self) -> str:
        return f"http://{self.cdn_host}:{self.cdn_port}"

    # -- users -------------------------------------------------------------------------------------------------

    def add_user(self, name: str, token: str, *, role: str = "write", orgs: Iterable[str] = (),
                 fullname: str = "", email: str = "") -> User:
        """Register a user. ``role="read"``: the token can read (incl. own private repos) but not write."""
        if role not in ("read", "write"):
            raise ValueError("role must be 'read' or 'write'")
        user = User(name=name, token=token, role=role, orgs=tuple(orgs), fullname=fullname, email=email)
        self._users[token] = user
        return user

    def user_for_token(self, token: str) -> User | None:
        return self._users.get(token)

    # -- link throttle -----------------------------------------------------------------------------------------

    def set_throttle(self, down_bytes_per_s: float | None = None, up_bytes_per_s: float | None = None) -> None:
        """Global link throttle on body bytes (None/0: unlimited). Shared by all connections of both origins."""
        self.down_limiter = RateLimiter(down_bytes_per_s)
        self.up_limiter = RateLimiter(up_bytes_per_s)

    # -- URLs --------------------------------------------------------------------------------------------------

    def cdn_url(self, repo_type: str, repo_id: str, path: str, sha256: str, commit: str) -> str:
        plural = f"{repo_type}s"
        return (f"{self.cdn_endpoint}/cdn/{plural}/{repo_id}/{quote(path)}"
                f"?{urlencode({'oid': sha256, 'commit': commit, 'X-Amz-Expires': '3600'})}")

    def url(self, repo_id: str, path: str, revision: str = "main", *, repo_type: str = "model") -> str:
        """The resolve URL of a file (what ``hf_hub_url(..., endpoint=emu.endpoint)`` builds)."""
        return f"{self.endpoint}/{_URL_PREFIX[repo_type]}{repo_id}/resolve/{quote(revision, safe='')}/{quote(path)}"

    # -- Xet -----------------------------------------------------------------------------------------------------

    def enable_xet(self, root: str | Path | None = None) -> XetStorage:
        """Speak Xet, like today's Hub: the ``xet-write-token`` / ``xet-read-token`` routes answer with a real
        hf_xet ``local://`` store (``root``, default ``<emulator root>/xet-cas``), commits accept files uploaded
        there, resolve redirects of Xet-backed files carry ``X-Xet-Hash`` and ``Link: <...>; rel="xet-auth"``,
        tree/paths-info entries carry their real ``xetHash`` (no stand-ins), and :meth:`seed` stores LFS files in
        Xet too unless told ``xet=False`` (a classic LFS repo). The client must run with xet enabled to use it.
        """
        if self._xet is None or root is not None:
            self._xet = XetStorage(Path(root) if root is not None else self.root / "xet-cas")
        self.xet_enabled = True
        return self._xet

    @property
    def xet(self) -> XetStorage:
        """The Xet store (created on first use; see :meth:`enable_xet`)."""
        if self._xet is None:
            self._xet = XetStorage(self.root / "xet-cas")
        return self._xet

    @property
    def xet_stand_in(self) -> bool:
        """Whether tree/paths-info show the sha256 as ``xetHash`` of LFS files that have no real Xet hash."""
        return self.emit_xet_hash and not self.xet_enabled

    def xet_uploaded(self, repo: Repo, sha256: str) -> None:
        """A commit names a file found in Xet storage: the repo may reference it if it was given a write token
        (the uploads of a Xet write token count for the repo it was issued for)."""
        granted = any(write and (t, r) == (repo.repo_type, repo.repo_id) for t, r, write in self.xet.tokens.values())
        if granted:
            with self.store.lock:
                repo.lfs_oids.add(sha256)

    def blob_path(self, sha256: str) -> Path | None:
        """Where a blob's bytes are, rebuilding a file that so far exists only in Xet storage; None if unknown."""
        if self.blobs.exists(sha256):
            return self.blobs.path(sha256)
        xf = self.xet.lookup(sha256) if self._xet is not None else None
        if xf is None:
            return None
        with self._blob_lock:
            if not self.blobs.exists(sha256):
                tmp = self.blobs.temp_path()
                try:
                    self.xet.fetch(xf, tmp)
                    with open(tmp, "rb") as f:
                        h = hashlib.file_digest(f, "sha256").hexdigest()
                    if h != sha256:
                        raise HubError(500, f"Xet file {xf.xet_hash} rebuilt to sha256 {h}, expected {sha256}")
                    self.blobs.adopt(tmp, sha256)
                finally:
                    tmp.unlink(missing_ok=True)
        return self.blobs.path(sha256)

    def set_storage_region(self, repo_id: str, region: str, *, repo_type: str = "model") -> None:
        """Put a repo in another storage region: server-side copies to or from it then fail per file."""
        repo = self.repo(repo_id, repo_type)
        with self.store.lock:
            repo.region = region

    def xet_hash(self, repo_id: str, path: str, revision: str = "main", *, repo_type: str = "model") -> str | None:
        """The Xet hash of a file (None for regular and classic LFS files)."""
        return self.entries(repo_id, revision, repo_type=repo_type)[path].xet_hash

    def xet_bytes_stored(self) -> int:
        """Bytes Xet storage holds (xorbs + shards): its growth is what clients actually uploaded through Xet."""
        return self.xet.stored_bytes()["total"] if self._xet is not None else 0

    # -- upload policy and LFS uploads -------------------------------------------------------------------------

    def wants_lfs(self, path: str, size: int, sample: bytes, lfs_patterns: list[str]) -> bool:
        """The Hub's rule, approximately: .gitattributes says so, or the file is large, or binary."""
        if size == 0:
            return False
        if any(_path_matches(path, p) for p in lfs_patterns):
            return True
        return size > self.lfs_threshold or b"\x00" in sample

    # -- test-side helper API (no HTTP) ------------------------------------------------------------------------

    def create_repo(self, repo_id: str, *, repo_type: str = "model", private: bool = False) -> str:
        """Create a repo directly (idempotent). Returns the head of main."""
        repo, _ = self.store.create_repo(repo_type, repo_id, private=private)
        return repo.branches["main"]

    def repo(self, repo_id: str, repo_type: str = "model") -> Repo:
        return self.store.require(repo_type, repo_id)

    def set_gated(self, repo_id: str, mode: str | bool = "manual", *, granted: Iterable[str] = (),
                  repo_type: str = "model") -> None:
        """Gate a repo (``"auto"``/``"manual"``, False to open it); ``granted``: users whose request was accepted."""
        repo = self.repo(repo_id, repo_type)
        repo.gated, repo.granted = mode, set(granted)

    def set_downloads(self, repo_id: str, downloads: int, *, repo_type: str = "model") -> None:
        self.repo(repo_id, repo_type).downloads = downloads

    def seed(
        self,
        repo_id: str,
        files: dict[str, bytes | str | Path | None],
        branch: str = "main",
        message: str = "seed",
        *,
        repo_type: str = "model",
        private: bool = False,
        replace: bool = False,
        lfs: bool | Iterable[str] | None = None,
        author: str = "system",
        create_branch: bool = True,
        xet: bool | None = None,
    ) -> str:
        """Commit ``files`` to ``branch`` directly (creating repo and branch if needed); returns the commit sha.

        Values: ``bytes``/``str`` content, a ``Path`` (streamed into the store, fine for big files), or ``None``
        to delete that path. Files not listed are kept unless ``replace=True``. LFS vs regular follows the same
        rule as the preupload endpoint unless ``lfs`` is given (True/False for all, or the set of LFS paths).
        LFS files are also stored in Xet (Xet-backed, with a real Xet hash) when the emulator speaks Xet, unless
        ``xet=False`` (a classic LFS repo). Every call makes a new commit, even an empty one.
        """
        repo, _ = self.store.create_repo(repo_type, repo_id, private=private)
        with self.store.lock:
            if branch not in repo.branches and repo.branch_ref(branch) is None:
                if not create_branch:
                    raise HubError.revision_not_found(branch)
                repo.branches[branch] = repo.branches["main"]
        ops = self._seed_ops(repo, branch, files, replace=replace, lfs=lfs,
                             xet=self.xet_enabled if xet is None else xet)
        commit, _ = self.store.apply_commit(repo, branch, ops, title=message, author=author)
        return commit.id

    def _seed_ops(self, repo: Repo, rev: str, files: dict, *, replace: bool = False,
                  lfs: bool | Iterable[str] | None = None, xet: bool = False) -> list[tuple]:
        """Store the contents and turn ``files`` into commit operations against the head of ``rev``."""
        base = self.store.commit_at(repo, rev)
        patterns = self.store.lfs_patterns(base)
        lfs_paths = None if lfs is None or isinstance(lfs, bool) else set(lfs)
        ops: list[tuple] = []
        if replace:
            ops += [("delete", p) for p in base.files if p not in files]
        for path, value in files.items():
            if value is None:
                ops.append(("delete", path))
                continue
            if isinstance(value, Path):
                sha, size = self.blobs.put_file(value)
            else:
                data = value.encode() if isinstance(value, str) else bytes(value)
                sha, size = self.blobs.put_bytes(data), len(data)
            if lfs_paths is not None:
                is_lfs = path in lfs_paths
            elif isinstance(lfs, bool):
                is_lfs = lfs and size > 0
            else:
                is_lfs = self.wants_lfs(path, size, self.blobs.sample(sha), patterns)
            xet_hash = None
            if is_lfs:
                with self.store.lock:
                    repo.lfs_oids.add(sha)
                if xet:
                    known = self.xet.lookup(sha)
                    xet_hash = (known or self.xet.put(self.blobs.path(sha), sha)).xet_hash
            ops.append(("put", path, self.store.entry_for_blob(sha, size, is_lfs, xet_hash=xet_hash)))
        return ops

    def concurrent_commit(self, repo: Repo, rev: str, fault: Fault) -> None:
        """What ``stale_parent`` does: another writer lands a commit on the branch first."""
        if repo.branch_ref(rev) is None:
            return  # the real commit will fail on its own (unknown branch)
        ops = self._seed_ops(repo, rev, fault.params.get("files") or {}, xet=self.xet_enabled)
        self.store.apply_commit(repo, rev, ops, title=fault.params["message"], author="concurrent-writer")

    def commits(self, repo_id: str, branch: str = "main", *, repo_type: str = "model") -> list[Commit]:
        """History of a branch (or any revision), newest first; the last one is the "initial commit"."""
        repo = self.repo(repo_id, repo_type)
        with self.store.lock:
            sha = repo.resolve(branch)
            if sha is None:
                raise HubError.revision_not_found(branch)
            return repo.history(sha)

    def head(self, repo_id: str, branch: str = "main", *, repo_type: str = "model") -> str:
        return self.commits(repo_id, branch, repo_type=repo_type)[0].id

    def entries(self, repo_id: str, revision: str = "main", *, repo_type: str = "model") -> dict[str, FileEntry]:
        return dict(self.store.commit_at(self.repo(repo_id, repo_type), revision).files)

    def files(self, repo_id: str, revision: str = "main", *, repo_type: str = "model") -> dict[str, str]:
        """``{path: sha256 of content}`` at a revision (branch, tag or commit sha)."""
        return {p: e.sha256 for p, e in self.entries(repo_id, revision, repo_type=repo_type).items()}

    def file_path(self, repo_id: str, path: str, revision: str = "main", *, repo_type: str = "model") -> Path:
        """On-disk location of a file's content (compare big files without loading them)."""
        entries = self.entries(repo_id, revision, repo_type=repo_type)
        if path not in entries:
            raise KeyError(f"{path} not in {repo_id}@{revision}")
        return self.blob_path(entries[path].sha256) or self.blobs.path(entries[path].sha256)

    def file_bytes(self, repo_id: str, path: str, revision: str = "main", *, repo_type: str = "model") -> bytes:
        return self.file_path(repo_id, path, revision, repo_type=repo_type).read_bytes()

    def is_lfs(self, repo_id: str, path: str, revision: str = "main", *, repo_type: str = "model") -> bool:
        return self.entries(repo_id, revision, repo_type=repo_type)[path].lfs

    def branches(self, repo_id: str, *, repo_type: str = "model") -> dict[str, str]:
        """``{branch: head commit sha}``."""
        repo = self.repo(repo_id, repo_type)
        with self.store.lock:
            return dict(repo.branches)

    def create_branch(self, repo_id: str, branch: str, revision: str = "main", *, repo_type: str = "model") -> str:
        return self.store.create_branch(self.repo(repo_id, repo_type), branch, revision)

    def repo_exists(self, repo_id: str, *, repo_type: str = "model") -> bool:
        return self.store.get(repo_type, repo_id) is not None

    # -- request log -------------------------------------------------------------------------------------------

    @property
    def requests(self) -> list[LogEntry]:
        """Snapshot of the request log (oldest first)."""
        return self.log.snapshot()

    def reset_log(self) -> None:
        self.log.clear()

    def find_requests(self, method: str | None = None, path: str | None = None, *, origin: str | None = None,
                      kind: str | None = None, status: int | None = None) -> list[LogEntry]:
        """Filter the log: ``path`` is a regex searched in the decoded path."""
        rx = re.compile(path) if path else None
        return [e for e in self.log.snapshot()
                if (method is None or e.method == method.upper())
                and (rx is None or rx.search(e.path))
                and (origin is None or e.origin == origin)
                and (kind is None or e.kind == kind)
                and (status is None or e.status == status)]

    def bytes_served(self, repo_id: str, path: str, *, repo_type: str = "model") -> int:
        """Body bytes sent for one file across resolve (regular files) and the CDN (LFS files)."""
        return sum(e.bytes_sent for e in self.log.snapshot()
                   if e.kind in ("resolve", "cdn") and e.repo_id == repo_id and e.repo_type == repo_type
                   and e.file == path and e.method == "GET" and e.status in (200, 206))

    def bytes_uploaded(self, repo_id: str | None = None, *, repo_type: str = "model", lfs_only: bool = True) -> int:
        """Request body bytes received: LFS upload PUTs only (default), or all request bodies."""
        return sum(e.bytes_received for e in self.log.snapshot()
                   if (not lfs_only or e.kind in ("lfs-upload", "lfs-part"))
                   and (repo_id is None or (e.repo_id == repo_id and e.repo_type == repo_type)))
