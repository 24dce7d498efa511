"""The ``store_secret`` tool: ask for a value in a hidden field and store it (R60, R73).

The value travels once, from the person's reply to the store. It is never echoed
back, never part of an event, the action record, a snapshot, a log line or an
exception message: the tool result only names the key.
"""

from __future__ import annotations

import re
from typing import Final

from agentrio.engine.errors import AskFailed
from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.pending import AskRequest, Entry
from agentrio.engine.tools.base import ServiceTool, ToolContext, ToolOutcome, string_arg
from agentrio.protocol import events as ev
from agentrio.protocol.events import Question

__all__ = ["StoreSecretTool"]

SECRET_KEY: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class StoreSecretTool(ServiceTool):
    name = "store_secret"

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
        request = AskRequest(
            kind="secret",
            session_id=ctx.session_id,
            task_hash=ctx.task_hash,
            window_hash=ctx.window_hash,
            tool_name=self.name,
            tool_args={"key": key},
            questions=[Question(text=f"Value for the secret {key!r}", secret=True)],
            subagent=ctx.subagent,
        )
        registry = self._services.registry
        if not registry.has_listener(ctx.session_id, request):
            return ToolOutcome(
                ok=False, output="", skipped="no front-end can take the secret value"
            )
        question = request.questions[0].text

        def announce(entry: Entry) -> None:
            # Front-ends that follow events (the web page) learn of the hidden field
            # here; the event names the key, never a value.
            ctx.emit(
                ev.SecretAsk,
                confirm_hash=entry.id,
                key=key,
                text=question,
                subagent=ctx.subagent,
            )

        try:
            reply = await registry.ask(request, on_registered=announce)
        except AskFailed as exc:
            return ToolOutcome(ok=False, output="", skipped=f"no value received: {exc}")
        await ctx.honour_stop(reply.action)
        value = reply.password or (reply.answers[0] if reply.answers else "")
        if not value:
            return ToolOutcome(ok=False, output="", skipped="no value was entered")
        await self._services.store.put_secret(ctx.session_id, key, value)
        return ToolOutcome(output=f"stored the secret {key}")  # never its length
