"""Every test's fixtures resolve, the slow ones included, before any of them runs.

Why: a slow test that names a fixture no module provides fails only at its setup, half an hour into CI (it did:
``fixture 'minimized' not found`` after a test that provided it was removed). ``pytest --setup-plan`` resolves every
fixture of every test without running one, in seconds, so the unit run catches it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_every_test_of_the_suite_has_its_fixtures() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--setup-plan", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if line.startswith("ERROR ") or "fixture '" in line]
    assert done.returncode == 0 and not errors, "\n".join(errors) or done.stdout[-3000:] + done.stderr[-3000:]
