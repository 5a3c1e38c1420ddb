"""Every fix in matrix.yaml passes only flags its form's script defines: a flag one form lacks (the GAN's
--g-step-raw-d reached the pure-DeepSpeed twin before it had it) would fail that form at setup with an argparse
error, recorded as if the fix failed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reprobisect.config.load import load_config
from tests.conftest import ROOT

CONFIG = load_config(ROOT / "matrix.yaml")
UNITS = [
    (repro.name, form.name, fix.name, form.script_for(fix), fix.args_for(form.name))
    for repro in CONFIG.repros.values()
    for form in repro.forms.values()
    for fix in repro.fixes.values()
    if fix.args_for(form.name)
]


def _flags(script_text: str) -> set[str]:
    return set(re.findall(r"""add_argument\(\s*["'](--[a-z0-9-]+)["']""", script_text))


def test_there_are_fixes_with_arguments_to_check() -> None:
    assert len(UNITS) > 10


@pytest.mark.parametrize(
    ("repro", "form", "fix", "script", "args"), UNITS, ids=[f"{u[0]}-{u[1]}-{u[2]}" for u in UNITS]
)
def test_a_fix_passes_only_flags_its_script_defines(
    repro: str, form: str, fix: str, script: Path, args: tuple[str, ...]
) -> None:
    defined = _flags(script.read_text())
    used = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    assert used <= defined, f"{repro}/{form}/{fix}: {sorted(used - defined)} not defined by {script.name}"
