"""The ```bash commands of the README, CONTRIBUTING and docs/: the cheap ones run, every other one parses.

A line of a block is a command (a trailing backslash joins the next line, ``&&`` chains several, ``#`` starts a
comment). Running them all would build cells and run repros for hours, so:

- ``nox -l`` runs for real, and ``... -- --help`` prints the command's help in-process;
- every ``nox -s NAME`` names a session of noxfile.py (read from its source, and checked against ``nox -l``);
- every ``nox -s NAME -- ARGS`` of a session that calls the harness, every ``reprobisect ...`` and
  ``python3 -m reprobisect ...`` passes the harness's own parser with the words the session would give it (parse
  only: nothing is built or run);
- a command that is not the harness's (pip, venv, ``export``) must be one this file knows, so a new kind of
  command in the README gets a check here instead of passing unseen.
"""

from __future__ import annotations

import ast
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from reprobisect.commands.main import _parse
from tests.docs.markdown import DOCS, README, ROOT, split_fences

NOXFILE = ROOT / "noxfile.py"
CI_RUN = ROOT / ".ci" / "run"
# Words that open a command the harness does not own: a machine's setup, a shell's bookkeeping, other tools.
NOT_OURS = (
    ("python3", "-m", "venv"),
    ("pip", "install"),
    (".",),
    ("export",),
    ("mkdir",),
    ("jq",),
    ("pytest",),
)
_OPERATORS = {"&&", "||", ";", "|"}
_REDIRECTS = {">", ">>", "<", "2>"}


@dataclass(frozen=True)
class Command:
    """One command of a ```bash block, as the shell would split it (variables left unexpanded)."""

    words: tuple[str, ...]
    where: str  # page:line, for messages

    def __str__(self) -> str:
        return shlex.join(self.words)


def bash_commands(page: Path) -> list[Command]:
    """Every command of every ```bash block of a page."""
    _, blocks = split_fences(page.read_text(encoding="utf-8"))
    found = []
    for block in (b for b in blocks if b.lang in ("bash", "sh", "shell")):
        for offset, line in _logical_lines(block.text):
            where = f"{page.relative_to(ROOT).as_posix()}:{block.line + 1 + offset}"
            found.extend(Command(tuple(words), where) for words in _split(line))
    return found


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Lines with backslash continuations joined, each with the offset of its first physical line."""
    joined: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for offset, line in enumerate(text.splitlines()):
        start, head = pending if pending is not None else (offset, "")
        if line.rstrip().endswith("\\"):
            pending = (start, head + line.rstrip()[:-1] + " ")
        else:
            pending = None
            joined.append((start, head + line))
    if pending is not None:
        joined.append(pending)
    return joined


def _split(line: str) -> list[list[str]]:
    """A line as the shell splits it into commands; redirections dropped, ``$(...)`` kept as one word."""
    line = re.sub(r"\$\([^()]*\)", "SUBST", line)  # `$(date +%F)`: a word of its own, not a command here
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    skip_next = False
    for token in lexer:
        if skip_next:
            skip_next = False
        elif token in _OPERATORS:
            commands.append([])
        elif token in _REDIRECTS:
            skip_next = True
        else:
            commands[-1].append(token)
    return [words for words in commands if words]


def session_commands() -> dict[str, tuple[str, ...] | None]:
    """Each nox session of noxfile.py -> the ``reprobisect`` words it runs before the user's (None: not the harness).

    Read from the source, so that this test needs no nox: ``_harness(session, "repro", "gan")`` gives
    ``repro gan --base-python PY``, ``session.run("reprobisect", "report", ...)`` gives ``report``.
    """
    tree = ast.parse(NOXFILE.read_text(encoding="utf-8"))
    sessions: dict[str, tuple[str, ...] | None] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(_is_session(d) for d in node.decorator_list):
            sessions[node.name] = _harness_words(node)
    return sessions


def _is_session(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "session"


def _harness_words(function: ast.FunctionDef) -> tuple[str, ...] | None:
    for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
        if isinstance(call.func, ast.Name) and call.func.id == "_harness":
            words = _constants(call.args[1:])
            return None if words is None else (*words, "--base-python", sys.executable)
        is_run = isinstance(call.func, ast.Attribute) and call.func.attr == "run"
        if is_run and call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value == "reprobisect":
            return _constants(call.args[1:])
    return None


def _constants(args: list[ast.expr]) -> tuple[str, ...] | None:
    """The leading string constants of a call's arguments (``*session.posargs`` ends them); None if a name is
    among them (``cell``'s id): such a session cannot be checked from its source alone."""
    words = []
    for arg in args:
        if isinstance(arg, ast.Starred):
            break
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            return None
        words.append(arg.value)
    return tuple(words)


SESSIONS = session_commands()
README_COMMANDS = bash_commands(README)
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
DOCS_COMMANDS = [command for page in [CONTRIBUTING, *sorted(DOCS.glob("*.md"))] for command in bash_commands(page)]


@dataclass(frozen=True)
class Harness:
    """What a command asks of the harness: the argv of ``reprobisect`` (None: no harness command) and the session."""

    argv: tuple[str, ...] | None
    session: str | None
    lists: bool = False  # nox -l


def harness_call(command: Command) -> Harness:
    """The harness argv and session a README command means; fails on a command this test does not know."""
    words = command.words
    if words[0] == "nox":
        return _nox_call(command)
    if words[0] == "reprobisect":
        return Harness(argv=words[1:], session=None)
    if words[:3] == ("python3", "-m", "reprobisect"):
        return Harness(argv=words[3:], session=None)
    if any(words[: len(prefix)] == prefix for prefix in NOT_OURS):
        return Harness(argv=None, session=None)
    if words[0] in ("python", "python3") and len(words) > 1 and words[1].startswith("tools/"):
        assert (ROOT / words[1]).is_file(), f"{command.where}: {command}: no such tool in the repository"
        return Harness(argv=None, session=None)  # a maintainer's script: its own tests check its options
    pytest.fail(f"{command.where}: {command}: a command this test cannot check; teach it (NOT_OURS or a parser)")


def _nox_call(command: Command) -> Harness:
    words = list(command.words[1:])
    cut = words.index("--") if "--" in words else len(words)
    options, posargs = words[:cut], words[cut + 1 :]
    session, lists, i = None, False, 0
    while i < len(options):
        if options[i] in ("-s", "--session", "-e") and i + 1 < len(options):
            session, i = options[i + 1], i + 2
        elif options[i] in ("-l", "--list", "--json"):
            lists, i = True, i + 1
        else:
            pytest.fail(f"{command.where}: {command}: nox option {options[i]!r} is not one this test knows")
    if session is not None and session not in SESSIONS:
        pytest.fail(f"{command.where}: {command}: noxfile.py has no session {session!r}: {sorted(SESSIONS)}")
    words_of = SESSIONS.get(session) if session is not None else None
    argv = None if words_of is None or lists else (*words_of, *posargs)
    return Harness(argv=argv, session=session, lists=lists)


def _id(command: Command) -> str:
    return f"{command.where} {command}"[:120]


def test_the_readme_has_commands_and_the_quick_start_two() -> None:
    """The quick start stays two commands on a fresh machine: the GAN repro and the tests."""
    sessions = [harness_call(command).session for command in README_COMMANDS]
    assert "repro_gan" in sessions and "tests" in sessions


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    """.ci/run installs what the tests need and then runs the README's test command: the two must not part."""
    ci_commands = [line.strip() for line in CI_RUN.read_text().splitlines() if line.strip().startswith("nox -s ")]
    assert ci_commands, ".ci/run runs no nox session"
    # which interpreter nox makes the session's venv from is CI's choice (the oldest here, issue #54), not the command
    last = re.sub(r' --force-python "\$\w+"', "", ci_commands[-1])
    assert last in {str(command) for command in README_COMMANDS}, (ci_commands[-1], README_COMMANDS)


@pytest.mark.parametrize("command", README_COMMANDS + DOCS_COMMANDS, ids=_id)
def test_every_harness_command_parses(command: Command, capsys: pytest.CaptureFixture[str]) -> None:
    """Parse only: the words go through the harness's parser as the session would pass them; nothing runs."""
    call = harness_call(command)
    if call.argv is None:
        return
    try:
        args = _parse(list(call.argv))
    except SystemExit as exc:
        err = capsys.readouterr().err.strip().splitlines()
        helped = "--help" in call.argv or "-h" in call.argv
        assert helped and exc.code == 0, f"{command.where}: {command}\n  reprobisect {shlex.join(call.argv)}\n  {err}"
        return
    assert callable(args.run)


def test_help_commands_print_the_commands_help(capsys: pytest.CaptureFixture[str]) -> None:
    """``nox -s X -- --help`` in the README shows the help of the command behind the session."""
    helps = [c for c in README_COMMANDS if "--help" in c.words and harness_call(c).argv is not None]
    for command in helps:
        argv = harness_call(command).argv
        assert argv is not None
        with pytest.raises(SystemExit) as exc:
            _parse(list(argv))
        assert exc.value.code == 0
        assert f"usage: reprobisect {argv[0]}" in capsys.readouterr().out


def test_the_sessions_read_from_noxfile_are_those_nox_lists() -> None:
    """``nox -l`` for real (a few seconds: it imports the noxfile and reads matrix.yaml's cells)."""
    nox = shutil.which("nox")
    if nox is None:
        pytest.skip("nox is not on PATH (pip install nox); the sessions were checked against noxfile.py's source")
    if not any(harness_call(c).lists for c in README_COMMANDS):
        pytest.fail("the README no longer shows `nox -l`: keep this test's real run in step with it")
    done = subprocess.run([nox, "-l"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    # "* repro_gan -> ..." (selected by default) or "- cell(cell='torch-...') -> ..."
    listed = {m.group(1) for m in re.finditer(r"^[*-] (\w+)", done.stdout, flags=re.MULTILINE)}
    assert listed == set(SESSIONS), done.stdout


def test_the_splitter_reads_the_shell_as_the_shell_does() -> None:
    line = "mkdir -p out && nox -s report -- --merge 'a b'/* > x.txt  # a comment"
    assert _split(line) == [["mkdir", "-p", "out"], ["nox", "-s", "report", "--", "--merge", "a b/*"]]
    assert [(offset, line.split()) for offset, line in _logical_lines("a \\\n  b\nc")] == [(0, ["a", "b"]), (2, ["c"])]
    assert _split("echo reports/$(date +%F)") == [["echo", "reports/SUBST"]]
