"""The built package (issue #40, "installable and runnable anywhere"): ``python -m build`` makes an sdist and, from
it, a wheel that ``twine check`` passes and that carries what a run needs beside the code — the default matrix with
the repros it names (copied from the checkout by setup.py, so the checkout's files stay the only copy), the child
files a run starts through, the known signatures, the report's templates. Installed, it runs from any folder: the
matrix is found without ``--config``, records go to ``./reports``, and ``triage`` works where minimize's own
dependencies (pyflakes, picire) are missing, while ``minimize`` names them and exits 2.

The build runs without isolation (the interpreter's setuptools: offline) on a copy of the files an sdist is made
from, so the checkout gets no ``build/`` or ``*.egg-info``. About 15 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, base_python

# what an sdist is made from (pyproject.toml, setup.py and MANIFEST.in say what goes in)
SOURCES = ("src", "repros", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "matrix.yaml")

BLOCKER = '''
"""Makes minimize's dependencies unimportable, as on a GPU node without them."""
import sys


class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyflakes", "picire"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Block())
'''


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it, in one folder."""
    tree = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, tree / name)
    out = tmp_path_factory.mktemp("dist")
    cmd = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(tree)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("*.whl")
    return wheel


def test_the_wheel_carries_the_matrix_its_repros_and_the_run_files(dist: Path) -> None:
    with zipfile.ZipFile(_wheel(dist)) as archive:
        names = set(archive.namelist())
        packaged = archive.read("reprobisect/data/project/matrix.yaml")
        entry_points = next(archive.read(n) for n in names if n.endswith(".dist-info/entry_points.txt")).decode()
    assert packaged == (ROOT / "matrix.yaml").read_bytes()  # the checkout's own, byte for byte
    repros = {p.relative_to(ROOT).as_posix() for p in (ROOT / "repros").rglob("*") if p.is_file()}
    repros = {name for name in repros if "__pycache__" not in name}
    assert {f"reprobisect/data/project/{name}" for name in repros} <= names
    package = ROOT / "src" / "reprobisect"
    for pattern in ("run/child/*.py", "data/*.toml", "report/templates/*.j2", "report/static/*", "py.typed"):
        wanted = {f"reprobisect/{p.relative_to(package).as_posix()}" for p in package.glob(pattern)}
        assert wanted and wanted <= names, (pattern, wanted - names)
    assert "reprobisect = reprobisect.commands.main:main" in entry_points


def test_twine_check_passes(dist: Path) -> None:
    files = sorted(str(p) for p in dist.iterdir())
    assert len(files) == 2  # the sdist and the wheel
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_installed_it_runs_anywhere_and_triage_needs_nothing_of_minimize(dist: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"  # the wheel as an installer lays it out
    with zipfile.ZipFile(_wheel(dist)) as archive:
        archive.extractall(site)
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(BLOCKER)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "issue.py").write_text('print("the issue\'s own output")\n')
    (elsewhere / "tiny.yaml").write_text("default_cell:\n  torch: system\nrepros: {}\n")  # a cell of torch alone
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(block), str(site)]), "XDG_CACHE_HOME": str(tmp_path / "xc")}
    env.pop("NOX_CURRENT_SESSION", None)  # installed: no nox session started it

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "reprobisect", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=elsewhere, check=False)

    probe = "import reprobisect\ntry:\n    import pyflakes\nexcept ImportError:\n    print(reprobisect.__file__)"
    where = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=elsewhere)
    assert where.stdout.startswith(str(site)), where  # the wheel's code runs, and pyflakes cannot be imported

    listed = harness("matrix", "--list", "--envs", str(tmp_path / "cells"))  # no --config: the packaged matrix
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    assert "deepspeed-0.16.4" in listed.stdout

    common = ["--backend", "cpu", "--envs", str(tmp_path / "cells"), "--base-python", base_python()]
    triaged = harness("triage", "issue.py", "--config", "tiny.yaml", *common)
    assert triaged.returncode == 0, triaged.stdout[-3000:] + triaged.stderr[-3000:]
    assert "PASS" in triaged.stdout and "ModuleNotFoundError" not in triaged.stderr
    assert list((elsewhere / "reports" / "records").rglob("*.json"))  # ./reports, where it was run from
    # the commands it prints for a person are the ones that run here (issue #54: `nox -s triage` exited 127)
    summary = (elsewhere / "reports" / "summary-script-issue.md").read_text()
    assert "reprobisect triage issue.py" in summary and "nox -s" not in summary + triaged.stdout
    helped = harness("triage", "--help")  # argparse wraps the path, at a hyphen too
    assert str(tmp_path / "xc" / "reprobisect" / "cells") in "".join(helped.stdout.split())
    assert not (elsewhere / ".cells").exists()

    minimized = harness("minimize", "issue.py", "--bad", "deepspeed==0.16.5", "--config", "tiny.yaml")
    assert minimized.returncode == 2, minimized.stdout + minimized.stderr
    assert (
        "minimize needs pyflakes and picire" in minimized.stderr and "pip install pyflakes picire" in minimized.stderr
    )
