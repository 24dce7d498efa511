"""R82: the Discord adapter's pieces that need no server: buttons within Discord's
component limits, the settings it gives the core, and where its endpoints point."""

from __future__ import annotations

import discord
import discord.gateway
import discord.http
import yarl

from agentrio.frontends.discord.adapter import _label, _rows
from agentrio.frontends.discord.run import point_at, settings_of
from agentrio.frontends.platform import Button
from agentrio.protocol.frontends import DEFAULT_DISCORD_API, DEFAULT_DISCORD_GATEWAY, DiscordConfig


def test_many_options_are_packed_five_to_a_row() -> None:
    """R82: an ask_user with 7 options (one button per row in the core) becomes two
    rows (Discord allows 5 rows of 5); more than 25 are cut (a written answer remains)."""
    rows = [[Button(f"o{n}", f"t|o0.{n}")] for n in range(7)]
    assert [[b.label for b in row] for row in _rows(rows)] == [
        ["o0", "o1", "o2", "o3", "o4"],
        ["o5", "o6"],
    ]
    many = [[Button(f"o{n}", f"t|o0.{n}")] for n in range(40)]
    packed = _rows(many)
    assert len(packed) == 5
    assert all(len(row) == 5 for row in packed)
    confirm = [[Button("a", "1"), Button("d", "2")], [Button("r", "3")]]
    assert _rows(confirm) == confirm


def test_long_labels_are_cut_to_80() -> None:
    assert _label("x" * 80) == "x" * 80
    assert _label("y" * 200) == "y" * 79 + "…"


def test_settings_of_the_config() -> None:
    """R82: allowed_channels narrows the server channels the core answers in."""
    settings = settings_of(
        DiscordConfig(allowed_users=[1, 2], allow_guilds=True, allowed_channels=[77])
    )
    assert settings.prefix == "dc-"
    assert settings.allowed_users == frozenset({1, 2})
    assert settings.allow_groups is True
    assert settings.group_chats == frozenset({"77"})
    assert settings_of(DiscordConfig()).group_chats is None


def test_point_at_redirects_rest_and_gateway() -> None:
    """R82: `[discord] api_base_url` and `gateway_url` reach discord.py (tests use a
    fake server); the defaults are the values discord.py has itself."""
    try:
        point_at(DiscordConfig(api_base_url="http://127.0.0.1:1/api/v10/", gateway_url="ws://h/"))
        assert discord.http.Route("GET", "/users/@me").url == "http://127.0.0.1:1/api/v10/users/@me"
        assert discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY == yarl.URL("ws://h/")
    finally:
        point_at(DiscordConfig())
    assert discord.http.Route.BASE == DEFAULT_DISCORD_API
    assert discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY == yarl.URL(DEFAULT_DISCORD_GATEWAY)
