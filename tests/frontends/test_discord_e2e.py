"""R82: the Discord front-end end to end: the real daemon, the real discord.py, a fake
Discord (REST + gateway) on loopback (tests/frontends/fake_discord.py). Real time
throughout (three processes): every wait polls with a deadline."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from agentrio import connect
from agentrio.protocol import wording
from agentrio.testing import DaemonProcess
from tests.frontends.conftest import STRANGER, USER, Bot, Daemon, acknowledged_by, eventually
from tests.frontends.fake_discord import FakeDiscord, Sent, dm_channel

TOKEN = "TEST.DISCORD.TOKEN"
GUILD = 5150
GUILD_CHANNEL = 7777


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    server = FakeDiscord(TOKEN).start()
    try:
        yield server
    finally:
        server.close()


def write_config(home: Path, fake: FakeDiscord, *, enabled: bool = False, extra: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        "[discord]\n"
        f"enabled = {'true' if enabled else 'false'}\n"
        f"allowed_users = [{USER}]\n"
        f'api_base_url = "{fake.base_url}"\n'
        f'gateway_url = "{fake.gateway_url}"\n'
        f"{extra}",
        encoding="utf-8",
    )


def discord_env(home: Path) -> dict[str, str]:
    return {**os.environ, "AGENTRIO_HOME": str(home), "AGENTRIO_DISCORD_TOKEN": TOKEN}


@pytest.fixture
def bot_home(tmp_path: Path, fake: FakeDiscord, config_extra: str) -> Path:
    home = tmp_path / "home"
    write_config(home, fake, extra=config_extra)
    return home


@pytest.fixture
def bot(bot_home: Path, daemon_process: Daemon) -> Iterator[Bot]:
    running = Bot(bot_home, "discord", discord_env(bot_home))
    try:
        yield running
    finally:
        code = running.stop()
        assert code == 0, (bot_home / "bot.log").read_text()


def _open_ask(fake: FakeDiscord, needle: str) -> Sent | None:
    return fake.find(lambda m: bool(m.buttons) and needle in m.plain)


async def test_message_task_confirm_approve_result(
    fake: FakeDiscord, bot: Bot, tmp_path: Path
) -> None:
    """R82: a message starts a task; its confirmation comes as buttons (message
    components) with the words of protocol/wording.py under the whole command in a code
    block; Approve runs it and the result is shown. Nothing may mention anyone."""
    target = tmp_path / "made-by-discord"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    here = os.path.realpath(os.getcwd())
    assert f"```\ncommand: touch {target}\ncwd: {here}\n```" in confirm.text
    assert confirm.rows == [
        ["Approve", "Deny with reason"],
        ["Always allow this exact command in this directory"],
        ["Allow this turn (plain programs only, above)"],
        ["Stop, keep to resume", "Stop and discard"],
    ]
    assert confirm.allowed_mentions == {"parse": []}
    press = fake.press(confirm, "Approve")
    await eventually(target.exists, what="the file")
    await eventually(lambda: fake.with_text("✓ run_command"), what="the result")
    assert fake.answered[press][0] == 6  # a deferred update: no notice
    assert not fake.messages()[-1].buttons
    assert "✓ approved" in (fake.with_text("Allow run_command?") or confirm).plain


async def test_the_bot_acknowledges_the_confirmation_it_sent(
    fake: FakeDiscord, bot: Bot, bot_home: Path, tmp_path: Path
) -> None:
    """R97 (issue 34): once Discord took the confirmation's message, the ask is shown
    on ``discord`` and acknowledged (``GET …/asks``, the ``ask_state`` event); the
    acknowledgement decides nothing: the command runs only once approved."""
    target = tmp_path / "acked-by-discord"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    await acknowledged_by(bot_home, f"dc-{dm_channel(USER)}", "discord")
    assert not target.exists()
    fake.press(confirm, "Approve")
    await eventually(target.exists, what="the file")


async def test_hostile_command_is_shown_escaped(fake: FakeDiscord, bot: Bot) -> None:
    """R82: a command full of markdown, fences and mentions is shown as it is inside
    one code block it cannot close; nothing is sent that may mention anyone."""
    hostile = "printf '%s' '```\n**bold** @everyone <@111> [x](https://e.x)'"
    fake.say(f"run: {hostile}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    assert confirm.text.count("```") == 2
    here = os.path.realpath(os.getcwd())
    assert confirm.plain.endswith(
        f" │ command: (2 lines)\n1│ printf '%s' '```⏎\n"
        f"2│ **bold** @everyone <@111> [x](https://e.x)'\n │ cwd: {here}\n{wording.ALLOW_TURN}"
    )
    assert all(m.allowed_mentions == {"parse": []} for m in fake.messages())
    fake.press(confirm, "Stop and discard")
    await eventually(lambda: fake.with_text("stopped and discarded"), what="the end")


async def test_deny_with_reason(fake: FakeDiscord, bot: Bot, tmp_path: Path) -> None:
    """R82: "Deny with reason" asks for the reason as the next message (a reply); the
    command does not run and the model reads the reason."""
    target = tmp_path / "never"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    fake.press(confirm, "Deny with reason")
    await eventually(lambda: fake.with_text("reply with the reason"), what="the reason prompt")
    fake.say("not on a Tuesday")
    await eventually(lambda: fake.with_text("denied: not on a Tuesday"), what="the outcome")
    await eventually(lambda: fake.with_text("was not run"), what="the model's answer")
    assert not target.exists()


async def test_ask_user_parked_and_answered_by_button(fake: FakeDiscord, bot: Bot) -> None:
    """R82, R11: an ask_user question parks the task; its options come as buttons, and
    pressing one resumes the task with that answer."""
    fake.say("ask: Which colour? | red, blue")
    question = await eventually(lambda: _open_ask(fake, "Which colour?"), what="the question")
    assert [label for label, _ in question.buttons] == ["red", "blue"]
    fake.press(question, "blue")
    await eventually(lambda: fake.with_text("→ blue"), what="the answer noted")
    await eventually(lambda: fake.with_text("A: blue"), what="the resumed task's answer")


async def test_ask_user_answered_by_free_text(fake: FakeDiscord, bot: Bot) -> None:
    """R82: a question without options is answered by the next message."""
    fake.say("ask: What is your name?")
    await eventually(lambda: fake.with_text("(write your answer)"), what="the question")
    fake.say("Ada")
    await eventually(lambda: fake.with_text("A: Ada"), what="the resumed task's answer")


async def test_unauthorized_user_gets_one_refusal(
    fake: FakeDiscord, bot: Bot, bot_home: Path, tmp_path: Path
) -> None:
    """R82: a user not in allowed_users gets one refusal, however often they write or
    press, and nothing of theirs reaches the engine."""
    target = tmp_path / "stranger"
    stranger_dm = dm_channel(STRANGER)
    fake.say(f"run: touch {target}", user=STRANGER)
    await eventually(lambda: fake.messages(stranger_dm), what="the refusal")
    fake.say(f"run: touch {target}", user=STRANGER)
    fake.say("hello", user=STRANGER)
    fake.say("/pending")  # an allowed user's message after them: all were handled
    await eventually(lambda: fake.with_text("Nothing is waiting"), what="/pending")
    refusals = fake.messages(stranger_dm)
    assert len(refusals) == 1
    assert "private" in refusals[0].plain
    assert str(STRANGER) in refusals[0].plain
    async with connect(home=bot_home) as client:
        assert await client.pending(f"dc-{stranger_dm}") == []
        assert await client.history(f"dc-{stranger_dm}") == []
    assert not target.exists()


async def test_stranger_press_is_refused(fake: FakeDiscord, bot: Bot, tmp_path: Path) -> None:
    """R82: a stranger pressing an allowed user's Approve (in a shared channel) gets an
    ephemeral "you may not" and nothing is approved."""
    target = tmp_path / "not-by-a-stranger"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    press = fake.press(confirm, "Approve", user=STRANGER)
    await eventually(lambda: fake.answered.get(press), what="the press answered")
    assert fake.answered[press] == (4, "You may not use this bot.")
    assert _open_ask(fake, "Allow run_command?") is not None
    assert not target.exists()
    fake.press(confirm, "Stop and discard")
    await eventually(lambda: fake.with_text("stopped and discarded"), what="the end")


async def test_long_output_split_without_breaking_code_blocks(fake: FakeDiscord, bot: Bot) -> None:
    """R82: output longer than Discord's 2,000 characters goes over several messages,
    each within the limit and each with whole code blocks; nothing is lost."""
    fake.say("run: seq 1 1500")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    fake.press(confirm, "Approve")
    await eventually(lambda: fake.with_text("finished with exit code 0"), what="the end")
    pages = [m for m in fake.messages() if "Allow run_command?" not in m.plain]
    assert all(len(m.text) <= 2000 for m in pages)
    assert all(m.text.count("```") % 2 == 0 for m in pages)
    bodies = "".join(body for m in pages for body in re.findall(r"```\n(.*?)\n```", m.text, re.S))
    lines = [line for line in bodies.split("\n") if line.isdigit()]
    assert lines[:1500] == [str(n) for n in range(1, 1501)]
    assert len(pages) >= 4


async def test_429_retry_after_is_honoured(fake: FakeDiscord, bot: Bot) -> None:
    """R82: a 429 answer's retry_after is waited out before the same call is made
    again, and the message still arrives."""
    fake.fail_next("POST messages", 429, retry_after=2)
    fake.say("hello")
    await eventually(lambda: fake.messages(), what="the reply")
    sends = fake.calls_of("POST messages")
    assert sends[0][2] == 429
    assert sends[1][2] == 200
    assert sends[1][3] - sends[0][3] >= 2.0


async def test_server_errors_are_retried(fake: FakeDiscord, bot: Bot) -> None:
    """R82: 5xx answers are retried with backoff; nothing is lost."""
    fake.fail_next("POST messages", 502)
    fake.fail_next("POST messages", 500)
    fake.say("hello")
    await eventually(lambda: fake.messages(), what="the reply")
    statuses = [c[2] for c in fake.calls_of("POST messages")]
    assert statuses[:3] == [502, 500, 200]


async def test_gateway_drop_is_resumed(fake: FakeDiscord, bot: Bot) -> None:
    """R82: the gateway connection drops (the network); the bot resumes its session and
    what is said afterwards is still answered."""
    fake.say("/help")
    await eventually(lambda: fake.with_text("/pending"), what="the first answer")
    fake.disconnect()
    await eventually(lambda: fake.resumed or fake.identified > 1, seconds=30, what="reconnect")
    fake.say("/new")
    await eventually(lambda: fake.with_text("new session"), seconds=30, what="the answer")


async def test_daemon_restart_withdraws_then_pending_resumes(
    fake: FakeDiscord, bot: Bot, daemon_process: Daemon, tmp_path: Path
) -> None:
    """R82: the daemon restarts under an open confirmation: the bot reconnects, the old
    confirmation is withdrawn with a message and its buttons answer "no longer open"
    (never an approval); /pending lists the kept task and its Resume button resumes it,
    asking again."""
    target = tmp_path / "after-restart"
    fake.say(f"run: touch {target}")
    old = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    approve = old.buttons[0][1]
    await trio.to_thread.run_sync(daemon_process.restart)
    await eventually(
        lambda: "withdrawn" in (fake.with_text("Allow run_command?") or old).plain,
        seconds=30,
        what="the withdrawal",
    )
    press = fake.press_data(old, approve)
    await eventually(lambda: fake.answered.get(press), what="the press answered")
    assert fake.answered[press] == (4, "This question is no longer open.")
    assert not target.exists()
    fake.say("/pending")
    listed = await eventually(
        lambda: fake.find(
            lambda m: bool(m.buttons) and "touch" in m.plain and "Allow" not in m.plain
        ),
        what="/pending",
    )
    fake.press(listed, "Resume")
    again = await eventually(
        lambda: fake.find(
            lambda m: (
                bool(m.buttons)
                and "Allow run_command?" in m.plain
                and m.message_id != old.message_id
            )
        ),
        seconds=30,
        what="the confirmation asked again",
    )
    fake.press(again, "Approve")
    await eventually(target.exists, what="the file")


@pytest.mark.parametrize("config_extra", ["allow_secrets_in_chat = true\nallow_guilds = true\n"])
async def test_secret_message_is_deleted(fake: FakeDiscord, bot: Bot) -> None:
    """R82, R60: with allow_secrets_in_chat, in a server channel, the bot asks for the
    value, deletes the person's message as soon as it read it, and never shows it."""
    # The value is typed while the bot still waits for its prompt to be sent: it is the
    # value all the same (deleted), never a message steering the task.
    release = fake.hold_replies("next message")
    fake.say("secret: API_KEY", channel=GUILD_CHANNEL, guild=GUILD)
    await eventually(
        lambda: fake.with_text("next message", GUILD_CHANNEL), what="the secret prompt"
    )
    message = fake.say("hunter2-value", channel=GUILD_CHANNEL, guild=GUILD)
    await eventually(lambda: (GUILD_CHANNEL, message) in fake.deleted, what="the deletion")
    release()
    await eventually(lambda: fake.with_text("secret received", GUILD_CHANNEL), what="outcome")
    await eventually(lambda: fake.with_text("API_KEY", GUILD_CHANNEL), what="the result")
    assert not any("hunter2" in text for m in fake.sent for text in m.history)


@pytest.mark.parametrize("config_extra", ["allow_secrets_in_chat = true\n"])
async def test_secret_refused_in_a_dm(fake: FakeDiscord, bot: Bot) -> None:
    """R82: Discord lets no bot delete a person's message in a DM, so even with
    allow_secrets_in_chat no secret is taken there: the bot says why and where."""
    fake.say("secret: API_KEY")
    # (the declined call's result says "secrets are not taken in this chat" too)
    refusal = await eventually(
        lambda: fake.with_text("Secrets are not taken in this chat"), what="refusal"
    )
    assert "direct messages" in refusal.plain
    await eventually(lambda: fake.with_text("store_secret not run"), what="the task goes on")


async def test_secret_refused_when_not_allowed(fake: FakeDiscord, bot: Bot) -> None:
    """R82: without allow_secrets_in_chat the bot says where to answer instead and
    takes no value."""
    fake.say("secret: API_KEY")
    await eventually(lambda: fake.with_text("allow_secrets_in_chat is off"), what="refusal")
    await eventually(lambda: fake.with_text("store_secret not run"), what="the task goes on")


async def test_cancel_stops_the_running_task(fake: FakeDiscord, bot: Bot) -> None:
    """R82, R40: /cancel stops the chat's running task and discards it."""
    fake.say("run: sleep 30")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    fake.press(confirm, "Approve")
    await eventually(lambda: fake.with_text("✓ approved"), what="approved")
    await trio.sleep(0.5)
    fake.say("/cancel")
    await eventually(lambda: fake.with_text("stopped and discarded"), what="the end line")


async def test_pause_keeps_the_task_for_pending(fake: FakeDiscord, bot: Bot) -> None:
    """R82, R41: /pause stops the running task and keeps it: /pending lists it."""
    fake.say("run: sleep 30")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    fake.press(confirm, "Approve")
    await eventually(lambda: fake.with_text("✓ approved"), what="approved")
    await trio.sleep(0.5)
    fake.say("/pause")
    await eventually(lambda: fake.with_text("resume it with /pending"), what="the end line")
    fake.say("/pending")
    listed = await eventually(
        lambda: fake.find(lambda m: [label for label, _ in m.buttons] == ["Resume"]),
        what="/pending",
    )
    assert "sleep 30" in listed.plain


async def test_restricted_path_is_refused_in_chat(fake: FakeDiscord, bot: Bot) -> None:
    """R82, R7: a confirmation that needs the system password is never asked in a
    chat: the bot shows the command, says it is refused and why, and the command does
    not run."""
    fake.say("run: touch /etc/agentrio-never")
    refused = await eventually(lambda: fake.with_text("Refused: restricted path"), what="refusal")
    assert "touch /etc/agentrio-never" in refused.plain
    assert not refused.buttons
    assert "password" in refused.plain
    await eventually(lambda: fake.with_text("was not run"), what="the model's answer")


async def test_server_channel_refused_unless_allowed(
    fake: FakeDiscord, bot: Bot, bot_home: Path, tmp_path: Path
) -> None:
    """R82: server (guild) channels only when configured: an allowed user there gets
    one notice, and nothing reaches the engine."""
    target = tmp_path / "from-a-server"
    fake.say(f"run: touch {target}", channel=GUILD_CHANNEL, guild=GUILD)
    fake.say(f"run: touch {target}", channel=GUILD_CHANNEL, guild=GUILD)
    fake.say("/pending")
    await eventually(lambda: fake.with_text("Nothing is waiting"), what="/pending")
    notices = fake.messages(GUILD_CHANNEL)
    assert len(notices) == 1
    assert "server channels" in notices[0].plain
    async with connect(home=bot_home) as client:
        assert await client.history(f"dc-{GUILD_CHANNEL}") == []
    assert not target.exists()


@pytest.mark.parametrize(
    "config_extra", [f"allow_guilds = true\nallowed_channels = [{GUILD_CHANNEL}]\n"]
)
async def test_allowed_channels_only(fake: FakeDiscord, bot: Bot, tmp_path: Path) -> None:
    """R82: with allow_guilds and allowed_channels, the bot works in those channels
    (buttons pressed there included) and refuses the server's others."""
    target = tmp_path / "from-the-channel"
    fake.say(f"run: touch {target}", channel=GUILD_CHANNEL, guild=GUILD)
    confirm = await eventually(
        lambda: (
            _open_ask(fake, "Allow run_command?")
            or fake.find(lambda m: bool(m.buttons), GUILD_CHANNEL)
        ),
        what="confirm",
    )
    assert confirm.channel == GUILD_CHANNEL
    fake.press(confirm, "Approve", guild=GUILD)
    await eventually(target.exists, what="the file")
    other = GUILD_CHANNEL + 1
    fake.say("/help", channel=other, guild=GUILD)
    notice = await eventually(lambda: fake.messages(other), what="the notice")
    assert "server channels" in notice[0].plain


async def test_transcript_for_the_docs(fake: FakeDiscord, bot: Bot, tmp_path: Path) -> None:
    """R82: the conversation docs/frontends.md shows, rendered from the fake server's
    record (written to <tmp>/transcript.md; docs/frontends.md carries a copy)."""
    fake.say("run: printf 'hello from agentrio\\n'")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    fake.press(confirm, "Approve")
    await eventually(lambda: fake.with_text("finished with exit code 0"), what="the result")
    fake.say("ask: Deploy it now? | yes, later")
    question = await eventually(lambda: _open_ask(fake, "Deploy it now?"), what="question")
    fake.press(question, "later")
    await eventually(lambda: fake.with_text("A: later"), what="the answer")
    await trio.sleep(1.5)  # the last edit lands (at most one a second)
    transcript = fake.transcript()
    (tmp_path / "transcript.md").write_text(transcript)
    print(transcript)
    assert "[Approve] [Deny with reason]" in transcript
    assert "hello from agentrio" in transcript


async def test_daemon_starts_and_stops_the_discord_bot(fake: FakeDiscord, tmp_path: Path) -> None:
    """R82: ``[discord] enabled``: the daemon runs the bot (it answers), logs it to
    <home>/discord.log (0600) without the token, and ends it on shutdown."""
    home = tmp_path / "home"
    write_config(home, fake, enabled=True)
    daemon = await trio.to_thread.run_sync(
        lambda: DaemonProcess(home, {"AGENTRIO_DISCORD_TOKEN": TOKEN})
    )
    try:
        await eventually(lambda: fake.identified, what="the bot on the gateway")
        fake.say("/pending")
        await eventually(lambda: fake.with_text("Nothing is waiting"), what="the bot's answer")
        log = home / "discord.log"
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        assert "Discord bot" in log.read_text()
        assert TOKEN not in log.read_text()
    finally:
        code = await trio.to_thread.run_sync(daemon.stop)
    assert code == 0
    assert "stopping" in (home / "discord.log").read_text()


async def test_a_press_is_acknowledged_in_time_while_the_core_is_busy(
    fake: FakeDiscord, bot: Bot, tmp_path: Path
) -> None:
    """R82: Discord drops a press not acknowledged within 3 s. While the core waits out
    a 6 s rate limit, a press is acknowledged by the adapter (at 2.5 s, far before the
    core gets to it) and is still acted on afterwards."""
    target = tmp_path / "late-press"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    fake.fail_next("POST messages", 429, retry_after=6)
    fake.say("/help")
    await eventually(
        lambda: any(c[2] == 429 for c in fake.calls_of("POST messages")), what="the 429"
    )
    pressed_at = trio.current_time()
    press = fake.press(confirm, "Approve")
    await eventually(lambda: fake.answered.get(press), what="the acknowledgement")
    assert trio.current_time() - pressed_at < 4.5
    assert fake.answered[press] == (6, "")
    await eventually(target.exists, seconds=30, what="the file")
