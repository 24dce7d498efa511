"""Issue 30 "The command line of a 2026 tool": ``agentrio --version``, every command in
``--help`` with one line, "did you mean" for a mistyped command, ``agentrio logs
[-f]``, completion scripts for bash and zsh generated from the parsers, ``make
install``, and a reopen line that works as printed. Real subprocesses and real shells
(bash, zsh) where the behaviour is the process's own.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentrio.repl import cli, control
from agentrio.repl.completion import bash_script, command_parsers, tree, zsh_script

ROOT = Path(__file__).resolve().parents[2]
AGENTRIO = [sys.executable, "-m", "agentrio.repl"]


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTRIO, *argv], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env
    )


def test_version_is_the_installed_one() -> None:
    """Issue 30: ``agentrio --version`` prints the installed version, exit 0."""
    done = _run("--version")
    assert done.returncode == 0
    assert done.stdout == f"agentrio {importlib.metadata.version('agentrio')}\n"


def test_help_lists_every_command_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30: the usage line names every command, and ``--help`` gives each one line
    (its help in `agentrio.repl.cli.COMMANDS`)."""
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    usage = out.split("\n\n")[0]
    assert "{" + ",".join(cli.COMMANDS) + "}" in usage.replace("\n", "").replace(" ", "")
    for name, (line, _) in cli.COMMANDS.items():
        assert len(line) < 90
        assert "\n" not in line
        listed = [row for row in out.splitlines() if row.strip().startswith(f"{name} ")]
        assert listed, name
        assert " ".join(out.split(f"    {name}", 1)[1].split()).startswith(" ".join(line.split()))


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["stauts"],
            "unknown command 'stauts'; did you mean 'status'? (agentrio --help lists them)",
        ),
        (
            ["--home", "/tmp/x", "docter"],
            "unknown command 'docter'; did you mean 'doctor'? (agentrio --help lists them)",
        ),
        (
            ["completoin", "bash"],
            "unknown command 'completoin'; did you mean 'completion'? (agentrio --help lists them)",
        ),
        (["xyzzy"], "unknown command 'xyzzy' (agentrio --help lists them)"),
    ],
)
def test_a_mistyped_command_gets_the_closest_one(argv: list[str], said: str) -> None:
    """Issue 30: a word that is no command says which one was probably meant, exit 2
    (not "unrecognized arguments")."""
    done = _run(*argv)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"agentrio: error: {said}"


def test_home_before_a_command_is_handed_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``agentrio --home DIR status`` is ``agentrio status --home DIR``."""

    calls: list[list[str]] = []
    monkeypatch.setattr(control, "main", lambda argv: calls.append(argv) or 3)
    assert cli.main(["--home", "/tmp/h", "status", "--json"]) == 3
    assert calls == [["status", "--json", "--home", "/tmp/h"]]


# ---------------------------------------------------------------------- logs


def test_logs_prints_the_last_lines_and_says_when_there_is_none(tmp_path: Path) -> None:
    """Issue 30: ``agentrio logs`` prints the last lines of ``<home>/daemon.log``
    (``-n``); without a log it says where it would be and how to get one, exit 1."""
    done = _run("logs", "--home", str(tmp_path))
    assert done.returncode == 1
    assert done.stderr == (
        f"agentrio logs: no log yet at {tmp_path / 'daemon.log'} (a daemon writes it once "
        "started: agentrio start)\n"
    )
    (tmp_path / "daemon.log").write_text("".join(f"line {n}\n" for n in range(300)))
    done = _run("logs", "-n", "2", "--home", str(tmp_path))
    assert (done.returncode, done.stdout) == (0, "line 298\nline 299\n")
    assert _run("logs", "--home", str(tmp_path)).stdout.splitlines()[0] == "line 200"
    assert len(_run("logs", "-n", "0", "--home", str(tmp_path)).stdout.splitlines()) == 300


def _read_until(process: subprocess.Popen[bytes], wanted: bytes, deadline_s: float = 20) -> bytes:
    """What the process printed, read until ``wanted`` is in it (a deadline bounds a
    failure; it times nothing)."""
    assert process.stdout is not None
    seen = b""
    os.set_blocking(process.stdout.fileno(), False)
    end = time.monotonic() + deadline_s
    while wanted not in seen:
        assert time.monotonic() < end, f"no {wanted!r} in {seen!r}"
        chunk = process.stdout.read()
        seen += chunk or b""
        if not chunk:
            time.sleep(0.02)
    return seen


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_logs_follow_prints_what_comes_and_stops_cleanly(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """Issue 30: ``agentrio logs -f`` waits for a log that is not there yet, prints
    lines as they are appended, starts over on a log that was replaced (a new daemon's),
    and Ctrl+C (or SIGTERM) ends it with exit 0 and no traceback."""
    log = tmp_path / "daemon.log"
    process = subprocess.Popen(
        [*AGENTRIO, "logs", "-f", "--home", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        log.write_text("first\n")
        _read_until(process, b"first\n")
        with log.open("a") as f:
            f.write("second\n")
        _read_until(process, b"second\n")
        replacement = tmp_path / "new.log"
        replacement.write_text("fresh start\n")
        replacement.replace(log)
        _read_until(process, b"fresh start\n")
        process.send_signal(stop)
        assert process.wait(timeout=20) == 0
        assert process.stderr is not None
        assert b"Traceback" not in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


# ---------------------------------------------------------------- completion


def test_completion_knows_every_command_and_option_of_the_parsers() -> None:
    """Issue 30: the scripts come from the parsers: every command, and every option of
    each command's own parser, is in both."""
    top, commands = tree()
    assert list(commands) == list(cli.COMMANDS)
    assert {"--version", "--home", "--session"} <= {f for o in top for f in o.flags}
    bash, zsh = bash_script(), zsh_script()
    for name, parser in command_parsers().items():
        for action in parser._actions:
            for flag in action.option_strings:
                assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", bash), (name, flag)
                assert f"{flag}[" in zsh or f"{{{flag}," in zsh or f",{flag}}}" in zsh, (
                    name,
                    flag,
                )
    assert "--port" in dict(
        (o.flags[-1], o) for o in commands["daemon"][1] if o.flags
    )  # the daemon's own parser, not a copy


def _bash_complete(script: Path, line: str) -> list[str]:
    """What bash completes for the words of ``line`` (the last may be partial)."""
    words = line.split(" ")
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_agentrio\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=script.parent,
    )
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


def test_bash_completes_commands_options_and_values(tmp_path: Path) -> None:
    """Issue 30: in bash, ``agentrio st`` offers status, stop and start; a command's
    options come from its parser; ``completion`` offers the shells; ``--home``
    completes directories; a value after ``--home`` is not taken for the command."""
    script = tmp_path / "agentrio.bash"
    done = _run("completion", "bash")
    assert done.returncode == 0
    script.write_text(done.stdout)
    (tmp_path / "homes").mkdir()
    (tmp_path / "a-file").write_text("")
    assert _bash_complete(script, "agentrio st") == ["status", "stop", "start"]
    assert _bash_complete(script, "agentrio status --") == ["--help", "--home", "--json"]
    assert _bash_complete(script, "agentrio completion ") == ["-h", "--help", "bash", "zsh"]
    assert _bash_complete(script, "agentrio --home hom") == ["homes"]
    assert _bash_complete(script, "agentrio --home homes logs -") == [
        "-h",
        "--help",
        "-f",
        "--follow",
        "-n",
        "--lines",
        "--home",
    ]
    assert _bash_complete(script, "agentrio daemon --port ") == []


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_script_loads_registers_and_offers_the_commands(tmp_path: Path) -> None:
    """Issue 30: the zsh script parses, ``source``-ing it after compinit registers
    ``_agentrio`` for agentrio, and it offers every command with its line and a
    command's own options (``_describe`` and ``_arguments`` stubbed to print what they
    are given)."""
    script = tmp_path / "_agentrio"
    script.write_text(_run("completion", "zsh").stdout)
    assert subprocess.run(["zsh", "-n", str(script)], timeout=30).returncode == 0
    program = (
        f"autoload -Uz compinit && compinit -u -d {tmp_path}/zcompdump\n"
        f"source {script}\n"
        "print -r -- registered=${_comps[agentrio]}\n"
        "calls=0\n"
        "_arguments() {\n"
        "  (( calls++ ))\n"
        "  if (( calls == 1 )); then state=$WANT; line=(daemon); return 0; fi\n"
        '  print -rl -- "$@"\n'
        "}\n"
        '_describe() { print -rl -- "${(@P)4}"; }\n'
        "WANT=command _agentrio\n"
        "calls=0; WANT=args _agentrio\n"
    )
    done = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "registered=_agentrio"
    for name, (line, _) in cli.COMMANDS.items():
        assert f"{name}:{line}" in out
    assert any(row.startswith("--port[") for row in out), out
    assert "--home[agentrio home]:DIR:_files -/" in out


# ------------------------------------------------------------- on PATH, reopen


def test_make_install_puts_agentrio_on_path_and_the_reopen_line_uses_it(tmp_path: Path) -> None:
    """Issue 30: ``make install`` links ``agentrio`` into ~/.local/bin (here BINDIR), the
    link runs this install, and with it on PATH the REPL's reopen line says plain
    ``agentrio``; without it, the script's absolute path, which works from any shell.
    ``make uninstall`` removes only its own link."""
    bindir = tmp_path / "bin"
    made = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "install", f"BINDIR={bindir}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    assert f"{bindir} is not on PATH" in made.stdout
    link = bindir / "agentrio"
    assert link.resolve() == (Path(sys.executable).parent / "agentrio").resolve()
    bare = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    version = subprocess.run(
        ["agentrio", "--version"], capture_output=True, text=True, env=bare, timeout=60
    )
    assert version.stdout.startswith("agentrio ")
    probe = "from agentrio.repl.launch import agentrio_command; print(agentrio_command())"
    said = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=bare, cwd=ROOT
    )
    assert said.stdout == "agentrio\n"
    bare["PATH"] = "/usr/bin:/bin"
    said = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=bare, cwd=ROOT
    )
    assert said.stdout == f"{Path(sys.executable).parent / 'agentrio'}\n"
    removed = subprocess.run(
        ["make", "-s", "uninstall", f"BINDIR={bindir}"], cwd=ROOT, capture_output=True, text=True
    )
    assert removed.returncode == 0
    assert not link.exists()


def _readme_commands() -> list[list[str]]:
    """The ``agentrio …`` and ``make …`` commands of the README's ``sh`` blocks, as words
    (up to a shell operator or comment)."""
    import shlex

    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    found = []
    for block in blocks:
        for line in block.splitlines():
            line = line.split("#")[0].replace("<(", " ").replace(")", " ")
            words = shlex.split(line)
            for start, word in enumerate(words):
                if word in ("agentrio", "make"):
                    rest = words[start:]
                    cut = [i for i, w in enumerate(rest) if w in (">", "|", "&&", ";")]
                    found.append(rest[: cut[0]] if cut else rest)
                    break
    return found


def test_every_command_the_readme_shows_exists_as_printed() -> None:
    """Issue 30 acceptance: each ``agentrio …`` of the README is a command whose own
    parser takes those words, and each ``make …`` a target of the Makefile."""
    from agentrio.engine.cli import build_parser as engine_parser
    from agentrio.repl.control import build_parser as control_parser

    commands = _readme_commands()
    text = (ROOT / "README.md").read_text()
    commands += [["make", target] for target in re.findall(r"`make (\w[\w-]*)`", text)]
    assert ["make", "install"] in commands
    assert ["agentrio", "doctor"] in commands
    assert ["agentrio", "completion", "bash"] in commands
    parsers = command_parsers()
    makefile = (ROOT / "Makefile").read_text()
    for words in commands:
        if words[0] == "make":
            assert re.search(rf"^{re.escape(words[1])}:", makefile, flags=re.M), words
            continue
        if len(words) == 1:
            continue  # the REPL itself
        name, rest = words[1], words[2:]
        assert name in cli.COMMANDS, words
        if name in ("daemon", "doctor"):
            engine_parser().parse_args([name, *rest])
        elif name in ("status", "stop", "start"):
            control_parser().parse_args([name, *rest])
        else:
            parsers[name].parse_args(rest)
