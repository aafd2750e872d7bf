"""The import layers (CONTRIBUTING.md, Layers): no import circle among the package's modules, and
every import goes the one way the layers allow.

Every import counts, wherever it is written: at the top, in a function, under
``if TYPE_CHECKING:``. A deferred import still ties the two modules together, so it must obey the
same rules (deferring one to dodge a circle hides the circle, it does not break it).
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "nats_conformance"
# The installed package's parts, each a folder of the repository of the same name (pyproject.toml's
# package-dir). harness/drivers/ holds driver programs, not modules of the package.
PARTS = ("conformance", "vectors", "harness", "reports")
NOT_MODULES = ("harness/drivers",)

# The layers, lowest first: a module may import its own layer and the layers below it.
# "harness core" is the harness's shared row, gate and suite modules: both wings and the reports
# use them, and they import only the reference model and each other.
CORE = ("results", "gate", "implementations", "suites")
# The front: what a user runs (the command, its commands, the plugin) and what only they use.
FRONT = ("cli", "commands", "plugin", "plan", "selection", "console", "ci_outputs",
         "counterexample")  # fmt: skip
LAYERS = ("conformance", "harness core", "harness.runtime", "harness.servers", "harness.clients",
          "harness front")  # fmt: skip
# The report pipeline stands apart: it may import the reference model, harness core and itself;
# of everything else, only the front imports it.
REPORTS = "reports"

# Import circles known and not yet broken, each with why: the test fails on any other one, and
# when one of these is gone (so that the list is shortened with it). Each is the modules of the
# circle, sorted, without the package's name. None is left.
ALLOWED_CIRCLES: set[tuple[str, ...]] = set()


def layer(module: str) -> str:
    """The layer of ``module`` (a dotted name below ``nats_conformance``)."""
    part, _, rest = module.partition(".")
    if part in ("conformance", "vectors"):
        return "conformance"
    if part == "reports":
        return REPORTS
    top = rest.partition(".")[0]
    if top in ("runtime", "servers", "clients"):
        return f"harness.{top}"
    if top in FRONT:
        return "harness front"
    # A new top-level harness module must be placed in CORE or FRONT.
    assert top in (*CORE, ""), f"harness.{top} is in no layer: add it to CORE or FRONT"
    return "harness core"


def allowed(importer: str, imported: str) -> bool:
    """Whether a module of layer ``importer`` may import one of layer ``imported``."""
    if importer == REPORTS:
        return imported in ("conformance", "harness core", REPORTS)
    if imported == REPORTS:
        return importer == "harness front"
    return LAYERS.index(imported) <= LAYERS.index(importer)


# --- reading the imports -------------------------------------------------------------------------


def modules(roots: Mapping[str, Path], skip: tuple[Path, ...] = ()) -> dict[str, Path]:
    """{dotted module name: file} of every module under ``roots`` ({dotted package: folder});
    a package is its ``__init__.py``."""
    found: dict[str, Path] = {}
    for package, folder in roots.items():
        for path in sorted(folder.rglob("*.py")):
            if any(path.is_relative_to(s) for s in skip):
                continue
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, known: Mapping[str, Path]) -> str | None:
    """The module ``name`` loads: itself, else the nearest enclosing one known (``a.b.c`` where
    ``c`` is a name in ``a.b``); None outside ``known``."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, known: Mapping[str, Path]) -> set[str]:
    """The modules of ``known`` that ``module`` imports, at any depth of its source."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(_resolve(alias.name, known) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parents, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else _resolve(base, known))
    return {name for name in found if name is not None and name != module}


def import_graph(roots: Mapping[str, Path], skip: tuple[Path, ...] = ()) -> dict[str, set[str]]:
    """{module: the modules it imports} for every module under ``roots``."""
    known = modules(roots, skip)
    return {module: imports_of(module, path, known) for module, path in known.items()}


@dataclass(frozen=True, order=True)
class Circle:
    """Modules that import each other (a strongly connected component of the import graph) and
    one cycle through them, in import order, to show how."""

    modules: tuple[str, ...]
    cycle: tuple[str, ...]


def circles(graph: Mapping[str, set[str]]) -> list[Circle]:
    """Each import circle of ``graph``: every strongly connected component of more than one
    module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(Circle(tuple(c), tuple(_cycle_through(graph, set(c)))) for c in components)


def _cycle_through(graph: Mapping[str, set[str]], members: set[str]) -> list[str]:
    """The shortest cycle from the component's first module back to it (breadth first)."""
    start = min(members)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph[node] & members):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if succ not in came_from:
                    came_from[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no cycle through {start}: not a component")


def _short(module: str) -> str:
    return module.removeprefix(f"{PACKAGE}.")


def _package_graph() -> dict[str, set[str]]:
    roots = {f"{PACKAGE}.{name}": REPO / name for name in PARTS}
    skip = tuple(REPO / s for s in NOT_MODULES)
    graph = import_graph(roots, skip)
    return {_short(m): {_short(i) for i in imported} for m, imported in graph.items()}


# --- the rules ---------------------------------------------------------------------------------


def test_the_scan_sees_every_layer_and_the_imports_written_in_functions() -> None:
    graph = _package_graph()
    assert {layer(module) for module in graph} == {*LAYERS, REPORTS}
    # A function-level import (a command's module, imported when the command runs) is seen.
    assert "harness.commands.run" in graph["harness.cli"]
    assert "reports.pipeline" in graph["harness.commands.report"]


def test_no_import_circle_beyond_the_listed_ones() -> None:
    found = {circle.modules: circle.cycle for circle in circles(_package_graph())}
    new = [" -> ".join(cycle) for key, cycle in found.items() if key not in ALLOWED_CIRCLES]
    assert new == [], "import circles:\n" + "\n".join(new)
    gone = ALLOWED_CIRCLES - set(found)
    assert not gone, f"listed circles that no longer exist (take them off the list): {gone}"


def test_every_import_goes_the_way_the_layers_allow() -> None:
    against = [
        f"{module} ({layer(module)}) imports {imported} ({layer(imported)})"
        for module, imports in sorted(_package_graph().items())
        for imported in sorted(imports)
        if not allowed(layer(module), layer(imported))
    ]
    assert against == []


def test_the_layer_rules_say_what_contributing_says() -> None:
    assert allowed("harness.runtime", "harness core")
    assert allowed("harness.runtime", "conformance")
    assert not allowed("harness.runtime", "harness.servers")
    assert not allowed("conformance", "harness core")
    assert not allowed("conformance", REPORTS)
    assert not allowed("harness.servers", "harness.clients")
    assert not allowed("harness.clients", "harness front")
    assert allowed(REPORTS, "harness core")
    assert not allowed(REPORTS, "harness.servers")
    assert not allowed(REPORTS, "harness.clients")
    assert not allowed(REPORTS, "harness front")
    assert allowed("harness front", REPORTS)
    assert not allowed("harness.clients", REPORTS)
    assert layer("harness.cli") == layer("harness.commands.run") == "harness front"
    assert layer("harness.results") == layer("harness.suites") == "harness core"


# --- the scanner on modules written for the test -----------------------------------------------


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_circle_through_a_deferred_import_is_reported(tmp_path: Path) -> None:
    root = _write(tmp_path / "pkg", {
        "__init__.py": "",
        "a.py": "def f():\n    from pkg import b\n    return b\n",
        "b.py": "from . import a\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n",
    })  # fmt: skip
    graph = import_graph({"pkg": root})
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.c"] == {"pkg.a"}  # a TYPE_CHECKING import counts too
    assert circles(graph) == [Circle(("pkg.a", "pkg.b"), ("pkg.a", "pkg.b", "pkg.a"))]


def test_a_longer_circle_is_reported_once_as_a_path_through_it(tmp_path: Path) -> None:
    root = _write(tmp_path / "pkg", {
        "__init__.py": "",
        "x.py": "import pkg.sub.y\n",
        "sub/__init__.py": "",
        "sub/y.py": "from ..z import thing\n",
        "z.py": "from pkg import x\nthing = 1\n",
        "free.py": "import pkg.x\n",
    })  # fmt: skip
    cycle = ("pkg.sub.y", "pkg.z", "pkg.x", "pkg.sub.y")
    assert circles(import_graph({"pkg": root})) == [Circle(("pkg.sub.y", "pkg.x", "pkg.z"), cycle)]


def test_modules_without_a_circle_give_none(tmp_path: Path) -> None:
    root = _write(tmp_path / "pkg", {"__init__.py": "", "a.py": "import pkg.b\n", "b.py": ""})
    assert circles(import_graph({"pkg": root})) == []


def test_imports_inside_the_package_are_relative() -> None:
    """An import names the file it loads as the repository holds it (``from ..results import``
    is ``harness/results.py`` from ``harness/clients/``), so a reader, an editor without the
    package installed and a tool drawing the imports can follow it; the package's own name
    appears only outside it (tests, benchmarks)."""
    absolute = re.compile(rf"^\s*(from|import)\s+{PACKAGE}\b", re.M)
    found = [
        str(path.relative_to(REPO))
        for path in module_files()
        if absolute.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def module_files() -> list[Path]:
    """The package's module files (not its drivers), as the repository holds them."""
    skip = [REPO / s for s in NOT_MODULES]
    return [
        path
        for name in PARTS
        for path in sorted((REPO / name).rglob("*.py"))
        if not any(path.is_relative_to(s) for s in skip)
    ]


def repeated_names(paths: list[Path], root: Path) -> dict[str, list[str]]:
    """Module file names used more than once (``__init__`` aside), with where each is."""
    where: dict[str, list[str]] = {}
    for path in paths:
        if path.stem != "__init__":
            where.setdefault(path.name, []).append(str(path.relative_to(root)))
    return {name: places for name, places in where.items() if len(places) > 1}


def test_no_module_file_name_is_used_twice() -> None:
    """One name, one file: a reader who meets ``client_targets`` knows which file it is, and no
    import needs an alias to tell two ``targets`` apart."""
    assert repeated_names(module_files(), REPO) == {}


def test_a_repeated_module_name_is_found(tmp_path: Path) -> None:
    files = ["harness/a/targets.py", "harness/b/targets.py", "harness/a/__init__.py",
             "harness/b/__init__.py", "reports/only.py"]  # fmt: skip
    paths = [tmp_path / f for f in files]
    repeated = {"targets.py": ["harness/a/targets.py", "harness/b/targets.py"]}
    assert repeated_names(paths, tmp_path) == repeated


def test_every_module_of_the_package_imports() -> None:
    """An import that names a module that is gone (a rename left behind) fails here, in the unit
    layer, not when a command that alone loads it is run."""
    for path in module_files():
        parts = path.relative_to(REPO).with_suffix("").parts
        dotted = ".".join((PACKAGE, *(parts[:-1] if parts[-1] == "__init__" else parts)))
        importlib.import_module(dotted)
