"""No command module imports another (issue #53, item 1): a group of options several commands share lives in a
module of its own below the commands (``options.py``, ``script_options.py``, ``engine_options.py``,
``run_options.py``, ``timing_options.py``, ``triage_options.py``), and what a session ends with in ``output.py``.
``corpus`` triages every entry as a maintainer would: it reads the entry's command line with ``triage_options.py``
and runs ``triage_flow.py``, the work below the ``triage`` command, not the command."""

from __future__ import annotations

import ast
from pathlib import Path

COMMANDS = Path(__file__).resolve().parents[2] / "src" / "reprobisect" / "commands"


def _is_command(path: Path) -> bool:
    """A command module: it adds a subcommand (``setup_arguments``) and runs it (``run_from_args``)."""
    names = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}
    return {"setup_arguments", "run_from_args"} <= names


def commands_imported(path: Path, commands: set[str]) -> set[str]:
    """The command modules ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("reprobisect.commands."):
                found.add(node.module.rsplit(".", 1)[1])
            elif node.module == "reprobisect.commands":
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.rsplit(".", 1)[1] for a in node.names if a.name.startswith("reprobisect.commands."))
    return found & commands


def test_no_command_module_imports_another() -> None:
    modules = {p.stem: p for p in COMMANDS.glob("*.py")}
    commands = {name for name, path in modules.items() if _is_command(path)}
    assert {"matrix", "triage", "bisect", "nightly", "corpus", "minimize"} <= commands  # the check sees them
    found = {(name, other) for name in commands for other in commands_imported(modules[name], commands) - {name}}
    assert found == set()


def test_the_check_sees_an_import_of_a_command(tmp_path: Path) -> None:
    module = tmp_path / "x.py"
    module.write_text(
        "from reprobisect.commands.bisect import a\ndef f():\n    from reprobisect.commands import matrix\n"
    )
    assert commands_imported(module, {"bisect", "matrix", "triage"}) == {"bisect", "matrix"}
