"""A message typed at a REPL confirmation decides nothing (issue 34 item 3, R98).

A confirmation's choices take single keys: a digit picks an entry, Enter the one
highlighted (Approve, first). A person who types a message at the dialog -- "do NOT run
that 3 times" -- used to approve it with the first Space. Now the first printable key
that is not an entry's digit starts typed text, which takes every key up to its Enter
(digits, Space and Enter included), picks nothing, is sent nowhere, and the dialog
says so; the person then chooses as before. Driven by keys through the real app.
"""

from __future__ import annotations

import pytest

from agentrio.protocol.frames import Reply
from agentrio.repl.dialogs import ConfirmDialog
from agentrio.repl.hints import NOT_AN_ANSWER
from tests.repl.helpers import ask_confirm
from tests.repl.test_app import DOWN, ENTER, Harness, run_app, shown_run


@pytest.mark.parametrize(
    "typed",
    [
        "do NOT run that 3 times" + ENTER,
        " ",
        "no" + ENTER,
        "wait 1 sec\x7f\x7f\x7fmin" + ENTER,
    ],
)
def test_typed_text_at_a_confirmation_sends_no_reply(typed: str) -> None:
    """R98, issue 34 item 3: whatever is typed at the armed dialog -- letters, digits
    and Spaces after them, Backspace, its Enter -- sends nothing (but the dialog's
    ``ack``); the dialog stays open and says typing is not an answer."""

    async def scenario(h: Harness) -> None:
        await shown_run(h)
        h.app.deliver(ask_confirm("k1"))
        dialog = h.app.dialog
        assert isinstance(dialog, ConfirmDialog)
        await h.armed()
        before = h.keys_done
        await h.press(typed)
        await h.until(lambda: h.keys_done >= before + len(typed), "the typed keys")
        await h.until(lambda: NOT_AN_ANSWER in dialog.error, "the note")
        assert h.frames() == []
        assert h.app.dialog is dialog

    run_app(scenario)


def test_after_typed_text_a_choice_still_decides() -> None:
    """R98: typed text ended by its Enter leaves the choices as they were: the next
    Enter picks the highlighted entry (here Deny, moved to with Down), a digit its
    entry; only that reply is sent."""

    async def scenario(h: Harness) -> None:
        await shown_run(h)
        h.app.deliver(ask_confirm("k1"))
        dialog = h.app.dialog
        assert isinstance(dialog, ConfirmDialog)
        await h.armed()
        await h.press("yes go" + ENTER)
        await h.until(lambda: NOT_AN_ANSWER in dialog.error, "the note")
        assert h.frames() == []
        await h.press(DOWN + ENTER + "asked twice" + ENTER)
        await h.until(h.sent_any, "reply")
        assert h.frames() == [Reply(id="k1", approve=False, reason="asked twice")]

    run_app(scenario)
