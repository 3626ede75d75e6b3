"""The built-in offline example: a tiny Hy3-shaped checkpoint in RedHatAI/Hy3-NVFP4-FP8's layout.

FP8-block attention, NVFP4 dense MLP and experts (compressed-tensors names), BF16 router gates and a BF16
MTP layer at index num_hidden_layers, like the real 178 GB model, in two upstream shards. `hubpad demo`
builds it, pads it for TP=3, verifies the result and prints what happened. No torch, no network.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hubpad.app.progress import run_hooks
from hubpad.app.report import output_width, plan_text
from hubpad.plan.planner import make_plan
from hubpad.publish.local import LocalPublisher
from hubpad.run.mirror import run_mirror
from hubpad.run.verify import verify_derivative
from hubpad.source.local import LocalSource
from hubpad.testing import build_tiny_hy3


def run_demo(out: Path) -> None:
    """Build the tiny upstream, show the plan, mirror it at TP=3 into a local folder, verify it."""
    import click

    upstream, target = out / "Tiny-Hy3-NVFP4-FP8", out / "Tiny-Hy3-NVFP4-FP8-TP3"
    for folder in (upstream, target):  # every run shows the whole job, not "up to date"
        if folder.exists():
            shutil.rmtree(folder)
    build_tiny_hy3(upstream)
    click.echo(f"built a tiny Hy3-shaped checkpoint (RedHatAI layout) in {upstream}\n")
    plan = make_plan(LocalSource(upstream), tp=3, shard_size=4_000_000)
    click.echo(plan_text(plan, width=output_width()))
    click.echo("")
    run_mirror(plan, LocalPublisher(target, force=True), hooks=run_hooks())
    report = verify_derivative(LocalSource(upstream), LocalSource(target))
    click.echo(f"\nmirrored to {target} and verified: {report['tensors']} tensors ({report['padded']} padded), "
               f"every original byte in place, every pad exactly zero, {len(report['shards'])} shard hashes match.")
    click.echo(f"see {target / 'README.md'} and {target / 'hubpad.json'}")
