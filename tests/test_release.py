"""A version to pin: one version (hubpad.__version__) for `hubpad --version`, the package and hubpad.json, and a
release workflow that builds on a tag and publishes with PyPI trusted publishing (no stored token)."""

from __future__ import annotations

import tomllib

from hubpad import __version__
from tests.helpers import cli
from tests.test_action import ROOT, load, triggers


def test_the_version_has_one_home():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"] and "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "hubpad.__version__"}
    r = cli("--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"hubpad, version {__version__}"


def test_release_builds_on_a_tag_and_publishes_without_a_stored_token():
    wf = load(ROOT / ".github" / "workflows" / "release.yml")
    assert triggers(wf) == {"push": {"tags": ["v*"]}}
    build, publish = wf["jobs"]["build"], wf["jobs"]["publish"]
    script = "\n".join(s.get("run", "") for s in build["steps"])
    assert 'if [[ "${TAG}" != "v${version}" ]]' in script  # the tag names the version the package carries
    assert "python -m build" in script and "hubpad --version" in script
    assert publish["needs"] == "build" and publish["permissions"] == {"id-token": "write"}
    (upload,) = [s for s in publish["steps"] if s["uses"].startswith("pypa/gh-action-pypi-publish@")]
    assert "with" not in upload  # no password, no token: trusted publishing
    assert "secrets." not in (ROOT / ".github" / "workflows" / "release.yml").read_text()
