"""Issue 30: ``agentrio doctor`` checks the sandbox, the store, the model, the bots, MCP
servers and the port, one line each, and says what to do about each problem. Real
subprocesses of the real command, a real HTTP server for the model's ``/models``, real
sockets and a real daemon for the port.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrio.testing import RunningDaemon

ROOT = Path(__file__).resolve().parents[2]
MARKS = ("ok  ", "warn", "FAIL", "--  ")


def doctor(home: Path, **env: str) -> tuple[int, dict[str, tuple[str, str]], str]:
    """Exit status, ``{what: (mark, text)}`` and the whole output of ``agentrio doctor``."""
    done = subprocess.run(
        [sys.executable, "-m", "agentrio.repl", "doctor", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), **env},
    )
    assert done.stderr == ""
    *lines, summary = done.stdout.splitlines()
    found = {}
    for line in lines:
        assert line[:4] in MARKS, line
        what, text = line[6:21].strip(), line[22:]
        found[what] = (line[:4].strip(), text)
    return done.returncode, found, summary


def _home(tmp_path: Path, config: str = "") -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    if config:
        (home / "config.toml").write_text(config)
        (home / "config.toml").chmod(0o600)
    return home


def test_a_fresh_home_is_all_good_and_mcp_says_none(tmp_path: Path) -> None:
    """Issue 30: a home with defaults: the config, sandbox, store, model and port are
    ok, the bots are off, MCP servers are none configured; exit 0."""
    code, found, summary = doctor(_home(tmp_path))
    assert list(found) == [
        "config",
        "sandbox",
        "store",
        "model",
        "telegram",
        "discord",
        "mcp servers",
        "port",
    ]
    assert found["mcp servers"] == ("--", "none configured (this agentrio runs no MCP servers yet)")
    assert found["model"] == ("ok", "builtin (offline, no network)")
    assert found["telegram"][0] == found["discord"][0] == "--"
    if found["sandbox"][0] == "ok":
        assert found["sandbox"][1].startswith("bubblewrap at /")
    if found["port"][0] == "ok":  # another test's daemon may hold the default port
        assert found["port"][1] == "127.0.0.1:17990 is free for this home's daemon"
    assert code == 0
    assert summary in ("all good", "0 failed, 1 to look at", "0 failed, 2 to look at")


def test_a_bad_config_is_the_one_failure(tmp_path: Path) -> None:
    """Issue 30: a config.toml that does not load is reported as the daemon would say
    it, and nothing else is checked against it; exit 1."""
    home = _home(tmp_path, '[model]\nprovider = "openai"\n')
    code, found, summary = doctor(home)
    assert code == 1
    assert found == {
        "config": (
            "FAIL",
            f'{home / "config.toml"}:2: model.name: required with provider = "openai" '
            "(the model to call) -- fix it; the daemon will not start",
        )
    }
    assert summary == "1 failed, 0 to look at"


def test_what_is_wrong_says_what_to_do(tmp_path: Path) -> None:
    """Issue 30: no bubblewrap, a corrupt database, an unreachable model, a bot without
    a token and a bot refusing everyone, a config readable by others: each a line with
    its fix; exit 1."""
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    home = _home(
        tmp_path,
        '[sandbox]\nprogram = "/nonexistent/bwrap"\n'
        f'[model]\nprovider = "openai"\nname = "m"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        "[telegram]\nenabled = true\nallowed_users = [1]\n"
        "[discord]\nenabled = true\n",
    )
    (home / "config.toml").chmod(0o644)
    (home / "agentrio.db").write_bytes(b"not a database at all" * 100)
    (home / "discord.token").write_text("x")
    code, found, _ = doctor(home)
    assert code == 1
    assert found["config mode"] == (
        "warn",
        f"{home / 'config.toml'} is open to other users (mode 0644): chmod 600 "
        f"{home / 'config.toml'}",
    )
    mark, text = found["sandbox"]
    assert mark == "warn"
    assert "'/nonexistent/bwrap' not found" in text
    assert "install bubblewrap (sudo apt-get install bubblewrap, or make sysdeps)" in text
    assert found["store"][0] == "FAIL"
    assert f"move it aside (mv {home / 'agentrio.db'} " in found["store"][1]
    assert found["model"] == (
        "FAIL",
        f"http://127.0.0.1:{port}/v1 is not reachable (ConnectError): start the model "
        "server, or fix [model] base_url in config.toml",
    )
    assert found["telegram"] == (
        "FAIL",
        "no bot token: set $AGENTRIO_TELEGRAM_TOKEN, or run `agentrio telegram "
        f"--store-token` (it goes to {home / 'telegram.token'}, never to config.toml)",
    )
    assert found["discord"][0] == "warn"
    assert "allowed_users is empty, so the bot refuses everyone" in found["discord"][1]
    # Doctor reads; it changes nothing (issue 30: the person's file stays as it is).
    assert (home / "config.toml").stat().st_mode & 0o777 == 0o644


class _Models(http.server.BaseHTTPRequestHandler):
    """``GET /v1/models``: the model list, or 401 without the right key."""

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != "Bearer sk-right":
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"data": [{"id": "llama"}, {"id": "qwen"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def models_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    ("name", "key", "mark", "says"),
    [
        ("llama", "sk-right", "ok", "openai-compatible 'llama' at {url} answers"),
        ("gpt-9", "sk-right", "warn", "{url} answers, but lists no model 'gpt-9' (it has: "),
        ("llama", "sk-wrong", "FAIL", "{url} refuses the API key (HTTP 401): set $MY_KEY"),
    ],
)
def test_the_model_is_asked_for_its_models(
    tmp_path: Path, models_server: str, name: str, key: str, mark: str, says: str
) -> None:
    """Issue 30: an openai-compatible model is reachable, lists the configured name, and
    takes the key (from ``api_key_env``; the key itself is never printed)."""
    home = _home(
        tmp_path,
        f'[model]\nprovider = "openai"\nname = "{name}"\nbase_url = "{models_server}"\n'
        'api_key_env = "MY_KEY"\n',
    )
    code, found, summary = doctor(home, MY_KEY=key)
    assert found["model"][0] == mark
    assert found["model"][1].startswith(says.format(url=models_server))
    assert key not in summary + json.dumps(found)
    assert (code == 1) is (mark == "FAIL")


def test_the_port_names_this_homes_daemon_or_what_holds_it(
    tmp_path: Path, agentrio_daemon: RunningDaemon
) -> None:
    """Issue 30: this home's daemon answering is ok; the configured port held by another
    home's daemon, or by any other program, is a warning with what to do."""
    _, found, _ = doctor(agentrio_daemon.home)
    assert found["port"] == ("ok", f"this home's daemon answers at {agentrio_daemon.base_url}")
    port = int(agentrio_daemon.base_url.rpartition(":")[2])
    other = _home(tmp_path, f"[server]\nport = {port}\n")
    _, found, _ = doctor(other)
    assert found["port"] == (
        "warn",
        f"127.0.0.1:{port} is held by another agentrio daemon: a daemon the "
        "REPL starts takes a free port instead; for `agentrio daemon` pass --port N or set "
        "[server] port",
    )
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        (other / "config.toml").write_text(f"[server]\nport = {holder.getsockname()[1]}\n")
        _, found, _ = doctor(other)
    assert found["port"][0] == "warn"
    assert "is held by another program" in found["port"][1]
