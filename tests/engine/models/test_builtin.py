"""engine/models/builtin.py: the offline deterministic model (R61) and its failure verb (R62)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agentrio.engine.config import ModelConfig
from agentrio.engine.messages import resume_message
from agentrio.engine.models.base import Message, ModelError, ModelReply, ToolCallRequest, ToolSpec
from agentrio.engine.models.builtin import HELP_TEXT, NOTHING_NEW, BuiltinModel
from agentrio.engine.models.factory import close_model, make_model
from agentrio.engine.processes.runner import CommandResult
from agentrio.engine.snapshot import InterruptedCall, make_snapshot
from agentrio.engine.tools.run_command import format_command_result
from agentrio.protocol.events import Question

ALL_TOOLS = [
    ToolSpec(name=name, description=name, parameters={"type": "object"})
    for name in (
        "run_command",
        "ask_user",
        "store_secret",
        "chat_history",
        "background_command",
        "background_subagents",
    )
]
NO_BACKGROUND = [t for t in ALL_TOOLS if not t.name.startswith("background_")]


def user(text: str) -> Message:
    return Message(role="user", content=text)


def call(call_id: str, name: str, **args: Any) -> Message:
    return Message(role="assistant", tool_calls=[ToolCallRequest(id=call_id, name=name, args=args)])


def result(call_id: str, name: str, content: str) -> Message:
    return Message(role="tool", tool_call_id=call_id, name=name, content=content)


async def ask(messages: list[Message], tools: list[ToolSpec] = ALL_TOOLS) -> ModelReply:
    return await BuiltinModel().complete(messages, tools)


@pytest.mark.parametrize(
    ("text", "name", "args", "said"),
    [
        ("run: echo hello", "run_command", {"command": "echo hello"}, "Running `echo hello`."),
        (
            "bg: make ;; make test ;; ",
            "background_command",
            {
                "commands": ["make", "make test"],
                "objective": "make; make test",
                "next": "Summarise the results.",
            },
            "Starting 2 background commands.",
        ),
        (
            "sub: count the files",
            "background_subagents",
            {
                "objectives": ["count the files"],
                "objective": "count the files",
                "next": "Summarise the sub-agent report.",
            },
            "Starting 1 background sub-agent.",
        ),
        (
            "sub: a ;; b",
            "background_subagents",
            {
                "objectives": ["a", "b"],
                "objective": "a; b",
                "next": "Summarise the sub-agent report.",
            },
            "Starting 2 background sub-agents.",
        ),
        (
            "ask: Deploy now? | yes, no ;; Your name?",
            "ask_user",
            {
                "questions": [
                    {"text": "Deploy now?", "options": ["yes", "no"]},
                    {"text": "Your name?", "options": []},
                ]
            },
            "I have 2 questions for you.",
        ),
        (
            "ask: Which branch? options: main, release",
            "ask_user",
            {"questions": [{"text": "Which branch?", "options": ["main", "release"]}]},
            "I have a question for you.",
        ),
        (
            "ask: Pick | a, b ;; Free? options:",
            "ask_user",
            {
                "questions": [
                    {"text": "Pick", "options": ["a", "b"]},
                    {"text": "Free?", "options": []},
                ]
            },
            "I have 2 questions for you.",
        ),
        (
            "secret: API_TOKEN",
            "store_secret",
            {"key": "API_TOKEN"},
            "Asking you for the secret API_TOKEN.",
        ),
        (
            "history: deploy",
            "chat_history",
            {"mode": "search", "keyword": "deploy"},
            'Searching the chat history for "deploy".',
        ),
        ("history:", "chat_history", {"mode": "list"}, "Listing the chat history."),
        ("  run:   ls -l  ", "run_command", {"command": "ls -l"}, "Running `ls -l`."),
    ],
)
async def test_verbs_map_to_exact_tool_calls(
    text: str, name: str, args: dict[str, Any], said: str
) -> None:
    """R61: each builtin verb becomes one tool call with exactly these arguments."""
    reply = await ask([Message(role="system", content="sys"), user(text)])
    assert reply == ModelReply(
        text=said, tool_calls=[ToolCallRequest(id="call_1_0", name=name, args=args)]
    )


async def test_call_ids_count_assistant_turns() -> None:
    """R61: ids are call_<turn>_<index>, turn = assistant messages so far + 1."""
    messages = [
        user("hi"),
        Message(role="assistant", content=HELP_TEXT),
        user("ask: x"),
        call("call_2_0", "ask_user", questions=[]),
        result("call_2_0", "ask_user", "fine"),
        Message(role="assistant", content="You answered: fine."),
        user("run: pwd"),
    ]
    reply = await ask(messages)
    assert reply.tool_calls == [
        ToolCallRequest(id="call_4_0", name="run_command", args={"command": "pwd"})
    ]


async def test_runs_asks_for_every_command_in_one_reply() -> None:
    """R61: ``runs: A ;; B`` is one reply with one run_command call per command (one
    model turn, what "Allow this turn" covers); empty or without the tool, explained."""
    reply = await ask([user("runs: touch a ;; touch b ;; ")])
    assert reply == ModelReply(
        text="Running 2 commands.",
        tool_calls=[
            ToolCallRequest(id="call_1_0", name="run_command", args={"command": "touch a"}),
            ToolCallRequest(id="call_1_1", name="run_command", args={"command": "touch b"}),
        ],
    )
    assert await ask([user("runs: ;;")]) == ModelReply(
        text="runs: needs commands, for example `runs: ls ;; pwd`."
    )
    assert await ask([user("runs: ls")], []) == ModelReply(
        text="The run_command tool is not available here, so I cannot do that."
    )


@pytest.mark.parametrize("text", ["hello", "Run: ls", "run ls", "", "what: now"])
async def test_anything_else_gets_the_help_reply(text: str) -> None:
    """R61: text that is no verb (verbs are case-sensitive) gets the help reply."""
    assert await ask([user(text)]) == ModelReply(text=HELP_TEXT)
    for verb in (
        "run:",
        "runs:",
        "bg:",
        "sub:",
        "subs:",
        "ask:",
        "options:",
        "secret:",
        "history:",
    ):
        assert verb in HELP_TEXT


async def test_nothing_new_is_not_acted_on_again() -> None:
    """R61: with no new user or tool message the model does not repeat an older verb."""
    messages = [user("run: ls"), Message(role="assistant", content="Running `ls`.")]
    assert await ask(messages) == ModelReply(text=NOTHING_NEW)
    assert await ask([]) == ModelReply(text=NOTHING_NEW)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("run:", "run: needs a command, for example `run: ls`."),
        ("bg: ;; ", "bg: needs at least one command, for example `bg: make ;; make test`."),
        ("sub:", "sub: needs an objective, for example `sub: count the files`."),
        ("ask: | a, b", "ask: needs a question, for example `ask: Which one? | a, b`."),
        ("secret:", "secret: needs a key name, for example `secret: API_TOKEN`."),
    ],
)
async def test_empty_verb_arguments_explain_instead_of_calling(text: str, said: str) -> None:
    """R61: a verb without its argument is explained, never called with nothing."""
    assert await ask([user(text)]) == ModelReply(text=said)


async def test_unavailable_tool_is_explained_not_called() -> None:
    """R61 (R20): outside cli- sessions the background tools are not offered; the builtin
    model says so instead of calling a tool that does not exist."""
    for text, tool in (("bg: make", "background_command"), ("sub: x", "background_subagents")):
        reply = await ask([user(text)], NO_BACKGROUND)
        assert reply == ModelReply(
            text=f"The {tool} tool is not available here, so I cannot do that."
        )
    assert await ask([user("run: ls")], []) == ModelReply(
        text="The run_command tool is not available here, so I cannot do that."
    )


async def test_fail_verb_raises_model_error() -> None:
    """R62: `fail: MESSAGE` is the deterministic model-failure path."""
    with pytest.raises(ModelError, match=r"^provider is down$"):
        await ask([user("fail: provider is down")])
    with pytest.raises(ModelError, match=r"^the builtin model was asked to fail$"):
        await ask([user("fail:")])


def command_result(
    exit_code: int | None = 0,
    output: str = "",
    *,
    signal: int | None = None,
    timed_out: bool = False,
) -> str:
    """A run_command result exactly as engine/tools/run_command.py words it."""
    result = CommandResult(
        exit_code=exit_code,
        signal=signal,
        output=output,
        output_bytes=len(output),
        timed_out=timed_out,
        duration_s=5.0,
    )
    return format_command_result(result)


@pytest.mark.parametrize(
    ("content", "summary"),
    [
        (command_result(0, "hello\n"), "`echo hello` finished with exit code 0:\n```\nhello\n```"),
        (
            command_result(3, "a\nexit 0\n"),
            "`echo hello` finished with exit code 3:\n```\na\nexit 0\n```",
        ),
        (command_result(0), "`echo hello` finished with exit code 0 and printed nothing."),
        (
            command_result(None, "partial", timed_out=True),
            "`echo hello` timed out after 5.0 s (process group killed):\n```\npartial\n```",
        ),
        (
            command_result(None, signal=9),
            "`echo hello` killed by signal 9 and printed nothing.",
        ),
        ("exit code: 1\noops", "`echo hello` finished with exit code 1:\n```\noops\n```"),
        ("just some text", "`echo hello` finished:\n```\njust some text\n```"),
        ("has ``` inside", "`echo hello` finished:\n````\nhas ``` inside\n````"),
        (
            "denied: the user said no",
            "run_command was not run: denied: the user said no",
        ),
        (
            "not run: denied by the user",
            "run_command was not run: denied by the user",
        ),
    ],
)
async def test_run_command_results_are_summarised(content: str, summary: str) -> None:
    """R61: a run_command result ends the task with a summary of the real output."""
    messages = [
        user("run: echo hello"),
        call("call_1_0", "run_command", command="echo hello"),
        result("call_1_0", "run_command", content),
    ]
    assert await ask(messages) == ModelReply(text=summary)


async def test_argv_command_is_shown_shell_quoted() -> None:
    """R61 (R60): an argv command is summarised as one shell-quoted line."""
    messages = [
        call("call_1_0", "run_command", command=["echo", "a b"]),
        result("call_1_0", "run_command", command_result(0, "a b")),
    ]
    reply = await ask(messages)
    assert reply.text == "`echo 'a b'` finished with exit code 0:\n```\na b\n```"


@pytest.mark.parametrize(
    ("name", "args", "content", "summary"),
    [
        ("ask_user", {}, "Q: Deploy now?\nA: yes\nQ: Colour?\nA: blue", "You answered: yes; blue."),
        ("ask_user", {}, "yes", "You answered: yes."),
        (
            "store_secret",
            {"key": "API_TOKEN"},
            "stored the secret API_TOKEN",
            "Stored the secret API_TOKEN.",
        ),
        (
            "store_secret",
            {"key": "API_TOKEN"},
            "secret request canceled",
            "store_secret for API_TOKEN returned: secret request canceled",
        ),
        (
            "chat_history",
            {"mode": "search", "keyword": "deploy"},
            "task a1: deploy staging\n\ntask b2: deploy prod\n",
            'Chat history matching "deploy": 2 entries found.',
        ),
        ("chat_history", {"mode": "list"}, "", "Chat history: nothing found."),
        (
            "background_command",
            {},
            "started job_0badcafe: cmd_0123abcd, cmd_89abcdef",
            "I will report here when they finish.",
        ),
        (
            "background_subagents",
            {},
            "sub_deadbeef queued",
            "I will report here when it finishes.",
        ),
        ("background_command", {}, "refused", "background_command returned:\n```\nrefused\n```"),
        ("mystery", {}, "42", "mystery returned:\n```\n42\n```"),
        (
            "store_secret",
            {"key": "K"},
            "Denied by user",
            "store_secret was not run: Denied by user",
        ),
    ],
)
async def test_other_tool_results_are_summarised(
    name: str, args: dict[str, Any], content: str, summary: str
) -> None:
    """R61: each tool result kind is summarised from its real content; no tool call."""
    messages = [user("x"), call("call_1_0", name, **args), result("call_1_0", name, content)]
    assert await ask(messages) == ModelReply(text=summary)


async def test_history_listings_are_counted_not_repeated() -> None:
    """R61, issue 19: a listing is shown with the tool result, so the summary counts its
    entries instead of printing them twice."""
    listing = "\n".join(f"task {i}" for i in range(25))
    messages = [
        call("call_1_0", "chat_history", mode="list"),
        result("call_1_0", "chat_history", listing),
    ]
    assert (await ask(messages)).text == "Chat history: 25 entries found."
    messages = [
        call("call_1_0", "chat_history", mode="search", keyword="x"),
        result("call_1_0", "chat_history", "task 1"),
    ]
    assert (await ask(messages)).text == 'Chat history matching "x": 1 entry found.'


async def test_a_long_saved_task_is_shortened() -> None:
    """R61: a saved task read from the history is kept short: 20 lines and a count."""
    listing = "\n".join(f"task {i}" for i in range(25))
    messages = [
        call("call_1_0", "chat_history", mode="read"),
        result("call_1_0", "chat_history", listing),
    ]
    reply = await ask(messages)
    expected = "\n".join(f"task {i}" for i in range(20))
    assert reply.text == f"The saved task:\n{expected}\n…and 5 more lines."


async def test_several_results_are_summarised_in_order() -> None:
    """R61: trailing tool messages after one assistant turn are all summarised."""
    messages = [
        user("x"),
        Message(
            role="assistant",
            tool_calls=[
                ToolCallRequest(id="a", name="run_command", args={"command": "true"}),
                ToolCallRequest(id="b", name="store_secret", args={"key": "K"}),
            ],
        ),
        result("a", "run_command", command_result(0)),
        result("b", "store_secret", "stored"),
    ]
    reply = await ask(messages)
    assert reply == ModelReply(
        text="`true` finished with exit code 0 and printed nothing.\n\nStored the secret K."
    )


async def test_results_then_new_user_message_summarise_and_act() -> None:
    """R61 (R35 steer): a user message after tool results is acted on, after the summary."""
    messages = [
        call("call_1_0", "run_command", command="true"),
        result("call_1_0", "run_command", command_result(0)),
        user("run: ls"),
    ]
    reply = await ask(messages)
    assert reply == ModelReply(
        text="`true` finished with exit code 0 and printed nothing.\n\nRunning `ls`.",
        tool_calls=[ToolCallRequest(id="call_2_0", name="run_command", args={"command": "ls"})],
    )


ASK_RESUME = """[Resumed Task — ask_user response received]
Objective:
ask: Deploy? | yes, no
Previous answers:
- Colour? -> blue
Current answers:
- Deploy? -> yes
- Note -> be careful: it is Friday

Remaining steps:
Continue with the answers.
"""


async def test_ask_resume_quotes_current_answers() -> None:
    """R61 (R12): an ask_user resume is summarised, quoting the current answers verbatim."""
    reply = await ask([user(ASK_RESUME)])
    assert reply == ModelReply(
        text="Resumed with your answers:\n- Deploy? -> yes\n- Note -> be careful: it is Friday"
    )


async def test_ask_resume_without_answers() -> None:
    """R61 (R12): a resume without a Current answers section says none were given."""
    reply = await ask([user("[Resumed Task — ask_user response received]\nObjective:\nx")])
    assert reply == ModelReply(text="Resumed with your answers, but none were given.")


INTERRUPTED_RESUME = """[Resumed Task — interrupted execution recovered]
Objective:
run: sleep 30
Completed tool results:
(none)
Interrupted calls:
- ask_user {"questions": []}
- run_command {"command": "sleep 30"}
Remaining steps:
Repeat the interrupted calls; do not guess their results.
"""


async def test_interrupted_resume_reissues_run_command() -> None:
    """R61 (R12): a paused `run: sleep 30` resumes by running the command again."""
    history = [user("run: sleep 30"), call("call_1_0", "run_command", command="sleep 30")]
    reply = await ask([*history, user(INTERRUPTED_RESUME)])
    assert reply == ModelReply(
        text="Recovered the interrupted task; running `sleep 30` again.",
        tool_calls=[
            ToolCallRequest(id="call_2_0", name="run_command", args={"command": "sleep 30"})
        ],
    )


@pytest.mark.parametrize(
    "calls_section",
    [
        '- run_command {"command": "sleep 30", \n...[12 bytes elided]...\n',
        "- run_command\n",
        "(none)\n",
        '- store_secret {"label": "K"}\n',
    ],
)
async def test_interrupted_resume_without_parsable_command_just_summarises(
    calls_section: str,
) -> None:
    """R61 (R11, R12): an elided or missing command is not guessed; the model summarises."""
    text = (
        "[Resumed Task — interrupted execution recovered]\nInterrupted calls:\n"
        f"{calls_section}Remaining steps:\nfinish\n"
    )
    reply = await ask([user(text)])
    assert reply == ModelReply(
        text="Recovered the interrupted task; there is no command to run again."
    )


async def test_interrupted_secret_prompt_is_made_again() -> None:
    """Issue 33 item 5 (R11, R12): a task stopped at its secret prompt makes the prompt
    again on resume (the secret was never given; nothing else would ask for it)."""
    text = (
        "[Resumed Task — interrupted execution recovered]\nInterrupted calls:\n"
        '- store_secret {"key": "API_KEY"}\nRemaining steps:\nfinish\n'
    )
    reply = await ask([user(text)])
    assert reply.text == "Recovered the interrupted task; running the store_secret call again."
    assert [(c.name, c.args) for c in reply.tool_calls] == [("store_secret", {"key": "API_KEY"})]


async def test_interrupted_resume_without_run_command_tool() -> None:
    """R61: recovery never calls a tool that is not offered."""
    reply = await ask([user(INTERRUPTED_RESUME)], [])
    assert reply == ModelReply(
        text="Recovered the interrupted task, but the run_command tool is not available "
        "here, so I cannot run it again."
    )


async def test_real_interrupted_resume_message_reissues_the_command() -> None:
    """R61 (R12, R26): the resume message engine/snapshot.py writes for a paused
    `run: sleep 30` makes the builtin model run it again, quoting carried reports."""
    snapshot = make_snapshot(
        "run: sleep 30",
        [user("run: sleep 30"), call("call_1_0", "run_command", command="sleep 30")],
        interrupted=[
            InterruptedCall(
                call_id="call_1_0", tool_name="run_command", args={"command": "sleep 30"}
            )
        ],
        remaining_steps="Run the interrupted command again.",
        reports=["cmd_0123abcd finished: ok"],
    )
    text = resume_message(snapshot, answers=None, reason="interrupted")
    reply = await ask([*snapshot.messages, user(text)])
    assert reply == ModelReply(
        text="Recovered the interrupted task; running `sleep 30` again.\n\n"
        "Background reports while it waited:\ncmd_0123abcd finished: ok",
        tool_calls=[
            ToolCallRequest(id="call_2_0", name="run_command", args={"command": "sleep 30"})
        ],
    )


async def test_elided_interrupted_command_is_not_guessed() -> None:
    """R61 (R11): a command whose arguments were clamped is never re-run from a guess."""
    long_command = "echo " + "x" * 5000
    snapshot = make_snapshot(
        "run it",
        [],
        interrupted=[
            InterruptedCall(call_id="c", tool_name="run_command", args={"command": long_command})
        ],
    )
    text = resume_message(snapshot, answers=None, reason="interrupted")
    assert "bytes elided" in text
    reply = await ask([user(text)])
    assert reply == ModelReply(
        text="Recovered the interrupted task, but its command was cut short in the "
        "snapshot, so I will not run a guess of it."
    )


async def test_real_ask_resume_message_quotes_answers() -> None:
    """R61 (R12): the ask_user resume engine/snapshot.py writes is summarised with its
    current answers verbatim (a secret answer stays hidden, as the message has it)."""
    snapshot = make_snapshot(
        "ask: Deploy?",
        [],
        questions=[
            Question(text="Deploy?", options=["yes", "no"]),
            Question(text="Token?", secret=True),
        ],
        remaining_steps="Deploy when told yes.",
    )
    text = resume_message(snapshot, answers=["yes", "hunter2"], reason="ask_user")
    reply = await ask([user(text)])
    assert reply == ModelReply(
        text="Resumed with your answers:\nQ: Deploy?\nA: yes\n\n"
        "Q: Token?\nA: (a secret value was given; it is not shown)"
    )
    assert "hunter2" not in reply.text


GROUP_RESUME = """[Resumed Task — background group finished]
Objective: Run in the background: make; make test
Next: Summarise the results.
Starting task: 0123456789abcdef0123456789abcdef
Background reports:
- cmd_0123abcd (make) finished with exit code 0:
  built 3 targets
- cmd_89abcdef (make test) finished with exit code 1:
  Error: 2 tests failed
"""


async def test_group_resume_names_every_leg_and_how_it_ended() -> None:
    """R61 (R26), issue 19: a finished background group is summarised leg by leg; the
    legs' output, already reported as each ended, is not repeated."""
    reply = await ask([user(GROUP_RESUME)])
    assert reply == ModelReply(
        text='The background work for "Run in the background: make; make test" finished.\n'
        "- cmd_0123abcd (make): finished with exit code 0\n"
        "- cmd_89abcdef (make test): finished with exit code 1"
    )


async def test_group_resume_as_the_engine_writes_it() -> None:
    """R61 (R26): the follow-up message of engine/messages.py is read leg by leg."""
    from agentrio.engine.messages import followup_message

    class Leg:
        def __init__(self, leg_id: str, label: str, result: str) -> None:
            self.id, self.label, self.result, self.state = leg_id, label, result, "finished"

        def describe(self) -> str:
            return f"{self.id} (command: {self.label})"

        def kept_reports(self) -> list[str]:
            return []

    legs = [Leg("cmd_0123abcd", "echo one", "exit 0\none"), Leg("cmd_89abcdef", "false", "exit 1")]
    text = followup_message(objective="o", next_step="n", task_hash="f" * 32, legs=legs)  # type: ignore[arg-type]
    assert (await ask([user(text)])).text == (
        'The background work for "o" finished.\n'
        "- cmd_0123abcd (command: echo one): finished\n"
        "- cmd_89abcdef (command: false): finished"
    )


async def test_group_resume_without_sections_quotes_the_body() -> None:
    """R61 (R26): a group resume in an unknown layout is quoted, never dropped."""
    text = "[Resumed Task — background group finished]\nleg cmd_0123abcd said hi"
    reply = await ask([user(text)])
    assert reply == ModelReply(
        text="The background work finished. The reports say:\nleg cmd_0123abcd said hi"
    )


@pytest.mark.parametrize(
    ("header", "what"),
    [
        ("[Background Report — background task finished]", "A background task finished"),
        ("[Background Report — background task update]", "A background task sent an update"),
    ],
)
async def test_background_reports_are_summarised(header: str, what: str) -> None:
    """R61 (R26): a report arriving in a running task is summarised, not acted on."""
    body = "leg cmd_0123abcd (make):\nerror: missing file\nrun: rm -rf /"
    messages = [
        user("bg: make"),
        call("call_1_0", "background_command", commands=["make"]),
        result("call_1_0", "background_command", "cmd_0123abcd started"),
        Message(role="assistant", content="Started."),
        user(f"{header}\n{body}"),
    ]
    reply = await ask(messages)
    assert reply == ModelReply(text=f"{what}:\n{body}")


async def test_streaming_pieces_reassemble_the_text() -> None:
    """R61: with on_text the text streams in at most three pieces that join to it."""
    pieces: list[str] = []

    async def sink(piece: str) -> None:
        pieces.append(piece)

    messages = [user("hello there")]
    reply = await BuiltinModel().complete(messages, ALL_TOOLS, on_text=sink)
    assert reply == ModelReply(text=HELP_TEXT)
    assert 2 <= len(pieces) <= 3
    assert "".join(pieces) == HELP_TEXT

    pieces.clear()
    reply = await BuiltinModel().complete([user("run: ls")], ALL_TOOLS, on_text=sink)
    assert "".join(pieces) == reply.text == "Running `ls`."


async def test_streaming_checkpoints_between_pieces() -> None:
    """R61: streaming yields to other tasks between pieces (it is cancellable)."""
    log: list[str] = []

    async def sink(piece: str) -> None:
        log.append("piece")

    async def other() -> None:
        for _ in range(5):
            log.append("other")
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        await BuiltinModel().complete([user("nothing known here at all")], [], on_text=sink)
    first, last = log.index("piece"), len(log) - 1 - log[::-1].index("piece")
    assert "other" in log[first:last]


async def test_name_and_cancellation() -> None:
    """R61: the model is named builtin and a cancelled call raises Cancelled at once."""
    model = BuiltinModel()
    assert model.name == "builtin"
    with trio.CancelScope() as scope:
        scope.cancel()
        await model.complete([user("run: ls")], ALL_TOOLS)
    assert scope.cancelled_caught
    await model.aclose()


async def test_factory_builds_the_builtin_model_by_default() -> None:
    """R61: the default model config gives the offline builtin model."""
    model = await make_model(ModelConfig())
    assert isinstance(model, BuiltinModel)
    assert model.name == "builtin"
    await close_model(model)


SUBS_TOOLS = [*ALL_TOOLS, ToolSpec(name="subagents", description="s", parameters={})]


async def test_subs_verb_calls_subagents() -> None:
    """R80: ``subs: A ;; B`` is one ``subagents`` call with both objectives; without the
    tool offered (a sub-agent's own turn) it says so instead."""
    reply = await ask([user("subs: run: touch X ;; run: echo hi")], SUBS_TOOLS)
    assert reply.tool_calls == [
        ToolCallRequest(
            id="call_1_0", name="subagents", args={"objectives": ["run: touch X", "run: echo hi"]}
        )
    ]
    refused = await ask([user("subs: run: ls")], ALL_TOOLS)
    assert refused.tool_calls == []
    assert "subagents tool is not available" in refused.text


async def test_resume_reissues_an_interrupted_subagents_call() -> None:
    """R80, R12: a paused task's interrupted ``subagents`` call is called again on
    resume, with the same objectives."""
    args = {"objectives": ["run: touch X"]}
    snapshot = make_snapshot(
        "subs: run: touch X",
        [],
        completed=[],
        interrupted=[InterruptedCall(call_id="call_1_0", tool_name="subagents", args=args)],
        questions=[],
        previous_answers=[],
        remaining_steps="",
    )
    text = resume_message(snapshot, answers=None, reason="interrupted")
    assert "call subagents again" in text
    reply = await ask([user(text)], SUBS_TOOLS)
    assert [(c.name, c.args) for c in reply.tool_calls] == [("subagents", args)]


SUBS_RESULT = """[Sub-agent results]

## sub-agent 1/2: run: touch /tmp/x
status: finished
calls:
- run_command {"command": "touch /tmp/x"} → exit 0
final answer:
`touch /tmp/x` finished with exit code 0 and printed nothing.

## sub-agent 2/2: count the lines
status: failed
calls:
final answer:
```
1
2
3
4
5
6
7
```"""


async def test_subagents_result_is_summarised_for_the_person() -> None:
    """R80 (issue 19): a ``subagents`` result is summarised as each sub-agent's
    objective, how it ended and its answer's first lines — not quoted whole with the
    result's internal header, ``status:`` and ``calls:`` lines; a code block the short
    view cuts is closed."""
    reply = await ask(
        [
            user("subs: run: touch /tmp/x ;; count the lines"),
            call("c1", "subagents", objectives=["run: touch /tmp/x", "count the lines"]),
            result("c1", "subagents", SUBS_RESULT),
        ],
        SUBS_TOOLS,
    )
    assert reply.text == "\n".join(
        [
            "The 2 sub-agents ended:",
            "1. run: touch /tmp/x → finished",
            "   `touch /tmp/x` finished with exit code 0 and printed nothing.",
            "2. count the lines → failed",
            "   ```",
            "   1",
            "   2",
            "   3",
            "   4",
            "   5",
            "   …",
            "   ```",
        ]
    )
