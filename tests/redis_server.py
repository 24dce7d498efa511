"""A throwaway ``redis-server`` for the tests of the Redis store (issue 21).

`RedisServer` starts the Debian ``redis-server`` binary on a free 127.0.0.1 port with
a temporary directory and no persistence (``--save "" --appendonly no``), and stops
it. `make test` installs the binary (the Makefile's ``sysdeps``) and sets
``AGENTRIO_REQUIRE_REDIS=1``, so there a missing binary fails the run; elsewhere the
Redis tests skip with the reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

__all__ = ["RedisServer", "free_port", "require_redis_server"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def require_redis_server() -> str:
    """The ``redis-server`` program, or skip (fail under ``make test``)."""
    binary = shutil.which("redis-server")
    if binary is None:
        reason = "redis-server is not installed (`make sysdeps` installs it)"
        if os.environ.get("AGENTRIO_REQUIRE_REDIS"):
            pytest.fail(reason)
        pytest.skip(reason)
    return binary


class RedisServer:
    """One ``redis-server`` process; `start` again after `stop` reuses the port."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            if self.ping():
                return
            time.sleep(0.02)
        raise RuntimeError("redis-server did not answer within 10 s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def flush(self) -> None:
        self._command(b"FLUSHALL")

    def save(self) -> None:
        """Write the data to ``dump.rdb`` in the directory: the next `start` loads it
        (a restart that keeps the data, as with persistence on)."""
        self._command(b"SAVE")

    def _command(self, command: bytes) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(command + b"\r\n")
            if not sock.recv(16).startswith(b"+OK"):
                raise RuntimeError(f"{command.decode()} failed")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


class RedisSentinel:
    """One Redis Sentinel (``redis-server --sentinel``) monitoring ``server`` as the
    service `SERVICE`: the store's ``redis+sentinel://`` URLs are tested against it."""

    SERVICE = "agentrio-test"

    def __init__(self, binary: str, directory: Path, server: RedisServer) -> None:
        self.binary = binary
        self.directory = directory
        self.server = server
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.port}/{self.SERVICE}/0"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        conf = self.directory / "sentinel.conf"  # Sentinel rewrites it: a file of its own
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.directory}\n"
            f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.server.port} 1\n",
            encoding="utf-8",
        )
        self.process = subprocess.Popen(
            [self.binary, str(conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis sentinel exited with {self.process.returncode}")
            if self._knows_the_primary():
                return
            time.sleep(0.02)
        raise RuntimeError("redis sentinel did not answer within 10 s")

    def _knows_the_primary(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(f"SENTINEL get-master-addr-by-name {self.SERVICE}\r\n".encode())
                return sock.recv(64).startswith(b"*2")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
