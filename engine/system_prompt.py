"""The system prompt: what a run's model is told about where it is (R87, issue 31 item 2).

Every model call of a task starts with one system message, made here when the run
starts (`task_prompt`) and counted against the context budget with the rest of its
input (`agentrio.engine.compaction`). It says, in order:

1. who the model is: agentrio's agent for a person (or a sub-agent of one, with its
   label; or a background sub-agent that can ask nobody);
2. where it is: the OS, today's date, the working directory, the session's origin
   (the REPL, the web page or HTTP, a Telegram or Discord chat);
3. the rules: what runs unasked (read-only commands, in the sandbox) and what asks a
   person, who may deny with a reason that must be respected; secrets never echoed;
4. the tools this run is offered (`Toolbox.available`, so a tool added to the engine
   is listed the turn it is offered), each with when to use it (`GUIDANCE`; a tool
   without an entry, an MCP server's, is listed with its own description's first
   sentence);
5. the ``AGENTS.md`` files found from the working directory up to the repository root
   (`find_agents_files`), the root's first;
6. ``[agent] instructions`` from the configuration.

**AGENTS.md is read as a read-only tool could read it.** The working directory's real
path is walked up to the directory holding ``.git`` (a repository's root, stop there),
else to the user's home or ``/``. Each ``AGENTS.md`` on the way is judged exactly as
``read_file`` judges a path (`agentrio.engine.tools.file_reach.read_refusal`, against the
hidden places of that moment): one that is or leads into a hidden place (every
agentrio home, the credential stores) is not read, nor one under ``/tmp`` outside the
working directory (the sandbox's ``/tmp`` is private), nor anything while a hidden file
has a second name (``Hidden.linked``); then it is opened as ``read_file`` opens one
(`open_regular`: a regular file, its descriptor's own path read back), so a swap
between the two looks cannot redirect it. All of them together keep to
`AGENTS_MD_BYTES`, each clamped with the project's elision marker; a huge file is read
only at its head and tail. Its paths are announced to the person once per session (an
``agents_md`` event).
"""

from __future__ import annotations

import datetime
import logging
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from functools import cache, partial
from typing import Any, Final, Protocol, TypeVar

import attrs
import trio

from agentrio.engine.messages import subagent_system_prompt
from agentrio.engine.processes.hidden import Hidden, HiddenPlaces
from agentrio.engine.snapshot import clamp, elision_marker
from agentrio.engine.tools.base import Services, Tool
from agentrio.engine.tools.file_reach import FileRefused, open_regular, read_refusal, resolve_target
from agentrio.engine.tools.workdir import Workdir
from agentrio.protocol import events as ev

__all__ = [
    "AGENTS_MD",
    "AGENTS_MD_BYTES",
    "GUIDANCE",
    "RULES",
    "AgentsFile",
    "Surroundings",
    "find_agents_files",
    "subagent_prompt",
    "surroundings",
    "system_prompt",
    "task_prompt",
]

log = logging.getLogger("agentrio.system_prompt")

_T = TypeVar("_T")

AGENTS_MD: Final = "AGENTS.md"
#: Most bytes of all ``AGENTS.md`` text one prompt includes (Codex keeps 32 KiB too).
AGENTS_MD_BYTES: Final = 32 * 1024

IDENTITY: Final = (
    "You are the agent of agentrio, a daemon that runs AI-agent tasks for a person on "
    "their own machine; they follow each task in agentrio's terminal REPL, its web page "
    "or a chat bot. You work by calling tools: the person sees every call and its "
    "result. Be direct and concise, look before you change anything, and end each task "
    "with a short final answer saying what you did or found."
)
LEG_IDENTITY: Final = (
    "You are a background sub-agent of agentrio, a daemon that runs AI-agent tasks for "
    "a person. Another task started you on one objective and went on; you work alone. "
    "Nobody can be asked anything: a call that would need a person's confirmation is "
    "not run, and it is offered to the person later with your report. End with a final "
    "answer: it becomes your report."
)

#: What runs without asking, what asks, and what a denial means (R6, R8, R75).
RULE_UNASKED: Final = (
    "A command that only reads (ls, cat, grep, find, git status, git log, ...) runs "
    "unasked, in a read-only sandbox: no writes, no network, a private /tmp, and "
    "agentrio's own files and the credential stores hidden (they read as empty)."
)
RULE_NO_SANDBOX: Final = (
    "The sandbox is not available on this machine, so every command asks the person first."
)
RULE_ASKS: Final = (
    "Anything that may change something (writing or deleting files, installing, "
    "network access, git commit or push, starting services) asks the person first; a "
    "command touching system directories also asks for their system password. They "
    "may approve, deny, or stop the task."
)
RULE_ALLOW_ALL: Final = (
    "This session was started with allow-all: commands run without a confirmation, so "
    "take extra care with anything that changes things."
)
RULE_DENIED: Final = (
    "A denied call comes back as 'not run: denied by the user: <reason>' (or 'denied by "
    "the exec policy' when a non-interactive run's rules answered for them). Respect it: "
    "do not run the same thing again or reach the same effect another way; follow the "
    "reason, or ask what they want instead."
)
RULE_SECRETS: Final = (
    "Never echo a secret (API key, password, token, private key): not in replies, "
    "commands, files or questions. Refer to a stored secret by its key."
)
RULE_CWD: Final = (
    "Commands run in the working directory below unless a call names another (its "
    "cwd); paths in replies are best given relative to it."
)
#: Every rule a task's prompt states (a test holds the prompt to each).
RULES: Final = (RULE_UNASKED, RULE_ASKS, RULE_DENIED, RULE_SECRETS, RULE_CWD)

#: When to use each shipped tool, as the prompt says it (a test holds every shipped
#: tool to an entry here).
GUIDANCE: Final[Mapping[str, str]] = {
    "run_command": (
        "run one command (a shell string or an argv list) and read its exit code and "
        "output. Read-only commands run unasked; look around with them first."
    ),
    "read_file": (
        "read a text file (or a line range of it) unasked, within what read-only commands "
        "may read; prefer it to cat. A large file comes back with its middle elided: read "
        "a line range for that part."
    ),
    "edit_file": (
        "change part of an existing text file: old_string must match the file exactly "
        "once (read it first; replace_all for every occurrence). The person sees the diff "
        "and approves it; if the file changed meanwhile, read it again."
    ),
    "write_file": (
        "write a whole text file, new or replaced; the person sees the diff and approves "
        "it. Prefer edit_file for a change to part of a file."
    ),
    "ask_user": (
        "ask the person when you need a decision or a fact only they have (which "
        "approach, missing details); give options when the choice is closed. Do not ask "
        "what a read-only command can find out. In a web or chat session the task waits "
        "until they answer."
    ),
    "store_secret": (
        "when the work needs a secret the person has (an API key, a password): they type "
        "it in a hidden field and it is stored under the key you give; you never see "
        "the value. Never ask for a secret with ask_user or in a reply."
    ),
    "chat_history": (
        "look up this session's earlier tasks (list, search, read one) when the "
        "conversation you were given does not hold what you need."
    ),
    "background_command": (
        "start long commands (builds, test suites, downloads, servers) in the background "
        "and return at once; each one's report arrives later as a message, and a "
        "follow-up task acts on them (its 'next')."
    ),
    "background_subagents": (
        "start independent pieces of work that may go on after this task ends; each "
        "background sub-agent works alone (it cannot ask or get confirmations; what needs "
        "one is offered to the person later) and its report arrives later as a message."
    ),
    "subagents": (
        "split work into independent parts done side by side now, and wait for all their "
        "answers; their confirmations and questions reach the person labelled with the "
        "sub-agent."
    ),
}

_ORIGINS: Final[Mapping[str, str]] = {
    "cli-": "the person's terminal (agentrio's REPL): they see each call as it runs",
    "chat-": "agentrio's web page or an HTTP client",
    "tg-": "a Telegram chat with agentrio's bot",
    "dc-": "a Discord chat with agentrio's bot",
}


@attrs.frozen
class AgentsFile:
    """One ``AGENTS.md`` included: its real path and its (clamped) text."""

    path: str
    text: str


@attrs.frozen(kw_only=True)
class Surroundings:
    """Where a run is: the facts its prompt states (`surroundings`)."""

    cwd: str
    origin: str
    os_name: str
    today: str
    sandbox: bool = True
    agents: tuple[AgentsFile, ...] = ()
    instructions: str = ""


# -- the text ----------------------------------------------------------------------


def _tool_line(tool: Tool) -> str:
    guidance = GUIDANCE.get(tool.name)
    if guidance is None:
        description = " ".join(tool.spec().description.split())
        guidance = description.split(". ")[0].rstrip(".") + "." if description else ""
    return f"- {tool.name}: {guidance}".rstrip(": ")


def system_prompt(
    place: Surroundings,
    tools: Sequence[Tool],
    *,
    allow_all: bool = False,
    subagent: str = "",
    leg: bool = False,
) -> str:
    """The system prompt of a run in ``place`` offered ``tools`` (module docstring):
    a task's, or with ``subagent`` (its label) an in-process sub-agent's, or with
    ``leg`` a background sub-agent's."""
    if leg:
        head = LEG_IDENTITY
    elif subagent:
        head = subagent_system_prompt(subagent)
    else:
        head = IDENTITY
    origin = _ORIGINS.get(place.origin, "a script using agentrio's API")
    where = [
        "## Where you are",
        f"- Operating system: {place.os_name}",
        f"- Today: {place.today}",
        f"- Working directory: {place.cwd}",
        f"- This session comes from {origin}.",
    ]
    rules = [RULE_UNASKED if place.sandbox else RULE_NO_SANDBOX, RULE_ASKS]
    if allow_all:
        rules.append(RULE_ALLOW_ALL)
    rules += [RULE_DENIED, RULE_SECRETS, RULE_CWD]
    parts = [head, "\n".join(where), "## Rules\n" + "\n".join(f"- {r}" for r in rules)]
    if tools:
        parts.append("## Your tools\n" + "\n".join(_tool_line(t) for t in tools))
    for found in place.agents:
        parts.append(
            f"## Project instructions ({found.path})\n"
            "Follow these where they do not conflict with the rules above.\n\n" + found.text
        )
    if place.instructions.strip():
        parts.append("## The person's instructions\n" + place.instructions.strip())
    return "\n\n".join(parts)


# -- the facts ---------------------------------------------------------------------


@cache
def _os_name() -> str:
    """``Linux 6.1 (Debian GNU/Linux 12)``; read once (it does not change)."""
    name = f"{platform.system()} {platform.release()}".strip()
    try:
        pretty = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        pretty = ""
    return f"{name} ({pretty})" if pretty else name


def _today(now: float) -> str:
    day = datetime.datetime.fromtimestamp(now).astimezone()
    return f"{day:%Y-%m-%d} ({day:%A}, {day.tzname() or 'local time'})"


def _facts(places: HiddenPlaces, cwd: str) -> tuple[str, str, list[AgentsFile]]:
    """The OS, the working directory ``cwd`` (the run's, R86) and its ``AGENTS.md``
    files, judged against the hidden places of now (blocking)."""
    return _os_name(), cwd, find_agents_files(cwd, places.snapshot())


async def in_thread(fn: Callable[[], _T]) -> _T:
    """``fn()`` in a worker thread (the tests of the in-process engine run it inline
    under a mock clock, as they do the store)."""
    return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


async def surroundings(services: Services, origin: str, cwd: str) -> Surroundings:
    """The facts of a run of origin ``origin`` working in ``cwd`` now, read in a worker
    thread."""
    places = services.sandbox.places
    await places.refresh()
    os_name, cwd, agents = await in_thread(partial(_facts, places, cwd))
    return Surroundings(
        cwd=cwd,
        origin=origin,
        os_name=os_name,
        today=_today(services.clock()),
        sandbox=services.sandbox.status.active,
        agents=tuple(agents),
        instructions=services.config.agent.instructions,
    )


class _SessionState(Protocol):
    origin: str
    agents_shown: set[str]


class TaskRun(Protocol):
    """What `task_prompt` needs of a run (`agentrio.engine.runs.TaskRun` is one)."""

    services: Services
    allow_all: bool
    subagent_of: str | None
    workdir: Workdir

    @property
    def session(self) -> _SessionState: ...

    def emit(self, kind: Any, **fields: Any) -> Any: ...


async def task_prompt(run: TaskRun, tools: Sequence[Tool]) -> str:
    """The system prompt of ``run`` offered ``tools``; the ``AGENTS.md`` files the
    session's person was not told of yet are announced (``agents_md``). A background
    sub-agent's run announces nothing: nobody follows its session."""
    session = run.session
    place = await surroundings(run.services, session.origin, run.workdir.path)
    leg = run.subagent_of is not None
    new = [f.path for f in place.agents if f.path not in session.agents_shown]
    if new and not leg:
        session.agents_shown.update(new)
        run.emit(ev.AgentsMd, paths=new)
    return system_prompt(place, tools, allow_all=run.allow_all, leg=leg)


def subagent_prompt(place: Surroundings, tools: Sequence[Tool], label: str) -> str:
    """The system prompt of the in-process sub-agent ``label`` (R80)."""
    return system_prompt(place, tools, subagent=label)


# -- AGENTS.md ---------------------------------------------------------------------


def _search_dirs(cwd: str, home: str) -> list[str]:
    """``cwd`` and its parents up to the repository root (the directory holding
    ``.git``), else up to ``home`` or ``/``; nearest first."""
    found: list[str] = []
    here = os.path.realpath(cwd)
    while True:
        found.append(here)
        if os.path.lexists(os.path.join(here, ".git")) or here == home:
            return found
        parent = os.path.dirname(here)
        if parent == here:
            return found
        here = parent


def _read_clamped(fd: int, size: int, limit: int) -> str:
    """The file's text clamped to ``limit`` bytes; beyond twice that only its head
    and tail are read, with the marker `clamp` reads as the bytes between."""
    if size <= 2 * limit:
        data = os.pread(fd, 2 * limit + 1, 0)
    else:
        head = os.pread(fd, limit * 3 // 4 + 4, 0)
        tail_size = limit // 4 + 4
        tail = os.pread(fd, tail_size, size - tail_size)
        gap = elision_marker(size - len(head) - len(tail)).encode()
        data = head + gap + tail
    return clamp(data.decode("utf-8", "replace"), limit)


def find_agents_files(
    cwd: str, hidden: Hidden, *, home: str | None = None, limit: int = AGENTS_MD_BYTES
) -> list[AgentsFile]:
    """The ``AGENTS.md`` files from ``cwd`` up (module docstring), the farthest first,
    clamped to ``limit`` bytes together. Blocking: it reads the file system."""
    if hidden.linked:
        log.warning("no AGENTS.md read: %s", hidden.linked)
        return []
    top = os.path.realpath(home if home is not None else os.path.expanduser("~"))
    base = os.path.realpath(cwd)
    candidates = [
        path
        for path in (os.path.join(d, AGENTS_MD) for d in reversed(_search_dirs(base, top)))
        if os.path.lexists(path)
    ]
    found: list[AgentsFile] = []
    for path in candidates:
        target = resolve_target(path, base)
        refusal = read_refusal(target, hidden)
        if refusal:
            log.warning("%s not read: %s", path, refusal)
            continue
        try:
            fd = open_regular(target.real)
        except (FileRefused, OSError) as exc:
            log.warning("%s not read: %s", path, getattr(exc, "strerror", None) or exc)
            continue
        real = target.real
        try:
            text = _read_clamped(fd, os.fstat(fd).st_size, limit // len(candidates))
        finally:
            os.close(fd)
        if text.strip():
            found.append(AgentsFile(path=real, text=text))
    return found
