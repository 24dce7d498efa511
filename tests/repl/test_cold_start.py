"""The ``agentrio`` entry point's start path (SPEC §11; issue #9, bench B7: cold start).

``agentrio daemon`` and ``agentrio --help`` must not pay for the REPL's modules, and the
REPL's HTTP client must not read a CA bundle it can never use.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from agentrio.repl.client import no_trust_roots

ROOT = Path(__file__).resolve().parents[2]

_REPL_MODULES = (
    "asyncio",
    "prompt_toolkit",
    "httpx",
    "trio_websocket",
    "agentrio.client",
    "agentrio.repl.app",
    "agentrio.repl.client",
)

#: Runs ``agentrio.repl.cli.main`` with the given arguments in a fresh interpreter and prints its
#: exit status and which of the REPL's modules got loaded.
_ENTRY = """
import json, sys
from agentrio.repl import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
watched = %r
print(json.dumps({"code": code, "loaded": [m for m in watched if m in sys.modules]}))
"""


def _entry(*argv: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _ENTRY % (_REPL_MODULES,), *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize(
    "argv",
    [("daemon", "--help"), ("--help",), ("--session", "chat-x")],
    ids=["daemon-help", "help", "bad-session"],
)
def test_entry_point_loads_the_repl_only_to_run_it(argv: tuple[str, ...]) -> None:
    """SPEC §11: ``agentrio daemon …``, ``agentrio --help`` and a rejected ``--session``
    end without importing prompt_toolkit, the Trio client (agentrio) or httpx."""
    expected_code = 2 if argv[0] == "--session" else 0
    assert _entry(*argv) == {"code": expected_code, "loaded": []}


def test_repl_http_client_verifies_against_no_trust_roots() -> None:
    """SPEC §11: the REPL's HTTP client speaks plain http to the daemon; its TLS context
    keeps verification on with no CA loaded, so https could only fail, never be trusted."""
    context = no_trust_roots()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert context.cert_store_stats() == {"crl": 0, "x509": 0, "x509_ca": 0}
