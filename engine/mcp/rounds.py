"""A ``tools/call`` that may need the person's input first: the 2026-07-28 protocol's
multi round-trip requests (docs/mcp.md, "A server asks the person").

On a connection of that revision a server sends no requests of its own. A call that
needs input answers with an ``InputRequiredResult`` (``resultType:
"input_required"``): the questions in ``inputRequests``, keyed by the server, and
optionally an opaque ``requestState``. The client answers by calling the same tool
again, with the same arguments, ``inputResponses`` keyed as the questions were and
``requestState`` echoed byte for byte (none when none came); each retry is a new
request. That repeats until the server sends the call's real result.

Here each round's elicitation requests are asked as one ``ask_user`` ask of the
task (`agentrio.engine.mcp.elicit.answer_forms`, so through `ToolContext.ask`, routed
by origin like any elicitation): inline for a REPL window, the task parked for
``chat-``/``tg-``/``dc-`` sessions -- the retry then waits for the model to call the
tool again once the person answered, and the server asks again (it kept nothing, or
its ``requestState`` said what it needed) and gets the kept answers. A request this
client cannot fulfil (sampling, roots: agentrio declares neither capability), or a
form nobody answered, ends the call as the tool's error; the engine never answers
for the person. A result carrying only ``requestState`` is retried after a short
back-off, as the SDK's own client does. (This module imports the SDK: it is imported
only once a server's tools are registered.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import trio
from mcp import MCPError
from mcp_types import INVALID_REQUEST, ElicitRequest, ErrorData, InputRequiredResult

from agentrio.engine.mcp.elicit import Elicitation, KeptForms, answer_forms

__all__ = ["MAX_ROUNDS", "call_with_input"]

#: Rounds of input a call may take before it is the tool's error (the SDK's default).
MAX_ROUNDS: Final = 10
#: The first and the longest wait before retrying a result that asked for nothing.
STATE_ONLY_DELAY_S: Final = (0.05, 0.25)


async def call_with_input(
    send: Callable[[Mapping[str, Any] | None, str | None], Awaitable[Any]],
    call: Elicitation,
    kept: KeptForms,
) -> Any:
    """``send(input_responses, request_state)`` until the server's result is not an
    ``InputRequiredResult`` (module docstring); None when the task parked instead."""
    delay = STATE_ONLY_DELAY_S[0]
    result = await send(None, None)
    for _ in range(MAX_ROUNDS):
        if not isinstance(result, InputRequiredResult):
            return result
        responses: dict[str, Any] | None = None
        if result.input_requests:
            answered = await _answer_round(call, result.input_requests, kept)
            if call.parked is not None:
                return None
            if isinstance(answered, ErrorData):
                raise MCPError.from_error_data(answered)
            responses, delay = answered, STATE_ONLY_DELAY_S[0]
        else:
            await trio.sleep(delay)
            delay = min(delay * 2, STATE_ONLY_DELAY_S[1])
        result = await send(responses, result.request_state)
    raise RuntimeError(f"the server still asked for input after {MAX_ROUNDS} rounds")


async def _answer_round(call: Elicitation, requests: Mapping[str, Any], kept: KeptForms) -> Any:
    """One round's responses, keyed as ``requests``; an ``ErrorData`` for a request
    that is not an elicitation, or when the person did not answer."""
    others = [req.method for req in requests.values() if not isinstance(req, ElicitRequest)]
    if others:
        return ErrorData(code=INVALID_REQUEST, message=f"agentrio does not answer {others[0]}")
    keys = list(requests)
    answered = await answer_forms(call, [requests[key].params for key in keys], kept)
    if not isinstance(answered, list):
        return answered
    return dict(zip(keys, answered, strict=True))
