"""R82: the Telegram front-end end to end: the real daemon, the real
python-telegram-bot, a fake Bot API server on loopback."""

from __future__ import annotations

from pathlib import Path

from tests.frontends.conftest import Bot, eventually
from tests.frontends.fake_telegram import FakeTelegram


async def test_message_task_confirm_approve_result(
    fake: FakeTelegram, bot: Bot, tmp_path: Path
) -> None:
    """R82: a message starts a task; its confirmation comes as buttons showing the
    whole command; Approve runs it and the result is shown."""
    target = tmp_path / "made-by-telegram"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: fake.find(lambda m: bool(m.buttons)), what="confirm")
    assert f"touch {target}" in confirm.plain
    assert "<pre>" in confirm.text
    fake.press(confirm, "Approve")
    await eventually(lambda: target.exists(), what="file")
    await eventually(lambda: fake.with_text("✓ run_command"), what="result")
    print(fake.transcript())
