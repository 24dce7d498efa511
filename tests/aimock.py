"""aimock (``@copilotkit/aimock``, npm): a mock LLM server no one here wrote, speaking
OpenAI Chat Completions (``/v1/chat/completions``), OpenAI Responses
(``/v1/responses``) and Anthropic Messages (``/v1/messages``) from one fixture file.

`start_aimock` runs its ``llmock`` CLI (``node …/dist/cli.js``) with ``--port 0 --strict``
in the caller's nursery and returns once it says where it listens: strict mode answers
a request no fixture matches with 503 instead of a made-up reply, and refuses an
Anthropic tool-loop continuation that drops the thinking block it sent (it checks the
extended-thinking invariants). ``make test`` installs it (``npm ci``, pinned in
package.json / package-lock.json); a machine without node or without ``npm ci`` run
skips the tests that need it, with the reason.

`Aimock.journal` reads ``GET /__aimock/journal``: every request it got, its body
normalised to the chat shape (``messages``, ``tools``), the status it answered and the
fixture that matched.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio

ROOT = Path(__file__).resolve().parents[1]
CLI = ROOT / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"
FIXTURES = Path(__file__).resolve().parent / "aimock_fixtures"
_LISTENING = "aimock server listening on "


@attrs.frozen
class Aimock:
    """A running aimock: its root URL (no ``/v1``)."""

    url: str

    async def journal(self, path: str = "") -> list[dict[str, Any]]:
        """The requests aimock received (oldest first), optionally those to ``path``."""
        params = {"path": path} if path else {}
        async with httpx.AsyncClient(base_url=self.url) as http:
            response = await http.get("/__aimock/journal", params=params)
        response.raise_for_status()
        entries: list[dict[str, Any]] = response.json()
        return entries


def require_aimock() -> None:
    """Skip the calling test when node or the installed aimock is missing (fail
    instead under ``make test``, which installs both: ``AGENTRIO_REQUIRE_AIMOCK``)."""
    missing = ""
    if shutil.which("node") is None:
        missing = "node is not installed (make sysdeps)"
    elif not CLI.is_file():
        missing = "aimock is not installed: run `npm ci` (make test does)"
    if missing and os.environ.get("AGENTRIO_REQUIRE_AIMOCK"):
        pytest.fail(missing)
    if missing:
        pytest.skip(missing)


async def start_aimock(nursery: trio.Nursery, fixture: Path | str) -> Aimock:
    """Start aimock on a free loopback port serving ``fixture`` (a path, or a file name
    in tests/aimock_fixtures); it is killed when ``nursery`` is cancelled."""
    require_aimock()
    path = Path(fixture) if Path(fixture).is_absolute() else FIXTURES / fixture
    command = ["node", str(CLI), "--port", "0", "--host", "127.0.0.1", "--strict"]
    command += ["--log-level", "info", "--fixtures", str(path)]
    return await nursery.start(_serve, command)


async def _serve(command: list[str], *, task_status: trio.TaskStatus[Aimock]) -> None:
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            functools.partial(
                trio.run_process, command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        )
        assert process.stdout is not None
        seen: list[str] = []
        buffer = b""
        started = False
        with trio.fail_after(20):
            while not started:
                chunk = await process.stdout.receive_some()
                if not chunk:
                    raise AssertionError(f"aimock exited: {''.join(seen)}")
                buffer += chunk
                *lines, rest = buffer.split(b"\n")
                buffer = rest
                for raw in lines:
                    line = raw.decode(errors="replace")
                    seen.append(line + "\n")
                    if _LISTENING in line:
                        url = line.split(_LISTENING, 1)[1].strip()
                        task_status.started(Aimock(url=url))
                        started = True
        async for _ in process.stdout:  # keep the pipe drained
            pass


def write_fixture(directory: Path, fixtures: list[dict[str, Any]]) -> Path:
    """A fixture file of ``fixtures`` in ``directory`` (for tests that build their own)."""
    path = directory / "aimock-fixture.json"
    path.write_text(json.dumps({"fixtures": fixtures}), encoding="utf-8")
    return path
