"""What a newcomer hits (issue 25), one class of mistake per test: one `error:` line, the right exit code (usage 2,
failure 1, interrupted 130), nothing left behind (no hubpad-* scratch folder, no half-made destination); and the
cards of a local and of a Hub derivative followed command by command."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hubpad.app.cli import main
from hubpad.errors import HubpadError
from hubpad.formats.mirrors_file import parse_mirrors
from hubpad.render.recipe import DEFAULT_CONTAINER
from hubpad.testing import build_tiny_hy3
from hubpad.util.refs import forced_local, is_local
from hubpad.util.sizes import SIZE_FLOOR, parse_size_floor
from tests.helpers import cli

UNREACHABLE = "http://127.0.0.1:9"  # nothing listens on the discard port: connection refused at once


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return build_tiny_hy3(tmp_path_factory.mktemp("newcomer") / "Tiny-Hy3")


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The temp dir hubpad's own scratch folders would go to, watched for leftovers."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def one_error(r, code: int) -> str:
    """The run failed with `code`, printed exactly one line (starting `error: `) on stderr, and no traceback."""
    assert r.exit_code == code, (r.exit_code, r.output)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.output and "internal error" not in r.output
    assert not any(line.startswith(("Error:", "Usage:", "Try ")) for line in r.output.splitlines())
    return lines[0]


def nothing_left(dst: Path, scratch: Path | None = None) -> None:
    assert not dst.exists(), f"{dst} was made"
    if dst.parent.exists():
        assert not [p.name for p in dst.parent.iterdir() if p.name.startswith(f".{dst.name}")]
    if scratch is not None:
        assert not list(scratch.iterdir()), f"left in the temp dir: {list(scratch.iterdir())}"


# ------------------------------------------------------------------------------------------------ 1: local or Hub


@pytest.mark.parametrize(("value", "local"), [
    (".", True), ("./x", True), ("../x", True), (".hidden/x", True), ("/abs/x", True), ("~/x", True),
    ("exists/x", True),  # first component exists: local, even though the path itself does not (yet)
    ("exists", True), ("nothere/x", False), ("org/model", False), ("model", False),
])
def test_local_or_hub_rule(tmp_path, value, local):
    (tmp_path / "exists").mkdir()
    assert is_local(value, base=tmp_path) is local
    assert is_local(forced_local(value), base=tmp_path)


def test_mirrors_file_uses_the_same_rule_from_its_folder(tmp_path):
    (tmp_path / "models").mkdir()
    (spec,) = parse_mirrors("mirrors:\n  - upstream: models/x\n    target: org/x-TP3\n", base_dir=tmp_path)
    assert spec.upstream == str(tmp_path / "models" / "x") and spec.target == "org/x-TP3"


def test_unreachable_hub_names_both_readings_and_leaves_nothing(good, tmp_path, scratch):
    """A value that could be a local path or a Hub repo id, with the Hub unreachable: one line that says what could
    not be reached, both readings and how to force the local one; no scratch folder, no destination."""
    env = {"HF_ENDPOINT": UNREACHABLE, "HF_TOKEN": "hf_unused"}
    os.chdir(tmp_path)
    try:
        line = one_error(run("mirror", good, "--tp", "3", "--to", "out2/hy3-tp3", env=env), 1)
        assert f"could not reach {UNREACHABLE}" in line and "./out2/hy3-tp3" in line and "Hub repo id" in line
        nothing_left(tmp_path / "out2" / "hy3-tp3", scratch)
        line = one_error(run("plan", "mdoels/tiny", "--tp", "3", env=env), 1)
        assert f"could not reach {UNREACHABLE}" in line and "./mdoels/tiny" in line
        line = one_error(run("mirror", "org/model", "--tp", "3", "--to", tmp_path / "o", env=env), 1)
        assert f"could not reach {UNREACHABLE}" in line and "./org/model" in line
        nothing_left(tmp_path / "o", scratch)
        line = one_error(run("check", "org/model", "--to", "me/x", env=env), 1)  # check and card: the same
        assert f"could not reach {UNREACHABLE}" in line and "./org/model" in line and "./me/x" in line
        line = one_error(run("card", "out9/x", env=env), 1)
        assert f"could not reach {UNREACHABLE}" in line and "./out9/x" in line
        # The first component exists: local, whatever the Hub would say (no request is made).
        (tmp_path / "out2").mkdir()
        assert run("mirror", good, "--tp", "3", "--to", "out2/hy3-tp3", env=env).exit_code == 0
        assert (tmp_path / "out2" / "hy3-tp3" / "hubpad.json").is_file()
        assert not list(scratch.iterdir())
    finally:
        os.chdir(Path(__file__).resolve().parent.parent)


def test_repo_not_found_names_both_readings(hub, tmp_path):
    line = one_error(run("plan", "alice/not-there", "--tp", "3"), 1)
    assert "repository not found" in line and "./alice/not-there" in line


def test_gated_upstream_says_so_not_not_found(hub, good):
    """huggingface_hub's GatedRepoError is a RepositoryNotFoundError: hubpad names the gate, not a missing repo."""
    hub.seed("acme/gated", {p.name: p for p in Path(good).iterdir() if p.is_file()})
    hub.set_gated("acme/gated", "manual")
    line = one_error(run("plan", "acme/gated", "--tp", "3"), 1)
    assert "gated repository; accept its terms on the Hub with this token's account" in line
    assert "not found" not in line


def test_not_a_repo_id_nor_a_directory(tmp_path):
    for value in ("a/b/c", "nodir"):
        line = one_error(run("plan", value, "--tp", "3"), 1)
        assert "neither an existing local directory nor a Hub repo id" in line and f"./{value}" in line
    assert "no such directory" in one_error(run("plan", tmp_path / "missing", "--tp", "3"), 1)


def test_refused_hub_target_leaves_no_scratch(hub, good, scratch):
    """Every way a Hub target can be refused before a shard is built leaves the temp dir as it was."""
    hub.seed("alice/someones", {"precious.txt": b"x"}, message="theirs")
    line = one_error(run("mirror", good, "--tp", "3", "--to", "alice/someones"), 1)
    assert "hubpad did not create it" in line
    assert not list(scratch.iterdir())
    r = run("mirror", good, "--tp", "3", "--to", "alice/new-one", "--dry-run")  # a dry run makes no scratch either
    assert r.exit_code == 0 and not list(scratch.iterdir())


# ------------------------------------------------------------------------------------------------ 5: one style


USAGE = {
    "plan --tp three": ("plan", "{src}", "--tp", "three"),
    "mirror --tp three": ("mirror", "{src}", "--tp", "three", "--to", "{dst}"),
    "mirror without --tp": ("mirror", "{src}", "--to", "{dst}"),
    "mirror local without --to": ("mirror", "{src}", "--tp", "3"),
    "mirror without SRC": ("mirror", "--tp", "3"),
    "unknown option": ("mirror", "{src}", "--tpp", "3"),
    "shard size in bytes": ("mirror", "{src}", "--tp", "3", "--to", "{dst}", "--shard-size", "5"),
    "check --tp 0": ("check", "a/b", "--tp", "0"),
    "check --offline without --config": ("check", "--offline"),
}


@pytest.mark.parametrize("case", sorted(USAGE))
def test_usage_errors_are_one_line_exit_2(good, tmp_path, case):
    dst = tmp_path / "out"
    args = [a.format(src=good, dst=dst) for a in USAGE[case]]
    line = one_error(run(*args), 2)
    assert "--help" in line and not run(*args).stdout
    nothing_left(dst)


def test_tp_message_is_the_same_everywhere(good, tmp_path):
    def message(*args):
        return one_error(run(*args), 2).split(" (see ")[0]
    plan = message("plan", good, "--tp", "three")
    assert plan == message("mirror", good, "--tp", "three", "--to", tmp_path / "o") == message("check", "a/b", "--tp",
                                                                                                "three")
    assert "'three' is not a tensor-parallel size" in plan


def test_no_command_shows_the_help():
    r = run()
    assert r.output.startswith("Usage:") and "Exit codes: 0 done, 1 failure, 2 usage mistake, 130 interrupted" in \
        " ".join(r.output.split()) and not any(line.startswith("error:") for line in r.output.splitlines())


def test_help_says_mirror_tp_is_required():
    text = " ".join(run("mirror", "--help").output.split())
    assert "--tp N Target tensor-parallel size. Required" in text


def test_interrupted_exits_130(good, monkeypatch):
    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("hubpad.app.cli.make_plan", interrupt)
    assert one_error(run("plan", good, "--tp", "3"), 130) == "error: interrupted"


def test_exit_codes_from_a_real_process(good, tmp_path):
    """The same codes outside click's test runner: usage 2, failure 1."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    usage = subprocess.run([sys.executable, "-m", "hubpad.app.cli", "plan", str(good), "--tp", "x"],
                           capture_output=True, text=True, env=env)
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1 and usage.stderr.startswith("error: ")
    failure = subprocess.run([sys.executable, "-m", "hubpad.app.cli", "plan", str(tmp_path / "nope"), "--tp", "3"],
                             capture_output=True, text=True, env=env)
    assert failure.returncode == 1 and failure.stderr.count("\n") == 1 and failure.stderr.startswith("error: ")


# ------------------------------------------------------------------------------------------------ 6: overwrites


def _tp_of(dst: Path) -> int:
    return json.loads((dst / "hubpad.json").read_text())["tp"]


def test_replacing_another_tp_or_source_needs_force(good, tmp_path):
    dst = tmp_path / "out"
    assert run("mirror", good, "--tp", "3", "--to", dst).exit_code == 0
    line = one_error(run("mirror", good, "--tp", "6", "--to", dst), 1)
    assert "holds a derivative of" in line and "TP=3" in line and "TP=6" in line and "--force" in line
    assert _tp_of(dst) == 3 and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    other = tmp_path / "other-source"
    shutil.copytree(good, other)
    line = one_error(run("mirror", other, "--tp", "3", "--to", dst), 1)
    assert f"holds a derivative of {good}" in line and "--force" in line
    r = run("mirror", good, "--tp", "6", "--to", dst, "--force")
    assert r.exit_code == 0 and "holds a derivative of" in r.stderr and _tp_of(dst) == 6
    assert run("mirror", good, "--tp", "6", "--to", dst).exit_code == 0  # same TP, same source: no --force


def test_replacing_on_the_hub_needs_force(hub, good):
    assert run("mirror", good, "--tp", "3", "--to", "alice/tiny-tp").exit_code == 0
    line = one_error(run("mirror", good, "--tp", "6", "--to", "alice/tiny-tp"), 1)
    assert "target alice/tiny-tp holds a derivative of" in line and "TP=3" in line and "--force" in line


def test_destination_is_the_source_suggests_only_what_works(good, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(good, src)
    for extra in ((), ("--force",)):
        line = one_error(run("mirror", src, "--tp", "3", "--to", src, *extra), 1)
        assert "destination is the source" in line and "--force" not in line and "--to" in line
    assert sorted(p.name for p in src.iterdir()) == sorted(p.name for p in good.iterdir())


# ------------------------------------------------------------------------------------------------ 7: sizes


def test_sizes_below_the_floor_are_refused():
    assert parse_size_floor("5GB", "--shard-size") == 5 * 10**9 and parse_size_floor("1000000", "x") == SIZE_FLOOR
    with pytest.raises(ValueError, match="a size without a unit is in bytes.*write the unit, e.g. 5GB"):
        parse_size_floor("5", "--shard-size")
    with pytest.raises(ValueError, match="below the 1MB floor"):
        parse_size_floor("5KB", "--shard-size")
    with pytest.raises(HubpadError, match="shard_size: '5' is 5 bytes"):
        parse_mirrors("mirrors:\n  - upstream: a/b\n    shard_size: 5\n")


def test_shard_size_in_bytes_on_the_command_line(good, tmp_path):
    for flag in ("--shard-size", "--max-disk"):
        line = one_error(run("mirror", good, "--tp", "3", "--to", tmp_path / "o", flag, "5"), 2)
        assert "write the unit, e.g. 5GB" in line
    assert "below the 1MB floor" in one_error(run("plan", good, "--tp", "3", "--shard-size", "100KB"), 2)


# ------------------------------------------------------------------------------------------------ 8: mirrors file


BAD_FILE = """defaults:
  tp: 3
mirrors:
  - upstream: a/b
    shardsize: 5GB
  - upstream: c/d
    tp: three
  - upstream: e/f
    max_disk: 5
"""


def test_check_config_reports_every_mistake_offline_without_token(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE)  # a request would fail loudly
    bad = tmp_path / "hubpad.yaml"
    bad.write_text(BAD_FILE)
    r = run("check", "--config", bad, "--offline")
    assert r.exit_code == 1 and not r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 3 and all(line.startswith("error: ") for line in lines), r.stderr
    assert "hubpad.yaml:5: mirrors[0] (a/b): unknown key 'shardsize'" in lines[0]  # the key's line, not the entry's
    assert "hubpad.yaml:7: mirrors[1] (c/d): tp must be" in lines[1]
    assert "mirrors[1] (c/d): tp must be an integer" in lines[1] and "mirrors[2] (e/f): max_disk" in lines[2]
    assert len(run("check", "--config", bad).stderr.splitlines()) == 3  # online too, before any request
    good_file = tmp_path / "ok.yaml"
    good_file.write_text("mirrors:\n  - upstream: a/b\n  - upstream: ./local\n    target: ./out\n")
    r = run("check", "--config", good_file, "--offline")
    assert r.exit_code == 0 and r.stdout.splitlines()[0] == "valid      a/b -> <your user>/b-TP3 (tp 3)"
    assert json.loads(run("check", "--config", good_file, "--offline", "--json").stdout)["valid"] is True


# ------------------------------------------------------------------------------------------------ 9: smaller ones


def test_plan_and_advisor_fit_the_terminal(good, monkeypatch):
    import shutil as sh
    import sys as system

    from hubpad.app import report

    for args in (("plan", good, "--tp", "3", "--shard-size", "1MB"), ("plan", good)):
        assert max(map(len, run(*args).stdout.splitlines())) > 100  # a pipe keeps whole lines for grep
        for width in (60, 100):
            with monkeypatch.context() as m:
                m.setattr("hubpad.app.cli.output_width", lambda: width)
                text = run(*args).stdout
            assert max(map(len, text.splitlines())) <= width, (args, width)
    # the width itself: the terminal's (shutil honours $COLUMNS) when stdout is one, none for a pipe
    monkeypatch.setattr(sh, "get_terminal_size", lambda *a: os.terminal_size((77, 24)))
    monkeypatch.setattr(system.stdout, "isatty", lambda: True, raising=False)
    assert report.output_width() == 77
    monkeypatch.setattr(system.stdout, "isatty", lambda: False, raising=False)
    assert report.output_width() is None


def test_advisor_says_which_vocab(good):
    text = run("plan", good).stdout
    assert "vLLM pads the vocab (config.json vocab_size 1000) to 1024, a multiple of 64, and 1024 % 3 != 0" in text


def test_shell_completion_works_as_the_readme_says():
    """The README's line (`eval "$(_HUBPAD_COMPLETE=bash_source hubpad)"`), in a real bash, completes commands and
    options; click's protocol answers the same without a shell."""
    complete = {"_HUBPAD_COMPLETE": "bash_complete", "COMP_WORDS": "hubpad mirror --dr", "COMP_CWORD": "2"}
    code = "from hubpad.app.cli import main; main(prog_name='hubpad')"
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, **complete}, capture_output=True, text=True)
    assert r.returncode == 0 and "plain,--dry-run" in r.stdout.splitlines(), r
    script = Path(sys.executable).with_name("hubpad")
    bash = shutil.which("bash")
    if not (script.is_file() and bash):
        pytest.skip("no hubpad console script or bash next to this Python")
    shell = ('eval "$(_HUBPAD_COMPLETE=bash_source hubpad)"; COMP_WORDS=(hubpad $WORDS); COMP_CWORD=$CWORD; '
             '_hubpad_completion hubpad; printf "%s\\n" "${COMPREPLY[@]}"')
    env = {**os.environ, "PATH": f"{script.parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    for words, cword, expected in (("ch", 1, {"check"}), ("card --dr", 2, {"--dry-run"}),
                                   ("check --t", 2, {"--to", "--tp"})):
        r = subprocess.run([bash, "-c", shell], env={**env, "WORDS": words, "CWORD": str(cword)}, capture_output=True,
                           text=True, timeout=60)
        got = set(r.stdout.split())  # every command or option that starts so (others may come): at least these
        prefix = words.split()[-1]
        assert r.returncode == 0 and expected <= got and all(w.startswith(prefix) for w in got), (words, got, r.stderr)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert 'eval "$(_HUBPAD_COMPLETE=bash_source hubpad)"' in readme


def test_verify_json_prints_json_when_it_fails(good, tmp_path):
    dst = tmp_path / "out"
    assert run("mirror", good, "--tp", "3", "--to", dst).exit_code == 0
    (dst / "config.json").write_text(json.dumps({**json.loads((dst / "config.json").read_text()), "x": 1}))
    r = run("verify", good, dst, "--json")
    assert r.exit_code == 1 and json.loads(r.stdout) == {"ok": False, "error": one_error(r, 1)[len("error: "):]}
    assert json.loads(run("verify", good, good, "--json").stdout)["ok"] is False  # not a derivative: JSON too


def test_up_to_date_is_said_once(good, tmp_path):
    dst = tmp_path / "out"
    assert run("mirror", good, "--tp", "3", "--to", dst).exit_code == 0
    r = run("mirror", good, "--tp", "3", "--to", dst)
    assert r.exit_code == 0 and (r.stdout + r.stderr).count("up to date") == 1 and "up to date" in r.stdout


# ------------------------------------------------------------------------------------------------ 2: local card


def test_local_card_names_the_folder_or_the_repo_id_given(good, tmp_path):
    dst = tmp_path / "loc"
    assert run("mirror", good, "--tp", "3", "--to", dst).exit_code == 0
    card = (dst / "README.md").read_text()
    assert "local/" not in card and "huggingface.co/local" not in card and "None" not in card
    assert f"vllm serve {dst}" in card and f"| upstream revision | local directory, content digest `" in card
    named = tmp_path / "named"
    assert run("mirror", good, "--tp", "3", "--to", named, "--repo-id", "alice/Tiny-Hy3-TP3").exit_code == 0
    card = (named / "README.md").read_text()
    assert "vllm serve alice/Tiny-Hy3-TP3" in card and str(named) not in card.split("## Provenance")[0]
    recipe = yaml.safe_load((named / "tiny-hy3-tp3.yaml").read_text())
    assert recipe["model"] == "alice/Tiny-Hy3-TP3"
    r = run("card", named)  # a refresh keeps the repo id it was mirrored with
    assert r.exit_code == 0 and "card is up to date" in r.stdout
    r = run("card", dst, "--repo-id", "alice/later")  # given later: rendered for it, and kept for the next refresh
    assert r.exit_code == 0 and "hubpad.json" in r.stdout and "vllm serve alice/later" in (dst / "README.md").read_text()
    assert json.loads((dst / "hubpad.json").read_text())["target"]["repo_id"] == "alice/later"
    assert "card is up to date" in run("card", dst).stdout
    for command in (("mirror", good, "--tp", "3", "--to", tmp_path / "x"), ("card", dst)):  # a usage mistake: 2
        assert "'--repo-id': 'not a repo' is not a Hub repo id" in one_error(run(*command, "--repo-id", "not a repo"), 2)
    assert not (tmp_path / "x").exists()


# ------------------------------------------------------------------------------------------------ cards, followed


def bash_commands(card: str) -> list[list[str]]:
    """Every command of the card's ```bash blocks, as argv; `# or: CMD` alternatives included, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", card, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith("# or: "):
                line = line[len("# or: "):]
            argv = shlex.split(line, comments=True)
            if argv:
                commands.append(argv)
    return commands


def _vllm_source_words() -> str | None:
    """The text of vLLM's argument definitions, when a vLLM install is named (HUBPAD_VLLM_PYTHON); else None."""
    python = os.environ.get("HUBPAD_VLLM_PYTHON")
    if not python:
        return None
    out = subprocess.run([python, "-c", "import importlib.util as u; print(u.find_spec('vllm').submodule_search_locations[0])"],
                         capture_output=True, text=True)
    root = Path(out.stdout.strip())
    files = [root / "engine/arg_utils.py", root / "entrypoints/cli/serve.py",
             *sorted(root.glob("entrypoints/**/cli_args.py")), *sorted((root / "config").glob("*.py"))]
    return "\n".join(f.read_text() for f in files if f.is_file())


class CardFollower:
    """Runs or checks every command a card prints; each must parse and name a path or repo that exists."""

    def __init__(self, tp: int, cwd: Path, hub=None, recipe_image: str | None = None):
        self.tp, self.cwd, self.hub, self.seen = tp, cwd, hub, []
        self.vllm_words = _vllm_source_words()
        self.built: list[str] = []  # images the card builds (the vocab plugin's)
        self.recipe_image = recipe_image or DEFAULT_CONTAINER
        self.in_containers: list[list[str]] = []  # the `vllm serve` argv of each `docker run`

    def model_exists(self, model: str, revision: str | None = None) -> None:
        if model.startswith("/"):
            assert (Path(model) / "config.json").is_file(), model
            assert revision is None
        else:
            assert self.hub is not None and self.hub.repo_exists(model), model
            if revision is not None:
                assert self.hub.repo(model).resolve(revision), f"{model} has no revision {revision}"

    def path(self, p: str) -> Path:
        return (self.cwd / p).resolve()

    def follow(self, argv: list[str]) -> None:
        tool = argv[0]
        self.seen.append(" ".join(argv[:2]))
        getattr(self, f"_{tool}")(argv)

    def _sparkrun(self, argv):
        if argv[1:3] == ["cluster", "create"]:
            hosts = argv[argv.index("-H") + 1].split(",")
            assert len(hosts) == self.tp and argv[3] == "mycluster"
        elif argv[1:3] == ["cluster", "update"]:
            assert argv[3:] == ["mycluster", "--topology", "ring"]
        elif argv[1] == "run":
            where, rest = argv[2], argv[3:]
            assert rest[:2] == ["--cluster", "mycluster"] and set(rest[2:]) <= {"--trust"}
            m = re.fullmatch(r"https://huggingface.co/([^/]+/[^/]+)/resolve/main/(.+)", where)
            text = self.hub.file_bytes(m[1], m[2]).decode() if m else Path(where).read_text()
            recipe = yaml.safe_load(text)
            self.model_exists(recipe["model"], recipe.get("model_revision"))
            assert recipe["defaults"]["tensor_parallel"] == self.tp and recipe["min_nodes"] == self.tp
        else:
            raise AssertionError(f"unknown sparkrun command {argv}")

    def _hf(self, argv):  # run it: the real huggingface_hub CLI against the emulator
        assert argv[1] == "download"
        self.model_exists(argv[2])
        hf = Path(sys.executable).with_name("hf")
        r = subprocess.run([str(hf), *argv[1:]], cwd=self.cwd, capture_output=True, text=True, env=dict(os.environ))
        assert r.returncode == 0, r.stderr

    def _pip(self, argv):
        assert argv[1] == "install" and len(argv) == 3
        project = tomllib.loads((self.path(argv[2]) / "pyproject.toml").read_text())
        assert project["project"]["name"]

    def _docker(self, argv):
        if argv[1] == "run":
            return self._docker_run(argv)
        assert argv[1] == "build"
        assert self.path(argv[argv.index("-f") + 1]).is_file() and self.path(argv[-1]).is_dir()
        assert argv[argv.index("--build-arg") + 1].startswith("BASE_IMAGE=")
        self.built.append(argv[argv.index("-t") + 1])

    def _docker_run(self, argv):
        """`docker run` parses (every option one `docker run` has, with its value), runs `vllm serve` in an image the
        card names (the recipe's, or the one the card builds with the vocab plugin), and sees the model."""
        options, image, command = parse_docker_run(argv)
        assert options["--entrypoint"] == ["vllm"] and command[0] == "serve"
        assert options["--gpus"] == ["all"] and options["--ipc"] == ["host"] and "--rm" in options
        multi_node = "--nnodes" in command
        assert options.get("--network") == (["host"] if multi_node else None)
        assert options.get("-p") == (None if multi_node else ["8000:8000"])
        model = command[1]
        if model.startswith("/"):
            assert options["-v"] == [f"{model}:{model}:ro"]  # the folder, at the path the command names
        else:
            assert options["-v"] == ["~/.cache/huggingface:/root/.cache/huggingface"] and "HF_TOKEN" in options["-e"]
        assert image in self.built or image == self.recipe_image, (image, self.built)
        self.in_containers.append(command)
        self._vllm(["vllm", *command])

    def _vllm(self, argv):
        assert argv[1] == "serve"
        flags = argv[3:]
        revision = flags[flags.index("--revision") + 1] if "--revision" in flags else None
        self.model_exists(argv[2], revision)
        assert flags[flags.index("--tensor-parallel-size") + 1] == str(self.tp)
        if "--nnodes" in flags:
            rank = int(flags[flags.index("--node-rank") + 1])
            assert flags[flags.index("--nnodes") + 1] == str(self.tp) and 0 <= rank < self.tp
            assert ("--headless" in flags) == (rank > 0) and flags[flags.index("--master-addr") + 1] == "HEAD_IP"
        for flag in (f for f in flags if f.startswith("--")):
            json.loads(flags[flags.index(flag) + 1]) if flag.endswith("-config") else None  # JSON values parse
            if self.vllm_words is not None:
                assert f'"{flag}"' in self.vllm_words or flag[2:].replace("-", "_") in self.vllm_words, flag

    def _hubpad(self, argv):  # run it: reproducing is up to date, verifying passes
        r = run(*argv[1:])
        assert r.exit_code == 0, r.output
        assert ("up to date" in r.stdout) if argv[1] == "mirror" else r.stdout.startswith("ok: ")
        if argv[1] == "mirror":
            assert argv[argv.index("--tp") + 1] == str(self.tp)


def _follow(card: str, follower: CardFollower) -> None:
    commands = bash_commands(card)
    for argv in commands:
        follower.follow(argv)
    tools = {s.split()[0] for s in follower.seen}
    assert {"sparkrun", "vllm", "pip", "docker", "hubpad"} <= tools, tools
    nodes = [a for a in commands if a[0] == "vllm" and "--nnodes" in a]
    assert sorted(int(a[a.index("--node-rank") + 1]) for a in nodes) == list(range(follower.tp))
    # the container form: the one-machine command and every node's, word for word
    assert follower.in_containers == [a[1:] for a in commands if a[:2] == ["vllm", "serve"]]


# `docker run`'s options used by the card: those that take a value, and flags (docker's reference)
DOCKER_RUN_VALUES = {"-p", "--publish", "-v", "--volume", "-e", "--env", "--network", "--entrypoint", "--gpus", "--ipc",
                     "--ulimit", "--device", "--shm-size", "--name"}
DOCKER_RUN_FLAGS = {"--rm", "--privileged", "-d", "--detach", "-i", "-t", "-it"}


def parse_docker_run(argv: list[str]) -> tuple[dict[str, list[str]], str, list[str]]:
    """`docker run [OPTIONS] IMAGE [COMMAND...]` as {option: [values]}, IMAGE, COMMAND; an unknown option fails."""
    assert argv[:2] == ["docker", "run"], argv
    options: dict[str, list[str]] = {}
    i = 2
    while argv[i].startswith("-"):
        name, eq, value = argv[i].partition("=")
        if name in DOCKER_RUN_FLAGS and not eq:
            options[name] = []
            i += 1
            continue
        assert name in DOCKER_RUN_VALUES, f"not a docker run option the card should use: {name}"
        if not eq:
            i += 1
            value = argv[i]
        options.setdefault(name, []).append(value)
        i += 1
    return options, argv[i], argv[i + 1:]


def test_local_card_followed_command_by_command(good, tmp_path, monkeypatch):
    dst = tmp_path / "loc"
    assert run("mirror", good, "--tp", "3", "--to", dst).exit_code == 0
    monkeypatch.chdir(tmp_path)
    card = (dst / "README.md").read_text()
    _follow(card, CardFollower(3, tmp_path))
    assert "hf download" not in card and "huggingface.co/local" not in card


def test_hub_card_followed_command_by_command(hub, good, tmp_path, monkeypatch):
    up, target = "RedHatAI/Tiny-Hy3", "alice/Tiny-Hy3-TP3"
    hub.seed(up, {p.relative_to(good).as_posix(): p for p in good.rglob("*") if p.is_file()}, message="upload")
    assert run("mirror", up, "--tp", "3", "--to", target).exit_code == 0
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    follower = CardFollower(3, work, hub)
    _follow(hub.file_bytes(target, "README.md").decode(), follower)
    assert "hf download" in follower.seen and (work / "hubpad-patch" / "vllm_patch").is_dir()


PARSE_WITH_VLLM = """
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = make_arg_parser(FlexibleArgumentParser())
parser.allow_abbrev = False  # a misspelt flag that happens to be a prefix of a real one must fail too
print(json.dumps([{k: getattr(ns, k) for k in ("model_tag", "tensor_parallel_size", "nnodes", "node_rank",
                                               "master_addr", "headless")}
                  for ns in (parser.parse_args(argv) for argv in json.load(open(sys.argv[1])))]))
"""


@pytest.mark.serve
def test_card_serve_commands_parse_with_vllms_own_parser(good, tmp_path):
    """Every `vllm serve` line of a card (one machine, and each node of the multi-node launch), bare and in its
    `docker run` form, is accepted by the argument parser of the vLLM in HUBPAD_VLLM_PYTHON (no engine is started)."""
    from tests import serving

    dst = tmp_path / "loc"
    assert run("mirror", good, "--tp", "3", "--to", dst).exit_code == 0
    commands = bash_commands((dst / "README.md").read_text())
    lines = [argv[2:] for argv in commands if argv[:2] == ["vllm", "serve"]]
    lines += [parse_docker_run(argv)[2][1:] for argv in commands if argv[:2] == ["docker", "run"]]
    (tmp_path / "lines.json").write_text(json.dumps(lines))
    (tmp_path / "parse.py").write_text(PARSE_WITH_VLLM)
    r = subprocess.run([serving.vllm_python(), str(tmp_path / "parse.py"), str(tmp_path / "lines.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    parsed = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(parsed) == 8 and all(p["model_tag"] == str(dst) and p["tensor_parallel_size"] == 3 for p in parsed)
    assert [(p["nnodes"], p["node_rank"], p["headless"]) for p in parsed] == 2 * [(1, 0, False), (3, 0, False),
                                                                                  (3, 1, True), (3, 2, True)]
    assert {p["master_addr"] for p in parsed[1:4] + parsed[5:]} == {"HEAD_IP"}



# ------------------------------------------------------------------------------------------------ issue 32


def _generated_files_are_listed_truly(dst: Path) -> None:
    """hubpad.json's generated files and the card's "Files written by hubpad" are the same list, and every file in it
    exists (nothing hubpad wrote before is left unlisted either)."""
    listed = json.loads((dst / "hubpad.json").read_text())["files"]["generated"]
    card = (dst / "README.md").read_text()
    assert re.search(r"Files written by hubpad: (.*)\.", card)[1] == ", ".join(f"`{f}`" for f in listed)
    assert all((dst / f).is_file() for f in listed), listed
    assert {p.name for p in dst.glob("*.yaml")} <= set(listed)


def test_dry_run_reaches_the_runs_verdict(good, tmp_path):
    """One rule for both: a target the run would call up to date, refuse or build, the dry run says so; it writes
    nothing (not even the folder), and --json is JSON."""
    dst = tmp_path / "t6"
    r = run("mirror", good, "--tp", "6", "--to", dst, "--dry-run")
    assert r.exit_code == 0 and "dry run: would publish" in r.stdout and not dst.exists()
    assert run("mirror", good, "--tp", "6", "--to", dst).exit_code == 0
    before = sorted((p.name, p.stat().st_mtime_ns) for p in dst.iterdir())
    for args in ((), ("--json",)):
        r = run("mirror", good, "--tp", "6", "--to", dst, "--dry-run", *args)
        assert r.exit_code == 0, r.output
        if args:
            verdict = json.loads(r.stdout)
            assert verdict["up_to_date"] is True and verdict["would_publish"] is False
            assert verdict["holds"]["tp"] == 6 and verdict["plan"]["tp"] == 6
            assert verdict["disk"] is None  # nothing to write: no room to check
        else:
            assert r.stdout.splitlines()[-1] == "dry run: " + run("mirror", good, "--tp", "6", "--to", dst).stdout.strip()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    for target, extra in ((foreign, ()), (dst, ("--tp", "3"))):  # not ours; another TP: the run's own refusal
        args = ("mirror", good, "--to", target, *(extra or ("--tp", "6")))
        line = one_error(run(*args, "--dry-run"), 1)
        assert line == one_error(run(*args), 1)
        assert ("was not made by hubpad" in line) if target == foreign else ("holds a derivative of" in line)
        assert "dry run: would publish" in run(*args, "--dry-run", "--force").stdout  # as the run would, forced
    r = run("mirror", good, "--tp", "3", "--to", dst, "--dry-run", "--force", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["would_publish"] is True
    assert json.loads(r.stdout)["disk"]["said"].startswith("disk: the derivative needs ")  # the room the run checks
    assert sorted((p.name, p.stat().st_mtime_ns) for p in dst.iterdir()) == before  # nothing written
    assert (foreign / "notes.txt").read_text() == "mine" and not list(tmp_path.glob(".*hubpad*"))


def test_dry_run_on_the_hub_creates_nothing(hub, good):
    target = "alice/Tiny-Hy3-TP3"
    r = run("mirror", good, "--tp", "3", "--to", target, "--dry-run", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["would_publish"] is True and not hub.repo_exists(target)
    assert run("mirror", good, "--tp", "3", "--to", target).exit_code == 0
    branches = hub.branches(target)
    r = run("mirror", good, "--tp", "3", "--to", target, "--dry-run")
    assert r.exit_code == 0 and r.stdout.splitlines()[-1].startswith(f"dry run: {target} is up to date")
    assert hub.branches(target) == branches  # no staging branch made, nothing committed
    hub.seed("alice/theirs", {"precious.txt": b"x"})
    assert "hubpad did not create it" in one_error(run("mirror", good, "--tp", "3", "--to", "alice/theirs",
                                                       "--dry-run"), 1)


def test_check_reads_the_tp_the_target_holds_and_says_why_it_is_stale(good, tmp_path):
    dst = tmp_path / "tiny-tp3"  # named tp3, holds TP 6
    assert run("mirror", good, "--tp", "6", "--to", dst).exit_code == 0
    r = run("check", good, "--to", dst)
    assert r.exit_code == 0 and r.stdout.strip() == f"up-to-date: {good} -> {dst} (tp 6)"
    r = run("check", good, "--to", dst, "--tp", "3")
    assert r.stdout.strip() == f"stale: {good} -> {dst} (tp 3; holds TP 6, checked for TP 3)"
    m = json.loads(run("check", good, "--to", dst, "--tp", "3", "--json").stdout)
    assert m["status"] == "stale" and m["reason"] == "holds TP 6, checked for TP 3" and m["changed"] is True
    moved = tmp_path / "moved"
    shutil.copytree(good, moved)
    (moved / "LICENSE").write_text("changed\n")
    m = json.loads(run("check", moved, "--to", dst, "--json").stdout)
    assert m["status"] == "stale" and m["reason"].startswith("upstream ") and ", recorded " in m["reason"]


def test_card_with_a_new_repo_id_removes_the_old_recipe_and_keeps_the_lists_true(good, tmp_path):
    dst = tmp_path / "tiny"
    assert run("mirror", good, "--tp", "6", "--to", dst).exit_code == 0
    _generated_files_are_listed_truly(dst)
    before = {p.name: p.read_bytes() for p in dst.iterdir() if p.is_file()}
    r = run("card", dst, "--repo-id", "my-org/Other-TP6", "--dry-run")
    assert r.exit_code == 0 and "dry run: would update" in r.stdout and "remove tiny.yaml" in r.stdout
    assert "updated" not in r.stdout and {p.name: p.read_bytes() for p in dst.iterdir() if p.is_file()} == before
    r = run("card", dst, "--repo-id", "my-org/Other-TP6")
    assert r.exit_code == 0 and "removed tiny.yaml" in r.stdout
    assert (dst / "other-tp6.yaml").is_file() and not (dst / "tiny.yaml").exists()
    _generated_files_are_listed_truly(dst)
    assert run("card", dst).stdout.strip() == f"{dst}: card is up to date"
    for text in ((dst / "README.md").read_text(), (dst / "other-tp6.yaml").read_text()):
        assert str(good) not in text and str(dst) not in text  # meant for upload: no local path
    assert "local folder" in (dst / "README.md").read_text() and f"`{good.name}`" in (dst / "README.md").read_text()


def test_hub_card_removes_what_an_earlier_render_wrote(hub, good):
    """A Hub target whose hubpad.json lists a recipe the card no longer renders (its repo was renamed): one commit
    deletes it, and the lists are true again; hubpad never deletes a file it did not list."""
    up, target = "RedHatAI/Tiny-Hy3", "alice/Tiny-Hy3-TP3"
    hub.seed(up, {p.relative_to(good).as_posix(): p for p in good.rglob("*") if p.is_file()}, message="upload")
    assert run("mirror", up, "--tp", "3", "--to", target).exit_code == 0
    manifest = json.loads(hub.file_bytes(target, "hubpad.json"))
    manifest["files"]["generated"].append("old-name.yaml")
    hub.seed(target, {"hubpad.json": json.dumps(manifest), "old-name.yaml": "recipe: old\n", "notes.yaml": "mine\n"})
    r = run("card", target, "--dry-run")
    assert r.exit_code == 0 and "remove old-name.yaml" in r.stdout and "old-name.yaml" in hub.files(target)
    commits = len(hub.commits(target))
    r = run("card", target)
    assert r.exit_code == 0 and "removed old-name.yaml" in r.stdout and len(hub.commits(target)) == commits + 1
    files = hub.files(target)
    assert "old-name.yaml" not in files and "notes.yaml" in files
    listed = json.loads(hub.file_bytes(target, "hubpad.json"))["files"]["generated"]
    assert "old-name.yaml" not in listed and all(f in files for f in listed)
    assert f"`{listed[-1]}`." in hub.file_bytes(target, "README.md").decode()


def test_offline_mode_names_both_readings(good, tmp_path, monkeypatch):
    """HF_HUB_OFFLINE=1: an ambiguous out2/tp3 gets the local reading and the ./ spelling, as a network error does."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    for args in (("mirror", good, "--tp", "3", "--to", "out2/tp3"), ("plan", "out2/tp3", "--tp", "3"),
                 ("check", "out2/tp3", "--to", "./x", "--tp", "3"), ("card", "out2/tp3")):
        line = one_error(run(*args, env={"HF_TOKEN": "hf_unused"}), 1)
        assert "offline mode is enabled" in line and "HF_HUB_OFFLINE" in line, line
        assert "read as a Hub repo id" in line and "write ./out2/tp3" in line, line
    r = subprocess.run([sys.executable, "-m", "hubpad.app.cli", "plan", "out2/tp3", "--tp", "3"], cwd=tmp_path,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "offline mode is enabled" in r.stderr and "./out2/tp3" in r.stderr, r.stderr


def test_force_help_says_everything_it_allows():
    text = " ".join(run("mirror", "--help").stdout.split())
    assert "a target hubpad did not create" in text and "another TP or another upstream" in text
