"""One mirror run: source → plan → pad → writer → publisher.

The publisher decides where bytes land (a local temp dir, or a Hub staging branch) and makes the result
visible in one step at the end. This module only sequences the work and keeps the books (bytes moved,
peak disk, which shards were reused). How progress is shown is the caller's business (`RunHooks`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import ContextManager, Protocol

from hubpad.errors import ConfigError, HubpadError
from hubpad.formats.manifest import dumps, is_fresh
from hubpad.formats.names import INDEX, MANIFEST
from hubpad.plan.adapters.drafts import default_speculative_tokens, draft_method
from hubpad.plan.adapters.vllm import min_vllm
from hubpad.plan.folders import folder_indexes
from hubpad.plan.model import Plan, ShardPlan
from hubpad.plan.vllm_route import route_flags
from hubpad.publish.base import Publisher, Summary
from hubpad.run.derivative import derivative_files
from hubpad.source.base import VerifiedReader
from hubpad.source.blocks import BlockReader
from hubpad.util.block_hashes import usable_record
from hubpad.util.hashing import bytes_sha256, digest_of, file_sha256
from hubpad.util.log import log
from hubpad.util.sizes import human
from hubpad.write.manifest import build_manifest, config_json, config_text, shard_entry, shard_inputs_key
from hubpad.write.pad import build_shard


class ProgressSink(Protocol):
    def update(self, n: int) -> None: ...

    def close(self) -> None: ...


class _NoProgress:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


class _WhenBytes:
    """A progress sink made only once bytes come (a check that reads nothing shows nothing)."""

    def __init__(self, make: Callable[[], ProgressSink]) -> None:
        self._make, self._sink = make, None

    def update(self, n: int) -> None:
        if self._sink is None:
            self._sink = self._make()
        self._sink.update(n)

    def close(self) -> None:
        if self._sink is not None:
            self._sink.close()


@dataclass
class RunHooks:
    """How a run shows itself: a progress sink per shard, and a collapsible log group per shard (Actions)."""

    progress: Callable[[str, int], ProgressSink] = lambda label, total: _NoProgress()
    group: Callable[[str], ContextManager[None]] = lambda title: contextlib.nullcontext()


@dataclass
class _Inputs:
    """Upstream files being read and checked, the sha256 of those checked, and their per-block hashes.

    A file with a usable block record (`records`: same sha256 as when an earlier run read it in full) is read
    only in the blocks the built shards need (BlockReader); any other file is read in full (VerifiedReader).
    """

    plan: Plan
    summary: Summary
    records: dict[str, dict] = field(default_factory=dict)
    readers: dict[str, VerifiedReader] = field(default_factory=dict)
    verified: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.last_use = {t.src.file: i for i, s in enumerate(self.plan.shards) for t in s.tensors}
        self.blocks = dict(self.records)  # files read partially (or not at all) keep their record

    def reader(self, file: str) -> VerifiedReader:
        if file not in self.readers:
            entry, record = self.plan.files[file], self.records.get(file)
            # A local upstream is hashed in full before any incremental run (_upstream_hashes): block records
            # would never save it a read, so only remote upstreams pay for them.
            self.readers[file] = (BlockReader(self.plan.source, entry, record) if record
                                  else VerifiedReader(self.plan.source, entry, blocks=self.plan.source.kind != "local",
                                                      header=self.plan.header_digests.get(file)))
        return self.readers[file]

    def want(self, shard: ShardPlan) -> None:
        """Name the ranges `shard` is about to be built from (a BlockReader reads only their blocks)."""
        for file, ranges in shard.source_ranges().items():
            reader = self.reader(file)
            if isinstance(reader, BlockReader):
                reader.want(ranges)

    def finish(self, upto_shard: int | None) -> None:
        """Read to the end (and check) every file no shard after `upto_shard` needs (None: all of them)."""
        for file, r in list(self.readers.items()):
            if file not in self.verified and (upto_shard is None or self.last_use[file] <= upto_shard):
                self.verified[file] = r.finish()
                self.summary.bytes_read += r.bytes_read
                if not isinstance(r, BlockReader) and r.block_record():
                    self.blocks[file] = r.block_record()

    def restart(self, shard: ShardPlan) -> None:
        """Fresh readers for a shard's files: its ranges are read again from the start."""
        for f in shard.source_ranges():
            self.summary.bytes_read += self.readers.pop(f).bytes_read


def run_mirror(plan: Plan, publisher: Publisher, *, templates_dir: Path | None = None,
               serving_overrides: dict | None = None, only: set[str] | None = None,
               publish_only: bool = False, hooks: RunHooks | None = None) -> Summary:
    """Build and publish the padded derivative described by `plan`.

    `only`: stage just these shards and stop (one part of a fan-out). `publish_only`: build nothing; every
    shard must already be staged or published (the fan-out's final step).

    Raises ConfigError when the plan needs no padding, and any HubpadError of the source or publisher; on
    any failure nothing is published (`publisher.abort()`).
    """
    started = time.monotonic()
    hooks = hooks or RunHooks()
    for warning in plan.warnings:
        log(f"warning: {warning}")
    summary = _start_summary(plan, publisher)
    try:
        existing = publisher.prepare(plan)
    except BaseException:  # a refused or unreachable target: nothing of this run may stay behind (scratch, locks)
        publisher.abort()
        raise
    upstream_sha, fresh = _verdict(plan, publisher, existing, hooks)
    if fresh:
        return _settle_up_to_date(plan, publisher, existing)
    inputs = _Inputs(plan, summary, _block_records(plan, publisher, existing, upstream_sha))
    try:
        publisher.check_room(plan, _to_build(plan, publisher, upstream_sha, only, publish_only))
        entries = _build_or_reuse_shards(plan, publisher, inputs, upstream_sha, only, publish_only, hooks)
        inputs.finish(None)
        if only is not None:
            return _finish_part(publisher, entries, summary, started, _weight_file_records(plan, inputs))
        _record_verified_inputs(plan, entries, inputs.verified, upstream_sha)
        manifest = _write_generated_files(plan, publisher, entries, inputs, templates_dir, serving_overrides)
        publisher.publish(manifest)
    except BaseException:
        publisher.abort()
        raise
    summary.changed = True
    summary.seconds = time.monotonic() - started
    _log_done(summary)
    _log_route(plan)
    return summary


def preview(plan: Plan, publisher: Publisher, publish_only: bool = False) -> dict:
    """What `run_mirror` would do, writing nothing (`--dry-run`): the same checks of the target (a refusal raises
    the same error), the same freshness rule, so a dry run reaches the run's verdict, and, when it would publish,
    the disk the run checks before its first byte (`disk`: its figure, and why the run would stop, if it would).
    The publisher only reads (`inspect`): no lock, no scratch, nothing created or removed."""
    _check_needs_padding(plan)
    try:
        existing = publisher.inspect(plan)
        upstream_sha, fresh = _verdict(plan, publisher, existing)
        room = None if fresh else publisher.room(plan, _to_build(plan, publisher, upstream_sha, None, publish_only))
    finally:
        publisher.abort()
    return {"dry_run": True, "target": publisher.label, "upstream": plan.source.label,
            "upstream_commit": plan.source.commit, "up_to_date": fresh, "would_publish": not fresh,
            "bytes_out": plan.bytes_out, "shards": len(plan.shards),
            "holds": None if existing is None else {"upstream": (existing.get("upstream") or {}).get("repo"),
                                                    "tp": existing.get("tp")},
            "disk": None if room is None else {"need": room.need, "least": room.least, "free": room.free,
                                               "where": str(room.where), "said": room.said(),
                                               "stops": publisher.short_of_room(room)}}


def _verdict(plan: Plan, publisher: Publisher, existing: dict | None,
             hooks: RunHooks | None = None) -> tuple[dict[str, str | None], bool]:
    """The one rule for "up to date" (a run and a dry run both ask it): the target's hubpad.json records this
    upstream state, padded for this TP into these shards. Returns the upstream weight files' sha256 as known."""
    upstream_sha, upstream_state = _upstream_hashes(plan, publisher, existing, hooks)
    return upstream_sha, is_fresh(existing, plan.tp, upstream_state, plan.source.ref, [s.name for s in plan.shards])


def _to_build(plan: Plan, publisher: Publisher, upstream_sha: dict, only: set[str] | None,
              publish_only: bool) -> list[ShardPlan]:
    """The shards a run will build, as far as records tell before any byte is read (a record whose bytes no longer
    check is built after all)."""
    if publish_only:
        return []
    return [s for s in plan.shards if (only is None or s.name in only)
            and not publisher.may_reuse(shard_entry(s, "", upstream_sha))]


def _log_route(plan: Plan) -> None:
    """A derivative vLLM must serve through another class says so where the user looks first (the card says more)."""
    if plan.vllm_route:
        log(f"note: serve it with {' '.join(route_flags(plan.vllm_route))} (the card and the recipe pass it): "
            f"{plan.vllm_route['why']}")


def _start_summary(plan: Plan, publisher: Publisher) -> Summary:
    summary = publisher.summary
    summary.target = publisher.label
    summary.upstream_commit = plan.source.commit
    _check_needs_padding(plan)
    return summary


def _check_needs_padding(plan: Plan) -> None:
    if not plan.needs_padding:
        raise ConfigError(f"{plan.source.label} already shards at tp={plan.tp}; nothing to pad "
                          f"(stock TP values that work: {plan.upstream_tp_values})")


def _settle_up_to_date(plan: Plan, publisher: Publisher, existing: dict) -> Summary:
    summary = publisher.summary
    summary.up_to_date = True
    summary.commit = existing.get("published_commit")
    publisher.settle_published()
    publisher.abort()
    return summary  # the caller says so, once (the CLI on stdout)


def _upstream_hashes(plan: Plan, publisher: Publisher, existing: dict | None,
                     hooks: RunHooks | None = None) -> tuple[dict[str, str | None], str | None]:
    """The sha256 of each upstream weight file, as far as known before reading (the Hub lists them), and the
    upstream's state for the freshness rule: its commit, or a local upstream's content digest."""
    source = plan.source
    if source.kind == "local" and (publisher.has_staged_shards() or (existing or {}).get("shards")):
        # Staged or published shards can only be matched to a local upstream by content: hash the local files
        # first (a local read pass is cheap next to rebuilding and re-uploading), so records made now and
        # on a resumed run agree. The same hashes say whether anything changed at all (hubpad.json's digest).
        progress = (hooks or RunHooks()).progress(f"hashing {source.label}", sum(e.size for e in plan.files.values()))
        hashes = {f: file_sha256(source.local_path(f), progress.update) for f in plan.files}
        progress.close()
        return {f: hashes[f] for f in plan.weight_files}, digest_of(hashes)
    return {f: plan.files[f].sha256 for f in plan.weight_files}, source.commit


def _block_records(plan: Plan, publisher: Publisher, existing: dict | None, upstream_sha: dict) -> dict[str, dict]:
    """The per-block hashes of each upstream weight file whose sha256 is unchanged: the existing manifest's, else
    those a fan-out part run staged (it read the file in full)."""
    old = ((existing or {}).get("upstream") or {}).get("files") or {}
    records = {}
    for f in plan.weight_files:
        sha, header = upstream_sha.get(f), plan.header_digests.get(f, (0, None))[1]
        record = (usable_record(old.get(f), sha, header)
                  or usable_record(publisher.staged_upstream_file(f, sha), sha, header))
        if record:
            records[f] = record
    return records


def _build_or_reuse_shards(plan: Plan, publisher: Publisher, inputs: _Inputs, upstream_sha: dict,
                           only: set[str] | None, publish_only: bool, hooks: RunHooks) -> list[dict]:
    """Each output shard in order: kept when the target already has it with the same inputs, else built."""
    summary, entries = inputs.summary, []
    unchecked: list[tuple[ShardPlan, dict]] = []  # built, some input file not yet read to its end and checked
    for i, shard in enumerate(plan.shards):
        if only is not None and shard.name not in only:
            continue
        found = _reusable(shard, publisher, inputs, upstream_sha, publish_only, hooks)
        if found is not None:
            publisher.keep_shard(found)
            summary.shards_reused.append(shard.name)
            entries.append(found)
            inputs.finish(i)
            unchecked = _record_checked(publisher, unchecked, inputs.verified, upstream_sha)
            continue
        with hooks.group(f"{shard.name} ({human(shard.size)})"):
            path = publisher.shard_path(shard.name)
            progress = hooks.progress(shard.name, shard.size)
            inputs.want(shard)
            # A publisher that stages shards keeps them durably itself (the Hub): the local file is scratch, no fsync.
            digest = build_shard(shard, inputs.reader, path, on_bytes=progress.update, durable=not publisher.stages,
                                 reserve=partial(publisher.reserve_disk, path))
            progress.close()
            inputs.finish(i)
        summary.bytes_written += shard.size
        entry = shard_entry(shard, digest, {f: inputs.verified.get(f, upstream_sha.get(f)) for f in upstream_sha})
        entry["verified"] = all(f in inputs.verified for f in shard.source_ranges())
        publisher.put_shard(entry, path)
        summary.shards_built.append(shard.name)
        entries.append(entry)
        unchecked = _record_checked(publisher, unchecked + [(shard, entry)], inputs.verified, upstream_sha)
    return entries


def _record_checked(publisher: Publisher, unchecked: list[tuple[ShardPlan, dict]], verified: dict[str, str],
                    upstream_sha: dict) -> list[tuple[ShardPlan, dict]]:
    """Hand the publisher each built shard whose input files are now all read and checked, its inputs keyed by
    their checked hashes (what lets the run after an interrupted one reuse it); return the others. A publisher
    that stages its shards (the Hub) keeps its own records."""
    if publisher.stages:
        return []
    waiting = []
    for shard, entry in unchecked:
        if all(f in verified for f in shard.source_ranges()):
            publisher.record_shard(_with_checked_inputs(shard, dict(entry), verified, upstream_sha))
        else:
            waiting.append((shard, entry))
    return waiting


def _reusable(shard: ShardPlan, publisher: Publisher, inputs: _Inputs, upstream_sha: dict,
              publish_only: bool, hooks: RunHooks) -> dict | None:
    """The target's entry for this exact shard, if it has one whose bytes can be trusted."""
    planned = shard_entry(shard, "", upstream_sha)
    known = all(upstream_sha.get(f) for f in shard.source_ranges())
    check = _WhenBytes(lambda: hooks.progress(f"checking {shard.name}", shard.size))
    found = publisher.find_reusable(planned, check.update) if known else None
    check.close()
    if found is None and publish_only:
        raise HubpadError(f"{shard.name} is not staged on {publisher.label}: a part run is missing or "
                          f"failed; run its `hubpad mirror ... --part i/K` first (nothing was published)")
    if found is not None and not found.get("verified", True):
        # Staged by a run that stopped before it had hashed all of this shard's inputs: the bytes it was
        # built from were never checked (a corrupted download is caught only by the file's hash). Rebuild
        # it from inputs read and hashed now, hash only, and keep the staged copy only if it is identical.
        inputs.want(shard)
        if build_shard(shard, inputs.reader, None) != found.get("sha256"):
            log(f"warning: staged {shard.name} does not match its upstream bytes (an earlier run read "
                f"corrupted bytes?); building it again")
            inputs.restart(shard)
            return None
    return found


def _finish_part(publisher: Publisher, entries: list[dict], summary: Summary, started: float,
                 upstream_files: dict[str, dict]) -> Summary:
    """One part of a fan-out: its shards are staged and verified; the publish comes later."""
    for entry in entries:
        entry["verified"] = True
    publisher.mark_verified(entries, {f: r for f, r in upstream_files.items() if "blocks" in r})
    publisher.abort()
    summary.changed = bool(summary.shards_built)
    summary.seconds = time.monotonic() - started
    log(f"staged {len(summary.shards_built)} shard(s), {len(summary.shards_reused)} already staged")
    return summary


def _record_verified_inputs(plan: Plan, entries: list[dict], verified: dict[str, str], upstream_sha: dict) -> None:
    """Local sources learn their hashes only while read: fix up the entries' recorded inputs."""
    for shard, entry in zip(plan.shards, entries):
        _with_checked_inputs(shard, entry, verified, upstream_sha)


def _with_checked_inputs(shard: ShardPlan, entry: dict, verified: dict[str, str], upstream_sha: dict) -> dict:
    """`entry`, its inputs keyed and its sources named by the checked hashes of its upstream files."""
    full = {f: verified.get(f, upstream_sha.get(f)) for f in upstream_sha}
    entry["verified"] = True
    entry["inputs"] = shard_inputs_key(shard, full)
    for src in entry["sources"]:
        src["sha256"] = full.get(src["file"])
    return entry


def _write_generated_files(plan: Plan, publisher: Publisher, entries: list[dict], inputs: _Inputs,
                           templates_dir: Path | None, serving_overrides: dict | None) -> dict:
    """Copy the other upstream files, then write config, index, card, recipe, patch and hubpad.json."""
    upstream_files = _upstream_file_records(plan, publisher, inputs)
    generated = plan.built_files()
    manifest = build_manifest(plan, entries, upstream_files, publisher.target_info(), generated,
                              _serving(plan, serving_overrides))
    if plan.source.kind == "local":
        manifest["upstream"]["digest"] = _local_digest(plan, upstream_files)
    publisher.put_file("config.json", config_json(plan).encode())
    indexes = folder_indexes(plan.folders, plan.shards) if plan.folders else {INDEX: plan.index_json()}
    for path, index in indexes.items():
        publisher.put_file(path, dumps(index).encode())
    for path, config in plan.folder_configs.items():
        publisher.put_file(path, config_text(config).encode())
    card_files = derivative_files(plan, manifest, publisher, templates_dir, warn=False)
    # The card lists the generated files, itself included: render again once that list is known, so a
    # later `hubpad card` refresh renders exactly the same text.
    manifest["files"]["generated"] = sorted(set(generated) | set(card_files))
    for path, text in derivative_files(plan, manifest, publisher, templates_dir).items():
        publisher.put_file(path, text.encode())
    publisher.put_file(MANIFEST, dumps(manifest).encode())
    return manifest


def _weight_file_records(plan: Plan, inputs: _Inputs) -> dict[str, dict]:
    """{path: {size, sha256, blocks?}} of every upstream weight file."""
    records = {}
    for f in plan.weight_files:
        records[f] = {"size": plan.files[f].size, "sha256": inputs.verified.get(f, plan.files[f].sha256)}
        if f in inputs.blocks:
            records[f]["blocks"] = inputs.blocks[f]
            if f in plan.header_digests:  # checked: against the stream on a full read, else by the record used
                records[f]["header_sha256"] = plan.header_digests[f][1]
    return records


def _upstream_file_records(plan: Plan, publisher: Publisher, inputs: _Inputs) -> dict[str, dict]:
    """{path: {size, sha256, blocks?}} of every upstream file the derivative is built from or carries."""
    files, records = plan.files, _weight_file_records(plan, inputs)
    for path in plan.copied_files:
        records[path] = publisher.copy_file(plan.source, path)
    folder_files = [*plan.folder_configs, *(f.index for f in plan.folders if f.index)]  # rewritten from upstream's
    for path in ("config.json", INDEX, "README.md", *folder_files):
        if path in files:
            records[path] = {"size": files[path].size,
                             "sha256": files[path].sha256 or bytes_sha256(plan.source.read_file(path))}
    return records


def _local_digest(plan: Plan, upstream_files: dict[str, dict]) -> str:
    """The content digest a local upstream is known by (what `hubpad check` compares)."""
    hashes = {f: e["sha256"] for f, e in upstream_files.items() if e.get("sha256")}
    for f in plan.files:
        if f not in hashes:
            hashes[f] = file_sha256(plan.source.local_path(f))
    return digest_of(hashes)


def _serving(plan: Plan, overrides: dict | None) -> dict:
    """The family's vLLM serving flags, with what the format needs and the mirrors file's overrides."""
    serving = dict(plan.adapter.serving(plan.new_config))  # the derivative's config: padded heads included
    serving["upstream_tp_values"] = plan.upstream_tp_values
    notes = plan.adapter.tp_notes(plan.new_config, plan.tp)  # what serving at this TP needs (the card says it)
    if notes:
        serving["notes"] = [*serving.get("notes", []), *notes]
    features = list(serving.pop("vllm_features", []))
    hidden = int(plan.adapter.dims_config(plan.new_config).get("hidden_size") or 0)
    if serving.get("speculative_config") and plan.adapter.mtp_fc_shards_hidden and hidden % plan.tp:
        # vLLM's MTP layer for the family shards the hidden size: no MTP at this TP (the card says why)
        serving["speculative_config"] = None
        features = [f for f in features if not f.startswith("spec:")]
        serving["mtp_unavailable"] = (f"MTP speculative decoding is left out: vLLM's MTP layer for this model "
                                      f"projects to the hidden size ({hidden}) column-parallel, which needs "
                                      f"hidden_size % {plan.tp} == 0, and padding cannot change the hidden size")
    if plan.vocab.get("patch_needed"):
        features.append("plugin:vocab-patch")
    if plan.vllm_route:  # vLLM's own class would misread the padded config: the class or implementation it needs
        serving.update({k: plan.vllm_route[k] for k in ("hf_overrides", "model_impl") if plan.vllm_route.get(k)})
        features += plan.vllm_route["features"]
    if plan.quant.weight_only_nvfp4:  # W4A16 NVFP4 experts: GB10 (sm_121) serves them with Marlin MoE kernels
        serving["extra_args"] = [*serving.get("extra_args", []), "--moe-backend", "marlin"]
        features.append("flag:moe-backend-marlin")
    paired = (overrides or {}).get("speculative_config")
    if isinstance(paired, dict) and paired.get("method"):  # a draft paired with this target (--draft): its method too
        features.append(f"spec:{paired['method']}")
    serving["min_vllm"] = min_vllm(features)
    method = draft_method(plan.config)
    if method and not serving.get("draft"):  # a draft repo of a family's own layers (an MTP-only repo): no model alone
        serving.update(speculative_config=None, draft={"method": method})
    overrides = dict(overrides or {})
    if "draft" in overrides:  # a draft's pairing (--draft-for): merged into what the adapter says of the draft
        if not serving.get("draft"):
            raise ConfigError(f"--draft-for: {plan.adapter.name} is not a speculative-decoding draft hubpad knows")
        pair = {k: v for k, v in overrides.pop("draft").items() if v is not None}
        serving["draft"] = {**serving["draft"], **pair}
    serving.update(overrides)
    if serving.get("draft"):
        serving["draft"].setdefault("num_speculative_tokens",
                                    default_speculative_tokens(serving["draft"]["method"], plan.config))
    return serving


def _log_done(summary: Summary) -> None:
    log(f"done in {summary.seconds:.1f}s: {len(summary.shards_built)} shard(s) built, {len(summary.shards_reused)} "
        f"reused; {human(summary.bytes_read)} read, {human(summary.bytes_written)} written, "
        f"{human(summary.bytes_uploaded)} uploaded, peak disk {human(summary.peak_disk)}"
        + (f"; commit {summary.url}" if summary.url and summary.commit else ""))
