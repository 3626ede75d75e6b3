"""The package's architecture, checked: one-way layers, no import cycles, nothing imports app/, design.md is true."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "hubpad"
# Lower layers never import higher ones (equal is fine: modules of one layer may use each other, without cycles).
LAYERS = {"errors": 0, "util": 1, "formats": 2, "source": 3, "plan": 4, "write": 5, "render": 5, "publish": 6,
          "run": 7, "testing": 7, "app": 8}


def _modules() -> dict[str, Path]:
    return {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
            for p in PKG.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """Every hubpad module `path` imports, at any depth (inside functions too)."""
    mods = _modules()
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("hubpad"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(full if full in mods else node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            pkg = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            parts = pkg.split(".")[: -node.level] if path.name != "__init__.py" else pkg.split(".")[:-1][: len(pkg.split(".")) - node.level]
            base = ".".join(parts + ([node.module] if node.module else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                out.add(full if full in mods else base)
    return out


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else 0


def test_layers_only_import_downwards():
    wrong = []
    for mod, path in _modules().items():
        for dep in _imports(path):
            if _layer(dep) is not None and _layer(mod) is not None and _layer(dep) > _layer(mod):
                wrong.append(f"{mod} imports {dep}")
    assert not wrong, "upward imports:\n" + "\n".join(sorted(wrong))


def test_nothing_imports_the_app_layer():
    wrong = [f"{m} imports {d}" for m, p in _modules().items() if not m.startswith("hubpad.app")
             for d in _imports(p) if d.startswith("hubpad.app")]
    assert not wrong, wrong


def test_no_import_cycles():
    mods = _modules()
    graph = {m: {d for d in _imports(p) if d in mods and d != m and not mods[m].name == "__init__.py"}
             for m, p in mods.items()}
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for d in graph[m]:
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            if d not in state:
                visit(d, stack + [d])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [m])


def test_every_subpackage_declares_its_public_names():
    missing = [p.parent.name for p in PKG.glob("*/__init__.py") if "__all__" not in p.read_text()]
    assert not missing, missing


def test_design_doc_names_only_modules_that_exist():
    text = (ROOT / "docs" / "design.md").read_text()
    named = set(re.findall(r"`(hubpad/[\w/]+\.py)`", text))
    assert named, "docs/design.md names no module"
    missing = sorted(n for n in named if not (ROOT / n).is_file())
    assert not missing, f"docs/design.md names modules that do not exist: {missing}"
    folders = set(re.findall(r"`(hubpad/[\w/]+/)`", text))  # a folder row describes its one-module-per-family files
    unlisted = sorted(str(p.relative_to(ROOT)) for p in PKG.rglob("*.py")
                      if p.name != "__init__.py" and str(p.relative_to(ROOT)) not in named
                      and f"{p.parent.relative_to(ROOT)}/" not in folders)
    assert not unlisted, f"modules docs/design.md does not describe: {unlisted}"


def test_pyproject_ships_every_subpackage():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PKG.rglob("__init__.py")}
    assert found <= listed, f"pyproject.toml does not ship {sorted(found - listed)}"


def test_the_space_calls_the_library_never_the_cli():
    """space/ (the Gradio app) is another front end beside app/cli.py: it composes library calls and imports neither the
    CLI nor click; and nothing in hubpad/ imports the Space."""
    space = ROOT / "space"
    wrong = []
    for path in space.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            wrong += [f"{path.relative_to(ROOT)} imports {n}" for n in names
                      if n == "click" or n.startswith(("hubpad.app.cli", "hubpad.app.gha", "hubpad.app.progress"))]
    assert not wrong, wrong
    assert not [p for p in PKG.rglob("*.py") if "hubpad_space" in p.read_text() or "gradio" in p.read_text()]
