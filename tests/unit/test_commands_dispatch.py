"""``reprobisect COMMAND`` imports only that command's module (commands/main.py): its table names each command and
the module that adds it, and a command that is not asked for is not imported."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

from reprobisect.commands.main import COMMANDS, _parse
from tests.conftest import ROOT


def test_each_module_adds_the_command_the_table_names_in_the_listed_order() -> None:
    parser = argparse.ArgumentParser(prog="reprobisect")
    subparsers = parser.add_subparsers(dest="command")
    for module in COMMANDS.values():
        importlib.import_module(module).setup_arguments(subparsers)
    assert list(subparsers.choices) == list(COMMANDS)


def test_a_command_runs_its_own_module_only() -> None:
    code = (
        "import sys\n"
        "from reprobisect.commands.main import _parse\n"
        "args = _parse(['ops', '--envs', 'x'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('reprobisect.commands.') and m != 'reprobisect.commands.main'))\n"
        "print('pyflakes' in sys.modules, 'pandas' in sys.modules)\n"
    )
    env_path = str(ROOT / "src")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONPATH": env_path}
    )
    modules, heavy = done.stdout.splitlines()
    # ops and the modules every option comes from (the shared flags, the declaration): no other command
    assert modules == "['reprobisect.commands.declared', 'reprobisect.commands.ops', 'reprobisect.commands.options']"
    assert heavy == "False False"


def test_an_unknown_command_still_lists_every_command(capsys: object) -> None:
    import pytest

    with pytest.raises(SystemExit):
        _parse(["no-such-command"])
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert all(name in err for name in COMMANDS)
