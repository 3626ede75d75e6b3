"""The `hubpad` command line. Expected failures print one `error:` line and exit 1, never a traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from . import __version__
from .errors import HubpadError
from .gha_log import log, set_quiet
from .progress import human
from .sizes import parse_size


def _size(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_size(value)
    except (HubpadError, ValueError) as exc:
        raise click.BadParameter(str(exc)) from None


def is_local(spec: str) -> bool:
    """A local directory: a path that exists, or one that starts with ./ ../ / or ~."""
    return spec.startswith(("./", "../", "/", "~")) or Path(spec).exists()


def open_source(spec: str, revision: str | None = None):
    if is_local(spec):
        from .source import LocalSource

        if revision:
            raise HubpadError(f"{spec}: --revision only applies to Hub repos")
        return LocalSource(Path(spec).expanduser())
    from .hub_source import HubSource

    return HubSource(spec, revision=revision or "main")


class HubpadGroup(click.Group):
    """Turns HubpadError (and a few library errors) into one clean line."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except HubpadError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted")
        except OSError as exc:
            _fail(f"{exc.strerror or exc}: {exc.filename}" if getattr(exc, "filename", None) else str(exc))


def _fail(message: str) -> None:
    from .redact import redact

    line = " ".join(redact(message).split())
    try:
        from .gha import error as gha_error, in_github_actions

        if in_github_actions():
            gha_error(line)
    except ImportError:
        pass
    click.echo(f"error: {line}", err=True)
    sys.exit(1)


@click.group(cls=HubpadGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hubpad")
def main() -> None:
    """Pad a Hugging Face checkpoint so it serves at a tensor-parallel size its authors never planned for."""


# ------------------------------------------------------------------------------------------------ plan


@main.command()
@click.argument("src")
@click.option("--tp", type=click.IntRange(1, 1024), required=True, help="Target tensor-parallel size.")
@click.option("--revision", default=None, help="Upstream branch, tag or commit (Hub only; default main).")
@click.option("--shard-size", default="5GB", callback=_size, show_default=True, help="Output shard size.")
@click.option("--parts", type=click.IntRange(1, 256), default=None, help="Split the output shards into K parts.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def plan(src: str, tp: int, revision: str | None, shard_size: int, parts: int | None, as_json: bool) -> None:
    """Show what padding SRC for TP=N changes, reading only config, index and headers."""
    from .plan import make_plan
    from .report import plan_text, split_parts

    p = make_plan(open_source(src, revision), tp, shard_size)
    data = p.to_json()
    if parts:
        data["parts"] = split_parts(p, parts)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(plan_text(p, data.get("parts")))


# ------------------------------------------------------------------------------------------------ mirror


@main.command()
@click.argument("src")
@click.option("--tp", type=click.IntRange(1, 1024), required=True, help="Target tensor-parallel size.")
@click.option("--to", "dst", default=None, help="Destination: a local directory or a Hub repo id.")
@click.option("--revision", default=None, help="Upstream branch, tag or commit (Hub only; default main).")
@click.option("--shard-size", default="5GB", callback=_size, show_default=True, help="Output shard size.")
@click.option("--max-disk", default=None, callback=_size, help="Cap on local disk hubpad may use (Hub targets).")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Scratch folder for shards before upload (default: a temp dir under $TMPDIR).")
@click.option("--templates", "templates_dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="Folder whose templates override the built-in ones.")
@click.option("--force", is_flag=True, help="Publish into a target hubpad did not create.")
@click.option("--private", is_flag=True, help="Create the Hub target as private.")
@click.option("--dry-run", is_flag=True, help="Plan and check the target, write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
def mirror(src, tp, dst, revision, shard_size, max_disk, workdir, templates_dir, force, private, dry_run,
           as_json) -> None:
    """Pad SRC for TP=N and publish the derivative to DST."""
    from .plan import make_plan
    from .report import plan_text

    source = open_source(src, revision)
    if dst is None:
        if source.kind == "local":
            raise HubpadError("--to is required when SRC is a local directory")
        dst = None
    p = make_plan(source, tp, shard_size)
    publisher = make_publisher(source, dst, tp, force=force, private=private, workdir=workdir, max_disk=max_disk)
    if dry_run:
        click.echo(plan_text(p))
        click.echo(f"dry run: would publish {human(p.bytes_out)} in {len(p.shards)} shard(s) to {publisher.label}")
        return
    from .mirror import run_mirror

    set_quiet(as_json and False)
    summary = run_mirror(p, publisher, templates_dir=Path(templates_dir) if templates_dir else None)
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2))
    else:
        click.echo(f"published {publisher.label}" + (f" ({summary.url})" if summary.url else ""))


def make_publisher(source, dst: str | None, tp: int, *, force: bool, private: bool, workdir, max_disk):
    if dst is not None and is_local(dst):
        from .publish_local import LocalPublisher

        return LocalPublisher(Path(dst).expanduser(), force=force)
    from .publish_hub import HubPublisher

    return HubPublisher.for_target(source, dst, tp, force=force, private=private, workdir=workdir, max_disk=max_disk)


# ------------------------------------------------------------------------------------------------ verify


@main.command()
@click.argument("src")
@click.argument("dst")
@click.option("--json", "as_json", is_flag=True, help="Print the verification report as JSON.")
def verify(src: str, dst: str, as_json: bool) -> None:
    """Check DST is SRC padded losslessly: original bytes in place, pads exactly zero, config and index right."""
    from .verify import verify_derivative

    report = verify_derivative(open_source(src), open_source(dst))
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"ok: {report['tensors']} tensors checked ({report['padded']} padded), "
                   f"{human(report['bytes_checked'])} compared, {len(report['shards'])} shard hashes match")


# ------------------------------------------------------------------------------------------------ demo


@main.command()
@click.option("--out", type=click.Path(file_okay=False), default="demo-out", show_default=True,
              help="Folder for the demo's upstream and padded checkpoints.")
def demo(out: str) -> None:
    """Offline example: build a tiny Hy3-shaped RedHatAI-layout checkpoint, pad it for TP=3, verify it."""
    from .demo import run_demo

    run_demo(Path(out))


if __name__ == "__main__":  # pragma: no cover
    main()
