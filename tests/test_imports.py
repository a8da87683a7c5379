"""The project's modules import in one direction: no cycle, and none held together by imports inside functions."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests")


def module_files() -> dict[str, Path]:
    """`package` and `package.module` names of the project's packages, with their files."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def imported(name: str, tree: ast.AST, known: set[str]) -> set[str]:
    """The project modules `name` imports anywhere in its file (`from .x import y` may name module `.x.y`)."""
    package = name.split(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module if not node.level else ".".join(filter(None, [package, node.module]))
            candidates = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        out |= {c for c in candidates if c in known and c != name}
    return out


def test_module_names_are_found():
    """Guards the scan: an empty graph would make the cycle check vacuous."""
    modules = module_files()
    assert {"training", "training.errors", "training.loop", "data_scripts", "modeling_chargpt"} <= set(modules)
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in modules.items()}
    assert {"training.errors", "training.presets"} <= imported("training.arguments", trees["training.arguments"],
                                                              set(modules))


def test_no_import_cycles():
    modules = module_files()
    graph = {name: imported(name, ast.parse(path.read_text(encoding="utf-8")), set(modules))
             for name, path in modules.items()}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as err:
        raise AssertionError(f"import cycle: {' -> '.join(err.args[1])}") from None
    assert order.index("training.errors") < order.index("training.cli") < order.index("training")


def test_the_training_package_imports_at_module_level_only():
    """An import inside a function is how the old cycles were held together; none is left in training/."""
    inside = []
    for path in sorted((ROOT / "training").glob("*.py")):
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside += [f"{path.name}:{node.lineno}" for node in ast.walk(function)
                           if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert not inside, f"imports inside functions: {inside}"
