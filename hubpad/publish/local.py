"""Publish to a local directory: build in a temp dir beside DST, then swap it in with renames.

A run that fails or is killed leaves only a `.<name>.hubpad-tmp-*` folder, never a DST that looks done.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from hubpad.errors import ConfigError, HubpadError
from hubpad.formats.names import MANIFEST
from hubpad.plan.model import Plan
from hubpad.publish.base import Publisher, Summary, check_replace, read_existing_manifest
from hubpad.source.base import ContentHash, Source
from hubpad.util.hashing import file_sha256
from hubpad.util.log import log
from hubpad.util.refs import is_repo_id


class LocalPublisher(Publisher):
    """Writes the derivative into `dst` atomically (as far as one rename allows)."""

    def __init__(self, dst: str | os.PathLike[str], force: bool = False, repo_id: str | None = None) -> None:
        self.dst = Path(dst).absolute()
        self.label = str(dst)
        if repo_id is not None and not is_repo_id(repo_id):
            raise ConfigError(f"--repo-id {repo_id!r} is not a Hub repo id (namespace/name)")
        self.repo_id = repo_id  # None: the card's commands name the folder itself
        self.local_path = self.dst
        self.force = force
        self.summary = Summary()
        self.tmp: Path | None = None
        self.existing: dict | None = None
        self._lock_file = None

    def inspect(self, plan: Plan) -> dict | None:
        existing = None
        if plan.source.kind == "local":  # first: --force cannot help here, so no other error may suggest it
            _check_apart(Path(plan.source.label).expanduser().resolve(), self.dst.resolve(), self.label)
        if self.dst.exists():
            if not self.dst.is_dir():
                raise HubpadError(f"{self.label}: exists and is not a directory")
            manifest = self.dst / MANIFEST
            if manifest.is_file():
                existing = read_existing_manifest(manifest.read_bytes(), self.label, self.force)
            elif any(self.dst.iterdir()) and not self.force:
                raise HubpadError(f"{self.label}: exists, is not empty and was not made by hubpad (use --force to "
                                  f"publish into it; its other files are kept)")
        if existing is not None:
            check_replace(existing, plan, self.label, self.force)
        return existing

    def prepare(self, plan: Plan) -> dict | None:
        existing = self.inspect(plan)
        self.dst.parent.mkdir(parents=True, exist_ok=True)
        self._lock()
        self.tmp = self.dst.parent / f".{self.dst.name}.hubpad-tmp-{os.getpid()}"
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir()
        self.existing = existing
        return existing

    def find_reusable(self, planned: dict) -> dict | None:
        """A shard DST already holds with exactly these inputs, whose bytes still hash to what hubpad.json says
        (a local file may have changed since; hashing it is cheaper than building it again)."""
        name = planned["name"]
        for entry in (self.existing or {}).get("shards", []):
            if entry.get("name") == name and entry.get("inputs") == planned["inputs"]:
                path = self.dst / name
                same_size = path.is_file() and path.stat().st_size == entry.get("size")
                if same_size and file_sha256(path) == entry.get("sha256"):
                    return dict(entry)
                log(f"warning: {self.label}/{name} does not match {MANIFEST}; building it again")
                return None
        return None

    def keep_shard(self, entry: dict) -> None:
        """Carry a reused shard into the new build: a hard link (no copy) where the filesystem allows one."""
        src, dst = self.dst / entry["name"], self.tmp / entry["name"]
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)

    def shard_path(self, name: str) -> Path:
        return self.tmp / name

    def put_shard(self, entry: dict, path: Path) -> None:
        self._track_disk()

    def put_file(self, path: str, data: bytes) -> None:
        target = self.tmp / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def existing_readme(self) -> str | None:
        readme = self.dst / "README.md"
        return readme.read_text(errors="replace") if (self.dst / MANIFEST).is_file() and readme.is_file() else None

    def copy_file(self, source: Source, path: str) -> dict:
        """Copy an unchanged file, hashing it on the way (its hash goes into the manifest)."""
        target = self.tmp / path
        target.parent.mkdir(parents=True, exist_ok=True)
        entry = source.files()[path]
        h = ContentHash.for_entry(entry)
        with open(target, "wb") as out:
            for chunk in source.stream(path, 0, entry.size):
                h.update(chunk)
                out.write(chunk)
        return {"size": entry.size, "sha256": h.check(entry, source.label)}

    def publish(self, manifest: dict) -> None:
        old = None
        if self.dst.exists():
            self._carry_over_foreign_files()
            old = self.dst.parent / f".{self.dst.name}.hubpad-old-{os.getpid()}"
            os.rename(self.dst, old)
        os.rename(self.tmp, self.dst)
        self.tmp = None
        self._unlock()
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        self.summary.url = str(self.dst)

    def _lock(self) -> None:
        """One run at a time per DST (a second fails at once): the final renames of two runs must not interleave.
        The lock file lives beside DST only while a run holds it."""
        path = self.dst.parent / f".{self.dst.name}.hubpad-lock"
        self._lock_file = open(path, "a+b")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Locked a file the run before us had already removed? Then someone else may hold the new one.
            held = os.fstat(self._lock_file.fileno()).st_ino == os.stat(path).st_ino
        except (BlockingIOError, FileNotFoundError):
            held = False
        if not held:
            self._lock_file.close()
            self._lock_file = None
            raise HubpadError(f"{self.label}: another hubpad run is publishing into it; try again when it is done")

    def _unlock(self) -> None:
        if self._lock_file is not None:
            Path(self._lock_file.name).unlink(missing_ok=True)  # removed while still held, then released
            self._lock_file.close()
            self._lock_file = None

    def _carry_over_foreign_files(self) -> None:
        """hubpad never deletes files it did not create: what DST holds beside an earlier derivative (or, under
        --force, everything of a folder hubpad did not make) moves into the new build unless the build replaces it."""
        made = set()
        if self.existing:
            files = self.existing.get("files", {})
            made = {s.get("name") for s in self.existing.get("shards", [])} | set(files.get("generated", [])) \
                | set(files.get("copied", [])) | {MANIFEST}
        made_top = {Path(p).parts[0] for p in made if p and Path(p).parts}
        for entry in self.dst.iterdir():
            if entry.name not in made_top and not (self.tmp / entry.name).exists():
                os.rename(entry, self.tmp / entry.name)

    def read_published(self, path: str) -> bytes | None:
        p = self.dst / path
        return p.read_bytes() if p.is_file() else None

    def update_files(self, files: dict[str, str], message: str, removed: list[str] = ()) -> dict:
        """Each file replaced by a rename (readers see the old text or the new one, never half of either); the
        removed ones deleted last, with a folder they leave empty (hubpad.json, written before, no longer lists them)."""
        for path, text in files.items():
            p = self.dst / path
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_name(f".{p.name}.hubpad-tmp")
            tmp.write_text(text)
            os.replace(tmp, p)
        for path in removed:
            p = self.dst / path
            p.unlink(missing_ok=True)
            for folder in p.parents:
                if folder == self.dst or not folder.is_relative_to(self.dst) or any(folder.iterdir()):
                    break
                folder.rmdir()
        return {"commit": None, "url": str(self.dst)}

    def abort(self) -> None:
        if self.tmp is not None and self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp = None
        self._unlock()

    def _track_disk(self) -> None:
        # A kept shard hard-linked from DST (two links) takes no new space.
        used = sum(st.st_size for p in self.tmp.rglob("*") if p.is_file() and (st := p.stat()).st_nlink == 1)
        self.summary.peak_disk = max(self.summary.peak_disk, used)


def _check_apart(src: Path, dst: Path, label: str) -> None:
    """A local DST must be neither SRC nor nested with it: swapping DST in would replace (or move) the source."""
    if dst == src:
        raise HubpadError(f"{label}: destination is the source; choose another --to (a new folder, e.g. {src.name}-padded)")
    if src in dst.parents:
        raise HubpadError(f"{label}: destination is inside the source {src}")
    if dst in src.parents:
        raise HubpadError(f"{label}: destination contains the source {src}")
