"""The `hubpad` command line. Expected failures print one `error:` line and exit 1, never a traceback."""

from __future__ import annotations

import functools
import gc
import json
import os
import sys
from pathlib import Path

import click

from hubpad import __version__
from hubpad.app.gha import append_summary
from hubpad.app.gha import error as gha_error
from hubpad.app.gha import in_github_actions
from hubpad.app.gha import set_outputs as gha_set_outputs
from hubpad.app.advice_report import advice_text
from hubpad.app.report import output_width, plan_text
from hubpad.errors import ConfigError, HubpadError
from hubpad.plan.advisor import DEFAULT_TPS, advise
from hubpad.plan.planner import make_plan
from hubpad.plan.shards import split_parts
from hubpad.source import open_source
from hubpad.source.hub_api import api_for, whoami_name
from hubpad.util.log import log
from hubpad.util.redact import redact
from hubpad.util.refs import is_local, is_repo_id
from hubpad.util.sizes import human, parse_size_floor

# The commands that build, publish, check or verify import their layers when they run: `hubpad plan` on a real
# checkpoint is close to its header-parse floor, and those imports (jinja2, yaml, the run steps) would be a
# tenth of its time.


def _size(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_size_floor(value, param.opts[0] if param is not None else "size")
    except (HubpadError, ValueError) as exc:
        raise click.BadParameter(str(exc)) from None


# Exit codes (README "Exit codes"): 0 done, 1 a failure (one `error:` line), 2 a usage mistake (one `error:` line),
# 130 interrupted (Ctrl-C; nothing half-written is left looking finished).
EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130
_NoArgsIsHelp = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2


class HubpadGroup(click.Group):
    """Every error in one style: one `error: ...` line on stderr, never a traceback (HUBPAD_DEBUG=1 shows one)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NoArgsIsHelp as exc:  # `hubpad` alone: the help itself, as click shows it (exit 2)
            click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
            sys.exit(EXIT_USAGE)
        except click.UsageError as exc:  # click's own usage text is four lines starting `Error:`; ours is one
            command = exc.ctx.command_path if exc.ctx is not None else "hubpad"
            _fail(f"{exc.format_message()} (see `{command} --help`)", EXIT_USAGE)
        except click.ClickException as exc:
            _fail(exc.format_message(), exc.exit_code or EXIT_FAILURE)
        except (click.exceptions.Abort, KeyboardInterrupt, EOFError):
            _fail("interrupted", EXIT_INTERRUPTED)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except HubpadError as exc:
            for line in getattr(exc, "problems", None) or [str(exc)]:  # a file's mistakes: one line each
                _echo_error(line)
            sys.exit(EXIT_FAILURE)
        except KeyboardInterrupt:
            _fail("interrupted", EXIT_INTERRUPTED)
        except OSError as exc:  # (huggingface_hub's offline mode is one: said as what could not be reached)
            _fail(_transport_error(exc) or (f"{exc.strerror or exc}: {exc.filename}" if getattr(exc, "filename", None)
                                            else str(exc)))
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as exc:  # a bug or an unexpected library error: still one line, unless debugging
            if os.environ.get("HUBPAD_DEBUG"):
                raise
            unreachable = _transport_error(exc)
            if unreachable:
                _fail(unreachable)
            _fail(f"internal error ({type(exc).__name__}: {exc}); set HUBPAD_DEBUG=1 for a traceback")


def _transport_error(exc: BaseException) -> str | None:
    """A network failure that escaped the Hub layer's translation, as what could not be reached (else None)."""
    try:
        from huggingface_hub.errors import OfflineModeIsEnabled
        from huggingface_hub.utils import httpx
    except ImportError:  # pragma: no cover
        return None
    if isinstance(exc, (httpx.TransportError, httpx.StreamError, OfflineModeIsEnabled)):
        from hubpad.source.hub_api import unreachable

        return unreachable(exc)
    return None


def _echo_error(message: str) -> None:
    line = " ".join(redact(message).split())
    if in_github_actions():
        gha_error(line)
    click.echo(f"error: {line}", err=True)


def _fail(message: str, code: int = EXIT_FAILURE) -> None:
    _echo_error(message)
    sys.exit(code)


@click.group(cls=HubpadGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hubpad")
def main() -> None:
    """Pad a Hugging Face checkpoint so it serves at a tensor-parallel size its authors never planned for.

    SRC and DST: a value starting with . / or ~, or whose first path component exists, is a local directory;
    anything else is a Hub repo id (write ./NAME for a local folder that does not exist yet).

    Exit codes: 0 done, 1 failure, 2 usage mistake, 130 interrupted; errors are one `error:` line on stderr.
    """


# ------------------------------------------------------------------------------------------------ jobs options

_RAW_ARGS = "hubpad.raw_args"


class JobCommand(click.Command):
    """A command that can also run as a Hugging Face job: keeps its own command line, to run the same one there."""

    def parse_args(self, ctx, args):
        ctx.meta[_RAW_ARGS] = list(args)
        return super().parse_args(ctx, args)


class JobOptions:
    """`--on hf-jobs` and how the job runs (run/hf_jobs.py)."""

    def __init__(self, on, flavor, timeout, namespace, install, attempts, detach) -> None:
        self.on, self.flavor, self.timeout, self.namespace = on, flavor, timeout, namespace
        self.install, self.attempts, self.detach = install, attempts, detach

    def settings(self, attempts: int = 1):
        from hubpad.run.hf_jobs import DEFAULT_FLAVOR, DEFAULT_TIMEOUT, Settings

        return Settings(flavor=self.flavor or DEFAULT_FLAVOR, timeout=self.timeout or DEFAULT_TIMEOUT,
                        namespace=self.namespace, install=self.install, attempts=self.attempts or attempts)


# Options that say how a job runs, never passed on to the hubpad inside it.
_JOB_FLAGS = ("--on", "--flavor", "--timeout", "--namespace", "--install", "--attempts", "--detach")


def _job_settings(f, with_on: bool = True):
    """The options of a command that starts Hugging Face jobs; the function gets them as `jobs` (a JobOptions, or
    None without --on)."""
    options = [
        click.option("--flavor", default=None, metavar="FLAVOR",
                     help="Jobs hardware (default cpu-upgrade: 8 vCPU, 32 GB RAM, 50 GB disk); "
                          "`hf jobs hardware` lists them with prices."),
        click.option("--timeout", "job_timeout", default=None, metavar="DURATION",
                     help="Jobs: stop a job after this long (default 6h): 90m, 6h, 1d."),
        click.option("--namespace", "job_namespace", default=None, metavar="USER_OR_ORG",
                     help="Jobs: run (and bill) the job there (default: the token's user)."),
        click.option("--install", "job_install", default=None, metavar="SPEC",
                     help="Jobs: the hubpad a job installs (default: this hubpad's release or commit): "
                          "hubpad==X.Y.Z or OWNER/REPO@<40-hex commit>."),
        click.option("--attempts", type=click.IntRange(1, 10), default=None,
                     help="Jobs: runs of a failing job, each resuming what was staged (default 1; 3 per part of "
                          "--parts)."),
    ]
    if with_on:
        options = [click.option("--on", type=click.Choice(["hf-jobs"]), default=None,
                                help="Run this command as a Hugging Face job, next to the weights (billed per minute "
                                     "to the namespace), following its log here."),
                   *options,
                   click.option("--detach", is_flag=True,
                                help="Jobs: print the job's id and URL and return; the job runs on.")]

    @functools.wraps(f)
    def wrapper(*args, flavor=None, job_timeout=None, job_namespace=None, job_install=None, attempts=None, on=None,
                detach=False, **kw):
        jobs = JobOptions(on, flavor, job_timeout, job_namespace, job_install, attempts, detach)
        if with_on and not on:
            given = [n for n, v in (("--flavor", flavor), ("--timeout", job_timeout), ("--namespace", job_namespace),
                                    ("--install", job_install), ("--attempts", attempts), ("--detach", detach)) if v]
            if given:
                raise click.UsageError(f"{given[0]} says how a job runs: add --on hf-jobs",
                                       click.get_current_context(silent=True))
            jobs = None
        return f(*args, jobs=jobs, **kw)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def _job_options(f):
    return _job_settings(f, with_on=True)


def _job_settings_only(f):
    return _job_settings(f, with_on=False)


def _remote_argv(ctx, drop=(), rename=None) -> list[str]:
    """This command's own command line (as typed) for the hubpad inside a job: without the job options and `drop`,
    with `rename`'s values (the mirrors file's name there)."""
    rename = rename or {}
    drop = set(drop) | set(_JOB_FLAGS)
    takes_value = {name: not (p.is_flag or p.count) for p in ctx.command.params if isinstance(p, click.Option)
                   for name in (*p.opts, *p.secondary_opts)}
    out: list[str] = []
    args = iter(ctx.meta.get(_RAW_ARGS, []))
    for arg in args:
        if arg == "--":
            out += [arg, *args]
            break
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name not in takes_value:
            out.append(arg)
            continue
        if takes_value[name] and not eq:
            value = next(args, "")
        if name in drop:
            continue
        out += [name, rename.get(name, value)] if takes_value[name] else [name]
    return [ctx.info_name, *out]


def _on_jobs(jobs: JobOptions, *, refs=(), config_file=None, templates=None, disk=False, max_disk=None,
             as_json=False) -> None:
    """Run this command as one Hugging Face job (run/hf_jobs.py) and report how it ended."""
    from hubpad.run import hf_jobs

    launcher = _launcher(jobs, refs, templates)
    argv = _remote_argv(click.get_current_context(), drop=("--max-disk",), rename={"--config": hf_jobs.CONFIG_NAME})
    command = hf_jobs.job_command(launcher, argv, config_file=config_file, disk=disk, max_disk=max_disk,
                                  about=next((r for r in refs if r), None))
    _job_report(hf_jobs.run(launcher, command, detach=jobs.detach), jobs.detach, as_json)


def _launcher(jobs: JobOptions, refs, templates, attempts: int = 1):
    from hubpad.run.hf_jobs import prepare, refuse_local

    refuse_local(refs, templates)
    return prepare(jobs.settings(attempts))


def _job_report(info, detached: bool, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"job_id": info.id, "url": info.url, "stage": info.status.stage}, indent=2))
    elif detached:
        click.echo(f"job {info.id} started: {info.url}")
    else:
        click.echo(f"job {info.id} completed: {info.url}")


def _fan_out_on_jobs(jobs: JobOptions, job: Job, parts: int, refs, templates, config_file, dry_run,
                     as_json) -> None:
    """`mirror --on hf-jobs --parts K`: K stage jobs, then the publish job (run/jobs_fanout.py)."""
    from hubpad.run import hf_jobs
    from hubpad.run.jobs_fanout import DEFAULT_PART_ATTEMPTS, fan_out

    ctx = click.get_current_context()
    if jobs.detach or dry_run or ctx.params.get("part"):
        flag = "--detach" if jobs.detach else "--dry-run" if dry_run else "--part"
        raise click.UsageError(f"--parts starts and awaits every part here: drop {flag}", ctx)
    launcher = _launcher(jobs, refs, templates, DEFAULT_PART_ATTEMPTS)
    argv = _remote_argv(ctx, drop=("--max-disk", "--parts", "--revision"), rename={"--config": hf_jobs.CONFIG_NAME})
    command = hf_jobs.job_command(launcher, argv, config_file=config_file, disk=True,
                                  max_disk=ctx.params.get("max_disk"), about=job.src)
    info = fan_out(launcher, command, src=job.src, revision=job.revision, tp=job.tp, shard_size=job.shard_size,
                   k=parts)
    _job_report(info, False, as_json)


# ------------------------------------------------------------------------------------------------ plan


def _tp_number(value: str) -> int:
    """A tensor-parallel size as every command reads it; the same message wherever it is wrong."""
    text = str(value).strip()
    if text.isdigit() and 1 <= int(text) <= 1024:
        return int(text)
    raise click.BadParameter(f"{value!r} is not a tensor-parallel size (a whole number from 1 to 1024; "
                             f"`hubpad plan` also takes auto)")


def _repo_id(ctx, param, value: str | None) -> str | None:
    """`--repo-id NAMESPACE/NAME`: a usage mistake (exit 2) when it is not a Hub repo id."""
    if value is not None and not is_repo_id(value):
        raise click.BadParameter(f"{value!r} is not a Hub repo id (namespace/name)")
    return value


def _tp_value(ctx, param, value: str | None) -> int | None:
    """`--tp N` of mirror, publish and check."""
    return None if value is None else _tp_number(value)


def _tp_values(ctx, param, values: tuple[str, ...]) -> tuple[int | str, ...]:
    """`--tp N` (repeatable) or `--tp auto` of plan: sizes 1..1024, or the word auto."""
    return tuple("auto" if v.strip().lower() == "auto" else _tp_number(v) for v in values)


@main.command(cls=JobCommand)
@click.argument("src")
@click.option("--tp", "tps", multiple=True, callback=_tp_values, metavar="N|auto",
              help="Target tensor-parallel size. Without it, with auto or with several: the TP advisor "
                   "(one row per TP 1..8 plus the sizes given).")
@click.option("--revision", default=None, help="Upstream branch, tag or commit (Hub only; default main).")
@click.option("--shard-size", default="5GB", callback=_size, show_default=True, help="Output shard size.")
@click.option("--parts", type=click.IntRange(1, 256), default=None, help="Split the output shards into K parts.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@_job_options
def plan(src: str, tps: tuple[int | str, ...], revision: str | None, shard_size: int, parts: int | None,
         as_json: bool, jobs: JobOptions | None) -> None:
    """Show what padding SRC for TP=N changes, reading only config, index and headers (no N: which TPs work)."""
    if jobs:
        return _on_jobs(jobs, refs=(src,), as_json=as_json)
    # The plan's ~10^6 objects live until the command ends and hold no reference cycles: the cyclic collector
    # (paused while planning) would only scan them again, a tenth of the time on a real Hy3. It resumes after
    # they are freed.
    enabled = gc.isenabled()
    gc.disable()
    try:
        _show_plan(src, tps, revision, shard_size, parts, as_json)
    finally:
        if enabled:
            gc.enable()


def _show_plan(src: str, tps: tuple[int | str, ...], revision: str | None, shard_size: int, parts: int | None,
               as_json: bool) -> None:
    sizes = [t for t in tps if t != "auto"]
    if len(tps) != 1 or "auto" in tps:
        if parts:
            raise ConfigError("--parts needs a single --tp N")
        advice = advise(open_source(src, revision), DEFAULT_TPS + tuple(sizes))
        click.echo(json.dumps(advice.to_json(), indent=2) if as_json else advice_text(advice, output_width()))
        return
    p = make_plan(open_source(src, revision), sizes[0], shard_size)
    split = split_parts(p, parts) if parts else None
    set_outputs({"total_bytes": p.bytes_out, "shard_count": len(p.shards), "upstream_sha": p.source.commit or "",
                 "changed": p.needs_padding})
    if as_json:
        data = p.to_json()
        if split is not None:
            data["parts"] = split
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(plan_text(p, split, width=output_width()))


# ------------------------------------------------------------------------------------------------ mirror


def _mirror_options(f):
    options = [
        click.option("--tp", callback=_tp_value, default=None, metavar="N",
                     help="Target tensor-parallel size. Required, unless --config's entry sets tp."),
        click.option("--to", "dst", default=None, help="Destination: a local directory or a Hub repo id "
                     "(default for a Hub SRC: <your user>/<name>-TP<N>)."),
        click.option("--repo-id", default=None, metavar="NAMESPACE/NAME", callback=_repo_id,
                     help="A local DST's card, recipe and commands name this Hub repo id (where you will upload it); "
                          "without it they name the local folder."),
        click.option("--revision", default=None, help="Upstream branch, tag or commit (Hub only; default main)."),
        click.option("--shard-size", default=None, callback=_size, help="Output shard size (default 5GB)."),
        click.option("--max-disk", default=None, callback=_size,
                     help="Cap on local scratch disk, in bytes (Hub targets); room beyond one shard lets the next "
                          "shards be padded while one uploads (default: two of the largest shards if free, else one)."),
        click.option("--workdir", type=click.Path(file_okay=False), default=None,
                     help="Scratch folder for shards before upload (default: a temp dir under $TMPDIR)."),
        click.option("--templates", "templates_dir", type=click.Path(exists=True, file_okay=False), default=None,
                     help="Folder whose templates override the built-in ones."),
        click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                     help="Mirrors file (hubpad.yaml) supplying tp, target, shard size and serving overrides."),
        click.option("--draft", default=None,
                     help="A speculative-decoding draft for this model, padded for the same TP (Hub repo id or local "
                          "path; its config.json names its method): the serve command gets --speculative-config."),
        click.option("--draft-for", default=None,
                     help="SRC is a speculative-decoding draft; this names the padded target it pairs with (Hub repo "
                          "id), which its card's serve command runs."),
        click.option("--num-speculative-tokens", type=click.IntRange(1, 64), default=None,
                     help="Draft tokens per step in that --speculative-config (default: eagle3 3 or a speculators "
                          "config's own, dspark its block size, mtp its number of layers)."),
        click.option("--force", is_flag=True,
                     help="Publish into a target hubpad did not create (its other files are kept), or replace a "
                          "derivative of another TP or another upstream there."),
        click.option("--private", is_flag=True, help="Create the Hub target as private."),
        click.option("--dry-run", is_flag=True, help="Plan and check the target, write nothing."),
        click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


class Job:
    """One mirror's settings, from the command line and (optionally) its entry in a mirrors file."""
    def __init__(self, src, tp, dst, revision, shard_size, max_disk, config_file, private, draft=None, draft_for=None,
                 num_speculative_tokens=None):
        self.serving: dict = {}
        if config_file:
            from hubpad.formats.mirrors_file import find_mirror, load_mirrors, pairing

            namespace = _namespace_or_none() if not is_local(src) or (dst and not is_local(dst)) else None
            specs = load_mirrors(config_file, namespace=namespace)
            spec = find_mirror(specs, src, target=dst, tp=tp, namespace=namespace, source=config_file)
            paired, drafts = pairing(specs, spec, namespace)
            draft_for = draft_for or paired
            if drafts and not draft:
                if len(drafts) > 1:
                    raise HubpadError(f"{spec.where}: {len(drafts)} entries are drafts for it (draft_for); vLLM "
                                      f"takes one --speculative-config, so pass the one to use with --draft")
                draft, draft_upstream = drafts[0].resolved_target(namespace), drafts[0].upstream
            else:
                draft_upstream = None
            tp = tp or spec.tp
            dst = dst or (spec.resolved_target(namespace) if spec.target or namespace else None)
            revision = revision or spec.revision
            shard_size = shard_size or spec.shard_size
            max_disk = max_disk or spec.max_disk
            private = private or spec.private
            self.serving = dict(spec.serving_overrides())
            if "container_image" in self.serving:
                self.serving["container"] = self.serving.pop("container_image")
            if spec.recipe:
                self.serving["recipe"] = spec.recipe_overrides()  # merged into the sparkrun recipe when rendered
        if tp is None:
            raise click.UsageError("Missing option '--tp' (or a --config entry that sets tp).",
                                   click.get_current_context(silent=True))
        if draft and draft_for:
            raise click.UsageError("--draft names the draft of a target, --draft-for the target of a draft: one "
                                   "model is not both", click.get_current_context(silent=True))
        if draft_for:
            self.serving["draft"] = {"target": draft_for, "num_speculative_tokens": num_speculative_tokens}
        if draft:
            self.serving["speculative_config"] = _speculative_config(
                draft, draft_upstream if config_file else None, num_speculative_tokens)
        self.src, self.tp, self.dst, self.revision = src, tp, dst, revision
        self.shard_size, self.max_disk, self.private = shard_size or 5 * 10**9, max_disk, private


def _speculative_config(draft: str, upstream: str | None, tokens: int | None) -> dict:
    """vLLM's --speculative-config for serving with `draft` (the padded draft's repo id or path): the method from the
    config.json of the draft (or of its upstream, when the draft is not published yet)."""
    from hubpad.plan.adapters.drafts import speculative_config
    from hubpad.source.readers import read_json

    config = None
    for ref in (draft, upstream):
        if ref is None:
            continue
        try:
            config = read_json(open_source(ref, None), "config.json")
            break
        except HubpadError:
            continue
    if config is None:
        raise HubpadError(f"--draft {draft}: cannot read its config.json (mirror the draft first, or name it in the "
                          f"mirrors file with draft_for)")
    return speculative_config(draft, config, tokens, what=f"--draft {draft}")


def _namespace_or_none() -> str | None:
    try:

        return whoami_name(api_for())
    except HubpadError:
        return None


def _build(job: Job, *, force: bool, workdir, repo_id: str | None = None):
    source = open_source(job.src, job.revision)
    if job.dst is None and source.kind == "local":
        raise click.UsageError("Missing option '--to': a local SRC has no default destination (give a folder, "
                               "or the Hub repo id to publish to).", click.get_current_context(silent=True))
    plan = make_plan(source, job.tp, job.shard_size)
    from hubpad.publish import make_publisher

    publisher = make_publisher(source, job.dst, job.tp, force=force, private=job.private, workdir=workdir,
                               max_disk=job.max_disk, repo_id=repo_id)
    return plan, publisher


def _parse_part(part: str) -> tuple[int, int]:
    """`--part i/K` as (i, K), 1 <= i <= K."""
    try:
        i, k = (int(x) for x in part.split("/"))
    except ValueError:
        i = k = 0
    if not 1 <= i <= k:
        raise ConfigError(f"--part must look like i/K with 1 <= i <= K, got {part!r}")
    return i, k


def set_outputs(values: dict) -> None:
    """Step outputs under snake_case (what action.yml maps) and kebab-case (for direct use in a workflow)."""
    both = dict(values)
    both.update({k.replace("_", "-"): v for k, v in values.items() if "_" in k})
    gha_set_outputs(both)


def _report(summary, publisher, as_json: bool, plan=None) -> None:
    set_outputs({"changed": summary.changed, "upstream_sha": summary.upstream_commit or "",
                 "target_commit": summary.commit or "", "target_url": summary.url or "",
                 "target": publisher.label})
    append_summary(_summary_markdown(summary, plan))
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2))
    elif summary.up_to_date:
        click.echo(_up_to_date_line(publisher.label, plan.source.label if plan else "its upstream",
                                    summary.upstream_commit))
    elif summary.commit or summary.url:
        click.echo(f"published {publisher.label}: {summary.url or summary.commit}")
    else:
        click.echo(f"staged {len(summary.shards_built)} shard(s) on {publisher.label}")


def _summary_markdown(s, plan=None) -> str:
    lines = [f"### hubpad: {s.target}", ""]
    if s.up_to_date:
        lines.append(f"Up to date with upstream commit `{(s.upstream_commit or '')[:12]}`; nothing published.")
        return "\n".join(lines)
    if plan is not None:
        lines += [f"Padded for TP={plan.tp}:", "", "| dim | before | after |", "|---|---:|---:|"]
        lines += [f"| {d.name} | {d.before} | {d.after} |" for d in plan.dims]
        lines.append("")
    lines += ["| | |", "|---|---|", f"| upstream commit | `{s.upstream_commit}` |",
              f"| shards built / reused | {len(s.shards_built)} / {len(s.shards_reused)} |",
              f"| bytes read / written / uploaded | {human(s.bytes_read)} / {human(s.bytes_written)} / "
              f"{human(s.bytes_uploaded)} |", f"| peak disk | {human(s.peak_disk)} |", f"| time | {s.seconds:.1f} s |"]
    if s.url:
        lines.append(f"| commit | {s.url} |")
    return "\n".join(lines)


@main.command(cls=JobCommand)
@click.argument("src")
@_mirror_options
@click.option("--part", default=None, help="Stage only part i of K (fan-out), e.g. 2/3; `hubpad publish` finishes.")
@click.option("--parts", type=click.IntRange(2, 256), default=None,
              help="With --on hf-jobs: the fan-out, K stage jobs (--part i/K) then one publish job, awaited here.")
@_job_options
def mirror(src, tp, dst, repo_id, revision, shard_size, max_disk, workdir, templates_dir, config_file, draft, draft_for,
           num_speculative_tokens, force, private, dry_run, as_json, part, parts, jobs) -> None:
    """Pad SRC for TP=N and publish the derivative to DST."""
    if parts and not jobs:
        raise click.UsageError("--parts runs the fan-out on Hugging Face Jobs: add --on hf-jobs (on your own machines, "
                               "run --part i/K on each, then hubpad publish)", click.get_current_context())
    job = Job(src, tp, dst, revision, shard_size, max_disk, config_file, private, draft, draft_for,
              num_speculative_tokens)
    if jobs:
        refs = (src, dst, draft, job.dst)
        if parts:
            return _fan_out_on_jobs(jobs, job, parts, refs, templates_dir, config_file, dry_run, as_json)
        return _on_jobs(jobs, refs=refs, config_file=config_file, templates=templates_dir, disk=True,
                        max_disk=max_disk, as_json=as_json)
    only = None
    if part:
        i, k = _parse_part(part)
    plan, publisher = _build(job, force=force, workdir=workdir, repo_id=repo_id)
    if part:
        if not publisher.stages:
            raise HubpadError("--part needs a Hub target (parts meet on its staging branch)")
        parts = split_parts(plan, k)
        only = set(parts[i - 1]["shards"]) if i <= len(parts) else set()
        log(f"part {i}/{k}: {len(only)} shard(s)")
    if dry_run:
        _dry_run(plan, publisher, as_json)
        return
    _run(job, plan, publisher, templates_dir, as_json, only=only)


def _dry_run(plan, publisher, as_json: bool, staged: bool = False) -> None:
    """`--dry-run`: the run's own verdict on the target (up to date, a refusal, or what it would publish), nothing
    written; `--json` prints it with the plan."""
    from hubpad.run.mirror import preview

    verdict = preview(plan, publisher, publish_only=staged)
    set_outputs({"changed": verdict["would_publish"], "upstream_sha": plan.source.commit or "",
                 "target": publisher.label})
    if as_json:
        click.echo(json.dumps({**verdict, "plan": plan.to_json()}, indent=2))
        return
    if not staged:
        click.echo(plan_text(plan, width=output_width()))
    if verdict["up_to_date"]:
        click.echo(f"dry run: {_up_to_date_line(publisher.label, plan.source.label, plan.source.commit)}")
    elif staged:
        click.echo(f"dry run: would publish {len(plan.shards)} staged shard(s) to {publisher.label}")
    else:
        click.echo(f"dry run: would publish {human(plan.bytes_out)} in {len(plan.shards)} shard(s) to {publisher.label}")
    if verdict["disk"] is not None:  # the room the run checks before its first byte
        stops = verdict["disk"]["stops"]
        click.echo(verdict["disk"]["said"] + (f" ({stops}: the run would stop before writing)" if stops else ""))


def _up_to_date_line(target: str, upstream: str, commit: str | None) -> str:
    return f"{target} is up to date with {upstream}{f'@{commit[:12]}' if commit else ''}; nothing to do"


@main.command(cls=JobCommand)
@click.argument("src")
@_mirror_options
@_job_options
def publish(src, tp, dst, repo_id, revision, shard_size, max_disk, workdir, templates_dir, config_file, draft, draft_for,
            num_speculative_tokens, force, private, dry_run, as_json, jobs) -> None:
    """Fan-out's last step: check every part is staged on DST, then make the single publish commit."""
    job = Job(src, tp, dst, revision, shard_size, max_disk, config_file, private, draft, draft_for,
              num_speculative_tokens)
    if jobs:
        return _on_jobs(jobs, refs=(src, dst, draft, job.dst), config_file=config_file, templates=templates_dir,
                        disk=True, max_disk=max_disk, as_json=as_json)
    plan, publisher = _build(job, force=force, workdir=workdir, repo_id=repo_id)
    if dry_run:
        _dry_run(plan, publisher, as_json, staged=True)
        return
    _run(job, plan, publisher, templates_dir, as_json, publish_only=True)


def _run(job: Job, plan, publisher, templates_dir: str | None, as_json: bool, **how) -> None:
    """Run the mirror with the command line's progress display, then report (stdout, Actions outputs)."""
    from hubpad.app.progress import run_hooks
    from hubpad.run.mirror import run_mirror

    summary = run_mirror(plan, publisher, templates_dir=Path(templates_dir) if templates_dir else None,
                         serving_overrides=job.serving, hooks=run_hooks(), **how)
    _report(summary, publisher, as_json, plan)


# ------------------------------------------------------------------------------------------------ check


@main.command(cls=JobCommand)
@click.argument("src", required=False)
@click.option("--to", "dst", default=None, help="The derivative to compare (default <your user>/<name>-TP<N>).")
@click.option("--tp", callback=_tp_value, default=None, metavar="N",
              help="Tensor-parallel size to check for (default: the one DST's hubpad.json records; 3 to derive DST).")
@click.option("--revision", default=None, help="Upstream branch, tag or commit (default main).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Check every mirror of a mirrors file (hubpad.yaml).")
@click.option("--offline", is_flag=True,
              help="With --config: only validate the mirrors file (every mistake at once); no network, no token.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_job_options
def check(src, dst, tp, revision, config_file, offline, as_json, jobs) -> None:
    """Is DST up to date with SRC? API calls only: reports up-to-date, stale or missing."""
    from hubpad.run.check import check_many, check_one

    if jobs:
        return _on_jobs(jobs, refs=(src, dst), config_file=config_file, as_json=as_json)

    if offline:
        if not config_file:
            raise click.UsageError("--offline validates a mirrors file: give --config FILE too.",
                                   click.get_current_context(silent=True))
        from hubpad.formats.mirrors_file import load_mirrors

        specs = load_mirrors(config_file)
        rows = [{**spec.to_dict(), "target": spec.resolved_target("<your user>") if spec.target is None
                 or spec.target_kind == "hub" else spec.target} for spec in specs]
        if as_json:
            click.echo(json.dumps({"valid": True, "mirrors": rows}, indent=2))
        else:
            for r in rows:
                click.echo(f"valid      {r['upstream']} -> {r['target']} (tp {r['tp']})")
        return
    if config_file:
        result = check_many(config_file, only_upstream=src, target=dst)
        changed = [m for m in result["mirrors"] if m["changed"]]
        set_outputs({"changed": bool(changed), "matrix": {"include": changed}, "mirrors": result["mirrors"]})
        if as_json:
            click.echo(json.dumps(result, indent=2))
        else:
            for m in result["mirrors"]:
                click.echo(f"{m['status']:10} {m['upstream']} -> {m['target']} (tp {m['tp']}"
                           + (f"; {m['reason']})" if m["reason"] else ")"))
        return
    if not src:
        raise HubpadError("give SRC or --config FILE")
    m = check_one(src, dst, tp, revision)
    set_outputs({"changed": m["changed"], "upstream_sha": m["upstream_sha"] or "", "target": m["target"]})
    if as_json:
        click.echo(json.dumps(m, indent=2))
    else:
        click.echo(f"{m['status']}: {m['upstream']} -> {m['target']} (tp {m['tp']}"
                   + (f"; {m['reason']})" if m["reason"] else ")"))


# ------------------------------------------------------------------------------------------------ card


@main.command(cls=JobCommand)
@click.argument("dst")
@click.option("--upstream", default=None, help="Upstream repo (default: the one in DST's hubpad.json).")
@click.option("--templates", "templates_dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="Folder whose templates override the built-in ones.")
@click.option("--repo-id", default=None, metavar="NAMESPACE/NAME", callback=_repo_id,
              help="A local DST: render the card for this Hub repo id (default: the one it was mirrored with, if any).")
@click.option("--dry-run", is_flag=True, help="Show which files would change; commit nothing.")
@_job_options
def card(dst, upstream, templates_dir, repo_id, dry_run, jobs) -> None:
    """Re-render DST's model card, recipe and patch files from its hubpad.json; no shard is read or written."""
    if jobs:
        return _on_jobs(jobs, refs=(dst, upstream), templates=templates_dir)
    from hubpad.run.card_refresh import refresh_card

    result = refresh_card(dst, upstream=upstream, templates_dir=Path(templates_dir) if templates_dir else None,
                          dry_run=dry_run, repo_id=repo_id)
    set_outputs({"changed": bool(result["changed"]), "target_commit": result.get("commit") or "",
                 "target_url": result.get("url") or ""})
    if not result["changed"]:
        click.echo(f"{dst}: card is up to date")
    elif dry_run:
        click.echo(f"{dst}: dry run: would update {', '.join(result['changed'])}"
                   + (f" and remove {', '.join(result['removed'])}" if result.get("removed") else "")
                   + "; nothing written")
    else:
        click.echo(f"{dst}: updated {', '.join(result['changed'])}"
                   + (f", removed {', '.join(result['removed'])}" if result.get("removed") else "")
                   + (f" ({result['url']})" if result.get("url") else ""))


# ------------------------------------------------------------------------------------------------ verify


@main.command(cls=JobCommand)
@click.argument("src")
@click.argument("dst")
@click.option("--json", "as_json", is_flag=True, help="Print the verification report as JSON.")
@_job_options
def verify(src: str, dst: str, as_json: bool, jobs: JobOptions | None) -> None:
    """Check DST is SRC padded losslessly: original bytes in place, pads exactly zero, config and index right."""
    if jobs:
        return _on_jobs(jobs, refs=(src, dst), as_json=as_json)
    from hubpad.run.verify import verify_derivative

    try:
        report = verify_derivative(open_source(src), open_source(dst))
    except HubpadError as exc:
        if as_json:  # --json promises JSON on stdout whatever the outcome; the error line still goes to stderr
            click.echo(json.dumps({"ok": False, "error": " ".join(redact(str(exc)).split())}, indent=2))
        raise
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"ok: {report['tensors']} tensors checked ({report['padded']} padded), "
                   f"{human(report['bytes_checked'])} compared, {len(report['shards'])} shard hashes match")


# ------------------------------------------------------------------------------------------------ schedule


@main.group()
def schedule() -> None:
    """Scheduled refresh on Hugging Face Jobs: a mirrors file (hubpad.yaml) checked on a cron, stale mirrors rebuilt."""


@schedule.command("create")
@click.argument("config_file", metavar="CONFIG", type=click.Path(exists=True, dir_okay=False))
@click.option("--cron", default=None, help="When it runs: a cron expression or @hourly/@daily (default every 6 "
                                            "hours, '17 */6 * * *').")
@click.option("--name", default=None, help="The schedule's name (default: from the file's path); the same name "
                                           "updates that schedule.")
@click.option("--suspend", is_flag=True, help="Create (or leave) it suspended.")
@click.option("--replace", is_flag=True, help="Make it anew even when the job is the same (a new token, say).")
@click.option("--json", "as_json", is_flag=True, help="Print the schedule as JSON.")
@_job_settings_only
def schedule_create(config_file, cron, name, suspend, replace, as_json, jobs) -> None:
    """Create the scheduled refresh of CONFIG, or update the one made from it before (never a second one)."""
    from hubpad.run.hf_jobs import prepare
    from hubpad.run.schedule import DEFAULT_CRON, describe, schedule_refresh

    result = schedule_refresh(prepare(jobs.settings()), config_file, cron=cron or DEFAULT_CRON, name=name,
                              suspend=suspend, replace=replace)
    row = describe(result.info)
    if as_json:
        click.echo(json.dumps({"action": result.action, **row}, indent=2))
    else:
        click.echo(f"{result.action} schedule {row['name']} ({row['id']}): {row['schedule']}"
                   f"{', suspended' if row['suspended'] else ''}, hubpad {row['hubpad'][:12]}")


@schedule.command("list")
@click.option("--namespace", "job_namespace", default=None, metavar="USER_OR_ORG",
              help="Where the schedules are (default: the token's user).")
@click.option("--json", "as_json", is_flag=True, help="Print them as JSON.")
def schedule_list(job_namespace, as_json) -> None:
    """hubpad's refresh schedules."""
    from hubpad.run.hf_jobs import connect
    from hubpad.run.schedule import describe, find

    rows = [describe(s) for s in find(connect(job_namespace))]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    for r in rows if not as_json else []:
        click.echo(f"{r['name']:32} {r['id']} {r['schedule']:16} {'suspended' if r['suspended'] else 'active':9} "
                   f"hubpad {r['hubpad'][:12]} last job {r['last_job'] or '-'}")


def _schedule_state(action: str):
    @click.argument("name")
    @click.option("--namespace", "job_namespace", default=None, metavar="USER_OR_ORG",
                  help="Where the schedule is (default: the token's user).")
    def command(name, job_namespace) -> None:
        from hubpad.run.hf_jobs import connect
        from hubpad.run.schedule import set_state

        sched = set_state(connect(job_namespace), name, action)
        click.echo(f"{action}{'d' if action.endswith('e') else 'ed'} schedule {name} ({sched.id})")

    command.__doc__ = f"{action.capitalize()} the schedule called NAME (its name, or its id)."
    return schedule.command(action)(command)


for _action in ("suspend", "resume", "delete"):
    _schedule_state(_action)


# ------------------------------------------------------------------------------------------------ webhook


@main.command()
@click.option("--config", "config_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The mirrors file (hubpad.yaml) whose upstreams it watches.")
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option("--port", default=7860, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (7860: a Space's).")
@click.option("--settle", default=15.0, show_default=True, type=click.FloatRange(0, 50),
              help="Seconds from a push to its job: a burst of pushes in that time starts one job.")
@_job_settings_only
def webhook(config_file, host, port, settle, jobs) -> None:
    """Receive the Hub's repo-update webhook for CONFIG's upstreams and mirror each push on Hugging Face Jobs.

    The webhook's secret comes from the WEBHOOK_SECRET environment variable (never a command-line value)."""
    from hubpad.run.hf_jobs import prepare
    from hubpad.run.webhook import SECRET_ENV, make_server, receiver_for

    receiver = receiver_for(prepare(jobs.settings()), config_file, os.environ.get(SECRET_ENV, ""), settle=settle)
    server = make_server(receiver, host, port)
    log(f"webhook receiver on http://{host}:{server.server_address[1]}: watching "
        f"{', '.join(sorted({w.upstream for w in receiver.watches}))}")
    try:
        server.serve_forever()
    finally:
        receiver.trigger.stop()
        server.server_close()


# ------------------------------------------------------------------------------------------------ demo


@main.command()
@click.option("--out", type=click.Path(file_okay=False), default="demo-out", show_default=True,
              help="Folder for the demo's upstream and padded checkpoints.")
def demo(out: str) -> None:
    """Offline example: build a tiny Hy3-shaped RedHatAI-layout checkpoint, pad it for TP=3, verify it."""
    from hubpad.app.demo import run_demo

    run_demo(Path(out))


if __name__ == "__main__":  # pragma: no cover
    main()
