"""What a minimization leaves for a maintainer to paste: the script, its diff, sizes, verdicts, re-check commands.

``out/minimize/NAME/`` holds ``minimized.py``, ``minimized.diff`` (against the original, as ``a/`` and ``b/``
of the script's own name), ``minimize.json`` (every figure below, for tools) and ``minimize.md`` (the section that
``report`` and ``triage`` include, made and read by ``sections``). The script came from an issue and is
untrusted text: in Markdown it sits in a fence longer than any run of backticks it holds, and the whole file is
neutralised like every Markdown file the harness writes.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobisect.minimize.candidates import CellRun, Cells
from reprobisect.minimize.request import MinimizeRequest, MinimizeResult
from reprobisect.minimize.sections import SECTION_FILE, section_markdown
from reprobisect.model.repro import script_forms
from reprobisect.util.files import write_atomic
from reprobisect.util.invocation import rerun_head
from reprobisect.util.neutral import command_line
from reprobisect.util.shell import setting_word

__all__ = ["plain_command", "recheck_commands", "write_outputs"]


def write_outputs(result: MinimizeResult, request: MinimizeRequest, source: str) -> None:
    """Write the four files of a minimization into ``result.folder``."""
    folder, cells = result.folder, result.cells
    name = request.script.name
    write_atomic(folder / "minimized.py", result.text, what="the minimized script")
    diff = "".join(
        difflib.unified_diff(
            source.splitlines(keepends=True),
            result.text.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )
    write_atomic(folder / "minimized.diff", diff, what="the diff")
    commands = recheck_commands(folder / "minimized.py", cells)
    summary = _summary(result, request, cells, commands)
    write_atomic(folder / "minimize.json", json.dumps(summary, indent=2) + "\n", what="the minimization's summary")
    write_atomic(folder / SECTION_FILE, section_markdown(summary, result.text, diff), what="the Markdown section")


def recheck_commands(script: Path, cells: Cells) -> list[str]:
    """One triage command per cell that runs the minimized script there again (``nox -s triage`` in a checkout,
    ``reprobisect triage`` installed)."""
    commands = []
    for pins in (cells.bad, cells.good):
        if pins is None:
            continue
        words = [*rerun_head("triage", ["triage"]), str(script)]
        for axis, value in pins.items():
            words += [f"--{axis}", value]
        words += ["--form", cells.form]
        words += ["--shim"] if cells.shim else []
        words += ["--expect-signature", cells.expect] if cells.expect else []
        words += [item for k, v in cells.env.items() for item in ("--env", setting_word(k, v))]
        words += ["--", *cells.script_args] if cells.script_args else []
        commands.append(command_line(words))
    return commands


def plain_command(request: MinimizeRequest, cells: Cells) -> str:
    """How a person runs ``minimized.py`` outside the harness: plain ``python`` with the variables the harness's
    run had and the script does not set itself (the form's, and the user's ``--env``: a secret's by name only), and
    the script's arguments; through ``env`` so that a value with a space stays one assignment."""
    forms = script_forms(request.script, shim=cells.shim)
    form_env = next((f.env for name, f in forms.items() if name == cells.form), {})
    settings = [setting_word(k, v) for k, v in {**form_env, **cells.env}.items()]
    return command_line([*(["env", *settings] if settings else []), "python", "minimized.py", *cells.script_args])


def _run(run: CellRun) -> dict[str, Any]:
    return {
        "outcome": run.outcome,
        "signature": run.signature,
        "signature_text": run.signature_text,
        "seconds": run.seconds,
        "record": run.record,
    }


def _cell(pins: Mapping[str, str] | None, original: CellRun | None, minimized: CellRun | None) -> dict[str, Any]:
    return {
        "pins": dict(pins or {}),
        "original": _run(original) if original else None,
        "minimized": _run(minimized) if minimized else None,
    }


def _summary(result: MinimizeResult, request: MinimizeRequest, cells: Cells, commands: list[str]) -> dict[str, Any]:
    original_runs = result.original_verdict.runs
    minimized_runs = result.verdict.runs
    minutes = result.seconds / 60
    return {
        "script": str(request.script),
        "form": cells.form,
        "target": result.target.text,
        "original": {"lines": result.original.lines, "tokens": result.original.tokens},
        "minimized": {"lines": result.minimized.lines, "tokens": result.minimized.tokens},
        "reduction": {
            "lines": round(result.original.lines / max(1, result.minimized.lines), 2),
            "tokens": round(result.original.tokens / max(1, result.minimized.tokens), 2),
        },
        "bad": _cell(cells.bad, _nth(original_runs, 0), _nth(minimized_runs, 0)),
        "good": _cell(cells.good, _nth(original_runs, 1), _nth(minimized_runs, 1)) if cells.good is not None else None,
        "interesting": result.verdict.interesting,
        "why": result.verdict.why,
        "stopped": result.stopped,
        "passes": result.passes,
        "candidates": result.candidates,
        "refused_without_a_run": result.refused,
        "runs": result.runs,
        "seconds": result.seconds,
        "runs_per_minute": round(result.runs / minutes, 2) if minutes > 0 else None,
        "jobs": request.jobs,
        "reducer": "picire ParallelDD over the statement tree (hierarchical delta debugging)",
        "recheck": commands,
        "plain_python": plain_command(request, cells),
        "kept_for_plain_python": result.kept,
        "minimized_script": "minimized.py",
        "diff": "minimized.diff",
    }


def _nth(runs: tuple[CellRun, ...], index: int) -> CellRun | None:
    return runs[index] if len(runs) > index else None
