"""Publish to a local directory: build in a temp dir beside DST, then swap it in with renames.

A run that fails leaves nothing behind; one that is killed (SIGKILL, power loss) leaves only its build folder
`.<name>.hubpad-tmp-<pid>` and the lock file `.<name>.hubpad-lock`, never a DST that looks done. The next run holds
the lock, so every such folder beside DST is stale: it says so, removes them, and first takes from them the
finished shards whose inputs were all checked (each has a record in `.hubpad-staged/`), to reuse each one whose
inputs match and whose bytes still hash to its record: a killed local run resumes.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from pathlib import Path

from hubpad.errors import ConfigError, HubpadError, TargetTakenError
from hubpad.formats.manifest import dumps, parse_manifest
from hubpad.formats.names import MANIFEST
from hubpad.plan.model import Plan, ShardPlan
from hubpad.publish.base import Publisher, Summary, check_replace, read_existing_manifest
from hubpad.source.base import ContentHash, Source
from hubpad.util.disk import Room, room, writing
from hubpad.util.hashing import file_sha256
from hubpad.util.log import log
from hubpad.util.refs import is_repo_id
from hubpad.util.run_lock import RunLock, abandoned, gone, recorded_pid
from hubpad.util.sizes import human

STAGED = ".hubpad-staged"  # in the build folder: one record per finished shard whose inputs are all checked
RESUME = ".hubpad-resume"  # in the build folder: finished shards an interrupted run left, until reused or dropped
SMALL_FILES = 4 * 1000**2  # room for the generated files (config, index, card, recipe, patch, hubpad.json)


class LocalPublisher(Publisher):
    """Writes the derivative into `dst` atomically (as far as one rename allows)."""

    def __init__(self, dst: str | os.PathLike[str], force: bool = False, repo_id: str | None = None,
                 max_disk: int | None = None, workdir: str | os.PathLike[str] | None = None) -> None:
        """`max_disk`: refuse up front a derivative that needs more disk beside DST. `workdir` cannot apply (the
        build must be on DST's filesystem, for the rename): said once, as a warning."""
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
        self.max_disk = max_disk
        if workdir is not None:
            log(f"warning: --workdir is not used for a local DST: the derivative is built beside {self.label}, on "
                f"its filesystem, so that one rename puts it in place")
        self._lock = RunLock(self.dst.parent / f".{self.dst.name}.hubpad-lock")
        self._resume: dict[str, list[tuple[dict, Path]]] = {}  # shard name -> (record, file) an interrupted run left
        self._keep_from: dict[str, Path] = {}  # shard name -> the file find_reusable checked
        self._stranded: list[str] = []  # DST's own files a failed swap could not move back out of the build

    def inspect(self, plan: Plan) -> dict | None:
        """Read only (a dry run): the run's refusals, DST's manifest, and the finished shards a killed run left that
        the run would reuse (where no run holds DST now); no lock, no scratch, nothing removed or restored."""
        self._check_source_apart(plan)
        self.existing = self._existing(plan)
        if abandoned(self._lock.path) or not self._lock.path.exists():
            for folder in self._stale_scratch(restore=False):
                for entry, path in _records(folder):
                    self._resume.setdefault(entry["name"], []).append((entry, path))
        return self.existing

    def prepare(self, plan: Plan) -> dict | None:
        """`inspect`'s checks, made under DST's lock once a killed run's leftovers are dealt with (a DST it left
        missing is restored first), then the build folder, holding what those runs finished."""
        self._check_source_apart(plan)
        with writing(self.dst.parent):
            self.dst.parent.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        stale = self._stale_scratch()
        existing = self._existing(plan)
        self.tmp = self.dst.parent / f".{self.dst.name}.hubpad-tmp-{os.getpid()}"
        with writing(self.tmp):
            if self.tmp in stale:  # left by an earlier process that had our pid (a reboot since): moved aside first
                aside = self.tmp.with_name(f".{self.dst.name}.hubpad-tmp-earlier-{os.getpid()}")
                shutil.rmtree(aside, ignore_errors=True)
                os.rename(self.tmp, aside)
                stale[stale.index(self.tmp)] = aside
            self.tmp.mkdir()
        self._take_over(stale)
        self.existing = existing
        return existing

    def _check_source_apart(self, plan: Plan) -> None:
        """First of the checks: --force cannot help here, so no other error may suggest it."""
        if plan.source.kind == "local":
            _check_apart(Path(plan.source.label).expanduser().resolve(), self.dst.resolve(), self.label)

    def _existing(self, plan: Plan) -> dict | None:
        """DST's manifest, once DST is known to be a folder this run may publish into."""
        existing = None
        if self.dst.exists():
            if not self.dst.is_dir():
                raise HubpadError(f"{self.label}: exists and is not a directory")
            manifest = self.dst / MANIFEST
            if manifest.is_file():
                existing = read_existing_manifest(manifest.read_bytes(), self.label, self.force)
            elif any(self.dst.iterdir()) and not self.force:
                raise TargetTakenError(f"{self.label}: exists, is not empty and was not made by hubpad (use --force "
                                       f"to publish into it; its other files are kept)", "files hubpad did not make")
        if existing is not None:
            check_replace(existing, plan, self.label, self.force)
        return existing

    def _stale_scratch(self, restore: bool = True) -> list[Path]:
        """The build folders (and old copies) of runs that stopped, beside DST: with the lock held, every one is
        stale. `restore` (a run, under the lock): a DST that a run killed between publish's two renames left missing
        is put back first, and files of DST's own that a killed publish had moved into its build go back to DST
        (a folder whose files cannot go back is kept, and said so)."""
        stem = glob.escape(f".{self.dst.name}.hubpad-")
        found = [p for p in sorted(self.dst.parent.glob(f"{stem}tmp-*")) + sorted(self.dst.parent.glob(f"{stem}old-*"))
                 if p.is_dir()]
        if not restore:
            return found
        old = [p for p in found if ".hubpad-old-" in p.name]
        if old and not self.dst.exists():
            with writing(self.dst):
                os.rename(old[-1], self.dst)
            log(f"restored {self.label} from {old[-1].name}: a run stopped while swapping in its new build "
                f"({gone(recorded_pid(old[-1]))})")
            found.remove(old[-1])
        return [folder for folder in found if self._give_back(folder)]

    def _give_back(self, folder: Path) -> bool:
        """Move the files of DST's own that a killed publish had carried into `folder` back to DST; False (the
        folder is kept) when some cannot go back."""
        made = _made_by(folder / MANIFEST) if (folder / MANIFEST).is_file() else None
        if made is None:  # no manifest: killed before publish began, nothing of DST's was carried in
            return True
        theirs = [e for e in folder.iterdir() if e.name not in made | {STAGED, RESUME}]
        for entry in theirs:
            if self.dst.is_dir() and not (self.dst / entry.name).exists():
                with writing(self.dst / entry.name):
                    os.rename(entry, self.dst / entry.name)
        if any(e.exists() for e in theirs):
            log(f"warning: kept {folder.name}: a run that stopped while publishing left files of {self.label} in it "
                f"({', '.join(e.name for e in theirs if e.exists())}); move them back by hand, then remove it")
            return False
        return True

    def _take_over(self, stale: list[Path]) -> None:
        """Remove each stale folder, saying so; the finished shards it records move into this build first (under
        RESUME, with their records, until find_reusable takes them), so a killed run resumes instead of starting
        over, however many runs were killed in a row."""
        for k, folder in enumerate(stale):
            kept, hold = 0, self.tmp / RESUME / str(k)
            for entry, src in _records(folder):
                if src.is_file() and src.stat().st_size == entry.get("size"):
                    with writing(hold):
                        (hold / entry["name"]).parent.mkdir(parents=True, exist_ok=True)
                        os.rename(src, hold / entry["name"])
                    _write_record(hold / STAGED, entry)
                    self._resume.setdefault(entry["name"], []).append((entry, hold / entry["name"]))
                    kept += 1
            shutil.rmtree(folder, ignore_errors=True)
            log(f"removed {folder.name}, left by a run that stopped ({gone(recorded_pid(folder))})"
                + (f"; its {kept} finished shard(s) are reused where their inputs match and their bytes check"
                   if kept else ""))

    def has_staged_shards(self) -> bool:
        return bool(self._resume)

    def _candidates(self, planned: dict) -> list[tuple[dict, Path]]:
        """Shards with exactly these inputs, by their records: DST's (hubpad.json), then an interrupted run's."""
        name, inputs = planned["name"], planned["inputs"]
        found = [(e, self.dst / name) for e in (self.existing or {}).get("shards", [])
                 if e.get("name") == name and e.get("inputs") == inputs]
        return found + [(e, p) for e, p in self._resume.get(name, []) if e.get("inputs") == inputs]

    def may_reuse(self, planned: dict) -> bool:
        return bool(self._candidates(planned))

    def find_reusable(self, planned: dict, on_bytes=None) -> dict | None:
        """A shard with exactly these inputs that DST (or an interrupted run) holds, whose bytes still hash to its
        record (a local file may have changed since; hashing it is cheaper than building it again)."""
        name = planned["name"]
        for entry, path in self._candidates(planned):
            same_size = path.is_file() and path.stat().st_size == entry.get("size")
            if same_size and file_sha256(path, on_bytes) == entry.get("sha256"):
                self._keep_from[name] = path
                return dict(entry)
            where = f"{self.label}/{name} does not match {MANIFEST}" if path.parent == self.dst else \
                f"{name}, left by an interrupted run, does not match its record"
            log(f"warning: {where}; building it again")
        return None

    def keep_shard(self, entry: dict) -> None:
        """Carry a reused shard into the new build: an interrupted run's is moved in; one of DST is hard-linked (no
        copy) where the filesystem allows one."""
        src = self._keep_from.pop(entry["name"], self.dst / entry["name"])
        dst = self.tmp / entry["name"]
        with writing(dst):
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.parent != self.dst:  # an interrupted run's: recorded again, should this run be killed too
                os.rename(src, dst)
                _write_record(self.tmp / STAGED, entry)
                return
            try:
                os.link(src, dst)
            except OSError:
                shutil.copyfile(src, dst)

    def record_shard(self, entry: dict) -> None:
        """A finished shard whose inputs are all checked: its record, written durably beside it (the shard was
        fsynced at close), lets the run after an interrupted one reuse it."""
        _write_record(self.tmp / STAGED, entry)

    def room(self, plan: Plan, to_build: list[ShardPlan]) -> Room:
        """The whole derivative beside DST, less the shards it reuses (hard links and moves take no new space)."""
        index = sum(len(t.name) + 48 for s in plan.shards for t in s.tensors)  # a line per tensor, 185k on a Hy3
        need = sum(s.size for s in to_build) + sum(plan.files[f].size for f in plan.copied_files) + SMALL_FILES + index
        return room(self.tmp or self.dst.parent, need, what="the derivative")

    def short_of_room(self, have: Room) -> str | None:
        return f"over --max-disk {human(self.max_disk)}" if self._over_max_disk(have) else super().short_of_room(have)

    def _over_max_disk(self, have: Room) -> bool:
        return self.max_disk is not None and have.need > self.max_disk

    def check_room(self, plan: Plan, to_build: list[ShardPlan]) -> None:
        have = self.room(plan, to_build)
        if self._over_max_disk(have):
            raise HubpadError(f"{self.label}: the derivative needs {human(have.need)} of disk beside it (a local DST "
                              f"holds every shard, less those it reuses), over --max-disk {human(self.max_disk)}")
        if not have.enough:
            raise HubpadError(f"{self.label}: not enough disk for the derivative: {have.line()}; free some space "
                              f"there or choose another --to")
        log(have.said())

    def shard_path(self, name: str) -> Path:
        return self.tmp / name

    def put_shard(self, entry: dict, path: Path) -> None:
        self._track_disk()

    def put_file(self, path: str, data: bytes) -> None:
        target = self.tmp / path
        with writing(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    def existing_readme(self) -> str | None:
        readme = self.dst / "README.md"
        return readme.read_text(errors="replace") if (self.dst / MANIFEST).is_file() and readme.is_file() else None

    def copy_file(self, source: Source, path: str) -> dict:
        """Copy an unchanged file, hashing it on the way (its hash goes into the manifest)."""
        target = self.tmp / path
        entry = source.files()[path]
        h = ContentHash.for_entry(entry)
        with writing(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as out:
                for chunk in source.stream(path, 0, entry.size):
                    h.update(chunk)
                    out.write(chunk)
        return {"size": entry.size, "sha256": h.check(entry, source.label)}

    def publish(self, manifest: dict) -> None:
        for scratch in (STAGED, RESUME):  # records and unused leftovers of an interrupted run: not the derivative's
            shutil.rmtree(self.tmp / scratch, ignore_errors=True)
        with writing(self.dst):
            old = self._swap_in()
        self.tmp = None
        self._unlock()
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        self.summary.url = str(self.dst)

    def _take_lock(self) -> None:
        """One run at a time per DST (a second fails at once): the final renames of two runs must not interleave.
        The lock file lives beside DST only while a run holds it (a killed run's is taken over by the next)."""
        with writing(self._lock.path):
            taken = self._lock.acquire()
        if not taken:
            raise HubpadError(f"{self.label}: another hubpad run is publishing into it; try again when it is done")

    def _unlock(self) -> None:
        self._lock.release()

    def _swap_in(self) -> Path | None:
        """The new build becomes DST: DST's own files moved into it, DST renamed aside, the build renamed into place.
        A rename that fails undoes the ones before it, so DST is left as it was, files hubpad did not make included;
        returns the old DST's new name (to remove), if there was one."""
        if not self.dst.exists():
            os.rename(self.tmp, self.dst)
            return None
        carried = self._carry_over_foreign_files()
        old = self.dst.parent / f".{self.dst.name}.hubpad-old-{os.getpid()}"
        try:
            os.rename(self.dst, old)
        except OSError:
            self._carry_back(carried, self.dst)
            raise
        try:
            os.rename(self.tmp, self.dst)
        except OSError:
            os.rename(old, self.dst)
            self._carry_back(carried, self.dst)
            raise
        return old

    def _carry_over_foreign_files(self) -> list[str]:
        """hubpad never deletes files it did not create: what DST holds beside an earlier derivative (or, under
        --force, everything of a folder hubpad did not make) moves into the new build unless the build replaces it.
        Returns the names moved; a move that fails puts the others back."""
        made_top = _made_top(self.existing) if self.existing else set()
        moved: list[str] = []
        try:
            for entry in self.dst.iterdir():
                if entry.name not in made_top and not (self.tmp / entry.name).exists():
                    os.rename(entry, self.tmp / entry.name)
                    moved.append(entry.name)
        except OSError:
            self._carry_back(moved, self.dst)
            raise
        return moved

    def _carry_back(self, names: list[str], dst: Path) -> None:
        """Undo _carry_over_foreign_files: each of `names` back from the build into `dst` (as far as it goes)."""
        for name in names:
            try:
                os.rename(self.tmp / name, dst / name)
            except OSError:
                self._stranded.append(name)

    def read_published(self, path: str) -> bytes | None:
        p = self.dst / path
        return p.read_bytes() if p.is_file() else None

    def update_files(self, files: dict[str, str], message: str, removed: list[str] = ()) -> dict:
        """Each file replaced by a rename (readers see the old text or the new one, never half of either); the
        removed ones deleted last, with a folder they leave empty (hubpad.json, written before, no longer lists them)."""
        for path, text in files.items():
            p = self.dst / path
            tmp = p.with_name(f".{p.name}.hubpad-tmp")
            with writing(p):
                p.parent.mkdir(parents=True, exist_ok=True)
                try:
                    tmp.write_text(text)
                    os.replace(tmp, p)
                finally:
                    tmp.unlink(missing_ok=True)
        for path in removed:
            p = self.dst / path
            with writing(p):
                p.unlink(missing_ok=True)
                for folder in p.parents:
                    if folder == self.dst or not folder.is_relative_to(self.dst) or any(folder.iterdir()):
                        break
                    folder.rmdir()
        return {"commit": None, "url": str(self.dst)}

    def abort(self) -> None:
        if self._stranded:  # never deleted: files hubpad did not make, which could not be moved back
            log(f"warning: {', '.join(self._stranded)} of {self.label} could not be moved back from {self.tmp}; "
                f"kept there, move them back by hand")
        elif self.tmp is not None and self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp = None
        self._unlock()

    def _track_disk(self) -> None:
        # A kept shard hard-linked from DST (two links) takes no new space.
        used = sum(st.st_size for p in self.tmp.rglob("*") if p.is_file() and (st := p.stat()).st_nlink == 1)
        self.summary.peak_disk = max(self.summary.peak_disk, used)


def _records(folder: Path) -> list[tuple[dict, Path]]:
    """The finished shards a build folder records, each (record, file): its own, and those it had taken over from
    runs killed before it (under RESUME). Anything unreadable, or naming no plain file, is skipped."""
    found = []
    for where in (folder, *sorted((folder / RESUME).glob("*"))):
        for f in sorted((where / STAGED).rglob("*.json")):  # a weight folder's shard: its record in that folder
            try:
                entry = json.loads(f.read_bytes())
            except (OSError, ValueError):
                continue
            name = entry.get("name") if isinstance(entry, dict) else None
            if isinstance(name, str) and _plain_relative(name) \
                    and isinstance(entry.get("sha256"), str) and isinstance(entry.get("inputs"), str):
                found.append((entry, where / name))
    return found


def _plain_relative(name: str) -> bool:
    """A shard name a record may give: a file in the derivative or one of its folders, none of them hidden."""
    parts = name.split("/")
    return all(p and not p.startswith(".") and p != ".." for p in parts) and "\\" not in name


def _write_record(folder: Path, entry: dict) -> None:
    """A finished shard's record, written durably (fsync, then rename into place)."""
    final = folder / f"{entry['name']}.json"
    part = final.parent / f".{final.name}.part"
    with writing(final):
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(part, "wb") as f:
            f.write(dumps(entry).encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, final)


def _made_top(manifest: dict) -> set[str]:
    """The top-level names of what a derivative's hubpad.json says hubpad made (shards, generated, copied files)."""
    files = manifest.get("files", {}) if isinstance(manifest.get("files"), dict) else {}
    made = {s.get("name") for s in manifest.get("shards", []) if isinstance(s, dict)} \
        | set(files.get("generated", [])) | set(files.get("copied", [])) | {MANIFEST}
    return {Path(p).parts[0] for p in made if isinstance(p, str) and p and Path(p).parts}


def _made_by(manifest_path: Path) -> set[str] | None:
    """_made_top of a build folder's hubpad.json; None when it cannot be read."""
    try:
        return _made_top(parse_manifest(manifest_path.read_bytes(), str(manifest_path)))
    except (HubpadError, OSError):
        return None


def _check_apart(src: Path, dst: Path, label: str) -> None:
    """A local DST must be neither SRC nor nested with it: swapping DST in would replace (or move) the source."""
    if dst == src:
        raise HubpadError(f"{label}: destination is the source; choose another --to (a new folder, e.g. {src.name}-padded)")
    if src in dst.parents:
        raise HubpadError(f"{label}: destination is inside the source {src}")
    if dst in src.parents:
        raise HubpadError(f"{label}: destination contains the source {src}")
