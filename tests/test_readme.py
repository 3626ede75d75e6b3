"""The README is ordered for a user (issue 25): a table of contents, the Quick start's two commands unchanged, the
user's journey in order, working links into docs/, the exit codes the CLI really uses, and Action set-up
instructions that work on the workflows as they are."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from hubpad.app import cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()

QUICK_START = """\
# a virtual environment of its own, the locked runtime dependencies and hubpad in it, then the main job on the
# built-in tiny Hy3 example
python3 -m venv .venv && .venv/bin/pip install -r requirements/runtime.txt && .venv/bin/pip install --no-deps -e . && .venv/bin/hubpad demo
bash .ci/run    # installs the locked test dependencies (CPU torch first) and runs the test suite
"""

JOURNEY = ["Contents", "Quick start", "Pad a Hub model", "Serve it on your GPUs or Sparks", "Keep it fresh with the Action",
           "Run it on Hugging Face Jobs", "Families and formats", "Reference"]


def _sections() -> list[str]:
    return re.findall(r"^## (.+)$", README, re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_quick_start_is_the_first_bash_block_with_the_same_two_commands():
    after = README.split("\n## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", after, re.S).group(1)
    assert block == QUICK_START
    assert after.index("```bash") < after.index("\n## ")


def test_sections_follow_the_users_journey_with_a_table_of_contents():
    sections = _sections()
    assert [next(s for s in sections if s.startswith(j)) for j in JOURNEY] == [
        s for s in sections if any(s.startswith(j) for j in JOURNEY)]
    assert [s for s in sections if not any(s.startswith(j) for j in JOURNEY)] == []
    order = [next(i for i, s in enumerate(sections) if s.startswith(j)) for j in JOURNEY]
    assert order == sorted(order)
    contents = README.split("## Contents", 1)[1].split("\n## ", 1)[0]
    anchors = re.findall(r"\]\(#([^)]+)\)", contents)
    assert anchors == [_slug(s) for s in sections[1:]], anchors
    assert len(README.splitlines()) < 400  # short: the detail lives in docs/


def test_every_relative_link_of_the_readme_and_the_moved_docs_exists():
    docs = ["README.md", "docs/families.md", "docs/advisor.md", "docs/hub.md", "docs/derivative.md",
            "docs/serving-tier.md", "docs/action.md", "docs/benchmarks.md", "docs/development.md", "docs/jobs.md"]
    for doc in docs:
        text = (ROOT / doc).read_text()
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if target.startswith(("http://", "https://")):
                continue
            if target.rstrip("/").endswith("families") and not (ROOT / doc).parent.joinpath(target).exists():
                continue  # docs/families/ is filled by the family branches
            assert ((ROOT / doc).parent / target).exists(), f"{doc} links to {target}"
    assert "docs/families/" in README.split("## Families and formats", 1)[1].split("\n## ", 1)[0]
    assert "docs/families.md" in README.split("## Families and formats", 1)[1].split("\n## ", 1)[0]


def test_exit_codes_documented_are_the_ones_used():
    table = README.split("### Errors and exit codes", 1)[1].split("\n### ", 1)[0]
    codes = {int(c) for c in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert codes == {0, cli.EXIT_FAILURE, cli.EXIT_USAGE, cli.EXIT_INTERRUPTED} == {0, 1, 2, 130}


def test_the_readmes_pinning_command_keeps_the_reusable_workflow_call(tmp_path):
    """Run the README's sed on copies of the two workflows: every action step is pinned, the local call of the
    reusable workflow is kept."""
    section = README.split("## Keep it fresh with the Action", 1)[1]
    sed = next(line.strip() for line in section.splitlines() if line.strip().startswith("sed -i"))
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    for name in ("mirror.yml", "mirror-fanout.yml"):
        shutil.copy(ROOT / ".github" / "workflows" / name, workflows / name)
    before = {n: (workflows / n).read_text() for n in ("mirror.yml", "mirror-fanout.yml")}
    subprocess.run(["bash", "-c", f"SHA={'a' * 40}; {sed}"], cwd=tmp_path, check=True)
    for name, old in before.items():
        new = (workflows / name).read_text()
        assert not re.search(r"^\s*uses: \./\s*$", new, re.M), name
        assert new.count(f"uses: OWNER/hubpad@{'a' * 40}") == len(re.findall(r"^\s*uses: \./\s*$", old, re.M)) > 0
        assert old.count("uses: ./.github/workflows/mirror-fanout.yml") == \
            new.count("uses: ./.github/workflows/mirror-fanout.yml")
    assert "uses: ./.github/workflows/mirror-fanout.yml" in (workflows / "mirror.yml").read_text()


def test_readme_says_how_to_serve_on_three_machines_without_sparkrun():
    serve = README.split("## Serve it on your GPUs or Sparks", 1)[1].split("\n## ", 1)[0]
    for words in ("--nnodes 3", "--node-rank 0", "--master-addr HEAD_IP", "--headless", "every node",
                  "pip install sparkrun", "https://github.com/spark-arena/sparkrun", ":latest"):
        assert words in serve, words


def test_readme_multi_node_lines_carry_the_one_machine_flags():
    """Every node's line of the README's example (issue 32: nodes 2 and 3 dropped the card's flags) has the one-machine
    command's flags (through the FLAGS array), then its own rank; the commands and options it lists exist."""
    import shlex

    serve = README.split("## Serve it on your GPUs or Sparks", 1)[1].split("\n## ", 1)[0]
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", serve, re.S)).replace("\\\n", " ")
    flags = shlex.split(re.search(r"^FLAGS=\((.*?)\)$", blocks, re.S | re.M)[1], comments=True)
    lines = [shlex.split(c, comments=True) for c in blocks.splitlines() if c.startswith("vllm serve")]
    lines = [sum(([*flags] if w == "${FLAGS[@]}" else [w] for w in a), []) for a in lines]
    one, nodes = lines[0], [a for a in lines if "--nnodes" in a]
    assert len(nodes) == 3 and all(a[:len(one)] == one for a in nodes), nodes
    assert [a[a.index("--node-rank") + 1] for a in nodes] == ["0", "1", "2"]
    assert [("--headless" in a) for a in nodes] == [False, True, True]
    assert all(a[a.index("--nnodes") + 1] == "3" and a[a.index("--master-addr") + 1] == "HEAD_IP" for a in nodes)
    table = README.split("### Commands", 1)[1].split("\n### ", 1)[0]
    for command, option in (("check", "--tp"), ("card", "--dry-run"), ("mirror", "--templates"),
                            ("mirror", "--num-speculative-tokens")):
        assert option in next(row for row in table.splitlines() if row.startswith(f"| `hubpad {command} ")), option
        assert option in cli.main.commands[command].get_help(cli.click.Context(cli.main.commands[command]))
