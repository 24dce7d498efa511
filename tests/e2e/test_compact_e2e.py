"""``/compact`` end to end through the real daemon and aimock, in each dialect (issue
31 item 3): the session's earlier exchange is summarised by the model on request (the
``compact`` frame, and ``POST /v1/session/{id}/compact``), and the next task's input
starts from that summary instead of the exchange.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from agentrio.engine.compaction import SUMMARY_PROMPT
from agentrio.protocol.codec import decode
from agentrio.protocol.frames import Compact, CompactedSession, DoneFrame, Run
from agentrio.protocol.http import Compaction
from tests.e2e.test_dialects_e2e import DIALECTS, talking_daemon, until_done


@pytest.fixture(params=list(DIALECTS))
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


ADA = "my name is Ada, remember it"
FIXTURES: list[dict[str, Any]] = [
    {
        # The summariser's request: its transcript quotes the exchange ("user: …").
        "match": {"userMessage": "user: my name is Ada, remember it"},
        "response": {"content": "The person is called Ada."},
    },
    {
        "match": {"userMessage": "user: what is my name?"},
        "response": {"content": "The person is called Ada and asked for her name."},
    },
    {
        "match": {"userMessage": "my name is Ada, remember it"},
        "response": {"content": "Nice to meet you, Ada.", "reasoning": "Remember it."},
    },
    {
        "match": {"userMessage": "what is my name?"},
        "response": {"content": "Your name is Ada.", "reasoning": "From the summary."},
    },
]


async def test_compact_on_request_folds_the_exchange_into_the_summary(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (3): after one exchange, ``compact`` answers ``compacted_session`` with
    1 summarised (the model was sent the summary prompt and the exchange); the next
    task's request holds the summary, not the exchange; compacting over HTTP then
    folds that second exchange, with the summary so far, into a new summary."""
    async with talking_daemon(nursery, tmp_path, dialect, FIXTURES) as (aimock, daemon, conn):
        await conn.send(Run(request_id="a", session_id="cli-cmp", input=ADA))
        first = (await until_done(conn, "a"))[-1]
        assert isinstance(first, DoneFrame)
        assert first.status == "finished", first.error
        await conn.send(Compact(session_id="cli-cmp", request_id="c"))
        answer = await conn.receive()
        await conn.send(Run(request_id="b", session_id="cli-cmp", input="what is my name?"))
        second = (await until_done(conn, "b"))[-1]
        headers = {"Authorization": f"Bearer {daemon.info.token}"}
        async with httpx.AsyncClient(base_url=daemon.info.base_url, headers=headers) as http:
            response = await http.post("/v1/session/cli-cmp/compact")
    assert answer == CompactedSession(session_id="cli-cmp", summarised=1, request_id="c")
    assert isinstance(second, DoneFrame)
    assert (second.status, second.error) == ("finished", "")
    assert response.status_code == 200
    assert decode(response.content, Compaction) == Compaction(summarised=1)
    journal = [e for e in await aimock.journal() if e["response"]["status"] == 200]
    assert len(journal) == 4
    summarise, asked = journal[1]["body"]["messages"], journal[2]["body"]["messages"]
    assert [m["content"] for m in summarise if m["role"] == "system"] == [SUMMARY_PROMPT]
    systems = [m["content"] for m in asked if m["role"] == "system"]
    assert any("The person is called Ada." in text for text in systems), systems
    said = [(m["role"], m["content"]) for m in asked if m["role"] != "system"]
    assert said == [("user", "what is my name?")]
    again = [m["content"] for m in journal[3]["body"]["messages"] if m["role"] == "user"]
    assert again[-1].startswith("Summary so far:\nThe person is called Ada.\n")
    assert "user: what is my name?" in again[-1]
