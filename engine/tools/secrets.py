"""The ``store_secret`` tool: ask for a value in a hidden field and store it (R60, R73).

The value travels once, from the person's reply to the store. It is never echoed
back, never part of an event, the action record, a snapshot, a log line or an
exception message: the tool result only names the key.
"""

from __future__ import annotations

import re
from typing import Final

from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.tools.base import (
    Reach,
    ServiceTool,
    ToolContext,
    ToolOutcome,
    declined,
    string_arg,
)
from agentrio.engine.tools.in_flight import again_details
from agentrio.protocol.events import Question

__all__ = ["StoreSecretTool"]

SECRET_KEY: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class StoreSecretTool(ServiceTool):
    name = "store_secret"
    reach = Reach(unasked=False, in_subagents=True, in_legs=False)

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Ask the user for a secret value (an API key, a password) in a hidden field "
                "and store it under a key. The value is never shown to you."
            ),
            parameters={
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
            },
        )

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        key = string_arg(call, "key").strip()
        if not SECRET_KEY.fullmatch(key):
            raise ValueError("argument 'key' must be 1-64 of [A-Za-z0-9_.-]")
        again = ctx.calls.met_again(call) is not None  # issue 34: asked anyway, said so
        reply = await ctx.ask(
            "secret",
            tool_name=self.name,
            tool_args={"key": key},
            questions=[Question(text=f"Value for the secret {key!r}", secret=True)],
            details=again_details() if again else None,
        )
        if reply.approve is False:
            return ToolOutcome(ok=False, output="", skipped=declined(reply.reason))
        value = reply.password or (reply.answers[0] if reply.answers else "")
        if not value:
            return ToolOutcome(ok=False, output="", skipped="no value was entered")
        await ctx.calls.effect()
        await self._services.store.put_secret(ctx.session_id, key, value)
        return ToolOutcome(output=f"stored the secret {key}")  # never its length
