"""The MCP servers of one engine: started in the background, each supervised, its
state always known (issue 32 section 3).

`McpServers.run` is started by `agentrio.engine.assembly` in the engine's nursery
(under its own `TaskHandle`, cancelled with cause ``shutdown``) only when
``[mcp.NAME]`` tables exist; it returns at once to its starter, so a server that takes
long, or never starts, delays nothing. Each server then goes through:

* ``starting``: spawn (stdio) or connect (HTTP), the protocol's handshake, the tool
  listing, within ``start_timeout_s``;
* ``ready``: its tools are in the engine's toolbox as ``mcp__NAME__TOOL``
  (`agentrio.engine.mcp.tool`), until the process exits or the connection ends; when
  the server says its tools changed (``notifications/tools/list_changed``) they are
  listed again and replace the old ones in one step, so the next turn's toolbox is
  the server's new list;
* ``restarting``: it failed to start or went away; its tools are removed at once, and
  after a back-off (``restart_backoff_s`` doubling up to `BACKOFF_CAP_S`) it starts
  again;
* ``failed``: ``max_restarts`` restarts did not help; ``reason`` says the last
  problem; it stays so until the daemon restarts.

A stdio server's process group is ended (R48) whenever its connection is left: on a
restart, on shutdown, and when its start is cancelled (`agentrio.engine.mcp.transport`).
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from agentrio.engine.mcp.config import McpServerConfig
from agentrio.engine.mcp.state import REASON_CHARS, ServerState, State, describe
from agentrio.engine.mcp.transport import open_http, open_stdio
from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.protocol.causes import Cause
from agentrio.protocol.http import McpServerInfo

if TYPE_CHECKING:
    from mcp import ClientSession

    from agentrio.engine.mcp.elicit import McpCalls
    from agentrio.engine.tools.base import Services
    from agentrio.engine.tools.registry import Toolbox

__all__ = ["BACKOFF_CAP_S", "McpServers", "ServerState", "describe", "tool_name_for"]

log = logging.getLogger("agentrio.mcp")

#: The longest wait between two starts of a server.
BACKOFF_CAP_S: Final = 60.0
#: The longest tool name models accept.
MAX_TOOL_NAME: Final = 64


def tool_name_for(server: str, tool: str) -> str:
    """``mcp__SERVER__TOOL``: the name the model calls a server's tool by, with every
    character a model's tool name may not hold made ``_`` (and at most 64 long)."""
    return f"mcp__{server}__{re.sub(r'[^A-Za-z0-9_-]', '_', tool)}"[:MAX_TOOL_NAME]


class McpServers:
    """The engine's MCP servers (module docstring): their states, sessions and calls."""

    def __init__(
        self,
        servers: dict[str, McpServerConfig],
        toolbox: Toolbox,
        *,
        home: Path,
        kill_grace_s: float,
        get_secret: Callable[[str], Awaitable[str | None]],
        environ: dict[str, str],
    ) -> None:
        from agentrio.engine.mcp.elicit import McpCalls

        self._toolbox = toolbox
        self._home = home
        self._kill_grace_s = kill_grace_s
        self._get_secret = get_secret
        self._environ = environ
        self.states = {name: ServerState(name=name, config=c) for name, c in servers.items()}
        #: Calls in flight, by server: where a server's requests (elicitation) go.
        self.calls: McpCalls = McpCalls()
        self._changed = trio.Event()

    @classmethod
    def for_engine(cls, services: Services, toolbox: Toolbox) -> McpServers:
        """The servers of ``services.config`` for an engine, its tools in ``toolbox``."""
        config = services.config

        async def get_secret(name: str) -> str | None:
            return await services.store.get_secret("", name)

        return cls(
            config.mcp,
            toolbox,
            home=config.home_path,
            kill_grace_s=config.tools.kill_grace_s,
            get_secret=get_secret,
            environ=dict(os.environ),
        )

    def _enter(self, state: ServerState, new: State) -> None:
        state.state = new
        self._changed.set()
        self._changed = trio.Event()

    async def wait_state(self, name: str, *states: State) -> ServerState:
        """Wait until server ``name`` is in one of ``states`` (tests, the bench)."""
        state = self.states[name]
        while state.state not in states:
            await self._changed.wait()
        return state

    def infos(self) -> list[McpServerInfo]:
        return [state.info() for state in self.states.values()]

    def __iter__(self) -> Iterator[ServerState]:
        return iter(self.states.values())

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Supervise every server until cancelled; ``started`` at once.

        The SDK is imported in a worker thread first: that import takes a second on a
        quiet machine and many under load, and on the Trio thread it held the daemon
        back from serving (and from writing ``daemon.json``) all that time. A stop
        during it abandons the thread (an import has no effect to undo)."""
        await trio.to_thread.run_sync(_make_dir, self._home / "mcp")
        task_status.started()
        await trio.to_thread.run_sync(_import_sdk, abandon_on_cancel=True)
        async with trio.open_nursery() as nursery:
            for state in self.states.values():
                nursery.start_soon(self._supervise, state)

    async def _supervise(self, state: ServerState) -> None:
        config = state.config
        while True:
            state.retry_at, state.gone = None, trio.Event()
            self._enter(state, "starting")
            try:
                await self._serve_once(state)
                reason = "the server exited" if state.config.command else "the connection ended"
            except Exception as exc:  # every failure of a server is its state's reason
                reason = describe(exc)
            finally:
                self._unregister(state)
            log.warning("MCP server %s: %s", state.name, reason)
            state.reason = reason[:REASON_CHARS]
            if state.restarts >= config.max_restarts:
                self._enter(state, "failed")
                return
            delay = min(BACKOFF_CAP_S, config.restart_backoff_s * 2**state.restarts)
            state.retry_at = trio.current_time() + delay
            self._enter(state, "restarting")
            state.restarts += 1
            await trio.sleep(delay)

    async def _serve_once(self, state: ServerState) -> None:
        """One life of a server: connect, hand-shake and list within the start timeout,
        then serve until its connection ends."""
        config = state.config
        with trio.CancelScope(deadline=trio.current_time() + config.start_timeout_s) as scope:
            async with self._connected(state) as (connection, session):
                await _agree(session, config.protocol)
                state.tools_changed = trio.Event()  # the listing below covers earlier news
                tools = await _list_tools(session)
                scope.deadline = math.inf
                state.session, state.pid = session, connection.pid
                self._register(state, tools)
                state.reason = ""
                self._enter(state, "ready")
                log.info("MCP server %s ready: %d tools", state.name, len(state.tools))

                async def follow() -> None:
                    await self._follow_tool_changes(state, session)

                await _first(connection.exited.wait, state.gone.wait, follow)
        if scope.cancelled_caught:
            raise TimeoutError(f"not ready within {config.start_timeout_s:g} s")

    async def _follow_tool_changes(self, state: ServerState, session: ClientSession) -> None:
        """While the server is ready: each time it says its tools changed, list them
        again and put the new list in place of the old, with no await between (a turn
        sees the old tools or the new ones, never a mix). Changes said while a listing
        runs are covered by one more listing. A failed listing is the server's failure."""
        while True:
            await state.tools_changed.wait()
            state.tools_changed = trio.Event()
            tools = await _list_tools(session)
            self._unregister(state)
            self._register(state, tools)
            self._enter(state, "ready")
            log.info("MCP server %s: tools changed, now %d", state.name, len(state.tools))

    @asynccontextmanager
    async def _connected(self, state: ServerState) -> Any:
        from mcp import ClientSession

        config = state.config
        async with AsyncExitStack() as stack:
            if config.command:
                connection = await stack.enter_async_context(
                    open_stdio(
                        config,
                        log_path=self._home / "mcp" / f"{state.name}.log",
                        cwd=self._home,
                        kill_grace_s=self._kill_grace_s,
                    )
                )
            else:
                headers = await self._headers(config)
                connection = await stack.enter_async_context(open_http(config, headers))
            state.pid = connection.pid
            session = await stack.enter_async_context(
                ClientSession(
                    connection.read,
                    connection.write,
                    elicitation_callback=self.calls.elicitation_for(state.name),
                    message_handler=_ending_on_close(state),
                )
            )
            try:
                yield connection, session
            finally:
                state.session, state.pid = None, None

    async def _headers(self, config: McpServerConfig) -> dict[str, str]:
        """An HTTP server's headers from the environment and the secret store; a
        missing one fails the start (never an empty header sent)."""
        headers: dict[str, str] = {}
        for header, variable in config.headers_env.items():
            if variable not in self._environ:
                raise LookupError(f"header {header}: environment variable {variable} is not set")
            headers[header] = self._environ[variable]
        for header, secret in config.headers_secret.items():
            value = await self._get_secret(secret)
            if value is None:
                raise LookupError(f"header {header}: no stored secret {secret!r}")
            headers[header] = value
        return headers

    def _register(self, state: ServerState, tools: list[Any]) -> None:
        from agentrio.engine.mcp.tool import McpTool

        for tool in tools:
            name = tool_name_for(state.name, tool.name)
            if self._toolbox.get(name) is not None:
                log.warning("MCP server %s: tool %s skipped (name taken)", state.name, tool.name)
                continue
            self._toolbox.add(McpTool(name=name, server=state, tool=tool, calls=self.calls))
            state.tools.append(name)

    def _unregister(self, state: ServerState) -> None:
        for name in state.tools:
            self._toolbox.remove(name)
        state.tools = []


def _ending_on_close(state: ServerState) -> Any:
    """The session's message handler: a transport error (a line that is not JSON-RPC)
    is logged; the server's life ends when its process exits or a call finds the
    connection closed, not here. A changed tool list only sets ``tools_changed``: the
    handler runs in the session's receive loop, so listing here would wait for an
    answer that loop has to read (`McpServers._follow_tool_changes` lists). Progress
    goes to its call's callback."""
    from mcp_types import ToolListChangedNotification

    async def handle(message: Any) -> None:
        if isinstance(message, Exception):
            log.warning("MCP server %s: %s", state.name, describe(message))
        elif isinstance(message, ToolListChangedNotification):
            state.tools_changed.set()
        await trio.lowlevel.checkpoint()

    return handle


def _import_sdk() -> None:
    """Import what connecting to servers and calling their tools uses (worker thread)."""
    import mcp
    import mcp.client.streamable_http
    import mcp.shared.message  # noqa: F401
    import mcp_types  # noqa: F401

    import agentrio.engine.mcp.tool  # noqa: F401


async def _agree(session: ClientSession, protocol: str) -> None:
    """Agree on the protocol revision: the ``initialize`` handshake, or (``"auto"``)
    ``server/discover`` first, the handshake when the server refuses it or offers
    no 2026 revision (what the SDK's own client does by default)."""
    from mcp import MCPError
    from pydantic import ValidationError

    if protocol == "auto":
        try:
            await session.discover()
        except (MCPError, RuntimeError, ValidationError) as exc:
            log.info("MCP server/discover refused (%s): the handshake", describe(exc))
            await session.initialize()
    else:
        await session.initialize()
    log.info("MCP session at protocol %s", session.protocol_version)


async def _list_tools(session: ClientSession) -> list[Any]:
    """Every tool the server lists, over all pages (at most 100 pages)."""
    from mcp_types import PaginatedRequestParams

    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def _first(*waits: Callable[[], Awaitable[None]]) -> None:
    """Return when the first of ``waits`` returns."""
    async with trio.open_nursery() as nursery:
        for wait in waits:

            async def one(wait: Callable[[], Awaitable[None]] = wait) -> None:
                await wait()
                cancel_scope(nursery.cancel_scope, Cause.SUPERSEDED)

            nursery.start_soon(one)


def _make_dir(path: Path) -> None:
    path.mkdir(mode=0o700, exist_ok=True)
