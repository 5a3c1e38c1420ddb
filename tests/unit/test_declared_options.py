"""Each command-line option declared once (issue #53, item 1; ``commands/declared.py``).

Every declaration of a flag under ``src/`` — a ``Flag.of("--x", ...)`` or a plain ``add_argument("--x", ...)`` —
is found by reading the source. A flag several commands take with the same meaning is one declaration, its help
given per command. The same spelling twice is allowed only for two different options of two commands, which
differ in kind (action, type, default, choices, ...) and are listed here with what each means: a new one fails
until it is merged or said."""

from __future__ import annotations

import argparse
import ast
import dataclasses
from collections import defaultdict
from pathlib import Path

import pytest

from reprobisect.commands.declared import Flag, add_fields, as_tuple, declared_flags, option, read_fields
from reprobisect.commands.timing_options import TimingOptions, add_timing
from tests.conftest import ROOT

SRC = ROOT / "src" / "reprobisect"
TWO_OPTIONS = {
    "--backend": "matrix, triage, ...: auto, cuda or cpu forms; corpus: cpu or cuda entries (no auto)",
    "--bad": "bisect: one release or revision; minimize: the failing cell's pins, PACKAGE==VERSION, repeatable",
    "--good": "bisect: one release or revision; minimize: the passing cell's pins, PACKAGE==VERSION, repeatable",
    "--corpus": "nightly: corpus entries to run beside the repros, repeatable; corpus: the folder of entries",
    "--dest": "wheelhouse: the folder to fill (.whl); report: where the report goes (OUT/report)",
    "--fix": "matrix, triage, ...: the fixes to run, several; bisect: the one fix each probe runs (none)",
    "--form": "matrix, triage, ...: the forms to run, several; bisect, minimize: the one form searched",
    "--git": "triage, corpus: a clone per package (PACKAGE=CLONE), repeatable; bisect, nightly: one clone",
    "--repro": "matrix, nightly: repros to run, several; bisect: the one repro searched",
}
_NOT_KIND = {"help", "metavar", "dest"}


def _declarations(root: Path) -> dict[str, list[tuple[str, str]]]:
    """Each flag's declarations under ``root``: (where, its kind: the keywords argparse gets, but its words)."""
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr not in ("add_argument", "of"):
                continue
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
            kind = ", ".join(sorted(f"{k.arg}={ast.unparse(k.value)}" for k in node.keywords if k.arg not in _NOT_KIND))
            for flag in flags:
                found[flag].append((f"{path.relative_to(root)}:{node.lineno}", kind))
    return found


def test_each_flag_is_declared_in_one_place() -> None:
    declarations = _declarations(SRC)
    assert len(declarations) > 80  # the walk sees the options (--out, --jobs, --slower-than, ...)
    assert {"--out", "--jobs", "--slower-than", "--shim", "--git", "--fix-env"} <= declarations.keys()
    twice = {flag: places for flag, places in declarations.items() if len(places) > 1}
    same_kind = {flag: places for flag, places in twice.items() if len({kind for _, kind in places}) < len(places)}
    assert same_kind == {}, "one option declared twice: make it one Flag (commands/options.py) and give its help"
    assert sorted(twice) == sorted(TWO_OPTIONS), "a spelling two options share: merge them, or say here what each is"


def test_the_check_finds_a_flag_declared_twice(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text('p.add_argument("--x", action="store_true", help="one")\n')
    (tmp_path / "b.py").write_text('X = Flag.of("--x", action="store_true")\nY = Flag.of("--y", type=int)\n')
    found = _declarations(tmp_path)
    assert [kind for _, kind in found["--x"]] == ["action='store_true'"] * 2 and len(found["--y"]) == 1


_A = Flag.of("--alpha", type=int, default=3, metavar="N")
_B = Flag.of("--beta", action="append", read=as_tuple)
_C = Flag.of("--gamma", action="store_true")
_D = Flag.of("--delta", action="append", default=[], read=tuple)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Options:
    alpha: int = option(_A, help="a number", group="numbers")
    beta: tuple[str, ...] = option(_B, help="repeatable")
    gamma: bool = option(_C, help="a switch", group="numbers")
    delta: tuple[str, ...] = option(_D, help="repeatable, default empty")
    made: str = "not an option"


def _parse(*words: str, skip: tuple[str, ...] = ()) -> _Options:
    parser = argparse.ArgumentParser()
    add_fields(parser, _Options, skip=skip)
    return read_fields(_Options, parser.parse_args(list(words)), made="given")


def test_a_declared_class_is_its_parser_and_its_object() -> None:
    assert _parse() == _Options(made="given")
    assert _Options() == _Options(alpha=3, beta=(), gamma=False, delta=())
    got = _parse("--alpha", "7", "--beta", "x", "--beta", "y", "--gamma", "--delta", "z")
    assert got == _Options(alpha=7, beta=("x", "y"), gamma=True, delta=("z",), made="given")
    assert _parse("--delta", "1") == _parse("--delta", "1")  # a parse never adds to the default list
    assert declared_flags(_Options) == {"alpha": _A, "beta": _B, "gamma": _C, "delta": _D}


def test_options_are_listed_in_the_class_s_order_each_group_once() -> None:
    parser = argparse.ArgumentParser()
    add_fields(parser, _Options, help={"beta": "replaced for this command"})
    groups = {g.title: [a.dest for a in g._group_actions] for g in parser._action_groups}
    assert groups["numbers"] == ["alpha", "gamma"]
    assert [a.help for a in parser._actions if a.dest == "beta"] == ["replaced for this command"]


@pytest.mark.parametrize("words", [["--alpha", "x"], ["--gamma", "1"], ["--alpha"], ["--nope"]])
def test_a_wrong_value_is_argparse_s_usage_error(words: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse(*words)
    assert exited.value.code == 2


def test_a_flag_the_command_does_not_take_keeps_its_default() -> None:
    assert _parse(skip=("alpha",)).alpha == 3
    with pytest.raises(SystemExit):
        _parse("--alpha", "4", skip=("alpha",))
    parser = argparse.ArgumentParser()
    add_timing(parser, compare_with=False)  # triage and the nightly compare with their first release
    assert TimingOptions.from_args(parser.parse_args(["--slower-than", "10"])).compare_with == "good"


def test_options_that_exclude_each_other_are_refused_together() -> None:
    from reprobisect.commands.main import _parse
    from reprobisect.commands.ops import OpsOptions

    assert OpsOptions.from_args(_parse(["ops", "--envs", "e", "--max-gib", "2"])).max_gib == 2
    with pytest.raises(SystemExit) as exited:
        _parse(["ops", "--envs", "e", "--clear", "--max-gib", "2"])
    assert exited.value.code == 2


def test_every_option_of_a_command_is_a_flag() -> None:
    """Outside commands/declared.py no command adds an argument by hand: each is a ``Flag``, declared once."""
    by_hand = [
        f"{path.name}:{node.lineno}"
        for path in sorted((SRC / "commands").glob("*.py"))
        if path.name != "declared.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
    ]
    assert by_hand == []
