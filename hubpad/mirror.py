"""One mirror run: source → plan → pad → writer → publisher.

The publisher decides where bytes land (a local temp dir, or a Hub staging branch) and makes the result
visible in one step at the end. This module only sequences the work and keeps the books (bytes moved,
peak disk, which shards were reused).
"""

from __future__ import annotations

import hashlib
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from .errors import HubpadError
from .gha import group
from .gha_log import log
from .manifest import MANIFEST, build_manifest, config_json, dumps, shard_entry, shard_inputs_key
from .pad import build_shard
from .plan import INDEX, Plan
from .progress import Progress, human
from .source import Source, VerifiedReader


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
    repo_id: str  # the Hub id the card and recipe name (for a local target: where it would be uploaded)
    summary: Summary

    @abstractmethod
    def prepare(self, plan: Plan) -> dict | None:
        """Check the target can take this derivative; return its current manifest, if any."""

    def find_reusable(self, planned: dict) -> dict | None:
        """The entry of a shard with exactly these inputs already on the target (published or staged), if any."""
        return None

    @abstractmethod
    def shard_path(self, name: str) -> Path:
        """Where to write an output shard before handing it over."""

    @abstractmethod
    def put_shard(self, entry: dict, path: Path) -> None:
        """Take a finished shard (its sha256 is in `entry`)."""

    def keep_shard(self, entry: dict) -> None:
        """Keep an already-present shard as it is."""

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

    def mark_verified(self, entries: list[dict]) -> None:
        """Record that staged shards' inputs are now fully verified (Hub staging only)."""

    def target_info(self) -> dict:
        return {"repo": self.label, "kind": "local"}

    def published_revision(self) -> str | None:
        """What the recipe pins (`model_revision`): a tag on the publish commit for the Hub, nothing locally."""
        return None

    def existing_readme(self) -> str | None:
        return None


def derivative_files(plan: Plan, manifest: dict, publisher: Publisher, templates_dir: Path | None,
                     warn: bool = True) -> dict[str, str]:
    """README.md, recipe and (when needed) the vLLM patch, rendered from the manifest."""
    from .card import render_derivative

    upstream_card = None
    if "README.md" in plan.files:
        upstream_card = plan.source.read_file("README.md").decode("utf-8", errors="replace")
    base_card = None
    if plan.source.kind == "hub":
        from .hub import base_model_card

        base_card = base_model_card(plan.source.api, upstream_card)
    result = render_derivative(manifest, target_repo=publisher.repo_id, upstream_card=upstream_card,
                               upstream_base_card=base_card,
                                     existing_readme=publisher.existing_readme(),
                                published_commit=publisher.published_revision(),
                                     templates_dir=templates_dir, upstream_files=set(plan.files))
    for warning in result.warnings if warn else ():
        log(f"warning: {warning}")
    return result.files


def run_mirror(plan: Plan, publisher: Publisher, *, templates_dir: Path | None = None, quiet: bool = False,
               serving_overrides: dict | None = None, only: set[str] | None = None,
               publish_only: bool = False) -> Summary:
    """Build and publish the padded derivative described by `plan`.

    `only`: stage just these shards and stop (one part of a fan-out). `publish_only`: build nothing; every
    shard must already be staged or published (the fan-out's final step).
    """
    started = time.monotonic()
    summary = publisher.summary
    summary.target = publisher.label
    summary.upstream_commit = plan.source.commit
    if not plan.needs_padding:
        raise HubpadError(f"{plan.source.label} already shards at tp={plan.tp}; nothing to pad "
                          f"(stock TP values that work: {plan.upstream_tp_values})")
    existing = publisher.prepare(plan)
    if is_up_to_date(existing, plan):
        summary.up_to_date = True
        summary.commit = existing.get("published_commit")
        publisher.settle_published()
        publisher.abort()
        log(f"{publisher.label} is up to date with {plan.source.label}@{(plan.source.commit or '')[:12]}; nothing to do")
        return summary
    source, files = plan.source, plan.files
    upstream_sha = {f: files[f].sha256 for f in plan.weight_files}
    if source.kind == "local" and (publisher.stages or (existing or {}).get("shards")):
        # Staged or published shards can only be matched to a local upstream by content: hash the local files
        # first (a local read pass is cheap next to rebuilding and re-uploading), so records made now and
        # on a resumed run agree.
        from .check import file_sha256

        upstream_sha = {f: file_sha256(source.local_path(f)) for f in plan.weight_files}
    readers: dict[str, VerifiedReader] = {}
    verified: dict[str, str] = {}
    last_use = {t.src.file: i for i, s in enumerate(plan.shards) for t in s.tensors}

    def reader(file: str) -> VerifiedReader:
        if file not in readers:
            readers[file] = VerifiedReader(source, files[file])
        return readers[file]

    def finish_files(upto_shard: int | None) -> None:
        for file, r in list(readers.items()):
            if file not in verified and (upto_shard is None or last_use[file] <= upto_shard):
                verified[file] = r.finish()
                summary.bytes_read += r.bytes_read

    entries: list[dict] = []
    try:
        for i, shard in enumerate(plan.shards):
            if only is not None and shard.name not in only:
                continue
            planned = shard_entry(shard, "", upstream_sha)
            found = publisher.find_reusable(planned) if upstream_sha_known(upstream_sha, shard) else None
            if found is None and publish_only:
                raise HubpadError(f"{shard.name} is not staged on {publisher.label}: a part run is missing or "
                                  f"failed; run its `hubpad mirror ... --part i/K` first (nothing was published)")
            if found is not None and not found.get("verified", True):
                # Staged by a run that stopped before it had hashed all of this shard's inputs: the bytes it was
                # built from were never checked (a corrupted download is caught only by the file's hash). Rebuild
                # it from inputs read and hashed now, hash only, and keep the staged copy only if it is identical.
                if build_shard(shard, reader, None) != found.get("sha256"):
                    log(f"warning: staged {shard.name} does not match its upstream bytes (an earlier run read "
                        f"corrupted bytes?); building it again")
                    for f in shard.source_ranges():  # fresh readers: the shard's ranges are read again from 0
                        summary.bytes_read += readers.pop(f).bytes_read
                    found = None
            if found is not None:
                publisher.keep_shard(found)
                summary.shards_reused.append(shard.name)
                entries.append(found)
                finish_files(i)
                continue
            with group(f"{shard.name} ({human(shard.size)})"):
                path = publisher.shard_path(shard.name)
                progress = Progress(shard.name, shard.size, quiet=quiet)
                digest = build_shard(shard, reader, path, on_bytes=progress.update)
                progress.close()
                finish_files(i)
            summary.bytes_written += shard.size
            entry = shard_entry(shard, digest, {f: verified.get(f, upstream_sha.get(f)) for f in upstream_sha})
            entry["verified"] = all(f in verified for f in shard.source_ranges())
            publisher.put_shard(entry, path)
            summary.shards_built.append(shard.name)
            entries.append(entry)
        finish_files(None)
        if only is not None:  # one part of a fan-out: its shards are staged and verified; publish comes later
            for entry in entries:
                entry["verified"] = True
            publisher.mark_verified(entries)
            publisher.abort()
            summary.changed = bool(summary.shards_built)
            summary.seconds = time.monotonic() - started
            log(f"staged {len(summary.shards_built)} shard(s), {len(summary.shards_reused)} already staged")
            return summary
        # Local sources learn their hashes only now: fix up the entries' recorded inputs.
        for shard, entry in zip(plan.shards, entries):
            full = {f: verified.get(f, upstream_sha.get(f)) for f in upstream_sha}
            entry["verified"] = True
            entry["inputs"] = shard_inputs_key(shard, full)
            for src in entry["sources"]:
                src["sha256"] = full.get(src["file"])

        upstream_files: dict[str, dict] = {}
        for f in plan.weight_files:
            upstream_files[f] = {"size": files[f].size, "sha256": verified.get(f, files[f].sha256)}
        for path in plan.copied_files:
            upstream_files[path] = publisher.copy_file(source, path)
        for path in ("config.json", INDEX, "README.md"):
            if path in files:
                upstream_files[path] = {"size": files[path].size, "sha256": files[path].sha256 or _sha(source, path)}

        if source.kind == "local":
            from .check import digest_of, file_sha256

            hashes = {f: e["sha256"] for f, e in upstream_files.items() if e.get("sha256")}
            for f in files:
                if f not in hashes:
                    hashes[f] = file_sha256(source.local_path(f))
            upstream_digest = digest_of(hashes)
        else:
            upstream_digest = None
        serving = dict(plan.adapter.serving(plan.config))
        serving["upstream_tp_values"] = plan.upstream_tp_values
        if plan.quant.weight_only_nvfp4:  # W4A16 NVFP4 experts: GB10 (sm_121) serves them with Marlin MoE kernels
            serving["extra_args"] = [*serving.get("extra_args", []), "--moe-backend", "marlin"]
        serving.update(serving_overrides or {})
        generated = ["config.json", INDEX, MANIFEST]
        manifest = build_manifest(plan, entries, upstream_files, publisher.target_info(), generated, serving)
        if upstream_digest:
            manifest["upstream"]["digest"] = upstream_digest
        publisher.put_file("config.json", config_json(plan).encode())
        publisher.put_file(INDEX, dumps(plan.index_json()).encode())
        card_files = derivative_files(plan, manifest, publisher, templates_dir, warn=False)
        # The card lists the generated files, itself included: render again once that list is known, so a
        # later `hubpad card` refresh renders exactly the same text.
        manifest["files"]["generated"] = sorted(set(generated) | set(card_files))
        card_files = derivative_files(plan, manifest, publisher, templates_dir)
        for path, text in card_files.items():
            publisher.put_file(path, text.encode())
        publisher.put_file(MANIFEST, dumps(manifest).encode())
        publisher.publish(manifest)
    except BaseException:
        publisher.abort()
        raise
    summary.changed = True
    summary.seconds = time.monotonic() - started
    log(f"done in {summary.seconds:.1f}s: {len(summary.shards_built)} shard(s) built, {len(summary.shards_reused)} "
        f"reused; {human(summary.bytes_read)} read, {human(summary.bytes_written)} written, "
        f"{human(summary.bytes_uploaded)} uploaded, peak disk {human(summary.peak_disk)}"
        + (f"; commit {summary.url}" if summary.url and summary.commit else ""))
    return summary


def is_up_to_date(existing: dict | None, plan: Plan) -> bool:
    """The target already carries this exact upstream commit, padded the same way by this format version."""
    if not existing or plan.source.commit is None:
        return False
    from . import FORMAT_VERSION

    return (existing.get("upstream", {}).get("commit") == plan.source.commit
            and existing.get("upstream", {}).get("repo") == plan.source.label
            and existing.get("tp") == plan.tp and existing.get("format_version") == FORMAT_VERSION
            and [s["name"] for s in existing.get("shards", [])] == [s.name for s in plan.shards])


def upstream_sha_known(upstream_sha: dict[str, str | None], shard) -> bool:
    return all(upstream_sha.get(f) for f in shard.source_ranges())


def _sha(source: Source, path: str) -> str:
    return hashlib.sha256(source.read_file(path)).hexdigest()
