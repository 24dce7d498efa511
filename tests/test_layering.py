"""Import direction (DESIGN "Boundaries"): protocol is sans-IO and knows nothing of
the packages above it; the client package (agentrio) has one I/O boundary, its
transport module, which alone sees the I/O libraries' errors; the engine never
imports the client; repl uses no private engine module."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from tests.sources import ROOT, python_files, top_level_packages

#: The repository folders that install as ``agentrio.<folder>`` (pyproject.toml).
_NESTED = frozenset({"engine", "protocol", "repl"})


def _raw_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _folder_name(module: str) -> str:
    """``agentrio.engine.x`` -> ``engine.x``: the module named by the folder it lives in,
    so the rules below read in the repository's terms."""
    parts = module.split(".")
    if parts[0] == "agentrio" and len(parts) > 1 and parts[1] in _NESTED:
        return ".".join(parts[1:])
    return module


def _imports(path: Path) -> set[str]:
    return {_folder_name(name) for name in _raw_imports(path)}


def _modules(package: str) -> list[Path]:
    return python_files(package)


def test_installed_names_are_agentrios_own() -> None:
    """Issue 30: the code answers to agentrio.* only: nothing imports a bare
    ``engine``, ``protocol`` or ``repl`` (installed, those are another project's)."""
    bad = {
        f"{p.relative_to(ROOT)}: {name}"
        for package in ("engine", "protocol", "repl", "agentrio", "tests", "bench", "examples")
        for p in _modules(package)
        for name in _raw_imports(p)
        if name.split(".")[0] in _NESTED
    }
    assert bad == set()


def test_protocol_imports_neither_engine_nor_repl() -> None:
    bad = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in _modules("protocol")
        for name in _imports(p)
        if name.split(".")[0] in {"engine", "repl", "agentrio"}
    }
    assert bad == set()


def test_protocol_is_sans_io() -> None:
    """No module of protocol imports an I/O library: no exceptions."""
    bad = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in _modules("protocol")
        for name in _imports(p)
        if name.split(".")[0] in _IO_LIBRARIES
    }
    assert bad == set()


def test_only_the_client_transport_imports_websocket_and_http_libraries() -> None:
    """agentrio/transport.py is the client's one I/O boundary; the REPL does its I/O
    through the client, so it imports neither library either."""
    users = {
        str(p.relative_to(ROOT))
        for package in ("agentrio", "repl")
        for p in _modules(package)
        if any(name.split(".")[0] in {"trio_websocket", "httpx"} for name in _imports(p))
    }
    assert users == {"agentrio/transport.py"}


def test_no_code_but_the_transport_catches_a_websocket_error() -> None:
    """The one error boundary: outside agentrio/transport.py no product code or
    example catches a trio_websocket exception (they see `agentrio.ClientError`s).
    Benchmarks (a trio-websocket echo server as the baseline) and tests (raw servers,
    the browser's devtools socket) use the library as a peer of their own."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for package in ("engine", "protocol", "repl", "agentrio", "examples")
        for path in _modules(package)
        if path.relative_to(ROOT) != Path("agentrio/transport.py")
        for line in _websocket_handlers(path)
    ]
    assert offenders == []


def test_the_engine_never_imports_the_client() -> None:
    """The daemon's cold start must not load the client (and trio-websocket with it).
    The pytest plugin, which hands a suite a connected client, is agentrio/testing.py."""
    users = {
        str(p.relative_to(ROOT))
        for p in _modules("engine")
        if any(name.split(".")[0] == "agentrio" for name in _imports(p))
    }
    assert users == set()


def test_the_transport_touches_no_private_attribute_of_a_library() -> None:
    """agentrio/transport.py reads private attributes (``_name``) of its own objects
    only (``self``), never of a library's (it owns the TCP stream instead)."""
    tree = ast.parse((ROOT / "agentrio" / "transport.py").read_text(encoding="utf-8"))
    offenders = [
        f"line {node.lineno}: .{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]
    assert offenders == []


_IO_LIBRARIES = {"trio", "trio_websocket", "httpx", "httpcore", "anyio", "socket", "asyncio"}


def _websocket_handlers(path: Path) -> list[int]:
    """Lines of ``except`` clauses naming a trio_websocket exception."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trio_websocket")
        for alias in node.names
    }
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ExceptHandler) or node.type is None:
            continue
        for part in ast.walk(node.type):
            if isinstance(part, ast.Name) and part.id in imported | {"trio_websocket"}:
                lines.append(node.lineno)
                break
    return lines


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
    """The engine modules ``path`` imports, by installed name: ``from agentrio.engine.x
    import y`` names the module ``agentrio.engine.x.y`` when there is one, else
    ``agentrio.engine.x``."""

    def is_engine(module: str) -> bool:
        return _folder_name(module).split(".")[0] == "engine"

    def is_module(module: str) -> bool:
        where = ROOT / Path(*_folder_name(module).split("."))
        return where.with_suffix(".py").exists() or (where / "__init__.py").exists()

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if is_engine(alias.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not is_engine(node.module):
                continue
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if is_module(submodule) else node.module)
    return found


def test_only_the_engines_public_modules_are_imported_from_outside() -> None:
    """The engine's internal modules are its own (issue 16): the REPL, the protocol,
    the client, the benchmarks and the examples -- every top-level package but the
    engine and the tests -- import only `engine.PUBLIC_MODULES`. The pytest plugin
    (agentrio/testing.py) is the engine's own harness, installed as agentrio.testing:
    it builds engines and daemons from their parts, as the engine's tests do."""
    from agentrio.engine import PUBLIC_MODULES

    plugin = ROOT / "agentrio" / "testing.py"

    packages = [name for name in top_level_packages() if name not in {"engine", "tests"}]
    assert {"repl", "protocol", "bench", "examples"} <= set(packages)
    bad = {
        f"{path.relative_to(ROOT)}: {name}"
        for package in packages
        for path in python_files(package)
        if path != plugin
        for name in _engine_imports(path)
        if name not in PUBLIC_MODULES
    }
    assert bad == set()


def test_front_ends_import_only_the_protocol_and_the_client() -> None:
    """R82: a chat front-end (agentrio/frontends/) speaks to the daemon only through
    the protocol and the client: it never imports the engine or the REPL, and a
    platform's library is imported by its own adapter only."""
    bad = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in _modules("agentrio/frontends")
        for name in _imports(p)
        if name.split(".")[0] in {"engine", "repl"}
    }
    assert bad == set()
    telegram_users = {
        str(p.relative_to(ROOT))
        for package in ("agentrio", "protocol", "engine", "repl")
        for p in _modules(package)
        if any(name.split(".")[0] == "telegram" for name in _imports(p))
    }
    assert telegram_users
    assert all(user.startswith("agentrio/frontends/telegram/") for user in telegram_users)
    discord_users = {
        str(p.relative_to(ROOT))
        for package in ("agentrio", "protocol", "engine", "repl")
        for p in _modules(package)
        if any(name.split(".")[0] in {"discord", "aiohttp"} for name in _imports(p))
    }
    assert discord_users
    assert all(user.startswith("agentrio/frontends/discord/") for user in discord_users)


def test_the_source_read_is_the_projects_not_its_build_outputs(tmp_path: Path) -> None:
    """Issue 30: a ``pip install .`` in the checkout leaves ``build/`` (a copy of every
    package) and ``*.egg-info``; the tests that read the source read what git tracks
    and new files not yet added, never what git ignores -- in a checkout and, by the
    folder names, outside one."""

    def git(*argv: str) -> None:
        subprocess.run(["git", *argv], cwd=tmp_path, check=True, capture_output=True)

    for name in ("repl/a.py", "repl/new.py", "build/lib/repl/a.py", "x.egg-info/b.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("import engine._private\n")
    (tmp_path / ".gitignore").write_text("build/\n*.egg-info/\n")
    want = [tmp_path / "repl" / "a.py", tmp_path / "repl" / "new.py"]
    assert python_files(root=tmp_path) == want  # not a checkout yet: by name
    git("init", "-q")
    git("add", ".gitignore", "repl/a.py")
    assert python_files(root=tmp_path) == want  # tracked, and new but not ignored
    assert python_files("repl", root=tmp_path) == want
    assert top_level_packages(root=tmp_path) == ["repl"]
