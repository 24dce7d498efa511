"""Import direction: protocol knows nothing of engine or repl; only its transport
module touches trio; repl uses no private engine module (DESIGN "Boundaries")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_protocol_imports_neither_engine_nor_repl() -> None:
    bad = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in _modules("protocol")
        for name in _imports(p)
        if name.split(".")[0] in {"engine", "repl"}
    }
    assert bad == set()


def test_only_protocol_transport_imports_trio() -> None:
    users = {
        str(p.relative_to(ROOT))
        for p in _modules("protocol")
        if any(name.split(".")[0] in {"trio", "trio_websocket"} for name in _imports(p))
    }
    # groups.py only tells a Cancelled from an error (shared with the engine, which
    # must not import the transport and trio-websocket with it).
    assert users <= {"protocol/transport.py", "protocol/client.py", "protocol/groups.py"}
    assert "protocol/transport.py" in users


def test_repl_uses_no_private_engine_module() -> None:
    bad = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in _modules("repl")
        for name in _imports(p)
        if name.startswith("engine") and any(part.startswith("_") for part in name.split("."))
    }
    assert bad == set()


def test_engine_cancels_scopes_only_through_cancel_scope() -> None:
    """R40: every cancel in the engine carries a cause, so `nursery_tasks.cancel_scope`
    is the only caller of `CancelScope.cancel` (DESIGN "nursery_tasks.py")."""
    offenders = []
    for path in _modules("engine"):
        if path.name == "nursery_tasks.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "cancel"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr in {"cancel_scope", "scope", "_scope"}
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "cancel"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in {"scope", "cancel_scope", "cs"}
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def _engine_imports(path: Path) -> set[str]:
    """The engine modules ``path`` imports: ``from engine.x import y`` names the module
    ``engine.x.y`` when there is one, else ``engine.x``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "engine")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "engine":
                continue
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                is_module = (ROOT / Path(*submodule.split("."))).with_suffix(".py").exists() or (
                    ROOT / Path(*submodule.split(".")) / "__init__.py"
                ).exists()
                found.add(submodule if is_module else node.module)
    return found


def test_only_the_engines_public_modules_are_imported_from_outside() -> None:
    """The engine's internal modules are its own (issue 16): the REPL, the protocol,
    the client, the benchmarks and the examples -- every top-level package but the
    engine and the tests -- import only `engine.PUBLIC_MODULES`."""
    from engine import PUBLIC_MODULES

    packages = [
        folder
        for folder in sorted(ROOT.iterdir())
        if folder.is_dir()
        and folder.name not in {"engine", "tests"}
        and not folder.name.startswith(".")
        and any(folder.rglob("*.py"))
    ]
    assert {"repl", "protocol", "bench", "examples"} <= {p.name for p in packages}
    bad = {
        f"{path.relative_to(ROOT)}: {name}"
        for package in packages
        for path in sorted(package.rglob("*.py"))
        for name in _engine_imports(path)
        if name not in PUBLIC_MODULES
    }
    assert bad == set()
