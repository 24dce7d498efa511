"""``agentrio completion bash|zsh``: a shell completion script, generated from the
command line's own parsers (issue 30), so it cannot drift from them.

The top-level parser (`agentrio.repl.cli.build_parser`) gives the commands and the REPL's
options; each command's own parser (`command_parsers`) gives its options, which of them
take a value, and the values they accept. A ``DIR`` value completes directory names, a
``FILE`` one file names, one with choices its choices. Install::

    agentrio completion bash > ~/.local/share/bash-completion/completions/agentrio
    agentrio completion zsh > "${fpath[1]}/_agentrio"     # or: source <(agentrio completion zsh)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Final

import attrs

__all__ = ["SHELLS", "Option", "bash_script", "build_parser", "command_parsers", "main", "tree"]

SHELLS: Final = ("bash", "zsh")


@attrs.frozen
class Option:
    """One option (or positional, ``flags`` empty) of a parser."""

    flags: tuple[str, ...]
    help: str
    takes_value: bool
    metavar: str = ""
    choices: tuple[str, ...] = ()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrio completion",
        description=(
            "Print a completion script for the shell: "
            "`agentrio completion bash > ~/.local/share/bash-completion/completions/agentrio`, "
            "or for zsh `source <(agentrio completion zsh)` in ~/.zshrc."
        ),
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    return parser


def main(argv: list[str]) -> int:
    """``argv`` from the command's name on (``["completion", "bash"]``)."""
    args = build_parser().parse_args(argv[1:])
    script = bash_script() if args.shell == "bash" else zsh_script()
    sys.stdout.write(script)
    return 0


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each command of `agentrio.repl.cli.COMMANDS` and its own parser."""
    from agentrio.engine.cli import build_parser as engine_parser
    from agentrio.frontends.setup import build_parser as frontend_parser
    from agentrio.repl.cli import COMMANDS
    from agentrio.repl.control import build_parser as control_parser
    from agentrio.repl.exec_run import build_parser as exec_parser
    from agentrio.repl.logs import build_parser as logs_parser

    found = {**_subcommands(engine_parser()), **_subcommands(control_parser())}
    found["logs"] = logs_parser()
    found["exec"] = exec_parser()
    found["completion"] = build_parser()
    found["telegram"] = frontend_parser("telegram", "Telegram")
    found["discord"] = frontend_parser("discord", "Discord")
    return {name: found[name] for name in COMMANDS}


def _options(parser: argparse.ArgumentParser) -> list[Option]:
    options = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        metavar = action.metavar if isinstance(action.metavar, str) else ""
        options.append(
            Option(
                flags=tuple(action.option_strings),
                help=(action.help or "").replace("%(default)s", str(action.default)),
                takes_value=action.nargs != 0,
                metavar=metavar,
                choices=tuple(str(c) for c in action.choices or ()),
            )
        )
    return options


def tree() -> tuple[list[Option], dict[str, tuple[str, list[Option]]]]:
    """The top-level options, and each command's one line of help and options."""
    from agentrio.repl.cli import COMMANDS
    from agentrio.repl.cli import build_parser as top_parser

    top = [option for option in _options(top_parser()) if option.flags]
    commands = {
        name: (COMMANDS[name][0], _options(parser)) for name, parser in command_parsers().items()
    }
    return top, commands


def _words(options: Iterable[Option]) -> str:
    return " ".join(flag for option in options for flag in option.flags)


def _bash_value_case(options: Iterable[Option]) -> list[str]:
    """``case $prev`` arms: what follows each option that takes a value."""
    arms: dict[str, str] = {}
    for option in options:
        if not option.flags or not option.takes_value:
            continue
        if option.choices:
            reply = f'COMPREPLY=($(compgen -W "{" ".join(option.choices)}" -- "$cur"))'
        elif option.metavar == "DIR":
            reply = 'COMPREPLY=($(compgen -d -- "$cur"))'
        elif option.metavar == "FILE":
            reply = 'COMPREPLY=($(compgen -f -- "$cur"))'
        else:
            reply = "COMPREPLY=()"
        for flag in option.flags:
            arms.setdefault(flag, reply)
    return [f"        {flag}) {reply}; return ;;" for flag, reply in arms.items()]


def bash_script() -> str:
    top, commands = tree()
    everything = top + [option for _, options in commands.values() for option in options]
    takes_value = sorted(
        {flag for option in everything if option.takes_value for flag in option.flags}
    )
    arms = []
    for name, (_, options) in commands.items():
        positional = " ".join(c for option in options if not option.flags for c in option.choices)
        words = f"{_words(options)} {positional}".strip()
        arms.append(f'        {name}) COMPREPLY=($(compgen -W "{words}" -- "$cur")) ;;')
    value_words = "|".join(takes_value)
    lines = [
        "# bash completion for agentrio, generated by `agentrio completion bash`.",
        "_agentrio() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        "    local command='' word i",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        word="${COMP_WORDS[i]}"',
        '        case "$word" in',
        f"            {value_words}) ((i++)) ;;",
        "            -*) ;;",
        '            *) [[ -z "$command" ]] && command="$word" ;;',
        "        esac",
        "    done",
        '    case "$prev" in',
        *_bash_value_case(everything),
        "    esac",
        '    case "$command" in',
        f'        "") COMPREPLY=($(compgen -W "{_words(top)} {" ".join(commands)}" -- "$cur")) ;;',
        *arms,
        "        *) COMPREPLY=() ;;",
        "    esac",
        "}",
        "complete -o default -F _agentrio agentrio",
        "",
    ]
    return "\n".join(lines)


def _zsh_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]")


def _zsh_specs(options: Iterable[Option]) -> list[str]:
    """``_arguments`` specs: ``'(-h --help)'{-h,--help}'[help]'`` and value actions."""
    specs = []
    for option in options:
        if not option.flags:
            if option.choices:
                specs.append(f"'1:{option.metavar or 'value'}:({' '.join(option.choices)})'")
            continue
        described = f"[{_zsh_quote(option.help.split('(')[0].strip() or option.flags[-1])}]"
        value = ""
        if option.takes_value:
            meta = option.metavar or "value"
            if option.choices:
                value = f":{meta}:({' '.join(option.choices)})"
            elif meta == "DIR":
                value = f":{meta}:_files -/"
            elif meta == "FILE":
                value = f":{meta}:_files"
            else:
                value = f":{meta}: "
        if len(option.flags) > 1:
            exclusive = " ".join(option.flags)
            flags = ",".join(option.flags)
            specs.append(f"'({exclusive})'{{{flags}}}'{described}{value}'")
        else:
            specs.append(f"'{option.flags[0]}{described}{value}'")
    return specs


def zsh_script() -> str:
    top, commands = tree()
    described = [f"    '{name}:{_zsh_quote(line)}'" for name, (line, _) in commands.items()]
    arms = []
    for name, (_, options) in commands.items():
        specs = " \\\n                    ".join(_zsh_specs(options))
        arms.append(f"                {name}) _arguments {specs} ;;")
    top_specs = " \\\n    ".join(_zsh_specs(top))
    lines = [
        "#compdef agentrio",
        "# zsh completion for agentrio, generated by `agentrio completion zsh`.",
        "_agentrio() {",
        "  local -a commands",
        "  commands=(",
        *described,
        "  )",
        "  local curcontext=$curcontext state line",
        f"  _arguments -C {top_specs} \\",
        "    '1: :->command' \\",
        "    '*:: :->args'",
        "  case $state in",
        "    command) _describe -t commands 'agentrio command' commands ;;",
        "    args)",
        "      case $line[1] in",
        *arms,
        "      esac ;;",
        "  esac",
        "}",
        'if [[ "${zsh_eval_context[-1]}" == loadautofunc ]]; then',
        '  _agentrio "$@"',
        "else",
        "  compdef _agentrio agentrio",
        "fi",
        "",
    ]
    return "\n".join(lines)
