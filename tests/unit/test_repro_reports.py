"""Each repro reads as the report (issue #29, item 2): the report's code is what fix ``none`` runs, line for line.

``repros/gan_fabric_zero1.py`` holds the GAN report's code between two marker lines. Every line there is a line of the
issue as filed (``tests/resources/reports/gan_fabric_zero1.filed.txt``, the code block of Lightning #19773, whose
indentation the issue's text lost), in the issue's order, unless it says ``# adapted`` (standalone here) or
``# instruments`` (the harness's measurements); the training loop is the issue's, every line. Fix ``none`` and the
patches run that file, a fix with flags runs its sibling, and the sibling without flags differs from it only in
lines its flags name.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from reprobisect.config.load import load_config
from tests.conftest import ROOT

REPORT = ROOT / "repros" / "gan_fabric_zero1.py"
FIXES = ROOT / "repros" / "gan_fabric_zero1_fixes.py"
FILED = ROOT / "tests" / "resources" / "reports" / "gan_fabric_zero1.filed.txt"
MARKED = re.compile(r"#\s*(adapted|instruments)\b")


def _block(path: Path) -> list[str]:
    """The lines between ``# --- the report's code`` and ``# --- end of the report's code``, ruff's fmt lines out."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# --- the report's code"))
    end = next(i for i, line in enumerate(lines) if line.startswith("# --- end of the report's code"))
    return [line for line in lines[start + 1 : end] if line not in ("# fmt: off", "# fmt: on")]


def _filed() -> list[str]:
    return [line.strip() for line in FILED.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_unmarked_line_of_the_repro_is_the_issues_in_its_order() -> None:
    filed, at = _filed(), 0
    for line in _block(REPORT):
        if not line.strip() or MARKED.search(line):
            continue
        # the issue lost its indentation: a line matches the filed one with its leading spaces
        found = next((i for i in range(at, len(filed)) if filed[i] == line.strip()), None)
        assert found is not None, f"not the issue's line (or out of its order), and not marked: {line!r}"
        at = found + 1


def test_the_training_loop_is_the_issues_every_line() -> None:
    filed = _filed()
    first, last = (
        filed.index("for epoch in range(args.epochs):"),
        filed.index('writer.add_scalar("Loss_G", errG.item(), epoch*len(dataloader)+i)'),
    )
    loop = [line.strip() for line in _block(REPORT) if line.strip()]
    start = loop.index(filed[first])
    assert loop[start : start + last - first + 1] == filed[first : last + 1]


def test_the_adapted_lines_are_few() -> None:
    # what makes the report stand alone here: imports of what it took from DeepSpeedExamples, the precision the CPU
    # forms need, tensorboard's writer, torch.cuda.synchronize on a machine without CUDA; the instruments hook in
    adapted = [line for line in _block(REPORT) if MARKED.search(line)]
    assert 0 < len(adapted) <= 10, adapted  # 9 today: 3 imports, Fabric, 2 syncs, 3 instruments


def test_none_and_the_patches_run_the_reports_code_and_flags_run_the_sibling() -> None:
    gan = load_config(ROOT / "matrix.yaml").repros["gan"]
    fabric = [form for form in gan.forms.values() if form.script == REPORT]
    assert {form.name for form in fabric} == {"cuda", "cuda-bf16", "cpu-shim"}
    for form in fabric:
        for fix in gan.fixes.values():
            script = form.script_for(fix)
            if fix.name == "none" or fix.kind == "patch":
                assert script == REPORT, (form.name, fix.name)
                assert not fix.args_for(form.name)
            else:
                assert script == FIXES, (form.name, fix.name)


def test_the_sibling_without_flags_changes_only_lines_its_flags_name() -> None:
    report = [line.split("  #")[0].rstrip() for line in _block(REPORT) if not MARKED.search(line)]
    sibling = FIXES.read_text(encoding="utf-8").splitlines()
    removed = [
        line[1:]
        for line in difflib.unified_diff(report, sibling, lineterm="", n=0)
        if line.startswith("-") and not line.startswith("---") and line[1:].strip()
    ]
    # the report's lines the sibling rewrites: D's and G's forward and backward, the criterion, the strategy, the
    # set-up (indented under single-engine's else); each rewritten line in the sibling carries its flag's name
    assert len(removed) <= 20, removed  # 18 today
    flagged = [line for line in sibling if re.search(r"# --[a-z-]+", line)]
    assert len(flagged) >= len(removed) // 2


@pytest.mark.parametrize("script", sorted((ROOT / "repros").glob("*.py")), ids=lambda p: p.name)
def test_no_repro_keeps_its_own_step_helper(script: Path) -> None:
    text = script.read_text(encoding="utf-8")
    if script.name == "instruments.py":
        assert "def step(" in text
    else:
        assert "def step(" not in text, "the step events come from instruments.py"
