"""Hostile patch fixes (issue #39): every path a patch names is checked when the config is loaded and when given
on the command line, before any cell is built; one that leaves its package is exit 2 with the path named."""

from __future__ import annotations

import posixpath
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.commands.main import main
from reprobisect.config.load import load_config
from reprobisect.config.patch_paths import check_patch, new_paths, patch_headers, path_problem
from reprobisect.errors import ConfigError
from tests.conftest import ROOT

HUNK = "@@ -1 +1 @@\n-a = 1\n+a = 2\n"
GOOD = "--- a/deepspeed/x.py\n+++ b/deepspeed/x.py\n" + HUNK

MATRIX = """\
version: 1
repros:
  gan:
    title: t
    forms:
      cpu-deepspeed: {script: repro.py, precision: bf16}
    fixes:
      none: {}
      evil: {patch: evil.diff}
"""

ESCAPES = {
    "climbs out (the issue's case)": GOOD.replace("b/deepspeed/x.py", "b/deepspeed/../../../tmp/PWNED"),
    "old side climbs": GOOD.replace("a/deepspeed/x.py", "a/deepspeed/../../etc/passwd"),
    "absolute": GOOD.replace("b/deepspeed/x.py", "/etc/cron.d/PWNED"),
    "into another package": GOOD.replace("b/deepspeed/x.py", "b/deepspeed/../torch/__init__.py"),
    "diff --git names": "diff --git a/deepspeed/x.py b/../PWNED\n" + GOOD,
    "quoted git name": 'diff --git "a/deepspeed/x.py" "b/deepspeed/../../\\tPWNED"\n' + GOOD,
    "rename to": "diff --git a/deepspeed/x.py b/deepspeed/y.py\nsimilarity index 90%\n"
    "rename from deepspeed/x.py\nrename to deepspeed/../../PWNED\n" + GOOD,
    "copy from": "diff --git a/deepspeed/x.py b/deepspeed/y.py\ncopy from ../../../etc/shadow\n"
    "copy to deepspeed/y.py\n",
    "symlink, new file": "diff --git a/deepspeed/l b/deepspeed/l\nnew file mode 120000\n"
    "--- /dev/null\n+++ b/deepspeed/l\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n",
    "symlink, mode change": "diff --git a/deepspeed/x.py b/deepspeed/x.py\nold mode 100644\nnew mode 120000\n",
    "Index: line": "Index: ../../PWNED\n" + GOOD,
    "context diff": "*** /etc/passwd\n" + GOOD,
    "second file of several": GOOD + GOOD.replace("deepspeed/x.py", "deepspeed/../../PWNED"),
    "header where a hunk's lines run out": GOOD.replace("@@ -1 +1 @@", "@@ -1,3 +1,3 @@")
    + "--- a/deepspeed/x.py\n+++ /deepspeed/x.py\n",
    "CRLF line ends": GOOD.replace("b/deepspeed/x.py", "b/deepspeed/../../PWNED").replace("\n", "\r\n"),
}


def _patch(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evil.diff"
    path.write_text(text, newline="")
    return path


@pytest.mark.parametrize("text", ESCAPES.values(), ids=ESCAPES.keys())
def test_a_patch_that_names_a_path_outside_its_package_is_refused_naming_it(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match=r"evil\.diff: line \d+ .* names '.*', which") as info:
        check_patch(_patch(tmp_path, text), 1)
    assert "inside the package it patches" in str(info.value)  # and what would be right


def test_the_issues_patch_is_refused_by_the_config_before_any_cell(tmp_path: Path) -> None:
    (tmp_path / "repro.py").write_text("print('hi')\n")
    _patch(tmp_path, ESCAPES["climbs out (the issue's case)"])
    config = tmp_path / "matrix.yaml"
    config.write_text(MATRIX)
    with pytest.raises(ConfigError) as info:
        load_config(config)
    message = str(info.value)
    assert message.startswith("matrix.yaml: repros.gan.fixes.evil.patch: ")
    assert "'b/deepspeed/../../../tmp/PWNED'" in message and "climbs out" in message
    envs = tmp_path / "cells"
    argv = ["matrix", "--config", str(config), "--list-json", "--envs", str(envs), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert not envs.exists()


def test_a_command_line_patch_is_refused_before_any_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "issue.py"
    script.write_text("print('hi')\n")
    patch = _patch(tmp_path, ESCAPES["absolute"])
    envs = tmp_path / "cells"
    argv = ["triage", str(script), "--fix-patch", f"evil={patch}", "--envs", str(envs), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--fix-patch 'evil=" in err and "'/etc/cron.d/PWNED'" in err and "is absolute" in err
    assert not envs.exists()


@pytest.mark.parametrize(
    "text",
    [
        GOOD,
        GOOD.replace("b/deepspeed/x.py", "b/deepspeed/sub/../x.py"),  # a '..' that stays inside is harmless
        GOOD.replace("--- a/deepspeed/x.py", "--- /dev/null").replace("-a = 1\n", "").replace("-1 ", "-0,0 "),
        # a changed line that starts with '+++ ' or '--- ' is content, as it is to patch
        "--- a/deepspeed/x.py\n+++ b/deepspeed/x.py\n@@ -1,2 +1,2 @@\n--- counter\n+++ counter\n x\n",
        "diff --git a/deepspeed/x.py b/deepspeed/y.py\nrename from deepspeed/x.py\nrename to deepspeed/y.py\n",
    ],
)
def test_a_patch_inside_its_package_passes(tmp_path: Path, text: str) -> None:
    check_patch(_patch(tmp_path, text), 1)


def test_every_fix_the_project_ships_passes() -> None:
    fixes = sorted((ROOT / "repros" / "fixes").rglob("*.diff"))
    assert fixes
    for fix in fixes:
        check_patch(fix, 1)


def test_new_paths_skip_hunk_content_that_looks_like_a_header() -> None:
    text = "--- a/pkg/x.py\n+++ b/pkg/x.py\n@@ -1,2 +1,2 @@\n-old\n+++ b/not/a/header.py\n x\n+++ b/pkg/y.py\n"
    assert [str(p) for p in new_paths(text, 1)] == ["pkg/x.py", "pkg/y.py"]


_PARTS = st.sampled_from(["..", ".", "", "pkg", "a", "b", "x.py", "sub"])


@given(parts=st.lists(_PARTS, max_size=8), strip=st.integers(0, 3), absolute=st.booleans())
@settings(max_examples=400, deadline=None)
def test_any_path_accepted_stays_inside_its_package(parts: list[str], strip: int, absolute: bool) -> None:
    """Soundness: whatever the checker lets through, resolved after -p<strip> inside the overlay folder, lies in
    the folder of its first part (the package copied there), never beside or above it."""
    name = ("/" if absolute else "") + "/".join(parts)
    if path_problem(name, strip) is not None or absolute:
        assert path_problem(name, strip) is not None or not absolute
        return
    left = [p for p in name.split("/") if p not in ("", ".")][strip:]
    if not left:
        return
    resolved = posixpath.normpath(posixpath.join("/overlay", *left))
    assert resolved.startswith(f"/overlay/{left[0]}/") or resolved == f"/overlay/{left[0]}"


_LINE = st.one_of(
    st.sampled_from(
        ["--- ", "+++ ", "*** ", "Index: ", "diff --git ", "rename to ", "copy from ", "new mode "]
    ).flatmap(lambda head: st.text(st.sampled_from('ab./"\\\t 120000pkg'), max_size=30).map(lambda tail: head + tail)),
    st.sampled_from(["@@ -1 +1 @@", "@@ -1,3 +1,0 @@", " x", "-y", "+z", "\\ No newline", ""]),
    st.text(max_size=40),
)


@given(lines=st.lists(_LINE, max_size=30), strip=st.integers(0, 2))
@settings(max_examples=300, deadline=None)
def test_any_patch_text_gives_headers_or_a_config_error(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], strip: int
) -> None:
    """Random patch headers: the checker never crashes, and every header it lets through names only safe paths."""
    path = tmp_path_factory.mktemp("p") / "random.diff"
    text = "\n".join(lines) + "\n"
    path.write_text(text, encoding="utf-8", errors="replace", newline="")
    try:
        check_patch(path, strip)
    except ConfigError as exc:
        assert "random.diff: line " in str(exc)
        return
    for header in patch_headers(path.read_text(encoding="utf-8", errors="replace")):
        assert not header.symlink
        assert all(not name.startswith("/") or name == "/dev/null" for name in header.names)
