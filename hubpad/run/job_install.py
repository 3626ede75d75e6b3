"""Which hubpad a Hugging Face job installs: exactly the one running here, a release or a commit, never "latest".

The rule, in order:
1. an explicit spec (`--install`, or `HUBPAD_JOBS_INSTALL`): `hubpad==X.Y.Z`, `OWNER/REPO@<40-hex commit>` (a GitHub
   repository), or a URL naming a 40-hex commit; anything that could move (a bare name, a range, a branch) is refused;
2. hubpad running from a git checkout (or installed editable from one): its HEAD commit on GitHub (the `origin`
   remote), refused when hubpad's files have uncommitted changes or no remote branch holds the commit;
3. hubpad installed from a URL (PEP 610 `direct_url.json` with a commit): that commit;
4. hubpad installed from an index: the release `hubpad==<version>`.

A commit installs its own locked dependencies first (`requirements/runtime.txt` at that commit, with their hashes),
then hubpad without dependencies, like the README's quick start; a release installs `hubpad==X` from PyPI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hubpad import __version__
from hubpad.errors import ConfigError

ENV_INSTALL = "HUBPAD_JOBS_INSTALL"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_RELEASE = re.compile(r"(?:hubpad\s*==\s*)?(\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)")
_GITHUB_AT = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+?)@(?P<sha>[0-9a-f]{40})")
_GITHUB_URL = re.compile(r"(?:git\+)?(?:https://|ssh://git@|git@)github\.com[/:](?P<repo>[\w.-]+/[\w.-]+?)(?:\.git)?/?$")
_GITHUB_ARCHIVE = re.compile(r"https://github\.com/(?P<repo>[\w.-]+/[\w.-]+)/archive/(?P<sha>[0-9a-f]{40})\.(?:tar\.gz|zip)")
# The files a job's hubpad is built from: a change to any of them (not committed) means another program would run.
_SOURCE_PATHS = ("hubpad", "templates", "pyproject.toml", "requirements/runtime.txt")


@dataclass(frozen=True)
class Install:
    """What a job runs `pip install` with: `requirement` (after `lock`, a hashed requirements URL, when set)."""

    requirement: str
    lock: str | None
    pin: str  # the version or the commit, for labels and messages
    needs_git: bool = False  # a git+ URL: the image must have git

    @property
    def label(self) -> str:
        return re.sub(r"[^A-Za-z0-9_-]", "-", self.pin)[:40]


def github_commit(repo: str, sha: str) -> Install:
    """A commit of a GitHub repository: its locked dependencies, then its source archive (no git needed)."""
    return Install(requirement=f"hubpad @ https://github.com/{repo}/archive/{sha}.tar.gz",
                   lock=f"https://raw.githubusercontent.com/{repo}/{sha}/requirements/runtime.txt", pin=sha)


def pinned(spec: str) -> Install:
    """An explicit spec, refused unless it names one release or one commit. An Install's own `requirement` is a
    spec of the same install (what space/publish.py hands its Space)."""
    text = spec.strip()
    url = text.split("@", 1)[1].strip() if text.startswith("hubpad") and "@" in text else text
    if m := _RELEASE.fullmatch(text):
        return Install(requirement=f"hubpad=={m[1]}", lock=None, pin=m[1])
    if m := _GITHUB_AT.fullmatch(text) or _GITHUB_ARCHIVE.fullmatch(url):
        return github_commit(m["repo"], m["sha"])
    if url.startswith(("https://", "git+https://")) and (shas := _COMMIT.findall(url)):
        return Install(requirement=f"hubpad @ {url}", lock=None, pin=shas[-1], needs_git=url.startswith("git+"))
    raise ConfigError(f"--install {spec!r} is not pinned: a job installs one release (hubpad==X.Y.Z), one commit "
                      f"(OWNER/REPO@<40-hex commit>) or a URL that names a 40-hex commit, never a branch or "
                      f"'latest'")


def resolve_install(spec: str | None = None, package_dir: Path | None = None) -> Install:
    """The install of this exact hubpad (the rule in the module docstring)."""
    spec = spec or os.environ.get(ENV_INSTALL)
    if spec:
        return pinned(spec)
    root = (package_dir or Path(__file__).resolve().parents[1]).parent
    if _is_checkout(root):
        return from_checkout(root)
    direct = _direct_url()
    if direct is not None:
        return from_direct_url(direct)
    return Install(requirement=f"hubpad=={__version__}", lock=None, pin=__version__)


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _is_checkout(root: Path) -> bool:
    return (root / ".git").exists() and (root / "pyproject.toml").is_file()


def from_checkout(root: Path) -> Install:
    """HEAD of a clean checkout whose `origin` is on GitHub and holds the commit."""
    sha = _git(root, "rev-parse", "HEAD")
    if not _COMMIT.fullmatch(sha):
        raise ConfigError(f"hubpad runs from {root}, but git cannot name its commit; pass --install")
    dirty = _git(root, "status", "--porcelain", "--", *_SOURCE_PATHS)
    if dirty:
        first = dirty.splitlines()[0][3:]
        raise ConfigError(f"hubpad runs from a checkout with uncommitted changes ({first}...): a job would install "
                          f"commit {sha[:12]} without them; commit and push them, or pass --install")
    remote = _git(root, "remote", "get-url", "origin")
    m = _GITHUB_URL.fullmatch(remote)
    if m is None:
        raise ConfigError(f"hubpad runs from a checkout whose origin ({remote or 'none'}) is not a GitHub repository, "
                          f"so a job cannot download commit {sha[:12]}; pass --install OWNER/REPO@{sha}")
    if not _git(root, "branch", "-r", "--contains", sha):
        raise ConfigError(f"commit {sha[:12]} is on no branch of origin ({m['repo']}) as far as this checkout knows: "
                          f"push it first (a job downloads it from GitHub), or pass --install")
    return github_commit(m["repo"], sha)


def _direct_url() -> dict | None:
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        text = distribution("hubpad").read_text("direct_url.json")
    except (ImportError, PackageNotFoundError):
        return None
    return json.loads(text) if text else None


def from_direct_url(direct: dict) -> Install:
    """hubpad installed from a URL (PEP 610): the commit it records, or the checkout an editable install points at."""
    url = str(direct.get("url") or "")
    commit = (direct.get("vcs_info") or {}).get("commit_id") or ""
    if (direct.get("dir_info") or {}).get("editable") and url.startswith("file://"):
        return from_checkout(Path(url[len("file://"):]))
    if _COMMIT.fullmatch(commit):
        m = _GITHUB_URL.fullmatch(url)
        return github_commit(m["repo"], commit) if m else pinned(f"git+{url.removeprefix('git+')}@{commit}")
    if url.startswith("https://") and _COMMIT.search(url):
        return pinned(url)
    raise ConfigError(f"hubpad was installed from {url or 'a local file'}, which a job cannot install again; pass "
                      f"--install hubpad==X.Y.Z or OWNER/REPO@<commit>")
