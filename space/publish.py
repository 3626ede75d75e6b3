"""Publish this checkout's Space to a Hugging Face Space of yours: `python space/publish.py YOU/hubpad`.

A Space is a git repo whose root holds the app. This script assembles that root from the checkout (space/'s app,
README front matter and locked requirements, plus hubpad's own package and templates beside them, so the Space runs
exactly this commit's library) and uploads it in one commit. The token is huggingface_hub's usual one (HF_TOKEN, or
`hf auth login`); it needs write access to the Space.

The Space's jobs (its "run it as a job" route and "keep it up to date") install the same hubpad: the Space gets a
JOBS_INSTALL file naming it (`--install`, else this checkout's pushed commit, by hubpad's own rule in
run/job_install.py). A checkout that cannot be pinned (uncommitted or unpushed changes) publishes a Space without
the Jobs route, and says so.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# What the Space's root holds, from the checkout: (source, name in the Space)
PARTS = ((HERE / "app.py", "app.py"), (HERE / "README.md", "README.md"), (HERE / "requirements.txt", "requirements.txt"),
         (HERE / "hubpad_space", "hubpad_space"), (ROOT / "hubpad", "hubpad"), (ROOT / "templates", "templates"))
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc")


def assemble(dest: Path, install: str | None = None) -> Path:
    """The Space's files from this checkout, in `dest` (made; must not exist); `install`: the hubpad its jobs
    install (a job_install spec), written to JOBS_INSTALL."""
    dest.mkdir(parents=True)
    for source, name in PARTS:
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=SKIP)
        else:
            shutil.copy2(source, dest / name)
    if install:
        (dest / "JOBS_INSTALL").write_text(install + "\n")
    return dest


def jobs_install(spec: str | None = None) -> tuple[str | None, str | None]:
    """(the spec the Space's jobs install, None) or (None, why there is none): `spec` checked, else this checkout."""
    sys.path.insert(0, str(ROOT))
    from hubpad.errors import ConfigError
    from hubpad.run.job_install import resolve_install

    try:
        return resolve_install(spec, ROOT / "hubpad").requirement, None
    except ConfigError as exc:
        return None, str(exc)


def publish(space_id: str, *, private: bool = False, token: str | None = None, install: str | None = None) -> str:
    """Create the Space if needed and upload this checkout's app to it in one commit; returns the commit URL."""
    from huggingface_hub import HfApi

    sys.path.insert(0, str(ROOT))
    from hubpad.source.hub_api import endpoint

    api = HfApi(endpoint=endpoint(), token=token)
    api.create_repo(space_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hubpad-space-") as tmp:
        folder = assemble(Path(tmp) / "space", install)
        info = api.upload_folder(repo_id=space_id, repo_type="space", folder_path=folder,
                                 commit_message="hubpad Space: publish from the checkout",
                                 delete_patterns=["hubpad/**", "hubpad_space/**", "templates/**", "JOBS_INSTALL"])
    return info.commit_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("space", help="the Space to publish to, NAMESPACE/NAME (created if missing)")
    parser.add_argument("--private", action="store_true", help="create it as a private Space")
    parser.add_argument("--install", default=None, help="the hubpad the Space's jobs install: hubpad==X.Y.Z or "
                                                        "OWNER/REPO@<commit> (default: this checkout's pushed commit)")
    args = parser.parse_args()
    install, why = jobs_install(args.install)
    if install is None:
        if args.install:
            sys.exit(f"error: {why}")
        print(f"warning: the Space will have no Jobs route: {why}", file=sys.stderr)
    print(f"published: {publish(args.space, private=args.private, install=install)}")
    print("Optional: set the Space variable HUBPAD_ACTION to OWNER/hubpad@COMMIT (the GitHub repository and commit "
          "its 'keep it up to date' workflow should use); HUBPAD_SPACE_MAX_DISK and HUBPAD_SPACE_SHARD_SIZE size it.")


if __name__ == "__main__":
    main()
