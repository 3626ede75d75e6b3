"""hubpad.app.gha: step outputs (multi-line safe), job summary, log groups, annotations and masking."""

from __future__ import annotations

import pytest

from hubpad.app import gha


def parse_output_file(text: str) -> dict[str, str]:
    """Read a $GITHUB_OUTPUT file the way the Actions runner does (name=value and name<<DELIM blocks)."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        line = lines[i]
        eq, heredoc = line.find("="), line.find("<<")
        if eq >= 0 and (heredoc < 0 or eq < heredoc):
            out[line[:eq]] = line[eq + 1 :]
            i += 1
            continue
        assert heredoc > 0, f"malformed line {line!r}"
        name, delimiter = line[:heredoc], line[heredoc + 2 :]
        body: list[str] = []
        i += 1
        while lines[i] != delimiter:
            body.append(lines[i])
            i += 1
        out[name] = "\n".join(body)
        i += 1
    return out


@pytest.fixture
def actions_env(monkeypatch, tmp_path):
    """Pretend to be inside a GitHub Actions step with fresh output and summary files."""
    output, summary = tmp_path / "output", tmp_path / "summary"
    output.write_text("", encoding="utf-8")
    summary.write_text("", encoding="utf-8")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    return output, summary


@pytest.fixture
def outside_actions(monkeypatch):
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


def test_in_github_actions(monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert gha.in_github_actions()
    monkeypatch.setenv("GITHUB_ACTIONS", "false")
    assert not gha.in_github_actions()
    monkeypatch.delenv("GITHUB_ACTIONS")
    assert not gha.in_github_actions()


def test_set_outputs_round_trips_multiline_and_typed_values(actions_env):
    output, _ = actions_env
    values = {
        "changed": True,
        "dirty": False,
        "upstream_sha": "0123abcd",
        "notes": "line one\nline two\r\nthird = with equals << and arrows\n",
        "matrix": {"include": [{"upstream": "a/b", "target": "c/d", "tp": 3}]},
        "empty": None,
        "count": 7,
    }
    assert gha.set_outputs(values) is True
    parsed = parse_output_file(output.read_bytes().decode("utf-8"))
    assert parsed == {
        "changed": "true",
        "dirty": "false",
        "upstream_sha": "0123abcd",
        "notes": "line one\nline two\r\nthird = with equals << and arrows\n",
        "matrix": '{"include":[{"upstream":"a/b","target":"c/d","tp":3}]}',
        "empty": "",
        "count": "7",
    }


def test_set_outputs_appends_and_uses_fresh_random_delimiters(actions_env):
    output, _ = actions_env
    output.write_text("earlier=kept\n", encoding="utf-8")
    gha.set_outputs({"a": "x"})
    gha.set_outputs({"b": "y"})
    text = output.read_text(encoding="utf-8")
    assert text.startswith("earlier=kept\n")
    delimiters = [line.split("<<", 1)[1] for line in text.splitlines() if "<<" in line]
    assert len(delimiters) == 2 and delimiters[0] != delimiters[1]
    assert all(len(d) >= 32 for d in delimiters)
    assert parse_output_file(text) == {"earlier": "kept", "a": "x", "b": "y"}


def test_value_cannot_forge_an_extra_output(actions_env):
    output, _ = actions_env
    evil = "x\nghadelimiter_guess\ninjected=true\n"
    gha.set_outputs({"notes": evil})
    parsed = parse_output_file(output.read_bytes().decode("utf-8"))
    assert parsed == {"notes": evil}


def test_format_outputs_shape():
    text = gha.format_outputs({"changed": True})
    first, value, last, end = text.split("\n")
    assert first.startswith("changed<<ghadelimiter_")
    assert value == "true" and last == first.split("<<", 1)[1] and end == ""


@pytest.mark.parametrize("name", ["", "has space", "a=b", "x<<y", "new\nline", "1starts-with-digit", 3])
def test_set_outputs_rejects_bad_names(actions_env, name):
    with pytest.raises(ValueError, match="output name"):
        gha.set_outputs({name: "v"})


def test_set_outputs_outside_actions_is_a_no_op(outside_actions, tmp_path):
    assert gha.set_outputs({"changed": True}) is False
    assert list(tmp_path.iterdir()) == []


def test_append_summary(actions_env):
    _, summary = actions_env
    assert gha.append_summary("### hubpad\n\n| a | b |") is True
    assert gha.append_summary("done\n") is True
    assert summary.read_text(encoding="utf-8") == "### hubpad\n\n| a | b |\ndone\n"


def test_append_summary_outside_actions(outside_actions):
    assert gha.append_summary("x") is False


def test_group_inside_actions(actions_env, capsys):
    with gha.group("Download 50% of shard\n1"):
        print("inside")
    assert capsys.readouterr().out == "::group::Download 50%25 of shard%0A1\ninside\n::endgroup::\n"


def test_group_closes_on_error(actions_env, capsys):
    with pytest.raises(RuntimeError):
        with gha.group("work"):
            raise RuntimeError("boom")
    assert capsys.readouterr().out == "::group::work\n::endgroup::\n"


def test_group_outside_actions_prints_nothing(outside_actions, capsys):
    with gha.group("work"):
        print("inside")
    assert capsys.readouterr().out == "inside\n"


def test_error_escapes_percent_cr_lf(actions_env, capsys):
    assert gha.error("100% failed\r\nsecond line") is True
    assert capsys.readouterr().out == "::error::100%25 failed%0D%0Asecond line\n"


def test_escaping_is_reversible_and_percent_first():
    assert gha.escape_data("%0A") == "%250A"  # a literal "%0A" must not turn into a newline
    assert gha.escape_data("a\nb") == "a%0Ab"
    assert gha.escape_property("a: b, c%") == "a%3A b%2C c%25"


def test_error_title_property_is_escaped(actions_env, capsys):
    gha.error("bad tp", title="hubpad.yaml: mirrors[0], tp")
    assert capsys.readouterr().out == "::error title=hubpad.yaml%3A mirrors[0]%2C tp::bad tp\n"


def test_warning_and_notice(actions_env, capsys):
    gha.warning("license mismatch: mit vs apache-2.0")
    gha.notice("up to date")
    assert capsys.readouterr().out == "::warning::license mismatch: mit vs apache-2.0\n::notice::up to date\n"


def test_annotations_outside_actions_print_nothing(outside_actions, capsys):
    assert gha.error("x") is False
    assert gha.warning("x") is False
    assert gha.notice("x") is False
    assert capsys.readouterr().out == ""


def test_mask(actions_env, capsys):
    assert gha.mask("hf_secret%value") is True
    assert capsys.readouterr().out == "::add-mask::hf_secret%25value\n"


def test_mask_multiline_masks_each_line(actions_env, capsys):
    gha.mask("first\nsecond\n")
    assert capsys.readouterr().out.splitlines() == [
        "::add-mask::first%0Asecond%0A",
        "::add-mask::first",
        "::add-mask::second",
    ]


def test_mask_never_prints_a_secret_outside_actions(outside_actions, capsys):
    assert gha.mask("hf_secret") is False
    assert gha.mask("") is False
    captured = capsys.readouterr()
    assert "hf_secret" not in captured.out + captured.err
