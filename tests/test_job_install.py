"""Which hubpad a job installs (run/job_install.py): one release or one commit, never anything that moves."""

from __future__ import annotations

import json
import subprocess

import pytest

from hubpad import __version__
from hubpad.errors import ConfigError
from hubpad.run.job_install import from_checkout, from_direct_url, pinned, resolve_install

SHA = "89abcdef" * 5


@pytest.mark.parametrize("spec", ["hubpad==0.3.1", "0.3.1"])
def test_a_release_is_installed_from_pypi(spec):
    got = pinned(spec)
    assert got.requirement == "hubpad==0.3.1" and got.lock is None and got.pin == "0.3.1"


@pytest.mark.parametrize("spec", [f"alice/hubpad@{SHA}", f"https://github.com/alice/hubpad/archive/{SHA}.tar.gz"])
def test_a_github_commit_installs_its_lock_then_its_archive(spec):
    got = pinned(spec)
    assert got.requirement == f"hubpad @ https://github.com/alice/hubpad/archive/{SHA}.tar.gz"
    assert got.lock == f"https://raw.githubusercontent.com/alice/hubpad/{SHA}/requirements/runtime.txt"
    assert not got.needs_git


@pytest.mark.parametrize("spec", ["hubpad==0.3.1", f"alice/hubpad@{SHA}", f"hubpad @ git+https://gitlab.com/a/hubpad@{SHA}"])
def test_an_installs_requirement_read_back_is_the_same_install(spec):
    """What space/publish.py hands its Space: the requirement, which names the same install again."""
    assert pinned(pinned(spec).requirement) == pinned(spec)


def test_a_git_url_with_a_commit_needs_git_in_the_image():
    got = pinned(f"hubpad @ git+https://gitlab.com/alice/hubpad@{SHA}")
    assert got.needs_git and got.requirement == f"hubpad @ git+https://gitlab.com/alice/hubpad@{SHA}"


@pytest.mark.parametrize("spec", ["hubpad", "latest", "hubpad>=0.1", "hubpad==0.1.*", "alice/hubpad@main",
                                  "git+https://github.com/alice/hubpad@main", "alice/hubpad@abc123"])
def test_anything_that_can_move_is_refused(spec):
    with pytest.raises(ConfigError, match="not pinned"):
        pinned(spec)


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _checkout(tmp_path):
    repo = tmp_path / "hubpad-checkout"
    (repo / "hubpad").mkdir(parents=True)
    (repo / "hubpad" / "__init__.py").write_text("")
    (repo / "pyproject.toml").write_text("[project]\nname = 'hubpad'\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "x")
    return repo


def test_a_checkout_pins_its_pushed_head_commit(tmp_path, monkeypatch):
    monkeypatch.delenv("HUBPAD_JOBS_INSTALL", raising=False)
    repo = _checkout(tmp_path)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    with pytest.raises(ConfigError, match="not a GitHub repository"):
        from_checkout(repo)
    _git(repo, "remote", "add", "origin", "git@github.com:alice/hubpad.git")
    with pytest.raises(ConfigError, match="push it first"):
        from_checkout(repo)
    _git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")  # as after a push
    got = resolve_install(package_dir=repo / "hubpad")  # hubpad running from this checkout
    assert got.pin == head and got.requirement.endswith(f"alice/hubpad/archive/{head}.tar.gz")
    (repo / "hubpad" / "__init__.py").write_text("changed = True\n")
    with pytest.raises(ConfigError, match="uncommitted changes"):
        from_checkout(repo)


def test_an_install_from_a_url_or_an_index(monkeypatch):
    direct = {"url": "https://github.com/alice/hubpad.git", "vcs_info": {"vcs": "git", "commit_id": SHA}}
    assert from_direct_url(json.loads(json.dumps(direct))).pin == SHA
    with pytest.raises(ConfigError, match="cannot install again"):
        from_direct_url({"url": "file:///tmp/hubpad-0.1.0-py3-none-any.whl", "archive_info": {}})
    monkeypatch.delenv("HUBPAD_JOBS_INSTALL", raising=False)
    monkeypatch.setattr("hubpad.run.job_install._is_checkout", lambda root: False)
    monkeypatch.setattr("hubpad.run.job_install._direct_url", lambda: None)
    assert resolve_install().requirement == f"hubpad=={__version__}"
    monkeypatch.setenv("HUBPAD_JOBS_INSTALL", f"alice/hubpad@{SHA}")
    assert resolve_install().pin == SHA
