"""How agentrio reaches an MCP server: a stdio child in its own process group, or a
streamable-HTTP endpoint; both as the SDK's pair of message streams.

**stdio** is agentrio's own, not the SDK's ``stdio_client``: the server must be the
leader of a process group of its own (R48) whose pid the daemon knows (``agentrio
status`` shows it), and ending it must follow R48 exactly -- SIGTERM to the group, then
SIGKILL after ``[tools] kill_grace_s`` -- on shutdown, on a restart and when its start
is cancelled, with no wait for it to notice its closed stdin first (the SDK waits
2 s for that). It runs with only the environment ``env`` names, plus a minimal set and
the owner tag, so a killed daemon's successor ends it like any orphan
(`agentrio.engine.processes.orphans`); its stderr goes to ``<home>/mcp/<name>.log``.

**A request's cancellation carries the task's cause.** The SDK answers a cancelled
request with a ``notifications/cancelled`` whose reason is always ``caller
cancelled``. It writes that notice from inside the cancelled call, while the
`trio.Cancelled` it handles is the current exception; that exception's ``reason`` is
the cause the task was cancelled with (`agentrio.engine.nursery_tasks.cancel_scope`),
so `CauseStamping` puts it in the notice instead, and the server learns *why*
(``user_canceled``, ``paused``, ``shutdown``, …).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from agentrio.engine.mcp.config import McpServerConfig
from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.processes.groups import end_group
from agentrio.engine.processes.orphans import OWNER_ENV
from agentrio.engine.store.files import open_private
from agentrio.protocol.causes import Cause

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

__all__ = ["BASE_ENV", "CauseStamping", "Connection", "open_http", "open_stdio", "server_env"]

#: The variables every stdio server gets from the daemon's environment when set.
BASE_ENV: Final = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME")
#: The longest line a server may send (a tool result with its content parts).
MAX_LINE_BYTES: Final = 16 * 1024 * 1024
#: Seconds the bounded end of a group may take beyond its kill grace.
_CLEANUP_EXTRA_S: Final = 2.0


def server_env(server: McpServerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a stdio server: `BASE_ENV`, the owner tag, and exactly the
    variables ``env`` names that are set (an unset one is simply absent)."""
    names = (*BASE_ENV, OWNER_ENV, *server.env)
    return {name: environ[name] for name in names if name in environ}


@attrs.define(eq=False)
class Connection:
    """An open connection's streams for `mcp.ClientSession`, and what is known of the
    process behind it (``pid`` None for HTTP)."""

    read: Any
    write: Any
    pid: int | None = None
    #: Set when the stdio process has exited (for HTTP: never).
    exited: trio.Event = attrs.field(factory=trio.Event)


class CauseStamping:
    """The write stream a session sends on: every message goes on to ``inner``; a
    ``notifications/cancelled`` written while a `trio.Cancelled` is being handled gets
    that cancellation's reason (the task's cause) as its ``reason`` (module docstring)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(_stamped(item))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> CauseStamping:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _stamped(item: SessionMessage) -> SessionMessage:
    message = item.message
    if getattr(message, "method", None) != "notifications/cancelled":
        return item
    handled = sys.exc_info()[1]
    reason = handled.reason if isinstance(handled, trio.Cancelled) else None
    params = getattr(message, "params", None)
    if not reason or not isinstance(params, dict):
        return item
    stamped = message.model_copy(update={"params": {**params, "reason": reason}})
    return dataclasses.replace(item, message=stamped)


@asynccontextmanager
async def open_stdio(
    server: McpServerConfig, *, log_path: Path, cwd: Path, kill_grace_s: float
) -> AsyncIterator[Connection]:
    """Start ``server``'s program as the leader of a new process group and yield its
    streams; on the way out (normally, by an error or cancelled) the whole group is
    ended (R48) before this returns. `OSError` when the program cannot start."""
    import anyio
    from mcp.shared.message import SessionMessage

    log_fd = await trio.to_thread.run_sync(
        open_private, log_path, os.O_WRONLY | os.O_APPEND, abandon_on_cancel=False
    )
    try:
        process = await trio.lowlevel.open_process(
            [server.command, *server.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_fd,
            cwd=server.cwd or str(cwd),
            env=server_env(server, os.environ),
            start_new_session=True,
        )
    finally:
        os.close(log_fd)
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](16)
    connection = Connection(read=from_server, write=CauseStamping(to_server), pid=process.pid)
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    async def read_lines() -> None:
        buffer = b""
        async with to_session:
            while True:
                chunk = await stdout.receive_some(65536)
                if not chunk:
                    return
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                if len(buffer) > MAX_LINE_BYTES:
                    await to_session.send(ValueError("a message over 16 MiB; connection ended"))
                    return
                for line in lines:
                    if line.strip():
                        await to_session.send(_parse(line))

    async def write_lines() -> None:
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdin.send_all(data.encode() + b"\n")

    async def watch_exit() -> None:
        await process.wait()
        connection.exited.set()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_ending_on_error, read_lines)
            nursery.start_soon(_ending_on_error, write_lines)
            nursery.start_soon(watch_exit)
            try:
                yield connection
            finally:
                cancel_scope(nursery.cancel_scope, Cause.SUPERSEDED)
    finally:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(kill_grace_s + _CLEANUP_EXTRA_S):
                await end_group(process, process.pid, kill_grace_s)
            await stdin.aclose()
            await stdout.aclose()


async def _ending_on_error(pump: Any) -> None:
    """Run one pipe pump; a broken pipe ends it quietly (the process went away: the
    session sees its read stream end and fails what is in flight)."""
    import anyio

    try:
        await pump()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass


def _parse(line: bytes) -> Any:
    """One JSON-RPC message, or the parse error as a value (the session reports it)."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


@asynccontextmanager
async def open_http(server: McpServerConfig, headers: dict[str, str]) -> AsyncIterator[Connection]:
    """Open the SDK's streamable-HTTP transport to ``server.url`` with ``headers``
    (already resolved from the environment and the secret store)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as client:
        async with streamable_http_client(server.url, http_client=client) as (read, write):
            yield Connection(read=read, write=CauseStamping(write))
