"""The package's import graph, read with `ast` (nothing is imported): the packages
stand in the order LAYERS gives, each importing only those below it; no module
imports itself back through others, imports inside function bodies included; no
module imports another's private names; and only the command line (and the
`python -m gpubench` entry point) imports the command line. Imports under
`if TYPE_CHECKING:` never run and are left out of the layers, but not of the
circles: two modules that name each other, even for a type alone, are one unit
that pretends to be two."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GPUBENCH_DIR = REPO / "gpubench"
# Source folder -> the package it is installed as (see pyproject.toml's package-dir).
ROOTS = {"gpubench": "gpubench", "providers": "gpubench.providers", "workloads": "gpubench.workloads"}
# `python -m gpubench` starts the command line: it is the one module outside it that may import it.
ENTRY_POINTS = {"gpubench.__main__"}
# The stages in the order of the flow, lowest first: a unit (a package, or a module at the
# top of gpubench) imports only units above it in this list, never one below.
LAYERS = [
    "gpubench.errors", "gpubench.paths", "gpubench.table_fit", "gpubench.format",  # the basics
    "gpubench.workloads",    # what runs on the machine: torch, never gpubench
    "gpubench.onhost",       # the standard-library scripts shipped to the machine
    "gpubench.providers",    # each cloud's API, and the registry of their capabilities
    "gpubench.defaults",     # [defaults] in config.toml
    "gpubench.project",      # a user's project's own files: its requirements, its [tool.gpubench]
    "gpubench.suite",        # the workloads by name, a user's script
    "gpubench.store",        # the ledger and the results: what every stage above writes
    "gpubench.offer_checks", "gpubench.offers",   # offers
    "gpubench.remote",       # SSH, rsync, the hosts of the ledger
    "gpubench.lifecycle",    # rent: provision, preflight, watchdog, terminate, down
    "gpubench.launch",       # launch: the launchers, the points of a sweep
    "gpubench.predict",      # know before you pay: the performance model, from records and tables
    #                          (a user's script: from a short calibration run by the local launcher)
    "gpubench.sweep",        # sweep: run the points, complete the records
    "gpubench.bench",        # rent, sweep and give back in one call
    "gpubench.report",       # report: tables, plots, HTML from the records
    "gpubench.mock",         # the mock cloud, which serves every provider's API
    "gpubench",              # the package itself (its version)
    "gpubench.cli",
    "gpubench.__main__",
]


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, whether it is a package's __init__)."""
    found = {}
    for folder, package in ROOTS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            found[".".join((package, *parts))] = (path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST, type_checking: bool = False):
    """Every Import/ImportFrom that can run, at any depth, skipping TYPE_CHECKING blocks
    (those too with `type_checking`)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             known: dict) -> set[str]:
    """The modules of ours that `node` makes Python execute by name (a `from X import
    name` counts as X, or as X.name when that is a module)."""
    if isinstance(node, ast.Import):
        return {_ours(alias.name, known) for alias in node.names} - {None}
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    out = set()
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.add(sub if sub in known else _ours(base, known))
    return out - {None}


def _ours(name: str, known: dict) -> str | None:
    """The longest prefix of `name` that is one of our modules."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


@functools.lru_cache(maxsize=2)
def import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (read once per test run); with
    `type_checking`, the imports only a type checker follows too."""
    known = _modules()
    graph = {}
    for module, (path, is_package) in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges = set()
        for node in _import_nodes(tree, type_checking):
            edges |= _targets(node, module, is_package, known)
        graph[module] = edges - {module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    for start in sorted(graph):
        if colour[start] != WHITE:
            continue
        path = [start]
        colour[start] = GREY
        todo = [iter(sorted(graph[start]))]
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                colour[path.pop()] = BLACK
                todo.pop()
            elif colour.get(nxt) == GREY:
                return path[path.index(nxt):] + [nxt]
            elif colour.get(nxt) == WHITE:
                colour[nxt] = GREY
                path.append(nxt)
                todo.append(iter(sorted(graph[nxt])))
    return None


def unit_of(module: str) -> str:
    """The entry of LAYERS a module belongs to: its package's, or its own."""
    return max((u for u in LAYERS if module == u or module.startswith(u + ".")), key=len)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {u: set() for u in LAYERS}
    for module, targets in graph.items():
        units[unit_of(module)] |= {unit_of(t) for t in targets} - {unit_of(module)}
    return units


def test_every_module_has_a_place_in_the_layers():
    loose = sorted(m for m in import_graph() if unit_of(m) == "gpubench" and m != "gpubench")
    assert loose == [], "add these to LAYERS: " + ", ".join(loose)


def test_each_package_imports_only_those_below_it():
    graph = import_graph()
    order = {u: i for i, u in enumerate(LAYERS)}
    upward = sorted(f"{m} imports {t}" for m, targets in graph.items() for t in targets
                    if order[unit_of(t)] > order[unit_of(m)])
    assert upward == []


def test_no_loop_between_packages():
    cycle = find_cycle(package_graph(import_graph()))
    assert cycle is None, "packages import each other: " + " -> ".join(cycle)
    assert find_cycle(package_graph({"gpubench.store.a": {"gpubench.sweep.b"},
                                     "gpubench.sweep.b": {"gpubench.store.c"},
                                     "gpubench.store.c": set()})) == [
        "gpubench.store", "gpubench.sweep", "gpubench.store"]


def test_no_private_name_is_imported_from_another_module():
    offenders = []
    for module, (path, _) in _modules().items():
        for node in _import_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                offenders += [f"{module}: from {node.module} import {a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert offenders == []


def test_the_scripts_shipped_to_a_machine_import_nothing_of_gpubench():
    graph = import_graph()
    shipped = [m for m in graph if m.startswith(("gpubench.onhost.", "gpubench.workloads"))]
    assert shipped and [f"{m} imports {sorted(graph[m])}" for m in shipped if graph[m]] == []


def test_the_walk_sees_imports_in_function_bodies_and_skips_type_checking():
    graph = import_graph()
    assert "gpubench.providers.common" in graph and "gpubench.workloads" in graph
    # bench.py imports the lifecycle only inside its functions
    assert any(m.startswith("gpubench.lifecycle.") for m in graph["gpubench.bench.machine"])
    assert unit_of("gpubench.store.ledger") == "gpubench.store" and unit_of("gpubench.format") == "gpubench.format"
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\n"
                     "def f():\n    import y\n")
    assert sorted(a.name for n in _import_nodes(tree) for a in n.names) == ["TYPE_CHECKING", "y"]


def test_no_import_circle_between_modules_type_only_imports_included():
    cycle = find_cycle(import_graph(type_checking=True))
    assert cycle is None, "import circle: " + " -> ".join(cycle)
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\n")
    assert "x" in [a.name for n in _import_nodes(tree, type_checking=True) for a in n.names]


def test_only_the_command_line_imports_the_command_line():
    offenders = sorted(f"{module} imports {target}"
                       for module, targets in import_graph().items()
                       if not module.startswith("gpubench.cli") and module not in ENTRY_POINTS
                       for target in targets
                       if target == "gpubench.cli" or target.startswith("gpubench.cli."))
    assert offenders == []


def test_only_the_cli_names_the_cli_even_under_type_checking():
    """Read with ast.walk, TYPE_CHECKING blocks included: not even a type-only import of
    the command line from below it."""
    offenders = []
    for path in GPUBENCH_DIR.rglob("*.py"):
        relative = path.relative_to(GPUBENCH_DIR)
        if relative.parts[0] == "cli" or relative == Path("__main__.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{relative}: {n}" for n in names
                          if n == "gpubench.cli" or n.startswith("gpubench.cli.")]
    assert offenders == []
