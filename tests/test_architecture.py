"""The layering of the ARCHITECTURE spec's table ("The layers and their folders"), checked on the source.

Every ``.py`` file under a layer folder is parsed; each ``import``/``from`` (absolute
``openvta.X`` and relative, at module level, inside functions and under ``TYPE_CHECKING``)
is resolved to the module it names.  Every one of them counts, for every rule:

- a ``TYPE_CHECKING`` import is a dependency the reader and mypy follow (an annotation names
  a type of the other module), so a layer may annotate only with types it may import, and
  two modules that annotate with each other's types are as entangled as two that call each
  other;
- an import inside a function is executed on the first call: deferring it hides a
  dependency from load time, it does not remove it.

The rules:

- **layers**: a layer imports only the layers its row of the table allows (``sim`` and
  ``hw`` only ``runtime.program`` of the runtime);
- **circles**: the imports between modules form no cycle (the strongly connected components
  of the module graph are single modules; a package's ``__init__`` and its own submodules
  are not a circle);
- **private names**: no module imports a ``_name`` from another module.

Each failure names the file, the line and the rule.  ``KNOWN`` would list tolerated
violations; it is empty.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: folder → its import package (pyproject's package-dir).
LAYERS = {"isa": "isa", "runtime": "runtime", "sim": "sim", "hw": "hw", "compiler": "compiler",
          "graph": "graph", "tune": "tune", "openvta": ""}

#: layer → the modules (``openvta.X`` prefixes) it may import, besides its own: the "may import"
#: column of the ARCHITECTURE spec (kept outside the repository), written down here once.
ALLOWED: dict[str, tuple[str, ...]] = {
    "isa": (),
    "runtime": ("isa",),
    "sim": ("isa", "runtime.program"),
    "hw": ("isa", "runtime.program"),
    "compiler": ("isa", "runtime"),
    "graph": ("isa", "runtime", "compiler"),
    "tune": ("isa", "runtime", "compiler", "graph"),
    "openvta": ("isa", "runtime", "sim", "hw", "compiler", "graph", "tune"),
}

#: Known violations ("<path>:<rule>:<what>"), none left; a new one is fixed, not listed.
KNOWN: set[str] = set()


@dataclass(frozen=True)
class Import:
    """One imported name: the importing file and line, the module, the name (or None)."""

    path: Path
    line: int
    module: str  # dotted, without the leading "openvta."; "" for the facade package
    name: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def module_name(path: Path) -> str:
    """``graph/passes/fold.py`` → ``graph.passes.fold``; ``graph/__init__.py`` → ``graph``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "openvta":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The layer a module belongs to: its first part, or the facade's ``openvta``."""
    first = module.split(".")[0]
    return first if first in LAYERS and first != "openvta" else "openvta"


def source_files() -> list[Path]:
    return sorted(p for folder in LAYERS for p in (ROOT / folder).rglob("*.py"))


def _walk(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module: at module level, in functions and classes, under
    ``if TYPE_CHECKING:`` and ``try:`` alike (module docstring)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def imports(path: Path) -> list[Import]:
    """The ``openvta`` modules (and names) ``path`` imports."""
    tree = ast.parse(path.read_text(), str(path))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for stmt in _walk(tree):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name == "openvta" or alias.name.startswith("openvta."):
                    found.append(Import(path, stmt.lineno, alias.name[8:], None))
            continue
        if stmt.level:
            base = package.split(".") if package else []
            base = base[:len(base) - (stmt.level - 1)] if stmt.level > 1 else base
            module = ".".join([*base, *([stmt.module] if stmt.module else [])])
        elif stmt.module and (stmt.module == "openvta" or stmt.module.startswith("openvta.")):
            module = stmt.module[8:]
        else:
            continue
        for alias in stmt.names:
            found.append(Import(path, stmt.lineno, module, alias.name))
    return found


ALL_MODULES = {module_name(p) for p in source_files()}


def target(imp: Import) -> str:
    """The module an import loads: ``from .x import y`` loads ``x.y`` when ``y`` is a module."""
    if imp.name is not None:
        sub = f"{imp.module}.{imp.name}" if imp.module else imp.name
        if sub in ALL_MODULES:
            return sub
    return imp.module


def violations() -> list[str]:
    """Every broken rule, as ``"<file>:<line>: <rule>: <what>"``."""
    out = []
    for path in source_files():
        here = module_name(path)
        layer = layer_of(here)
        for imp in imports(path):
            to = target(imp)
            other = layer_of(to)
            if other != layer and not any(to == a or to.startswith(a + ".") for a in ALLOWED[layer]):
                out.append((imp, "layers", f"{layer} must not import {to or 'openvta'}"))
            if imp.name is not None and imp.name.startswith("_") and not imp.name.startswith("__") \
                    and to == imp.module:
                out.append((imp, "private names", f"imports {imp.name} from {to or 'openvta'}"))
    return [f"{imp.where}: {rule}: {what}" for imp, rule, what in out]


def _key(message: str) -> str:
    """A violation without its line number, so that KNOWN survives edits above it."""
    path, _, rest = message.partition(":")
    return f"{path}:{rest.partition(': ')[2]}"


def module_graph() -> dict[str, set[str]]:
    """Module → the modules it imports (module docstring: every import counts)."""
    graph: dict[str, set[str]] = {m: set() for m in ALL_MODULES}
    for path in source_files():
        here = module_name(path)
        for imp in imports(path):
            to = target(imp)
            if to in ALL_MODULES and to != here:
                graph[here].add(to)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        # recursion depth is bounded by the number of modules (a few hundred)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _package_edge(a: str, b: str) -> bool:
    """``a`` is a package's ``__init__`` re-exporting its own submodule ``b`` (or the reverse
    a submodule loading its package): Python loads the package first either way."""
    return b.startswith(a + ".") or a.startswith(b + ".")


def circle_messages() -> list[str]:
    graph = module_graph()
    # a package and its own submodules always load each other; only circles between modules
    # that are not each other's package count
    pruned = {m: {t for t in ts if not _package_edge(m, t)} for m, ts in graph.items()}
    out = []
    for component in circles(pruned):
        members = set(component)
        first = component[0]
        for path in source_files():
            if module_name(path) != first:
                continue
            lines = sorted({i.line for i in imports(path) if target(i) in members})
            line = lines[0] if lines else 1
            out.append(f"{path.relative_to(ROOT)}:{line}: circles: import circle between "
                       f"{', '.join(component)}")
    return out


def test_each_layer_imports_only_what_the_table_allows_and_no_private_names() -> None:
    found = [v for v in violations() if _key(v) not in KNOWN]
    assert not found, "\n".join(found)


def test_no_import_circle_between_modules() -> None:
    found = [v for v in circle_messages() if _key(v) not in KNOWN]
    assert not found, "\n".join(found)


def test_known_violations_still_exist() -> None:
    current = {_key(v) for v in violations() + circle_messages()}
    assert KNOWN <= current, f"fixed, remove from KNOWN: {sorted(KNOWN - current)}"


def test_the_checker_sees_each_kind_of_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "graph"
    folder.mkdir()
    (folder / "sample.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from openvta.isa import Config\n"
        "from ..sim.cycle import CycleReport\n"
        "if TYPE_CHECKING:\n"
        "    from openvta.tune import space\n"
        "def f():\n"
        "    import openvta.hw.rtl\n"
        "    from .ir import _private\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = [(i.line, i.module, i.name) for i in imports(folder / "sample.py")]
    assert found == [(2, "isa", "Config"), (3, "sim.cycle", "CycleReport"), (5, "tune", "space"),
                     (7, "hw.rtl", None), (8, "graph.ir", "_private")]


def test_circles_are_the_strongly_connected_components() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}) == [["a", "b"], ["c", "d"]]


def test_a_violation_names_the_file_the_line_and_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ALLOWED, "graph", ("isa", "runtime"))  # as if compiler were not allowed
    found = [v for v in violations() if v.startswith("graph/executor.py:")]
    assert found and all(re.fullmatch(r"graph/executor\.py:\d+: layers: graph must not import "
                                      r"compiler\.\S+", v) for v in found)
