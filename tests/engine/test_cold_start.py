"""What a daemon imports on its way to serving (issue #9, bench B7: cold start).

Every module counts in the time from ``agentrio daemon`` to a healthy ``/v1/health``.
These tests run a fresh interpreter (the test process has imported everything already)
and check that the start path leaves out what only some configurations need.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Imports what ``agentrio daemon`` imports before it serves (the CLI, the server with
#: its routes, the builtin model of the default config), then prints which of the named
#: modules got loaded.
_START_PATH = """
import json, sys
import trio
import agentrio.engine.cli, agentrio.engine.server.lifecycle
import agentrio.engine.server.sse, agentrio.engine.server.ws
from agentrio.engine.config import ModelConfig
from agentrio.engine.models.factory import close_model, make_model

PROVIDER = "builtin"

async def build():
    name = "m" if PROVIDER != "builtin" else ""
    model = await make_model(ModelConfig(provider=PROVIDER, name=name))
    await close_model(model)
    return type(model).__name__

name = trio.run(build)
watched = sys.argv[1:]
print(json.dumps({"model": name, "loaded": [m for m in watched if m in sys.modules]}))
"""


def _run_start_path(*watched: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _START_PATH, *watched],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_builtin_daemon_start_imports_no_other_provider_or_front_end() -> None:
    """R61, SPEC §7: a daemon with the default (builtin) model imports neither the
    openai provider (and with it httpx) nor the scripted one, nor anything of the REPL,
    nor the client transport's trio-websocket (the daemon serves WebSockets with
    hypercorn), nor coredis (~0.2 s of imports, needed only on the Redis store)."""
    watched = (
        "agentrio.engine.models.builtin",
        "agentrio.engine.models.openai",
        "agentrio.engine.models.scripted",
        "openai",
        "anthropic",
        "httpx",
        "httpcore",
        "prompt_toolkit",
        "agentrio.repl",
        "trio_websocket",
        "agentrio.client",
        "agentrio.transport",
        "coredis",
    )
    assert _run_start_path(*watched) == {
        "model": "BuiltinModel",
        "loaded": ["agentrio.engine.models.builtin"],
    }


def test_an_sdk_provider_imports_its_sdk_only_at_the_first_call() -> None:
    """Issue 31 (5), bench B7: building the openai-responses or anthropic model (as the
    daemon does at start) imports its small module but neither SDK (~1-3 s of
    imports): that waits for the first call, in a worker thread."""
    for provider, module, cls in [
        ("openai-responses", "agentrio.engine.models.openai_responses", "ResponsesModel"),
        ("anthropic", "agentrio.engine.models.anthropic_messages", "AnthropicModel"),
    ]:
        script = _START_PATH.replace('PROVIDER = "builtin"', f"PROVIDER = {provider!r}")
        done = subprocess.run(
            [sys.executable, "-c", script, module, "openai", "anthropic", "httpx2"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert json.loads(done.stdout) == {"model": cls, "loaded": [module]}
