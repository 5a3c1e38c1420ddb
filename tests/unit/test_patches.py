"""Patch fixes: applied to a private copy of a tiny installed package, the original never touched, and a patch
that does not apply (or reaches outside its copy) a ConfigError naming the file before anything runs."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.cells.envs import CellEnv
from reprobisect.cells.patches import patched_paths, prepare_overlay
from reprobisect.errors import ConfigError
from reprobisect.model.cell import Cell
from reprobisect.model.repro import Fix

ORIGINAL = "def answer():\n    return 41\n"
PATCH = """\
diff --git a/fakepkg/mod.py b/fakepkg/mod.py
--- a/fakepkg/mod.py
+++ b/fakepkg/mod.py
@@ -1,2 +1,2 @@
 def answer():
-    return 41
+    return 42
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site folder holding ``fakepkg``, importable by the cell's python (this interpreter) through PYTHONPATH."""
    site = tmp_path / "site"
    (site / "fakepkg" / "__pycache__").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text("")
    (site / "fakepkg" / "mod.py").write_text(ORIGINAL)
    (site / "fakepkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"stale")
    (site / "otherpkg").mkdir()
    (site / "otherpkg" / "__init__.py").write_text("X = 1\n")
    (site / "single_module.py").write_text("Y = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site


@pytest.fixture
def env(tmp_path: Path) -> CellEnv:
    path = tmp_path / "cell"
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").symlink_to(sys.executable)
    return CellEnv(
        cell=Cell(python="3", torch="none", torch_source="pinned", packages={}),
        path=path,
        reused=True,
        build_seconds=0.0,
    )


def _fix(tmp_path: Path, text: str | bytes, *, strip: int = 1, name: str = "answer-42") -> Fix:
    patch = tmp_path / "patches" / f"{name}.patch"
    patch.parent.mkdir(exist_ok=True)
    patch.write_bytes(text if isinstance(text, bytes) else text.encode())
    return Fix(name=name, description="", patch=patch, patch_strip=strip)


pytestmark = pytest.mark.requires_tool("patch")


def test_a_patch_applies_to_a_private_copy_and_the_original_is_untouched(
    tmp_path: Path, site: Path, env: CellEnv
) -> None:
    overlay = prepare_overlay(env, _fix(tmp_path, PATCH))
    assert overlay.parent == env.path / "overlays" and overlay.name.startswith("answer-42-")
    assert (overlay / "fakepkg" / "mod.py").read_text() == ORIGINAL.replace("41", "42")
    assert (overlay / "fakepkg" / "__init__.py").is_file()
    assert not (overlay / "fakepkg" / "__pycache__").exists()  # a stale byte cache would shadow the patch
    assert not (overlay / "otherpkg").exists()  # only what the patch touches
    assert (site / "fakepkg" / "mod.py").read_text() == ORIGINAL
    assert not list(site.rglob("*.orig")) and not list(site.rglob("*.rej"))


def test_a_prepared_overlay_is_reused_and_a_changed_patch_gets_its_own(
    tmp_path: Path, site: Path, env: CellEnv
) -> None:
    fix = _fix(tmp_path, PATCH)
    first = prepare_overlay(env, fix)
    (site / "fakepkg" / "mod.py").write_text("changed since\n")  # the dry run would fail now: not run again
    assert prepare_overlay(env, fix) == first
    (site / "fakepkg" / "mod.py").write_text(ORIGINAL)
    other = prepare_overlay(env, _fix(tmp_path, PATCH.replace("return 42", "return 43")))
    assert other != first and (other / "fakepkg" / "mod.py").read_text().endswith("return 43\n")


def test_a_half_made_overlay_is_made_again(tmp_path: Path, site: Path, env: CellEnv) -> None:
    fix = _fix(tmp_path, PATCH)
    overlay = prepare_overlay(env, fix)
    (overlay / ".applied").unlink()
    (overlay / "fakepkg" / "mod.py").write_text("half\n")
    assert prepare_overlay(env, fix) == overlay
    assert (overlay / "fakepkg" / "mod.py").read_text() == ORIGINAL.replace("41", "42")


@pytest.mark.parametrize(
    "patch",
    [
        PATCH.replace(" def answer():\n-    return 41", " def answer():\n-    return 40"),  # another release's code
        pytest.param(PATCH.replace("@@ -1,2 +1,2 @@", "@@ -9,2 +9,2 @@").replace(" def answer", " def question")),
    ],
)
def test_a_patch_that_does_not_apply_is_a_config_error_naming_it(
    tmp_path: Path, site: Path, env: CellEnv, patch: str
) -> None:
    fix = _fix(tmp_path, patch)
    with pytest.raises(ConfigError, match="does not apply to cell") as info:
        prepare_overlay(env, fix)
    assert str(fix.patch) in str(info.value)
    assert not (env.path / "overlays").exists() or not any((env.path / "overlays").iterdir())
    assert (site / "fakepkg" / "mod.py").read_text() == ORIGINAL


def test_an_already_applied_patch_is_not_applied_in_reverse(tmp_path: Path, site: Path, env: CellEnv) -> None:
    (site / "fakepkg" / "mod.py").write_text(ORIGINAL.replace("41", "42"))
    with pytest.raises(ConfigError, match="does not apply"):
        prepare_overlay(env, _fix(tmp_path, PATCH))
    assert (site / "fakepkg" / "mod.py").read_text() == ORIGINAL.replace("41", "42")


@pytest.mark.parametrize(
    ("patch", "strip"),
    [
        (PATCH, 0),  # 'b/fakepkg/...': the top folder 'b' is no package
        (PATCH.replace("fakepkg", "nosuchpkg"), 1),
        (PATCH.replace("fakepkg/mod.py", "single_module.py"), 1),  # a module, not a package folder
    ],
)
def test_a_patch_of_something_not_importable_names_the_package_and_the_strip(
    tmp_path: Path, site: Path, env: CellEnv, patch: str, strip: int
) -> None:
    with pytest.raises(ConfigError, match=rf"which is not an importable package in cell .*now {strip}\)") as info:
        prepare_overlay(env, _fix(tmp_path, patch, strip=strip))
    assert "answer-42.patch" in str(info.value)


def test_a_fix_without_a_patch_is_a_programming_error(env: CellEnv) -> None:
    with pytest.raises(ValueError, match="has no patch"):
        prepare_overlay(env, Fix(name="none", description=""))


def test_a_patch_reaching_outside_its_copy_never_writes_there(tmp_path: Path, site: Path, env: CellEnv) -> None:
    victim = env.path / "victim.py"
    victim.write_text("safe\n")
    escape = """\
--- a/fakepkg/../../../victim.py
+++ b/fakepkg/../../../victim.py
@@ -1 +1 @@
-safe
+pwned
"""
    with contextlib.suppress(ConfigError):  # patch refuses such a name; if it ever did not, nothing may change
        prepare_overlay(env, _fix(tmp_path, escape))
    assert victim.read_text() == "safe\n"
    assert (site / "fakepkg" / "mod.py").read_text() == ORIGINAL


def test_a_patch_through_a_link_in_the_package_never_writes_the_linked_file(
    tmp_path: Path, site: Path, env: CellEnv
) -> None:
    victim = tmp_path / "victim.py"
    victim.write_text(ORIGINAL)
    (site / "fakepkg" / "linked.py").symlink_to(victim)
    prepare_overlay(env, _fix(tmp_path, PATCH.replace("mod.py", "linked.py")))
    assert victim.read_text() == ORIGINAL


def test_two_packages_in_one_patch_are_both_copied(tmp_path: Path, site: Path, env: CellEnv) -> None:
    two = PATCH + PATCH.replace("fakepkg/mod.py", "otherpkg/__init__.py").replace(
        " def answer():\n-    return 41\n+    return 42", "-X = 1\n+X = 2"
    ).replace("@@ -1,2 +1,2 @@", "@@ -1 +1 @@")
    overlay = prepare_overlay(env, _fix(tmp_path, two))
    assert (overlay / "otherpkg" / "__init__.py").read_text() == "X = 2\n"
    assert (overlay / "fakepkg" / "mod.py").read_text().endswith("return 42\n")


# --- reading the patch -------------------------------------------------------------------------------------


def test_patched_paths_with_strip_and_deleted_files(tmp_path: Path) -> None:
    patch = tmp_path / "x.patch"
    patch.write_text(
        "--- a/pkg/one.py\n+++ b/pkg/one.py\t2024-01-01 00:00:00\n"
        "--- a/pkg/gone.py\n+++ /dev/null\n"
        "+++ b/pkg/sub/two.py\n"
        "++++ not a header\n"
        " +++ b/indented/not/a/header.py\n"
    )
    assert patched_paths(patch, 1) == [PurePosixPath("pkg/one.py"), PurePosixPath("pkg/sub/two.py")]
    assert patched_paths(patch, 0)[0] == PurePosixPath("b/pkg/one.py")
    assert patched_paths(patch, 2) == [PurePosixPath("one.py"), PurePosixPath("sub/two.py")]


@pytest.mark.parametrize(
    "content",
    [b"", b"not a diff\n", b"--- a/x\n", b"\xff\xfe\x00 binary", b"+++ /dev/null\n", b"+++ b\n"],
)
def test_a_file_without_headers_is_a_config_error_naming_it(tmp_path: Path, content: bytes) -> None:
    patch = tmp_path / "odd.patch"
    patch.write_bytes(content)
    with pytest.raises(ConfigError, match=r"odd\.patch: no '\+\+\+ ' file headers"):
        patched_paths(patch, 1)


@given(st.text(max_size=400), st.integers(0, 4))
def test_patched_paths_of_any_text_is_paths_or_a_config_error(text: str, strip: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        patch = Path(tmp) / "any.patch"
        patch.write_text(text, encoding="utf-8")
        try:
            paths = patched_paths(patch, strip)
        except ConfigError:
            return
    assert paths and all(isinstance(p, PurePosixPath) and p.parts for p in paths)
