"""The HTML report in a real headless Chromium: the matrix renders, the script ran, nothing is fetched."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reprobisect.commands.main import main

RECORDS = Path(__file__).parents[1] / "resources" / "records"

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool("chromium")]


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    argv = [
        shutil.which("chromium") or "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    # its crash-report folder, dconf and NSS databases go under HOME and XDG folders whatever --user-data-dir says
    home = {"HOME": str(profile), "XDG_CONFIG_HOME": str(profile / "config"), "XDG_CACHE_HOME": str(profile / "cache")}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True, env={**os.environ, **home})


def _report(dest: Path, *argv: str) -> Path:
    assert main(["report", *argv, "--dest", str(dest)]) == 0
    return dest / "report.html"


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The GAN on deepspeed 0.16.4, 0.17.0 and 0.19.8, merged with a real bisect's probes (0.16.5, 0.16.7)."""
    return _report(
        tmp_path_factory.mktemp("report"), "--out", str(RECORDS / "releases"), "--merge", str(RECORDS / "bisect")
    )


def test_the_matrix_and_outcome_cells_are_in_the_dom_after_the_script_ran(page: Path, tmp_path: Path) -> None:
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert 'data-ready="1"' in dom  # set by the inline script's last line
    matrix = re.search(r'<table class="sortable matrix"[^>]*data-sortable="ready"[^>]*>(.*?)</table>', dom, re.S)
    assert matrix is not None
    cells = re.findall(r'<td class="o o-(\w+)[^"]*"', matrix.group(1))
    assert len(cells) == 3 * 6 + 2  # three releases × six fixes, and the bisect's two extra releases × none
    assert {"PASS", "REPRODUCED", "OTHER_FAILURE"} <= set(cells)
    assert "✗ 36b244a365" in matrix.group(1)
    assert dom.count('<details id="run-') == 36 + 4
    assert "last <strong>0.16.4</strong> → first <strong>0.16.5</strong>" in dom


def test_sorting_and_run_links_work(page: Path, tmp_path: Path) -> None:
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    run_id = re.search(r'<details id="run-([0-9a-f]+)"', dom)
    assert run_id is not None
    opened = _chromium(tmp_path, "--dump-dom", f"{page.as_uri()}#run-{run_id.group(1)}").stdout
    assert re.search(rf'<details id="run-{run_id.group(1)}" class="run" open="">', opened)
    assert dom.count('data-sortable="ready"') == dom.count('<table class="sortable')


def test_the_comparison_renders(tmp_path: Path) -> None:
    page = _report(tmp_path / "cmp", "--out", str(RECORDS / "current"), "--baseline", str(RECORDS / "baseline"))
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert re.search(r'<tr class="ch-new-failure">.*?freeze-d', dom)
    assert re.search(r'<tr class="ch-timing-regression">.*?no-overlap-comm', dom)
    assert dom.count('<tr class="ch-') == 2


def test_screenshot_renders(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", page.as_uri())
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
