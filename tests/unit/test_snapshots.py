"""Outputs byte for byte on fixed inputs (issue #53: "behaviour unchanged ... before and after each step").

Each case turns committed inputs (real harness records, a real bisection's and a real grid search's JSON) into what
a maintainer reads — the report command's files and terminal, the triage answer, the bisect command's lines, a
grid's Markdown and terminal — and compares them with the snapshot under tests/resources/snapshots/<case>/. A
refactor that changes a byte fails here, naming the file and the first line that differs.

A change of output on purpose is written back with ``REPROBISECT_SNAPSHOTS=update`` and reviewed as a diff. Only
what is the harness's own is kept: the temporary folder is ``<tmp>``, and a plot embedded in the HTML report is
``<png>`` (its pixels are matplotlib's, which differ between releases).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import itertools
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from reprobisect.bisect.answer import answer_markdown, sweep_answers
from reprobisect.commands.bisect import _print_report
from reprobisect.commands.main import COMMANDS, main
from reprobisect.model.bisect_report import BisectReport
from reprobisect.model.culprit import Commit, Culprit, SearchTarget
from reprobisect.model.grid_report import GridReport
from reprobisect.model.store import Store
from reprobisect.report.grid_view import grid_markdown, grid_terminal
from tests.conftest import ROOT

SNAPSHOTS = ROOT / "tests" / "resources" / "snapshots"
RECORDS = ROOT / "tests" / "resources" / "records"
GRID = ROOT / "reports" / "cpu" / "2026-12-07-interaction-elastic-culprits" / "ia-ds-elastic-socket-port"
GRID_JSON = GRID / "grid-script-issue-cpu-deepspeed-deepspeed-torch.json"
_PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")

Outputs = dict[str, str]


def _normal(text: str, tmp: Path) -> str:
    return _PNG.sub("data:image/png;base64,<png>", text.replace(str(tmp), "<tmp>"))


def _report_command(tmp: Path) -> Outputs:
    """``reprobisect report`` of a real bisection's probes (four releases) against a baseline, Markdown printed."""
    shutil.copytree(RECORDS / "bisect", tmp / "bisect")
    shutil.copytree(RECORDS / "baseline", tmp / "baseline")
    argv = ["report", "--out", str(tmp / "bisect"), "--baseline", str(tmp / "baseline"), "--dest", str(tmp / "out")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main([*argv, "--markdown"])
    outputs = {"stdout.txt": f"exit {code}\n{printed.getvalue()}"}
    for name in ("report.md", "report.html", "runs.csv", "changes.csv", "timings.csv"):
        outputs[name] = (tmp / "out" / name).read_text(encoding="utf-8")
    return outputs


def _triage_answer(tmp: Path) -> Outputs:
    """The triage answer over the releases' records, with a culprit named at one change and none at another."""
    answers = sweep_answers(list(Store(RECORDS / "releases").iter_records()))
    assert answers, "the releases' records make no answer"
    sections = []
    for answer in answers:
        culprits = [
            Culprit(
                last=t.last,
                first=t.first,
                kind="introduced" if t.before.outcome == "PASS" else "fixed",
                target=SearchTarget(outcome=t.after.outcome, signature_id=t.after.signature_id),
                commit=Commit(sha="b418cf6c1" + "0" * 31, subject="Training multiple models (#7018)",
                              pull_request="deepspeedai/DeepSpeed#7018") if i == 0 else None,
                why=None if i == 0 else "the clone has no tag of deepspeed 0.19.8",
                rerun=f"reprobisect bisect --axis deepspeed --good {t.last} --bad {t.first}" if i == 0 else None,
                release_sources=("0.17.0 as published is commit 819af0e5940b, not its tag v0.17.0",) if i == 0 else (),
            )
            for i, t in enumerate(answer.transitions)
        ]  # fmt: skip
        sections.append(answer_markdown(answer, culprits, rerun="reprobisect triage gan --deepspeed 0.16.4,0.17.0"))
        sections.append(answer_markdown(answer, [], culprit_hint="add --git CLONE"))
    return {"answers.md": "\n".join(sections)}


def _bisect_lines(tmp: Path) -> Outputs:
    """The bisect command's lines for a real all-transitions bisection, and with a culprit per transition."""
    [path] = (RECORDS / "bisect").glob("bisect-*.json")
    report = BisectReport.from_json(json.loads(path.read_text()), where=str(path))
    first = report.transitions[0]
    culprit = Culprit(
        last=first.last,
        first=first.first,
        kind="introduced",
        target=SearchTarget(outcome=first.after.outcome, signature_id=first.after.signature_id),
        commit=Commit(
            sha="c" * 40, subject="Change the step\x1b[2J (#7000)", pull_request="deepspeedai/DeepSpeed#7000"
        ),
        skipped_between=("d" * 40,),
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        _print_report(report, Path("bisect.json"), all_transitions=True)
        _print_report(report.with_culprits([culprit]), Path("bisect.json"), all_transitions=True)
    return {"stdout.txt": printed.getvalue()}


def _grid_views(tmp: Path) -> Outputs:
    """A real grid search's answer (DeepSpeed × torch, with the commit behind its edge) in Markdown and in words."""
    data = GridReport.from_json(json.loads(GRID_JSON.read_text()), where=str(GRID_JSON))
    return {
        "grid.md": grid_markdown(data, name=GRID_JSON.name, rerun="reprobisect triage issue.py"),
        "grid.txt": "\n".join(grid_terminal(data)) + "\n",
    }


CASES: dict[str, Callable[[Path], Outputs]] = {
    "report-command": _report_command,
    "triage-answer": _triage_answer,
    "bisect-lines": _bisect_lines,
    "grid-views": _grid_views,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_output_is_the_snapshot_byte_for_byte(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    _compare(case, {name: _normal(text, tmp_path) for name, text in CASES[case](tmp_path).items()})


def test_each_command_s_options_are_the_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every option of every command as argparse holds it — flags, group, kind, type, default, choices, metavar,
    help — so that moving an option's declaration (commands/declared.py) changes nothing a user sees or gets. The
    structure, not ``--help``'s text, whose layout differs between Python releases."""
    monkeypatch.setenv("REPROBISECT_ENVS", "/cells")  # the defaults that say where they come from
    monkeypatch.setenv("REPROBISECT_BASE_PYTHON", "python3")
    monkeypatch.delenv("REPROBISECT_WHEELHOUSE", raising=False)
    monkeypatch.chdir(ROOT)
    options = {name: _command_options(name) for name in COMMANDS}
    _compare("command-options", {"options.json": json.dumps(options, indent=1) + "\n"})


def _described(value: object) -> str:
    """A default, a type or a constant as the snapshot shows it: a function by its name, a path as a path."""
    if isinstance(value, type) or (callable(value) and not isinstance(value, Path)):
        return f"<{getattr(value, '__name__', type(value).__name__)}>"
    if isinstance(value, Path):
        return f"Path({str(value)!r})"
    return repr(value)


def _command_options(name: str) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog="reprobisect")
    importlib.import_module(COMMANDS[name]).setup_arguments(parser.add_subparsers(dest="command"))
    command = parser._subparsers._group_actions[0].choices[name]  # type: ignore[union-attr]
    actions = [
        {
            "group": group.title,
            "flags": action.option_strings,
            "dest": action.dest,
            "kind": type(action).__name__,
            "nargs": action.nargs,
            "const": _described(action.const),
            "default": _described(action.default),
            "type": _described(action.type),
            "choices": list(action.choices) if action.choices else None,
            "required": action.required,
            "metavar": action.metavar,
            "help": action.help,
        }
        for group in command._action_groups
        for action in group._group_actions
    ]
    return {"defaults": {k: _described(v) for k, v in sorted(command._defaults.items())}, "actions": actions}


def _compare(case: str, outputs: Outputs) -> None:
    """Each output against its file under the case's snapshot folder (written first with the variable set)."""
    folder = SNAPSHOTS / case
    if os.environ.get("REPROBISECT_SNAPSHOTS") == "update":
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, text in outputs.items():
            (folder / name).write_text(text, encoding="utf-8")
    assert sorted(p.name for p in folder.iterdir()) == sorted(outputs), f"{folder}: the files differ"
    for name, text in outputs.items():
        kept = (folder / name).read_text(encoding="utf-8")
        if text != kept:
            line, wrote, had = _first_difference(text, kept)
            pytest.fail(f"{folder / name}: line {line} is now {wrote!r}, the snapshot has {had!r}")


def _first_difference(text: str, kept: str) -> tuple[int, str, str]:
    """The first line (1-based) where two texts differ, as each has it ('' past its end)."""
    pairs = itertools.zip_longest(text.splitlines(), kept.splitlines(), fillvalue="")
    ends = (len(kept.splitlines()) + 1, repr(text[-40:]), repr(kept[-40:]))  # they differ only in a last newline
    return next(((i, a, b) for i, (a, b) in enumerate(pairs, start=1) if a != b), ends)
