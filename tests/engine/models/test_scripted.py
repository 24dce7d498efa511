"""engine/models/scripted.py: replaying turns for tests and demos (R61), failures (R62)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from agentrio.engine.config import ModelConfig
from agentrio.engine.errors import ConfigError
from agentrio.engine.models.base import Message, ModelError, ModelReply, ToolCallRequest, ToolSpec
from agentrio.engine.models.factory import close_model, make_model
from agentrio.engine.models.scripted import ScriptedModel, ScriptedTurn

TOOLS = [ToolSpec(name="run_command", description="run", parameters={"type": "object"})]


def user(text: str) -> Message:
    return Message(role="user", content=text)


async def test_python_turns_replay_in_order_and_record_calls() -> None:
    """R61: turns come back in order, each call's messages and tools are recorded."""
    first = ModelReply(
        text="Running it.",
        tool_calls=[ToolCallRequest(id="x1", name="run_command", args={"command": "ls"})],
    )
    second = ModelReply(text="Done.", reasoning="it worked")
    model = ScriptedModel([first, second])
    assert model.name == "scripted"
    assert model.remaining == 2
    assert await model.complete([user("a")], TOOLS) == first
    assert await model.complete([user("a"), user("b")], []) == second
    assert model.calls == [[user("a")], [user("a"), user("b")]]
    assert model.tool_names == [["run_command"], []]
    assert model.remaining == 0


async def test_exhausted_script_raises_model_error() -> None:
    """R62: a script that runs out fails the call with a clear ModelError."""
    model = ScriptedModel([ModelReply(text="only")])
    await model.complete([], [])
    with pytest.raises(ModelError, match=r"^scripted model has no more turns$"):
        await model.complete([user("again")], [])
    assert model.calls == [[], [user("again")]]


async def test_error_turns_raise() -> None:
    """R62: an exception turn is raised; a ScriptedTurn error is a ModelError."""
    boom = RuntimeError("model bug")
    model = ScriptedModel(
        [ModelError("provider exploded"), boom, ScriptedTurn(error="rate limited")]
    )
    with pytest.raises(ModelError, match=r"^provider exploded$"):
        await model.complete([], [])
    with pytest.raises(RuntimeError) as info:
        await model.complete([], [])
    assert info.value is boom
    with pytest.raises(ModelError, match=r"^rate limited$"):
        await model.complete([], [])


async def test_callable_turns_see_the_input() -> None:
    """R61: a callable turn gets the messages and tools; sync or async."""
    seen: list[tuple[list[Message], list[str]]] = []

    def sync_turn(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        seen.append((list(messages), [t.name for t in tools]))
        return ModelReply(text=f"{len(messages)} message(s)")

    async def async_turn(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        await trio.lowlevel.checkpoint()
        return ModelReply(text=messages[-1].content.upper())

    model = ScriptedModel([sync_turn, async_turn])
    assert await model.complete([user("x"), user("y")], TOOLS) == ModelReply(text="2 message(s)")
    assert seen == [([user("x"), user("y")], ["run_command"])]
    assert await model.complete([user("shout")], []) == ModelReply(text="SHOUT")


SCRIPT = """
[[turns]]
text = "Running it."
[[turns.tool_calls]]
name = "run_command"
args = { command = "echo hi" }
[[turns.tool_calls]]
id = "mine"
name = "ask_user"
args = { questions = [{ text = "ok?", options = ["y", "n"] }] }

[[turns]]
chunks = ["Do", "ne", "."]
reasoning = "all good"

[[turns]]
text = "Again."
[[turns.tool_calls]]
name = "run_command"

[[turns]]
error = "provider exploded"
delay_s = 0.0
"""


async def test_toml_script_replays(tmp_path: Path) -> None:
    """R61: a TOML script replays text, tool calls (ids call_<n> unless given), streamed
    chunks and error turns."""
    path = tmp_path / "script.toml"
    path.write_text(SCRIPT, encoding="utf-8")
    model = ScriptedModel.from_toml(path)
    streamed: list[str] = []

    async def sink(piece: str) -> None:
        streamed.append(piece)

    assert await model.complete([user("go")], TOOLS, on_text=sink) == ModelReply(
        text="Running it.",
        tool_calls=[
            ToolCallRequest(id="call_1", name="run_command", args={"command": "echo hi"}),
            ToolCallRequest(
                id="mine",
                name="ask_user",
                args={"questions": [{"text": "ok?", "options": ["y", "n"]}]},
            ),
        ],
    )
    assert streamed == ["Running it."]
    streamed.clear()
    assert await model.complete([], TOOLS, on_text=sink) == ModelReply(
        text="Done.", reasoning="all good"
    )
    assert streamed == ["Do", "ne", "."]
    assert await model.complete([], TOOLS) == ModelReply(
        text="Again.", tool_calls=[ToolCallRequest(id="call_3", name="run_command", args={})]
    )
    with pytest.raises(ModelError, match=r"^provider exploded$"):
        await model.complete([], TOOLS)
    with pytest.raises(ModelError, match=r"^scripted model has no more turns$"):
        await model.complete([], TOOLS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[turns]]\nsay = 'x'\n", "turns[0].say: unknown key"),
        ("[[turns]]\n[[turns.tool_calls]]\nargs = {}\n", "turns[0].tool_calls[0].name: required"),
        (
            "[[turns]]\n[[turns.tool_calls]]\nname = 1\n",
            "turns[0].tool_calls[0].name: expected a string",
        ),
        (
            "[[turns]]\n[[turns]]\n[[turns.tool_calls]]\nname = 'x'\nargs = 'y'\n",
            "turns[1].tool_calls[0].args: expected a table",
        ),
        ("[[turns]]\ndelay_s = -1\n", "turns[0].delay_s: expected a number of seconds >= 0"),
        ("[[turns]]\ndelay_s = true\n", "turns[0].delay_s: expected a number of seconds >= 0"),
        ("[[turns]]\nerror = 3\n", "turns[0].error: expected a string"),
        ("[[turns]]\ntext = 'ab'\nchunks = ['a']\n", "turns[0].chunks: they must join to text"),
        ("turns = 3\n", "turns: expected an array of tables ([[turns]])"),
        ("other = 1\n", "other: unknown key"),
    ],
)
def test_invalid_scripts_name_the_turn(tmp_path: Path, text: str, message: str) -> None:
    """R61: a bad script is a ConfigError naming the file and the offending key."""
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        ScriptedModel.from_toml(path)
    assert str(info.value) == f"{path}: {message}"


def test_unreadable_and_unparsable_scripts(tmp_path: Path) -> None:
    """R61: a missing file or broken TOML is a one-line ConfigError naming the file."""
    with pytest.raises(ConfigError, match=r"cannot read script \(No such file or directory\)"):
        ScriptedModel.from_toml(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[[turns]\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        ScriptedModel.from_toml(broken)
    assert str(info.value).startswith(f"{broken}: ")


async def test_delay_is_slept_and_cancellable(autojump_clock: trio.testing.MockClock) -> None:
    """R61, R62: a delayed turn waits delay_s, and cancelling it leaves no answer behind."""
    model = ScriptedModel(
        [ScriptedTurn(text="slow", delay_s=5.0), ScriptedTurn(text="late", delay_s=60.0)]
    )
    start = trio.current_time()
    assert await model.complete([], []) == ModelReply(text="slow")
    assert trio.current_time() - start == pytest.approx(5.0)

    with trio.move_on_after(1.0) as scope:
        await model.complete([], [])
    assert scope.cancelled_caught
    assert trio.current_time() - start == pytest.approx(6.0)
    with pytest.raises(ModelError, match="no more turns"):
        await model.complete([], [])


async def test_factory_builds_the_scripted_model(tmp_path: Path) -> None:
    """R61: provider "scripted" loads config.script; a missing script is a ConfigError."""
    path = tmp_path / "s.toml"
    path.write_text('[[turns]]\ntext = "hi"\n', encoding="utf-8")
    model = await make_model(ModelConfig(provider="scripted", script=str(path)))
    assert isinstance(model, ScriptedModel)
    assert await model.complete([], []) == ModelReply(text="hi")
    await close_model(model)

    with pytest.raises(ConfigError) as info:
        await make_model(ModelConfig(provider="scripted"))
    assert (
        str(info.value)
        == 'model.script: required with provider = "scripted" (a TOML file of turns)'
    )
    with pytest.raises(ConfigError) as info:
        await make_model(ModelConfig(provider="scripted", script=str(tmp_path / "nope.toml")))
    assert str(info.value) == f"model.script: {tmp_path / 'nope.toml'}: no such file"
