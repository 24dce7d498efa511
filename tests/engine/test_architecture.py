"""The engine's shape, checked: imports go one way, and no file or function grows past
what a reader takes in at once (issue 16 "Dependencies one way", size limits).

These read the source (``ast``), never import it, so they see every import: those
inside functions and under ``if TYPE_CHECKING:`` count as much as the others, since a
type-only circle still means two modules that cannot be understood one without the
other.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.sources import ROOT, python_files

#: Most lines in one module, and in one function (decorators and docstring included).
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
#: How a module's docstring starts when it is allowed to be over a limit; the rest of
#: that first line says why.
SIZE_EXCEPTION = "Over the size limits:"


def _module_name(path: Path) -> str:
    """The installed name: engine/ installs as agentrio.engine (pyproject.toml)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in {"engine", "protocol", "repl"}:
        parts.insert(0, "agentrio")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


#: The product's packages: one import graph over all of them, and the size limits hold
#: in each.
PRODUCT = ("engine", "protocol", "agentrio", "repl")


def _product_modules() -> dict[str, Path]:
    return {_module_name(path): path for package in PRODUCT for path in python_files(package)}


def _targets(node: ast.Import | ast.ImportFrom, here: str, is_package: bool) -> list[str]:
    """The dotted names ``node`` depends on, relative imports resolved: ``from a import
    b`` depends on the module ``a.b`` when there is one, else on ``a`` (whose ``b`` it
    takes)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = here.split(".") if is_package else here.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def _graph() -> dict[str, set[str]]:
    """Product module -> the product modules it imports (anywhere in it)."""
    modules = _product_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                graph[name].update(t for t in _targets(node, name, False) if t in modules)
            elif isinstance(node, ast.ImportFrom):
                *names, base = _targets(node, name, path.name == "__init__.py")
                for target in names:
                    graph[name].add(target if target in modules else base)
        graph[name] = {t for t in graph[name] if t in modules and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_type_only_and_late_imports() -> None:
    """The checker itself: an import under TYPE_CHECKING and one inside a function are
    edges of the graph (open_engine imports the store and the sandbox late)."""
    graph = _graph()
    assert (
        "agentrio.engine.store.sqlite" in graph["agentrio.engine.assembly"]
    )  # imported inside open_engine
    assert (
        "agentrio.engine.processes.sandbox" in graph["agentrio.engine.tools.base"]
    )  # under TYPE_CHECKING


def test_engine_imports_form_no_circle() -> None:
    """Dependencies go one way: no module of the engine, the protocol, the client or
    the REPL reaches itself through its imports, type-only and function-level imports
    included (issue 30: the circles outside the engine, ``agentrio.repl.app`` and
    ``agentrio.repl.key_bindings``, ``agentrio.frontends.chat`` and its ``commands`` and
    ``presses``, are gone and stay so)."""
    graph = _graph()
    assert {"agentrio.repl.app", "agentrio.frontends.chat", "agentrio.protocol.frames"} <= set(
        graph
    )
    assert _cycles(graph) == []


def _size_exception(tree: ast.Module) -> bool:
    doc = ast.get_docstring(tree) or ""
    first = doc.splitlines()[0] if doc else ""
    return first.startswith(SIZE_EXCEPTION) and len(first) > len(SIZE_EXCEPTION) + 10


def test_no_product_module_or_function_is_over_the_limits() -> None:
    """No module over 600 lines and no function over 80 in engine/, protocol/,
    agentrio/ or repl/, unless the module's docstring starts with ``Over the size
    limits:`` and a one-line reason."""
    over: list[str] = []
    paths = sorted(path for package in PRODUCT for path in python_files(package))
    for path in paths:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        if _size_exception(tree):
            continue
        where = path.relative_to(ROOT)
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            over.append(f"{where}: {lines} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - start + 1
                if length > MAX_FUNCTION_LINES:
                    over.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    assert over == []


def test_a_size_exception_needs_its_reason_on_the_first_line() -> None:
    """The exception is deliberate and explained: the marker alone is not enough."""
    reasoned = '"""Over the size limits: one table of SQL statements, read top to bottom.'
    assert _size_exception(ast.parse(reasoned + '\n\nMore.\n"""'))
    assert not _size_exception(ast.parse('"""Over the size limits:"""'))
    assert not _size_exception(ast.parse('"""A module.\n\nOver the size limits: late."""'))
