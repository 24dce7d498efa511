"""Token file, bearer check and Origin check (R70)."""

from __future__ import annotations

import stat
from pathlib import Path

from agentrio.engine.server.auth import (
    bearer_ok,
    load_or_create_token,
    origin_allowed,
    own_origins,
    token_ok,
)


def test_token_is_created_0600_and_reused(tmp_path: Path) -> None:
    """R70: the token is made at first start with mode 0600 and reused after."""
    home = tmp_path / "home"
    first = load_or_create_token(home)
    mode = stat.S_IMODE((home / "token").stat().st_mode)
    assert mode == 0o600
    assert len(first) >= 40
    assert load_or_create_token(home) == first
    assert sorted(p.name for p in home.iterdir()) == ["token"]


def test_empty_token_file_is_replaced_and_loose_mode_tightened(tmp_path: Path) -> None:
    """R70: an empty token file gets a fresh token; a readable-by-others file is made 0600."""
    (tmp_path / "token").write_text("")
    token = load_or_create_token(tmp_path)
    assert token
    assert (tmp_path / "token").read_text() == token
    (tmp_path / "token").chmod(0o644)
    assert load_or_create_token(tmp_path) == token
    assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600


def test_bearer_check() -> None:
    """R70: only ``Bearer <token>`` passes; the scheme is case-insensitive."""
    assert bearer_ok("Bearer abc", "abc")
    assert bearer_ok("bearer abc", "abc")
    assert not bearer_ok("Bearer abd", "abc")
    assert not bearer_ok("Basic abc", "abc")
    assert not bearer_ok("abc", "abc")
    assert not bearer_ok(None, "abc")
    assert not bearer_ok("Bearer ", "abc")
    assert not token_ok(None, "abc")
    assert token_ok("ünï", "ünï")


def test_origin_check() -> None:
    """R70: no Origin (non-browser) passes; a browser Origin must be allowed or the
    daemon's own address (loopback aliases included)."""
    own = own_origins("127.0.0.1", 4000)
    assert own == {"http://127.0.0.1:4000", "http://localhost:4000", "http://[::1]:4000"}
    assert origin_allowed(None, [], own)
    assert origin_allowed("http://localhost:4000", [], own)
    assert origin_allowed("HTTPS://Allowed.Example/", ["https://allowed.example"], own)
    assert not origin_allowed("https://evil.example", ["https://allowed.example"], own)
    assert not origin_allowed("http://localhost:4001", [], own)
    assert not origin_allowed("null", [], own)
    assert own_origins("::1", 5) == {
        "http://127.0.0.1:5",
        "http://localhost:5",
        "http://[::1]:5",
    }
    assert own_origins("10.0.0.2", 5) == {"http://10.0.0.2:5"}
