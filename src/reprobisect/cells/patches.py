"""Apply a patch fix to a private copy of an installed package, inside one cell.

The patched copy lives in ``<cell>/overlays/<fix>-<hash>/`` and is put first on the child's
PYTHONPATH for that fix's runs only: the cell's own site-packages stay untouched, so every other run
of the cell sees the released code. A patch that does not apply is an error before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from reprobisect.cells.envs import CellEnv
from reprobisect.config.patch_paths import check_patch, new_paths
from reprobisect.errors import ConfigError
from reprobisect.model.repro import Fix
from reprobisect.util.cmd import run_tool
from reprobisect.util.files import write_atomic

__all__ = ["PatchDoesNotApplyError", "patched_paths", "prepare_overlay"]


class PatchDoesNotApplyError(ConfigError):
    """A well-formed patch whose hunks do not match this release's code (``patch --fuzz=0`` refused them): the
    fix's runs in that cell are ENV_ERROR with the reason, the other cells run it."""


def patched_paths(patch: Path, strip: int) -> list[PurePosixPath]:
    """Files a unified diff changes, relative to the folder it applies in (after ``patch -p<strip>``); every
    name it gives checked first (``config.patch_paths``): none may leave its package."""
    check_patch(patch, strip)
    paths = new_paths(patch.read_text(encoding="utf-8", errors="replace"), strip)
    if not paths:
        msg = f"{patch}: no '+++ ' file headers; is it a unified diff (git diff / diff -u)?"
        raise ConfigError(msg)
    return paths


def _package_dirs(python: Path, tops: set[str]) -> dict[str, Path]:
    code = (
        "import importlib.util, json, sys, os\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    spec = importlib.util.find_spec(name)\n"
        "    if spec and spec.submodule_search_locations:\n"
        "        out[name] = list(spec.submodule_search_locations)[0]\n"
        "print(json.dumps(out))\n"
    )
    done = run_tool(
        [python, "-c", code, *sorted(tops)], what="finding the packages a patch touches", timeout=120, check=False
    )
    found = json.loads(done.stdout or "{}") if done.returncode == 0 else {}
    return {name: Path(path) for name, path in found.items()}


def _patch(overlay: Path, fix: Fix, *, dry_run: bool) -> subprocess.CompletedProcess[str]:
    assert fix.patch is not None
    # --fuzz=0: a hunk whose context lines differ (another release's code) fails rather than landing elsewhere
    cmd = ["patch", f"-p{fix.patch_strip}", "--batch", "--forward", "--fuzz=0", "-d", str(overlay)]
    cmd += ["-i", str(fix.patch)]
    if dry_run:
        cmd.append("--dry-run")
    return run_tool(cmd, what=f"applying {fix.patch}", timeout=120, error=ConfigError, check=False)


def prepare_overlay(env: CellEnv, fix: Fix) -> Path:
    """The folder to put first on PYTHONPATH for this fix's runs in this cell (made once, then reused)."""
    if fix.patch is None:
        msg = f"fix {fix.name!r} has no patch"
        raise ValueError(msg)
    digest = hashlib.sha256(fix.patch.read_bytes()).hexdigest()[:10]
    overlay = env.path / "overlays" / f"{fix.name}-{digest}"
    if (overlay / ".applied").is_file():
        return overlay
    tops = {path.parts[0] for path in patched_paths(fix.patch, fix.patch_strip)}
    dirs = _package_dirs(env.python, tops)
    missing = sorted(tops - set(dirs))
    if missing:
        msg = (
            f"{fix.patch}: patches {missing[0]!r}, which is not an importable package in cell {env.cell.id}; "
            f"check the fix's strip (now {fix.patch_strip}) so paths start at the package folder"
        )
        raise ConfigError(msg)
    if overlay.exists():
        shutil.rmtree(overlay)
    overlay.mkdir(parents=True)
    for top, source in dirs.items():
        shutil.copytree(source, overlay / top, ignore=shutil.ignore_patterns("__pycache__"))
    check = _patch(overlay, fix, dry_run=True)
    if check.returncode != 0:
        shutil.rmtree(overlay)
        detail = (check.stdout + check.stderr).strip().splitlines()
        msg = f"{fix.patch}: does not apply to cell {env.cell.id}: " + " / ".join(detail[-4:])
        raise PatchDoesNotApplyError(msg)
    applied = _patch(overlay, fix, dry_run=False)
    if applied.returncode != 0:
        shutil.rmtree(overlay)
        msg = f"{fix.patch}: patch failed after a clean dry run: {applied.stdout.strip()[-400:]}"
        raise ConfigError(msg)
    write_atomic(overlay / ".applied", digest, what="the overlay's marker")
    return overlay
