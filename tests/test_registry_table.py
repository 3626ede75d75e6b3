"""docs/families.md's registry table accounts for every architecture of vLLM's registry (issue 33), and stays true.

tests/vllm_registry.txt is a snapshot of the locked vLLM's _TEXT_GENERATION_MODELS and _MULTIMODAL_MODELS
(tests/vllm_registry_dump.py writes it; tests/test_serve_registry.py, in the serving gate, checks it against the
installed vLLM). These tests need no vLLM: the snapshot names the lock's version, every name has exactly one row
(in the table of architectures with a public checkpoint of 20B parameters or more, or in the list of those under
20B), no row names an architecture the registry lacks, and each row's status agrees with hubpad: a padded row's
model types are ones hubpad pads, a refused one's are refused, a "not yet supported" one's are not known at all (so
adding an adapter fails here until its row says so).
"""

from __future__ import annotations

import re

import pytest

from hubpad.errors import ConfigError
from hubpad.plan.adapters import adapter_for, check_refused
from tests.helpers import ROOT

TABLE = ROOT / "docs" / "families.md"
SNAPSHOT = ROOT / "tests" / "vllm_registry.txt"
LARGE, SMALL = "20B parameters or more", "under 20B"
STATUSES = ("padded", "divides already", "refused", "not yet supported", "TODO(")


def _snapshot() -> tuple[str, list[str]]:
    lines = [line for line in SNAPSHOT.read_text().splitlines() if line and not line.startswith("#")]
    return lines[0], [line.split()[1] for line in lines[1:]]


def _section_rows(heading: str) -> list[list[str]]:
    """The cells of every body row of the first table under the heading that contains `heading`."""
    text = TABLE.read_text()
    start = next(m.end() for m in re.finditer(r"^#+ .*$", text, re.M) if heading in m.group(0))
    rows, seen_table = [], False
    for line in text[start:].splitlines():
        if line.startswith("|"):
            seen_table = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set(cells[0]) <= set("-: "):
                rows.append(cells)
        elif seen_table or line.startswith("#"):
            break
    return rows[1:]  # the header row


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _rows() -> dict[str, tuple[str, list[str]]]:
    """architecture -> (which table, its row's cells); an architecture named twice fails."""
    out: dict[str, tuple[str, list[str]]] = {}
    for which in (LARGE, SMALL):
        for cells in _section_rows(which):
            for arch in _names(cells[0]):
                assert arch not in out, f"{arch} has two rows in docs/families.md"
                out[arch] = (which, cells)
    return out


def test_snapshot_is_the_locked_vllm():
    version, _ = _snapshot()
    pin = re.search(r"^(vllm(?:-cpu)?)==(\S+)", (ROOT / "requirements" / "serve.in").read_text(), re.M)
    assert version == f"{pin.group(1)} {pin.group(2)}", (
        f"tests/vllm_registry.txt is {version!r} but requirements/serve.in locks {pin.group(0)}: regenerate it "
        f"($HUBPAD_VLLM_PYTHON tests/vllm_registry_dump.py > tests/vllm_registry.txt) and give every new "
        f"architecture its row in docs/families.md")


def test_every_registry_architecture_has_exactly_one_row():
    _, names = _snapshot()
    rows = _rows()
    missing = [n for n in names if n not in rows]
    stale = sorted(set(rows) - set(names))
    assert not missing, f"architectures of vLLM's registry without a row in docs/families.md: {missing}"
    assert not stale, f"rows in docs/families.md for architectures vLLM's registry does not have: {stale}"
    assert len(names) == len(set(names))


def _large_rows() -> list[tuple[str, str, str]]:
    """(architecture, model types cell, status) of each row of the 20B-or-more table."""
    out = []
    for cells in _section_rows(LARGE):
        assert len(cells) == 9, f"a row of the registry table has {len(cells)} cells, not 9: {cells[0]}"
        for arch in _names(cells[0]):
            out.append((arch, cells[1], cells[2].replace("**", "")))
    return out


def test_every_row_has_a_known_status():
    bad = [(arch, status) for arch, _, status in _large_rows() if not status.startswith(STATUSES)]
    assert not bad, f"statuses must start with one of {STATUSES}: {bad}"


def _verdict(arch: str, model_type: str) -> str:
    config = {"model_type": model_type, "architectures": [arch]}
    try:
        check_refused(config)
    except ConfigError:
        return "refused"
    try:
        adapter_for(config)
    except ConfigError as e:  # an adapter that needs more of config.json than its model type still knows it
        return "unknown" if "is not supported (known:" in str(e) else "padded"
    return "padded"


@pytest.mark.parametrize("status, verdict", [("padded", "padded"), ("divides already", None),
                                             ("refused", "refused"), ("not yet supported", "unknown")])
def test_statuses_agree_with_hubpad(status, verdict):
    """A padded row's model types are padded by hubpad, a refused row's refused (rows refused without a Hugging Face
    config.json say `—`), a not-yet-supported row's unknown to hubpad; divides-already rows need nothing."""
    wrong = []
    for arch, types, row_status in _large_rows():
        if not row_status.startswith(status) or verdict is None:
            continue
        for model_type in _names(types):
            if _verdict(arch, model_type) != verdict:
                wrong.append((arch, model_type, _verdict(arch, model_type)))
        if verdict != "refused" and not _names(types):
            wrong.append((arch, "no model_type", verdict))
    assert not wrong, f"rows whose status ({status}) hubpad does not agree with: {wrong}"


def test_todo_rows_are_not_yet_known_to_hubpad():
    """A row left to another stream (`TODO(stream)`) turns stale the moment its family lands: then it must say what
    hubpad does."""
    stale = [(arch, t, _verdict(arch, t)) for arch, types, status in _large_rows() if status.startswith("TODO(")
             for t in _names(types) if _verdict(arch, t) != "unknown"]
    assert not stale, f"TODO rows whose model types hubpad now pads or refuses: {stale}"


def test_the_counts_are_the_tables():
    """The introduction's "Counted by architecture" sentence adds up the rows."""
    counts = {s: 0 for s in STATUSES}
    for _, _, status in _large_rows():
        counts[next(s for s in STATUSES if status.startswith(s))] += 1
    small = sum(len(_names(cells[0])) for cells in _section_rows(SMALL))
    want = (f"Counted by architecture: {counts['padded']} padded, {counts['divides already']} divides already, "
            f"{counts['refused']} refused, {counts['not yet supported']} not yet supported")
    text = " ".join(TABLE.read_text().split())
    assert want in text, f"docs/families.md should say: {want!r}"
    todo = f", {counts['TODO(']} TODO (other streams)" if counts["TODO("] else ""
    assert f"{want}{todo}; {small} under 20B." in text, f"docs/families.md should say: {want}{todo}; {small} under 20B."


def test_the_table_names_the_version_and_the_readme_links_it():
    version = _snapshot()[0].split()[1]
    text = TABLE.read_text()
    section = text[text.index("## vLLM's registry"):]
    assert f"vLLM {version}" in section[:2000], f"the registry table's introduction does not name vLLM {version}"
    assert "docs/families.md#vllms-registry-every-architecture-padded-or-refused" in (ROOT / "README.md").read_text()
