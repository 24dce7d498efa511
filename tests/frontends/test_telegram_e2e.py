"""R82: the Telegram front-end end to end: the real daemon, the real
python-telegram-bot, a fake Bot API server on loopback (tests/frontends/fake_telegram.py).
Real time throughout (three processes): every wait polls with a deadline."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest
import trio

from agentrio import connect
from agentrio.protocol import wording
from tests.frontends.conftest import STRANGER, USER, Bot, Daemon, acknowledged_by, eventually
from tests.frontends.fake_telegram import FakeTelegram, Sent

#: The real directory a command runs in when none is named (the daemon's, the tests').
HERE = os.path.realpath(os.getcwd())


def _open_ask(fake: FakeTelegram, needle: str) -> Sent | None:
    return fake.find(lambda m: bool(m.buttons) and needle in m.plain)


async def test_message_task_confirm_approve_result(
    fake: FakeTelegram, bot: Bot, tmp_path: Path
) -> None:
    """R82: a message starts a task; its confirmation comes as buttons with the words of
    protocol/wording.py under the whole command in a code block; Approve runs it and the
    result is shown."""
    target = tmp_path / "made-by-telegram"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    assert f"<pre>command: touch {target}\ncwd: {HERE}</pre>" in confirm.text
    assert [label for label, _ in confirm.buttons] == [
        "Approve",
        "Deny with reason",
        "Always allow this exact command in this directory",
        "Allow this turn (plain programs only, above)",
        "Stop, keep to resume",
        "Stop and discard",
    ]
    fake.press(confirm, "Approve")
    await eventually(target.exists, what="the file")
    await eventually(lambda: fake.with_text("✓ run_command"), what="the result")
    assert not fake.messages()[-1].buttons
    assert "✓ approved" in (fake.with_text("Allow run_command?") or confirm).plain


async def test_the_bot_acknowledges_the_confirmation_it_sent(
    fake: FakeTelegram, bot: Bot, bot_home: Path, tmp_path: Path
) -> None:
    """R97 (issue 34): once the Bot API took the confirmation's message, the ask is
    shown on ``telegram`` and acknowledged (``GET …/asks``, the ``ask_state`` event);
    the acknowledgement decides nothing: the command runs only once approved."""
    target = tmp_path / "acked-by-telegram"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    await acknowledged_by(bot_home, f"tg-{USER}", "telegram")
    assert not target.exists()
    fake.press(confirm, "Approve")
    await eventually(target.exists, what="the file")


async def test_hostile_command_is_shown_escaped(fake: FakeTelegram, bot: Bot) -> None:
    """R82: a command full of markup characters is shown as it is, and cannot inject
    markup: the confirmation's only tags are the code block's."""
    hostile = "printf '%s' '</pre><b>bold</b> &amp; <a href=\"x\">link</a>'"
    fake.say(f"run: {hostile}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    assert hostile in confirm.plain
    assert re.findall(r"<[^>]+>", confirm.text) == ["<pre>", "</pre>"]
    fake.press(confirm, "Stop and discard")
    await eventually(lambda: fake.with_text("stopped and discarded"), what="the end")


async def test_the_confirmation_shows_where_and_every_hidden_character(
    fake: FakeTelegram, bot: Bot
) -> None:
    """Issue 29 finding 5, R77: through the real daemon, the Telegram confirmation of a
    command with a bidi override and a zero-width space shows each as its escape, and
    names the real directory it would run in; stopped, nothing ran."""
    fake.say("run: touch \u202egnp.exe\u200b")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    assert "<pre>command: touch ⟨\\u202e⟩gnp.exe⟨\\u200b⟩\ncwd: " + HERE + "</pre>" in confirm.text
    assert "\u202e" not in confirm.text
    assert "\u200b" not in confirm.text
    fake.press(confirm, "Stop and discard")
    await eventually(lambda: fake.with_text("stopped and discarded"), what="the end")
    assert not (Path(HERE) / "\u202egnp.exe\u200b").exists()


async def test_deny_with_reason(fake: FakeTelegram, bot: Bot, tmp_path: Path) -> None:
    """R82: "Deny with reason" asks for the reason as a reply; the command does not run
    and the model reads the reason."""
    target = tmp_path / "never"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    fake.press(confirm, "Deny with reason")
    await eventually(lambda: fake.with_text("reply with the reason"), what="the reason prompt")
    fake.say("not on a Tuesday")
    await eventually(lambda: fake.with_text("denied: not on a Tuesday"), what="the outcome")
    await eventually(lambda: fake.with_text("was not run"), what="the model's answer")
    assert not target.exists()


async def test_ask_user_parked_and_answered_by_button(fake: FakeTelegram, bot: Bot) -> None:
    """R82, R11: an ask_user question parks the task; its options come as buttons, and
    pressing one resumes the task with that answer."""
    fake.say("ask: Which colour? | red, blue")
    question = await eventually(lambda: _open_ask(fake, "Which colour?"), what="the question")
    assert [label for label, _ in question.buttons] == ["red", "blue"]
    fake.press(question, "blue")
    await eventually(lambda: fake.with_text("→ blue"), what="the answer noted")
    await eventually(lambda: fake.with_text("A: blue"), what="the resumed task's answer")


async def test_unauthorized_user_gets_one_refusal(
    fake: FakeTelegram, bot: Bot, bot_home: Path, tmp_path: Path
) -> None:
    """R82: a user not in allowed_users gets one refusal message, however often they
    write, and nothing of theirs reaches the engine."""
    target = tmp_path / "stranger"
    fake.say(f"run: touch {target}", user=STRANGER)
    await eventually(lambda: fake.messages(STRANGER), what="the refusal")
    fake.say(f"run: touch {target}", user=STRANGER)
    fake.say("hello", user=STRANGER)
    fake.say("/pending")  # an allowed user's message after them: all were handled
    await eventually(lambda: fake.with_text("Nothing is waiting"), what="/pending")
    refusals = fake.messages(STRANGER)
    assert len(refusals) == 1
    assert "private" in refusals[0].plain
    assert str(STRANGER) in refusals[0].plain
    async with connect(home=bot_home) as client:
        assert await client.pending(f"tg-{STRANGER}") == []
        assert await client.history(f"tg-{STRANGER}") == []
    assert not target.exists()


async def test_long_output_split_without_breaking_code_blocks(fake: FakeTelegram, bot: Bot) -> None:
    """R82: output longer than Telegram's 4,096 characters goes over several messages,
    each within the limit and each with whole code blocks; nothing is lost."""
    fake.say("run: seq 1 2500")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    fake.press(confirm, "Approve")
    await eventually(lambda: fake.with_text("finished with exit code 0"), what="the end")
    pages = [m for m in fake.messages() if "Allow run_command?" not in m.plain]
    assert all(len(m.text.encode("utf-16-le")) // 2 <= 4096 for m in pages)
    assert all(m.text.count("<pre>") == m.text.count("</pre>") for m in pages)
    numbers = "".join(re.findall(r"<pre>(.*?)</pre>", "".join(m.text for m in pages), re.S))
    assert "\n".join(str(n) for n in range(1, 2501)) in numbers
    assert len(pages) >= 3


async def test_429_retry_after_is_honoured(fake: FakeTelegram, bot: Bot) -> None:
    """R82: a 429 answer's retry_after is waited out before the same call is made
    again, and the message still arrives."""
    await eventually(lambda: fake.calls_of("getUpdates"), what="polling")
    fake.fail_next("sendMessage", 429, retry_after=2)
    fake.say("hello")
    await eventually(lambda: fake.messages(), what="the reply")
    sends = fake.calls_of("sendMessage")
    assert sends[0][2] == 429
    assert sends[1][2] == 200
    assert sends[1][3] - sends[0][3] >= 2.0


async def test_server_errors_are_retried(fake: FakeTelegram, bot: Bot) -> None:
    """R82: a 5xx answer is retried with backoff; nothing is lost."""
    await eventually(lambda: fake.calls_of("getUpdates"), what="polling")
    fake.fail_next("sendMessage", 502)
    fake.fail_next("sendMessage", 500)
    fake.say("hello")
    await eventually(lambda: fake.messages(), what="the reply")
    statuses = [c[2] for c in fake.calls_of("sendMessage")]
    assert statuses[:3] == [502, 500, 200]


async def test_daemon_restart_withdraws_then_pending_resumes(
    fake: FakeTelegram, bot: Bot, daemon_process: Daemon, tmp_path: Path
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
    assert fake.answered[press] == "This question is no longer open."
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


@pytest.mark.parametrize("config_extra", ["allow_secrets_in_chat = true\n"])
async def test_secret_message_is_deleted(fake: FakeTelegram, bot: Bot) -> None:
    """R82, R60: with allow_secrets_in_chat the bot asks for the value, deletes the
    person's message as soon as it read it, and never shows the value."""
    fake.say("secret: API_KEY")
    await eventually(lambda: fake.with_text("next message"), what="the secret prompt")
    message = fake.say("hunter2-value")
    await eventually(lambda: (111, message) in fake.deleted, what="the deletion")
    await eventually(lambda: fake.with_text("secret received"), what="the outcome")
    await eventually(lambda: fake.with_text("API_KEY"), what="the result")
    assert not any("hunter2" in text for m in fake.sent for text in m.history)


async def test_secret_refused_when_not_allowed(fake: FakeTelegram, bot: Bot) -> None:
    """R82: without allow_secrets_in_chat the bot says where to answer instead and
    takes no value."""
    fake.say("secret: API_KEY")
    await eventually(lambda: fake.with_text("not taken in this chat"), what="the refusal")
    await eventually(lambda: fake.with_text("store_secret not run"), what="the task goes on")


async def test_cancel_stops_the_running_task(fake: FakeTelegram, bot: Bot) -> None:
    """R82, R40: /cancel stops the chat's running task and discards it."""
    fake.say("run: sleep 30")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    fake.press(confirm, "Approve")
    await eventually(lambda: fake.with_text("✓ approved"), what="approved")
    await trio.sleep(0.5)
    fake.say("/cancel")
    await eventually(lambda: fake.with_text("stopped and discarded"), what="the end line")


async def test_restricted_path_is_refused_in_chat(fake: FakeTelegram, bot: Bot) -> None:
    """R82, R7: a confirmation that needs the system password is never asked in a
    chat: the bot shows the command, says it is refused and why, and the command does
    not run."""
    fake.say("run: touch /etc/agentrio-never")
    refused = await eventually(lambda: fake.with_text("Refused: restricted path"), what="refusal")
    assert "touch /etc/agentrio-never" in refused.plain
    assert not refused.buttons
    assert "password" in refused.plain
    await eventually(lambda: fake.with_text("was not run"), what="the model's answer")


async def test_ask_user_answered_by_free_text(fake: FakeTelegram, bot: Bot) -> None:
    """R82: a question without options is answered by the next message."""
    fake.say("ask: What is your name?")
    await eventually(lambda: fake.with_text("(write your answer)"), what="the question")
    fake.say("Ada")
    await eventually(lambda: fake.with_text("A: Ada"), what="the resumed task's answer")


async def test_transcript_for_the_docs(fake: FakeTelegram, bot: Bot, tmp_path: Path) -> None:
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


async def test_long_command_is_shown_whole_over_messages(fake: FakeTelegram, bot: Bot) -> None:
    """R82, R77: a command longer than one message is shown whole, over several
    messages each with a closed code block; the buttons come under the last one."""
    words = " ".join(f"w{n:04d}" for n in range(1400))  # about 8,400 characters
    fake.say(f"run: printf '%s' {words}")
    confirm = await eventually(lambda: _open_ask(fake, "w1399"), what="the last page")
    first = await eventually(lambda: fake.with_text("Allow run_command?"), what="the first page")
    pages = [
        m
        for m in fake.messages()
        if first.message_id < m.message_id <= confirm.message_id and m.text.startswith("<pre>")
    ]
    assert len(pages) >= 3
    assert all(len(m.text) <= 4096 for m in pages)
    assert all(m.text.count("<pre>") == m.text.count("</pre>") == 1 for m in pages)
    assert [bool(m.buttons) for m in pages] == [False] * (len(pages) - 1) + [True]
    shown = "".join(m.plain for m in pages)
    assert f"command: printf '%s' {words}\ncwd: {HERE}\n{wording.ALLOW_TURN}" == shown
    fake.press(confirm, "Stop and discard")
    await eventually(lambda: fake.with_text("stopped and discarded"), what="the end")


async def test_group_chat_refused_unless_allowed(
    fake: FakeTelegram, bot: Bot, bot_home: Path, tmp_path: Path
) -> None:
    """R82: group chats only when configured: an allowed user in a group gets one
    notice there, and nothing reaches the engine."""
    group = -100123
    target = tmp_path / "from-a-group"
    fake.say(f"run: touch {target}", chat=group)
    fake.say(f"run: touch {target}", chat=group)
    fake.say("/pending")
    await eventually(lambda: fake.with_text("Nothing is waiting"), what="/pending")
    notices = fake.messages(group)
    assert len(notices) == 1
    assert "group chats" in notices[0].plain
    async with connect(home=bot_home) as client:
        assert await client.history(f"tg-{group}") == []
    assert not target.exists()


@pytest.mark.parametrize("config_extra", ["allow_secrets_in_chat = true\n"])
async def test_a_secret_that_looks_like_a_command_is_deleted_too(
    fake: FakeTelegram, bot: Bot
) -> None:
    """R82: while a secret is asked, the next message is the secret whatever it looks
    like: deleted, never run as a command."""
    fake.say("secret: TOKEN")
    await eventually(lambda: fake.with_text("next message"), what="the secret prompt")
    message = fake.say("/pending-not-a-command")
    await eventually(lambda: (111, message) in fake.deleted, what="the deletion")
    await eventually(lambda: fake.with_text("secret received"), what="the outcome")
    assert not fake.with_text("Nothing is waiting")


async def test_pause_keeps_the_task_for_pending(fake: FakeTelegram, bot: Bot) -> None:
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


async def test_always_allow_skips_the_next_confirmation(
    fake: FakeTelegram, bot: Bot, tmp_path: Path
) -> None:
    """R82, R76: "Always allow this exact command" approves it and, in this chat's
    session, the same command runs again without asking."""
    target = tmp_path / "always"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    fake.press(confirm, "Always allow")
    await eventually(target.exists, what="the file")
    await eventually(lambda: fake.with_text("finished with exit code 0"), what="the result")
    target.unlink()
    fake.say(f"run: touch {target}")
    await eventually(target.exists, what="the file again")
    assert len([m for m in fake.messages() if m.shown_buttons]) == 1


@pytest.mark.parametrize("config_extra", ["[tools]\nreadonly_commands = []\n"])
async def test_an_offered_rule_is_written_out_and_its_button_keeps_it(
    fake: FakeTelegram, bot: Bot
) -> None:
    """R82, R92: a confirmation offering an argv-prefix rule writes the rule out whole
    in the message and adds a numbered button after the fixed six; pressing it
    approves the call and keeps the rule, so ``git rev-parse`` with other arguments
    then runs without a confirmation (every command asks here: no read-only ones)."""
    fake.say("run: git rev-parse HEAD")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    covers = f"`git rev-parse …` in {HERE} (any further arguments that name no path outside it)"
    assert f"<pre>Always allow {html.escape(covers, quote=False)}</pre>" in confirm.text
    assert f"Rule 1 offered:Always allow {covers}" in confirm.plain  # (a block follows)
    assert [label for label, _ in confirm.buttons][4:] == [
        "Stop, keep to resume",
        "Stop and discard",
        "Always allow rule 1 (above)",
    ]
    fake.press(confirm, "Always allow rule 1")
    await eventually(lambda: fake.with_text("rule 1 always allowed in this home"), what="outcome")
    await eventually(lambda: fake.with_text("finished with exit code 0"), what="the result")
    fake.say("run: git rev-parse --short=12 HEAD")
    await eventually(
        lambda: len([m for m in fake.messages() if "finished with exit code 0" in m.plain]) == 2,
        what="the covered command's result",
    )
    assert len([m for m in fake.messages() if m.shown_buttons]) == 1


async def test_history_lists_finished_tasks(fake: FakeTelegram, bot: Bot) -> None:
    """R82: /history lists the chat session's finished tasks."""
    fake.say("hello there")
    await eventually(lambda: fake.with_text("run:"), what="the help reply")
    fake.say("/history")
    await eventually(lambda: fake.with_text("finished: hello there"), what="/history")


async def test_polling_survives_server_errors_and_429(fake: FakeTelegram, bot: Bot) -> None:
    """R82: getUpdates answered by a 502 and then a 429 keeps polling (after
    retry_after): a message sent after both is still answered."""
    await eventually(lambda: fake.calls_of("getUpdates"), what="polling")
    fake.fail_next("getUpdates", 502)
    fake.fail_next("getUpdates", 429, retry_after=1)

    def statuses() -> list[int]:
        return [c[2] for c in fake.calls_of("getUpdates")]

    await eventually(lambda: 429 in statuses(), seconds=40, what="both failures")
    assert 502 in statuses()
    fake.say("/help")
    await eventually(lambda: fake.with_text("/pending"), seconds=30, what="the answer")
