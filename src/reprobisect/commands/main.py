"""The one entry point, ``reprobisect COMMAND ...`` (``python -m reprobisect``, the console script, nox).

It builds the parser from the chosen command module's ``setup_arguments`` (every module's only for the list of
commands or an unknown one) and runs its ``run_from_args``: a command imports only what it uses, so a machine that
lacks what another command needs (minimize's pyflakes and picire, say) still runs this one. Here, and nowhere
else, a harness error becomes one line on stderr and its own exit code, and Ctrl-C or SIGTERM becomes one line and
exit 130: the command modules only raise.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Callable, Sequence

from reprobisect.commands.options import Subparsers, register_argv_secrets, register_option_secrets
from reprobisect.errors import INTERRUPTED_EXIT, HarnessError
from reprobisect.util.console import neutral_terminal, redacted_terminal

__all__ = ["COMMANDS", "main"]

DESCRIPTION = (
    "Reproduce and bisect bugs between torch, deepspeed and lightning. Start with 'reprobisect repro gan' (the "
    "GAN report on its default cell) or 'reprobisect triage issue.py'; 'reprobisect COMMAND --help' lists a "
    "command's options. From a checkout, nox sessions run the same commands (nox -l)."
)

# Each command and the module that adds and runs it, in the order ``reprobisect --help`` lists them.
COMMANDS: dict[str, str] = {
    "repro": "reprobisect.commands.run_repro",
    "triage": "reprobisect.commands.triage",
    "env": "reprobisect.commands.env",
    "matrix": "reprobisect.commands.matrix",
    "nightly": "reprobisect.commands.nightly",
    "bisect": "reprobisect.commands.bisect",
    "minimize": "reprobisect.commands.minimize",
    "report": "reprobisect.commands.report",
    "wheelhouse": "reprobisect.commands.wheelhouse",
    "bench": "reprobisect.commands.bench",
    "ops": "reprobisect.commands.ops",
    "corpus": "reprobisect.commands.corpus",
}


def _setups(words: Sequence[str]) -> list[Callable[[Subparsers], None]]:
    """The ``setup_arguments`` of the command ``words`` name (the first word that is not an option: the top-level
    parser has no option but ``--help``), or of every command when they name none or one that does not exist."""
    chosen = next((word for word in words if not word.startswith("-")), None)
    names = [chosen] if chosen in COMMANDS else list(COMMANDS)
    setups = []
    for name in names:
        setup: Callable[[Subparsers], None] = importlib.import_module(COMMANDS[name]).setup_arguments
        setups.append(setup)
    return setups


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line as a namespace whose ``run`` is the command's ``run_from_args``. An unknown option
    is reported by the command's own parser (its usage, ``reprobisect CMD: error: ...``), as ``report``'s
    parser always did; argparse alone would report it with the top-level usage."""
    words = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first ``--`` is the script's own (``triage issue.py -- --lr 0.1``), never ours.
    cut = words.index("--") if "--" in words else len(words)
    words, script_args = words[:cut], words[cut + 1 :]
    parser = argparse.ArgumentParser(prog="reprobisect", description=DESCRIPTION)
    parser.set_defaults(error_prefix="reprobisect")  # a command may name itself instead (report does)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for setup in _setups(words):
        setup(subparsers)
    args, unknown = parser.parse_known_args(words)
    if unknown:
        subparsers.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    if script_args and not hasattr(args, "script_args"):
        subparsers.choices[args.command].error(
            f"arguments after '--' ({' '.join(script_args)}) go to a script: triage, matrix --script, "
            "bisect --script, nightly --script"
        )
    if hasattr(args, "script_args"):
        args.script_args = tuple(script_args)
    return args


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM takes the path of Ctrl-C: the running child's process group is stopped, no record is half-written."""
    raise KeyboardInterrupt


def _run(args: argparse.Namespace) -> int:
    """The command's exit code; a harness error prints one line (a traceback with ``--debug``)."""
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except HarnessError as exc:
        if args.debug:
            raise
        print(f"{args.error_prefix}: error: {exc}", file=sys.stderr)
        return exc.return_code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; harness errors print one message and exit with their own code, an interruption exits 130. All
    it prints goes through ``neutral_terminal``: no escape sequence from a commit subject, a tag, a file name or a
    run's output reaches the terminal, whichever line carries it."""
    signal.signal(signal.SIGTERM, _terminate)
    # Started in the background by a non-interactive shell, SIGINT arrives ignored: Ctrl-C must still stop a run.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with redacted_terminal(), neutral_terminal():  # every line printed from here on: redacted, then made inert
        try:
            register_argv_secrets(sys.argv[1:] if argv is None else argv)  # before argparse may quote a word
            args = _parse(argv)
            register_option_secrets(args)  # before anything runs, prints or writes
            return _run(args)
        except KeyboardInterrupt:
            # the runner has stopped the child's process group; finished runs keep their records
            print("reprobisect: interrupted", file=sys.stderr)
            return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
