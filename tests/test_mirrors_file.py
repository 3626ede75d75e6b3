"""The mirrors file (hubpad.yaml) and byte sizes: valid files load, every mistake is one clear line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from hubpad.errors import HubpadError
from hubpad.formats.mirrors_file import DEFAULT_SHARD_SIZE, MirrorSpec, find_mirror, load_mirrors, parse_mirrors
from hubpad.util.refs import derive_target
from hubpad.util.refs import is_local as is_local_ref
from hubpad.util.sizes import format_size, parse_size

ROOT = Path(__file__).resolve().parents[1]


def error_of(text: str, **kwargs) -> str:
    with pytest.raises(HubpadError) as info:
        parse_mirrors(text, **kwargs)
    message = str(info.value)
    assert "\n" not in message, "errors must be one line"
    return message


# --- sizes ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5GB", 5_000_000_000),
        ("5gb", 5_000_000_000),
        ("5 GB", 5_000_000_000),
        ("1.5GB", 1_500_000_000),
        (".5KB", 500),
        ("750MB", 750_000_000),
        ("2TB", 2 * 10**12),
        ("1KiB", 1024),
        ("1.5GiB", 1_610_612_736),
        ("3MiB", 3 * 1024**2),
        ("1TiB", 1024**4),
        ("1000", 1000),
        ("10B", 10),
        ("0", 0),
        (4096, 4096),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "junk", ["", "GB", "5G", "5 gigs", "-1GB", "1e9", "1,5GB", "5GB5", "five", "nan", "inf", "1..5GB", None, 1.5, True, -3, [5]]
)
def test_parse_size_rejects_junk(junk):
    with pytest.raises(ValueError):
        parse_size(junk)


def test_parse_size_hint_for_ambiguous_unit():
    with pytest.raises(ValueError, match="GB or GiB"):
        parse_size("5G")


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0B"),
        (999, "999B"),
        (1000, "1KB"),
        (1536, "1.54KB"),
        (5_000_000_000, "5GB"),
        (1_500_000_000, "1.5GB"),
        (178 * 10**9, "178GB"),
        (2 * 10**12, "2TB"),
    ],
)
def test_format_size(n, text):
    assert format_size(n) == text


def test_format_size_binary():
    assert format_size(1536, binary=True) == "1.5KiB"
    assert format_size(5 * 1024**3, binary=True) == "5GiB"


@pytest.mark.parametrize("n", [1, 999, 1001, 123_456_789, 5_368_709_120, 178_123_456_789, 7 * 10**13])
def test_format_then_parse_is_close(n):
    assert abs(parse_size(format_size(n)) - n) <= n * 0.005
    assert abs(parse_size(format_size(n, binary=True)) - n) <= n * 0.005


@pytest.mark.parametrize("bad", [-1, 1.5, "5GB", True])
def test_format_size_rejects_non_sizes(bad):
    with pytest.raises(ValueError):
        format_size(bad)


# --- valid files ---------------------------------------------------------------------------------------------


def test_minimal_entry_gets_defaults():
    (spec,) = parse_mirrors("mirrors:\n  - upstream: RedHatAI/Hy3-NVFP4-FP8\n")
    assert spec == MirrorSpec(upstream="RedHatAI/Hy3-NVFP4-FP8")
    assert spec.tp == 3 and spec.target is None and spec.revision is None
    assert spec.shard_size == DEFAULT_SHARD_SIZE and spec.max_disk is None and spec.private is False
    assert spec.serving_overrides() == {} and spec.recipe_overrides() == {}
    assert spec.upstream_kind == "hub"
    assert spec.resolved_target() == "Hy3-NVFP4-FP8-TP3"
    assert spec.resolved_target("alice") == "alice/Hy3-NVFP4-FP8-TP3"


def test_full_file_with_defaults_and_merging():
    text = """
defaults:
  tp: 4
  shard_size: 2GiB
  max_disk: 60GB
  private: true
  serving:
    tool_call_parser: hy_v3
    extra_args: [--max-model-len, 32768]
  recipe:
    container: img:1
mirrors:
  - upstream: RedHatAI/Hy3-NVFP4-FP8
    target: alice/Hy3-TP3
    tp: 3
    revision: refs/pr/1
    shard_size: 1.5GB
    private: false
    serving:
      reasoning_parser: hy_v3
      speculative_config: {method: mtp, num_speculative_tokens: 1}
    recipe:
      min_nodes: 3
  - upstream: org/other
"""
    first, second = parse_mirrors(text)
    assert first.upstream == "RedHatAI/Hy3-NVFP4-FP8" and first.target == "alice/Hy3-TP3"
    assert (first.tp, first.revision, first.shard_size, first.max_disk, first.private) == (3, "refs/pr/1", 1_500_000_000, 60 * 10**9, False)
    assert first.serving_overrides() == {
        "tool_call_parser": "hy_v3",
        "extra_args": ["--max-model-len", "32768"],
        "reasoning_parser": "hy_v3",
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 1},
    }
    assert first.recipe_overrides() == {"container": "img:1", "min_nodes": 3}
    assert (second.tp, second.shard_size, second.max_disk, second.private) == (4, 2 * 1024**3, 60 * 10**9, True)
    assert second.serving_overrides() == {"tool_call_parser": "hy_v3", "extra_args": ["--max-model-len", "32768"]}
    assert second.resolved_target("bob") == "bob/other-TP4"


def test_spec_is_frozen_and_overrides_are_copies():
    (spec,) = parse_mirrors("mirrors:\n  - upstream: a/b\n    serving: {extra_args: [--x]}\n    recipe: {env: {A: '1'}}\n")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.tp = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.serving["extra_args"] = ()  # type: ignore[index]
    copy = spec.recipe_overrides()
    copy["env"]["A"] = "2"
    assert spec.recipe_overrides() == {"env": {"A": "1"}}
    hash(spec)  # usable in sets / as dict keys


def test_null_serving_values_mean_explicitly_none():
    (spec,) = parse_mirrors("mirrors:\n  - upstream: a/b\n    serving: {speculative_config: null, extra_args: null}\n")
    assert spec.serving_overrides() == {"speculative_config": None, "extra_args": []}


def test_to_dict_is_json_ready():
    (spec,) = parse_mirrors("mirrors:\n  - upstream: a/b\n    max_disk: 60GB\n    serving: {extra_args: [--x]}\n")
    data = spec.to_dict("alice")
    assert json.loads(json.dumps(data)) == data
    assert data["target"] == "alice/b-TP3" and data["shard_size"] == "5GB" and data["max_disk"] == "60GB"
    assert spec.to_dict()["target"] is None


def test_local_paths_resolve_against_the_file(tmp_path):
    path = tmp_path / "conf" / "hubpad.yaml"
    path.parent.mkdir()
    path.write_text("mirrors:\n  - upstream: ./models/tiny\n    target: ../out/tiny-tp3\n", encoding="utf-8")
    (spec,) = load_mirrors(path)
    assert spec.upstream == str((tmp_path / "conf" / "models" / "tiny").resolve())
    assert spec.target == str((tmp_path / "out" / "tiny-tp3").resolve())
    assert spec.upstream_kind == "local" and spec.target_kind == "local"
    assert spec.resolved_target("alice") == spec.target


def test_load_mirrors_from_file(tmp_path):
    path = tmp_path / "hubpad.yaml"
    path.write_text("mirrors:\n  - upstream: a/b\n", encoding="utf-8")
    assert load_mirrors(path) == [MirrorSpec(upstream="a/b")]


def test_example_file_in_repo_root_is_valid():
    specs = load_mirrors(ROOT / "hubpad.yaml")
    assert [(s.upstream, s.tp) for s in specs] == [("RedHatAI/Hy3-NVFP4-FP8", 3)]


def test_bare_upstream_and_target_names_are_allowed():
    (spec,) = parse_mirrors("mirrors:\n  - upstream: gpt2\n    target: gpt2-padded\n")
    assert spec.resolved_target() == "gpt2-padded"
    assert spec.resolved_target("alice") == "alice/gpt2-padded"


@pytest.mark.parametrize(
    ("ref", "local"),
    [("/abs", True), ("./x", True), ("../x", True), ("~/x", True), (".", True), ("org/model", False), ("model", False)],
)
def test_is_local_ref(ref, local):
    assert is_local_ref(ref) is local


def test_derive_target():
    assert derive_target("RedHatAI/Hy3-NVFP4-FP8", 3) == "Hy3-NVFP4-FP8-TP3"
    assert derive_target("RedHatAI/Hy3-NVFP4-FP8", 3, "alice") == "alice/Hy3-NVFP4-FP8-TP3"
    assert derive_target("/data/models/tiny/", 6, "alice") == "alice/tiny-TP6"


def test_find_mirror():
    specs = parse_mirrors("mirrors:\n  - upstream: a/b\n  - upstream: a/b\n    tp: 4\n  - upstream: c/d\n    target: me/x\n")
    assert find_mirror(specs, "A/B", tp=4).tp == 4
    assert find_mirror(specs, "c/d").target == "me/x"
    assert find_mirror(specs, "a/b", target="alice/b-TP3", namespace="alice").tp == 3
    with pytest.raises(HubpadError, match="2 mirror entries match a/b"):
        find_mirror(specs, "a/b")
    with pytest.raises(HubpadError, match="no mirror entry for z/z"):
        find_mirror(specs, "z/z")


# --- one-line errors naming file, line and entry -------------------------------------------------------------


def test_unknown_key_suggests_closest():
    msg = error_of("mirrors:\n  - upstream: a/b\n    shardsize: 5GB\n")
    assert msg == "hubpad.yaml:3: mirrors[0] (a/b): unknown key 'shardsize'; did you mean 'shard_size'?"  # its line


def test_kebab_case_key_suggests_snake_case():
    assert "did you mean 'max_disk'?" in error_of("mirrors:\n  - upstream: a/b\n    max-disk: 5GB\n")


def test_unknown_key_without_close_match_lists_valid_keys():
    msg = error_of("mirrors:\n  - upstream: a/b\n    colour: red\n")
    assert "unknown key 'colour'; valid keys: upstream, target, tp" in msg


def test_unknown_top_level_key():
    assert error_of("mirror:\n  - upstream: a/b\n") == "hubpad.yaml:1: unknown key 'mirror'; did you mean 'mirrors'?"


def test_unknown_serving_key():
    msg = error_of("mirrors:\n  - upstream: a/b\n    serving:\n      tool_parser: x\n")
    assert "unknown key 'serving.tool_parser'; did you mean 'tool_call_parser'?" in msg


def test_unknown_defaults_key_and_upstream_in_defaults():
    assert "defaults: unknown key 'tpp'; did you mean 'tp'?" in error_of("defaults:\n  tpp: 3\nmirrors:\n  - upstream: a/b\n")
    assert "'upstream' cannot be set in defaults" in error_of("defaults:\n  upstream: a/b\nmirrors:\n  - upstream: a/b\n")


def test_error_names_the_file_and_the_right_entry(tmp_path):
    path = tmp_path / "my-mirrors.yaml"
    path.write_text("mirrors:\n  - upstream: a/b\n  - upstream: c/d\n    tp: 0\n", encoding="utf-8")
    with pytest.raises(HubpadError) as info:
        load_mirrors(path)
    assert str(info.value) == f"{path}:4: mirrors[1] (c/d): tp must be an integer >= 2, got 0 (tp 1 needs no padding)"


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("1", "tp must be an integer >= 2, got 1"),
        ("-3", "got -3"),
        ("'3'", "got '3' (a string)"),
        ("3.0", "got 3.0 (a number)"),
        ("true", "got True (a boolean)"),
        ("[3]", "got [3] (a list)"),
    ],
)
def test_bad_tp(value, fragment):
    assert fragment in error_of(f"mirrors:\n  - upstream: a/b\n    tp: {value}\n")


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("shard_size", "5 gigs", "shard_size: unknown size unit 'gigs'"),
        ("shard_size", "5G", "did you mean GB or GiB?"),
        ("shard_size", "0", "shard_size must be greater than zero"),
        ("shard_size", "-5GB", "shard_size: not a size: '-5GB'"),
        ("shard_size", "[5]", "shard_size must be a size like '5GB'"),
        ("max_disk", "lots", "max_disk: not a size: 'lots'"),
        ("max_disk", "true", "max_disk must be a size like '5GB', got True"),
    ],
)
def test_bad_sizes(key, value, fragment):
    assert fragment in error_of(f"mirrors:\n  - upstream: a/b\n    {key}: {value}\n")


def test_integer_size_is_bytes():
    (spec,) = parse_mirrors("mirrors:\n  - upstream: a/b\n    shard_size: 1000000\n")
    assert spec.shard_size == 1_000_000


def test_max_disk_smaller_than_shard_size():
    msg = error_of("mirrors:\n  - upstream: a/b\n    max_disk: 1GB\n")
    assert "max_disk (1GB) is smaller than shard_size (5GB)" in msg


def test_missing_upstream():
    assert error_of("mirrors:\n  - target: a/b\n") == (
        "hubpad.yaml:2: mirrors[0]: missing required key 'upstream' (a Hub repo id like org/model, or ./local/path)"
    )
    assert "missing required key 'upstream'" in error_of("mirrors:\n  - upstream:\n")


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ("upstream: 42", "upstream must be a Hub repo id (org/model) or a local path, got 42 (an integer)"),
        ("upstream: a/b/c", "upstream 'a/b/c' is not a valid Hub repo id"),
        ("upstream: -bad/x", "is not a valid Hub repo id"),
        ("upstream: a--b/x", "'--' and '..' are not allowed"),
        ("upstream: a/x.git", "cannot end with '.git'"),
        ("upstream: 'a/has space'", "is not a valid Hub repo id"),
        ("{upstream: a/b, target: 'x/y/z'}", "target 'x/y/z' is not a valid Hub repo id"),
        ("{upstream: a/b, revision: 1234567}", "revision must be a string, got 1234567 (an integer); quote it in YAML"),
        ("{upstream: a/b, revision: 'has space'}", "revision must be a branch, tag or commit without spaces"),
        ("{upstream: a/b, private: 'yes'}", "private must be true or false, got 'yes' (a string)"),
        ("{upstream: a/b, serving: [x]}", "serving must be a mapping"),
        ("{upstream: a/b, serving: {tool_call_parser: 3}}", "serving.tool_call_parser must be a non-empty string or null"),
        ("{upstream: a/b, serving: {extra_args: --x}}", "serving.extra_args must be a list"),
        ("{upstream: a/b, serving: {extra_args: [{a: 1}]}}", "serving.extra_args[0] must be a string"),
        ("{upstream: a/b, serving: {speculative_config: mtp}}", "serving.speculative_config must be a mapping"),
        ("{upstream: a/b, recipe: [x]}", "recipe must be a mapping"),
        ("{upstream: a/b, recipe: {when: 2026-01-01}}", "recipe.when: unsupported value"),
        ("{upstream: a/b, recipe: {1: x}}", "recipe keys must be strings"),
    ],
)
def test_wrong_types_and_values(entry, fragment):
    msg = error_of(f"mirrors:\n  - {entry}\n")
    assert msg.startswith("hubpad.yaml:2: mirrors[0]")
    assert fragment in msg


def test_duplicate_explicit_targets_case_insensitive():
    msg = error_of("mirrors:\n  - upstream: a/b\n    target: me/X\n  - upstream: c/d\n    target: ME/x\n")
    assert msg == "hubpad.yaml:4: mirrors[1] (c/d): duplicate target 'ME/x', already used by mirrors[0] (a/b)"


def test_duplicate_derived_targets():
    msg = error_of("mirrors:\n  - upstream: a/model\n  - upstream: b/model\n")
    assert msg == "hubpad.yaml:3: mirrors[1] (b/model): duplicate derived target 'model-TP3', already used by mirrors[0] (a/model)"


def test_duplicate_after_defaults():
    text = "defaults: {tp: 4}\nmirrors:\n  - upstream: a/model\n  - upstream: b/model\n    tp: 4\n"
    assert "duplicate derived target 'model-TP4'" in error_of(text)
    # same upstream name at different tp sizes -> different targets
    parse_mirrors("mirrors:\n  - upstream: a/model\n  - upstream: b/model\n    tp: 4\n")


def test_duplicate_explicit_vs_derived_with_namespace():
    text = "mirrors:\n  - upstream: a/model\n  - upstream: b/other\n    target: alice/model-TP3\n"
    parse_mirrors(text)  # without the namespace the two cannot be compared
    assert "duplicate target 'alice/model-TP3'" in error_of(text, namespace="alice")
    bare = "mirrors:\n  - upstream: a/model\n  - upstream: b/other\n    target: model-TP3\n"
    assert "duplicate target 'model-TP3'" in error_of(bare)


def test_duplicate_yaml_key():
    assert error_of("mirrors:\n  - upstream: a/b\n    tp: 3\n    tp: 4\n") == "hubpad.yaml:4: duplicate key 'tp'"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "the file is empty"),
        ("# only a comment\n", "the file is empty"),
        ("- upstream: a/b\n", "expected a mapping with a 'mirrors:' list, got a list"),
        ("defaults: {tp: 3}\n", "missing the 'mirrors:' list"),
        ("mirrors: a/b\n", "'mirrors' must be a list, got a string"),
        ("mirrors: []\n", "'mirrors' is empty"),
        ("mirrors:\n  - a/b\n", "each mirror must be a mapping"),
        ("defaults: [tp]\nmirrors:\n  - upstream: a/b\n", "'defaults' must be a mapping"),
        ("mirrors:\n  - upstream: [a\n", "hubpad.yaml:3: invalid YAML"),
        ("mirrors:\n  - {upstream: a/b, 3: x}\n", "keys must be strings, got 3"),
    ],
)
def test_file_shape_errors(text, fragment):
    assert fragment in error_of(text)


def test_missing_file(tmp_path):
    with pytest.raises(HubpadError, match="mirrors file not found"):
        load_mirrors(tmp_path / "nope.yaml")


def test_a_key_problem_names_the_keys_own_line():
    """Issue 32: `shard_sise` on line 3 was reported on line 2 (the entry's): each key's own line, nested ones too."""
    assert error_of("mirrors:\n  - upstream: a/b\n    shard_sise: 5GB\n").startswith("hubpad.yaml:3: mirrors[0] (a/b)")
    text = "defaults:\n  tp: 3\n  upstream: x\nmirrors:\n  - upstream: a/b\n    revision: main\n    serving:\n" \
           "      tool_parser: x\n  - upstream: c/d\n    private: 'yes'\n"
    with pytest.raises(HubpadError) as info:
        parse_mirrors(text)
    lines = [p.split(": ", 1)[0] for p in info.value.problems]
    assert lines == ["hubpad.yaml:3", "hubpad.yaml:8", "hubpad.yaml:10"], info.value.problems
    assert error_of("mirrors:\n  - target: a/b\n").startswith("hubpad.yaml:2: mirrors[0]")  # no key: the entry's


def test_a_duplicate_target_is_found_even_when_its_entry_has_other_mistakes():
    """Issue 32: an entry with `tp: 0` was dropped before the duplicate check, so its duplicate target went unseen."""
    text = "mirrors:\n  - upstream: a/b\n    target: me/x\n  - upstream: c/d\n    target: me/x\n    tp: 0\n"
    with pytest.raises(HubpadError) as info:
        parse_mirrors(text)
    assert info.value.problems == [
        "hubpad.yaml:6: mirrors[1] (c/d): tp must be an integer >= 2, got 0 (tp 1 needs no padding)",
        "hubpad.yaml:4: mirrors[1] (c/d): duplicate target 'me/x', already used by mirrors[0] (a/b)"]
    # the first of two duplicates broken, and a derived target with a valid tp from the defaults: both still seen
    text = "defaults: {tp: 4}\nmirrors:\n  - upstream: a/model\n    private: 3\n  - upstream: b/model\n"
    with pytest.raises(HubpadError) as info:
        parse_mirrors(text)
    assert len(info.value.problems) == 2 and "duplicate derived target 'model-TP4'" in info.value.problems[1]
    # a derived target whose tp is broken is unknown: no duplicate is claimed
    with pytest.raises(HubpadError) as info:
        parse_mirrors("mirrors:\n  - upstream: a/model\n  - upstream: b/model\n    tp: 0\n")
    assert len(info.value.problems) == 1
