"""Sessions of the torch × deepspeed × lightning repro harness. Each one calls into ``reprobisect``.

The harness runs in the session's venv; each matrix cell gets its own venv under ``.cells/`` made from
the interpreter that runs nox (its torch is the cells' ``system`` torch). Pass harness options after
``--``, e.g. ``nox -s repro_gan -- --deepspeed 0.16.4 --fix none,freeze-d``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["repro_gan"]

BASE_PYTHON = os.environ.get("REPROBISECT_BASE_PYTHON", sys.executable)


def _cell_ids() -> list[str]:
    """Cell ids of matrix.yaml for `nox -l` (needs pyyaml beside nox; without it no cell sessions are listed)."""
    sys.path.insert(0, str(Path(__file__).parent / "src"))
    try:
        from reprobisect.run.matrix_plan import cell_ids

        return cell_ids("matrix.yaml", BASE_PYTHON)
    except Exception:
        return []
    finally:
        sys.path.pop(0)


def _install(session: nox.Session, target: str = ".") -> None:
    """Install the harness in the session's venv, saying so first where it downloads for a while: a venv without
    the harness yet (a reused venv only checks what it has)."""
    location = getattr(session.virtualenv, "location", None)
    first = location is None or not (Path(location) / "bin" / "reprobisect").exists()
    if first:
        session.log(f"Installing the harness ({target}) and its dependencies: about 100 MB to download, this once")
    session.install("-e", target)


def _harness(session: nox.Session, *args: str) -> None:
    _install(session)
    session.run("reprobisect", *args, "--base-python", BASE_PYTHON, *session.posargs)


@nox.session
def repro_gan(session: nox.Session) -> None:
    """GAN on ZeRO-1 (Lightning #17856): every form here × the report's code and its two fixes (`-- --fix all`)."""
    _harness(session, "repro", "gan")


@nox.session
def repro_zero3(session: nox.Session) -> None:
    """BoringModel on ZeRO-3 fp16 with FusedAdam (Lightning #10510): every form × fix, one table."""
    _harness(session, "repro", "zero3")


@nox.session(default=False)
def triage(session: nox.Session) -> None:
    """A script from an issue, every form, your fixes; over a range, the answer (`-- x.py --deepspeed '>=0.16'`)."""
    _harness(session, "triage")


@nox.session(default=False)
def repro(session: nox.Session) -> None:
    """Any repro of matrix.yaml by name, as repro_gan runs gan (`-- NAME --deepspeed 0.16.4 --fix none`)."""
    _harness(session, "repro")


@nox.session(default=False)
def matrix(session: nox.Session) -> None:
    """Every cell × repro × form × fix of matrix.yaml (`-- --repro gan --select 'deepspeed=0.18.*' --jobs 2`)."""
    _harness(session, "matrix")


@nox.session(default=False)
@nox.parametrize("cell", _cell_ids())
def cell(session: nox.Session, cell: str) -> None:
    """One matrix cell, every repro × form × fix in it (ids as `reprobisect matrix --list` prints them)."""
    _harness(session, "matrix", "--cell", cell)


@nox.session(default=False)
def bisect(session: nox.Session) -> None:
    """Which release and commit changed it (`-- --repro gan --good A --bad B --all-transitions --culprits --git D`)."""
    _harness(session, "bisect")


@nox.session(default=False)
def corpus(session: nox.Session) -> None:
    """Accuracy on real regressions (corpus/): each entry triaged and scored, k of n exact (`-- --entry N`)."""
    _harness(session, "corpus")


@nox.session(default=False)
def minimize(session: nox.Session) -> None:
    """Shrink a script to what still fails on one release, not another (`-- x.py --bad deepspeed==B --good ..==G`)."""
    _harness(session, "minimize")


@nox.session(default=False)
def nightly(session: nox.Session) -> None:
    """DeepSpeed releases newer than the baseline: run the nightly slice, compare, bisect; exit 1 on a regression."""
    _harness(session, "nightly")


@nox.session(default=False)
def report(session: nox.Session) -> None:
    """Report of every record under reports/ (`-- --merge DIR... --baseline DIR --fail-on regression`)."""
    _install(session)
    session.run("reprobisect", "report", *session.posargs)


@nox.session(default=False)
def wheelhouse(session: nox.Session) -> None:
    """Wheels for offline cells (`-- --deepspeed '>=0.16,<0.20' --target-python 3.12 --dest .whl`)."""
    _harness(session, "wheelhouse")


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Cell builds vs virtualenv+pip, reuse, run overhead, fresh repro_gan, cold bisection, --jobs 2: side by side."""
    session.install("virtualenv")
    _harness(session, "bench", "--workloads")


@nox.session
def env(session: nox.Session) -> None:
    """Build (or reuse) the default cell and print its torch collect_env and ds_report."""
    _harness(session, "env")


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests and the slow integration tests that build real cells and run real repros on the CPU."""
    session.install("-e", ".[test]")
    session.run(
        "pytest",
        "-m",
        "not scheduled",
        "--durations=25",
        *session.posargs,
        env={"REPROBISECT_BASE_PYTHON": BASE_PYTHON},
    )


@nox.session(default=False)
def scheduled(session: nox.Session) -> None:
    """The long real checks CI's time leaves out (more corpus entries, each triaged and scored): a scheduled job."""
    session.install("-e", ".[test]")
    session.run(
        "pytest", "-m", "scheduled", "--durations=25", *session.posargs, env={"REPROBISECT_BASE_PYTHON": BASE_PYTHON}
    )


@nox.session(default=False)
def chaos(session: nox.Session) -> None:
    """The fault suite: hangs, segfaults, OOM kills, full disks, SIGINT/SIGTERM, concurrent writers, floods."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "chaos", *session.posargs, env={"REPROBISECT_BASE_PYTHON": BASE_PYTHON})


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (checks and format) over the harness, tests and repros, mypy --strict, the import layers (lint-imports)."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", "src", "tests", "tools", "repros", "noxfile.py")
    session.run("ruff", "format", "--check", "src", "tests", "tools", "repros", "noxfile.py")
    session.run("mypy")
    session.run("lint-imports")
