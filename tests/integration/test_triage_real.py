"""Triage on real packages (issue #14): a script with its own arguments and four kinds of fixes given on the command
line; the command its record keeps re-runs it; several gloo ranks (one that fails, one that hangs); the canonical
CPU forms with two ranks; DeepSpeed #8072 found with two ranks between 0.19.1, 0.19.2 and 0.19.3."""

from __future__ import annotations

import difflib
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from reprobisect.model.record import Record
from tests.conftest import ROOT, base_python
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool("patch")]

SCRIPTS = ROOT / "tests" / "resources" / "scripts"
ISSUE = SCRIPTS / "triage" / "issue_with_args.py"
CELL = ("--deepspeed", "0.19.8", "--lightning", "2.6.6")


def _harness(*args: str, envs: Path, out: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "reprobisect", *args]
    split = cmd.index("--") if "--" in cmd else len(cmd)  # the harness's options go before the script's own
    common = ["--backend", "cpu", "--out", str(out), "--envs", str(envs), "--base-python", base_python()]
    cmd[split:split] = common
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _records(out: Path) -> list[Record]:
    return [Record.load(path) for path in sorted((out / "records").rglob("*.json"))]


def _patch_setting_issue_fixed(envs: Path, tmp_path: Path) -> Path:
    """A patch to the cell's own deepspeed/constants.py (made from the file installed there, so it applies exactly)."""
    installed = next(envs.glob("torch-*_deepspeed-0.19.8_lightning-2.6.6/lib/python*/site-packages/deepspeed"))
    old = (installed / "constants.py").read_text().splitlines(keepends=True)
    new = [*old, "ISSUE_FIXED = True\n"]
    diff = difflib.unified_diff(old, new, "a/deepspeed/constants.py", "b/deepspeed/constants.py")
    patch = tmp_path / "issue-fixed.diff"
    patch.write_text("".join(diff))
    return patch


@pytest.mark.requires_tool(*DEEPSPEED_OPS)
def test_a_script_with_arguments_and_four_kinds_of_fixes(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    _harness("triage", str(ISSUE), *CELL, "--", "--steps", "2", envs=envs_dir, out=out)
    patch = _patch_setting_issue_fixed(envs_dir, tmp_path)
    fixes = (
        *("--fix-args", "safe=--safe"),
        *("--fix-env", "workaround=ISSUE_WORKAROUND=1"),
        *("--fix-patch", f"patched={patch}"),
        *("--fix-override", "older=deepspeed==0.16.4"),
    )
    _harness("triage", str(ISSUE), *CELL, *fixes, "--jobs", "2", "--", "--steps", "2", envs=envs_dir, out=out)
    records = {r.fix: r for r in _records(out)}
    assert records["none"].outcome == "OTHER_FAILURE"
    assert records["none"].signature is not None and "issue N: step N diverged" in records["none"].signature.text
    for fix, kind in (("safe", "args"), ("workaround", "env"), ("patched", "patch"), ("older", "override")):
        assert records[fix].outcome == "PASS", (fix, records[fix].signature)
        assert records[fix].fix_kind == kind
        assert records[fix].argv[-2:] == ["--steps", "2"] or "--safe" in records[fix].argv  # the script's own args
    assert records["older"].versions["deepspeed"] == "0.16.4"
    assert records["older"].matrix_cell == records["none"].cell["id"]  # reported in the row of the 0.19.8 cell

    # the command the env fix's record keeps re-runs it, from a fresh output folder, with the same verdict
    words = records["workaround"].rerun
    assert words[:5] == ["nox", "-s", "triage", "--", str(ISSUE)]
    again = tmp_path / "again"
    _harness("triage", *words[4:], envs=envs_dir, out=again)
    (rerun,) = _records(again)
    assert (rerun.fix, rerun.outcome, rerun.fix_kind) == ("workaround", "PASS", "env")

    # the report prints one real command per run
    subprocess.run(
        [sys.executable, "-m", "reprobisect", "report", "--out", str(out), "--dest", str(tmp_path / "report")],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    text = (tmp_path / "report" / "report.md").read_text()
    for record in records.values():
        assert shlex.join(record.rerun) in text


def test_two_gloo_ranks_a_failing_rank_and_a_hanging_one(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    script = SCRIPTS / "ranks" / "gloo_ranks.py"
    fixes = ("--fix-args", "fail1=--fail-rank 1 --fail-step 1", "--fix-args", "hang=--hang-rank 1")
    _harness("triage", str(script), *CELL, "--nproc", "2", *fixes, "--timeout", "40", envs=envs_dir, out=out)
    records = {r.fix: r for r in _records(out)}
    ok, failed, hung = records["none"], records["fail1"], records["hang"]
    assert all(r.nproc == 2 and r.cell["id"].endswith("_nproc-2") for r in records.values())
    assert ok.outcome == "PASS" and len(ok.steps) == 3
    # rank 1 failed first: its traceback is the signature, its step the step the run died at
    assert failed.outcome == "OTHER_FAILURE" and failed.failed_rank == 1
    assert failed.signature is not None and failed.signature.exception == "ValueError"
    assert failed.failing_step == 1
    assert failed.wall_seconds < 30  # rank 0, blocked in the all-reduce, was stopped by the launcher
    (rank_log,) = failed.rank_logs
    assert "rank 1 cannot go on at step 1" in (out / rank_log).read_text()
    # rank 1 sleeps, rank 0 waits for it in the all-reduce: the timeout ends both
    assert hung.outcome == "TIMEOUT" and 40 <= hung.wall_seconds < 60
    assert "--nproc 2" in shlex.join(hung.rerun)


def _no_process_of(out: Path) -> bool:
    needle = str(SCRIPTS / "ranks" / "gloo_ranks.py").encode()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and needle in (proc / "cmdline").read_bytes():
                return False
        except OSError:
            continue
    return True


def test_no_rank_outlives_its_run(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    script = SCRIPTS / "ranks" / "gloo_ranks.py"
    _harness(
        "triage",
        str(script),
        *CELL,
        "--nproc",
        "3",
        "--timeout",
        "20",
        "--",
        "--hang-rank",
        "2",
        envs=envs_dir,
        out=out,
    )
    (record,) = _records(out)
    assert record.outcome == "TIMEOUT" and len(record.rank_logs) == 2
    assert _no_process_of(out)


@pytest.mark.requires_tool(*DEEPSPEED_OPS)
def test_the_canonical_cpu_forms_with_two_ranks(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    """Both CPU forms of both canonical repros: DeepSpeed alone (cpu-deepspeed) and Lightning's own strategy
    (cpu-shim, Fabric and the Trainer with devices = the launcher's LOCAL_WORLD_SIZE)."""
    out = tmp_path / "out"
    for repro in ("gan", "zero3"):
        _harness(
            "repro", repro, *CELL, "--form", "cpu-deepspeed,cpu-shim", "--fix", "none", "--nproc", "2",
            envs=envs_dir, out=out,
        )  # fmt: skip
    records = {(r.repro, r.form): r for r in _records(out)}
    assert sorted(records) == [(r, f) for r in ("gan", "zero3") for f in ("cpu-deepspeed", "cpu-shim")]
    for key, record in records.items():
        assert record.nproc == 2 and len(record.rank_logs) == 1, key
        assert record.config.get("world_size", 2) == 2
        assert record.outcome in ("PASS", "REPRODUCED", "OTHER_FAILURE"), (key, record.signature)
    assert records["zero3", "cpu-deepspeed"].outcome == "PASS"  # ZeRO-3 bf16 on two ranks trains on 0.19.8
    assert records["zero3", "cpu-shim"].outcome == "PASS"  # and so does the Trainer's deepspeed_stage_3 on two


@pytest.mark.requires_tool(*DEEPSPEED_OPS)
def test_deepspeed_8072_needs_two_ranks_and_bisects_to_0_19_2(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    """DeepSpeed #8072: ZeRO-3 all-gathers mixed-dtype parameters with the first one's dtype on 0.19.2 only. With
    one rank the all-gather is a copy and nothing fails; with two, 0.19.2 reproduces and its neighbours pass."""
    out = tmp_path / "out"
    common = ("--repro", "zero3-mixed-dtype", "--form", "cpu-deepspeed", "--fix", "torch-adam", "--lightning", "2.6.6")
    _harness("matrix", *common, "--deepspeed", "0.19.1,0.19.2,0.19.3", "--nproc", "1,2", envs=envs_dir, out=out)
    outcomes = {(r.versions["deepspeed"], r.nproc): r.outcome for r in _records(out)}
    assert outcomes == {
        ("0.19.1", 1): "PASS",
        ("0.19.2", 1): "PASS",
        ("0.19.3", 1): "PASS",
        ("0.19.1", 2): "PASS",
        ("0.19.2", 2): "REPRODUCED",
        ("0.19.3", 2): "PASS",
    }
    done = _harness(
        "bisect",
        *("--repro", "zero3-mixed-dtype", "--form", "cpu-deepspeed", "--fix", "torch-adam", "--lightning", "2.6.6"),
        *("--nproc", "2", "--good", "0.19.1", "--bad", "0.19.2"),
        envs=envs_dir,
        out=out,
    )
    assert "0.19.1 PASS" in done.stdout and "-> 0.19.2 REPRODUCED" in done.stdout
    assert "0 runs executed, 2 reused" in done.stdout  # the matrix's records serve the bisection's probes
    done = _harness(
        "bisect",
        *("--repro", "zero3-mixed-dtype", "--form", "cpu-deepspeed", "--fix", "torch-adam", "--lightning", "2.6.6"),
        *("--nproc", "2", "--good", "0.19.2", "--bad", "0.19.3", "--all-transitions"),
        envs=envs_dir,
        out=out,
    )
    assert "0.19.2 REPRODUCED" in done.stdout and "-> 0.19.3 PASS" in done.stdout


TREE = SCRIPTS.parent / "pytest_tree"
THINGS = TREE / "pkgtests" / "sub" / "test_things.py"


@pytest.mark.requires_tool(*DEEPSPEED_OPS)
def test_a_package_own_tests_as_repros(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    selections = [f"{THINGS}::{name}" for name in ("test_passes", "test_warns", "test_fails_unless_fixed")]
    broken = TREE / "pkgtests" / "sub" / "test_broken_import.py"
    options = [item for spec in [*selections, str(broken)] for item in ("--pytest", spec)]
    _harness("triage", *options, *CELL, "--fix-env", "fixed=THINGS_FIXED=1", "--jobs", "2", envs=envs_dir, out=out)
    records = {(r.repro, r.fix): r for r in _records(out)}
    for name in ("test_passes", "test_warns"):
        assert records[(f"pytest-test_things-{name}", "none")].outcome == "PASS"
    failing = records[("pytest-test_things-test_fails_unless_fixed", "none")]
    assert failing.outcome == "OTHER_FAILURE" and failing.signature is not None
    assert failing.signature.exception == "AssertionError" and "broke things" in failing.signature.message
    assert failing.tests == {"pkgtests/sub/test_things.py::test_fails_unless_fixed": "failed"}
    assert failing.failing_step == 0
    assert records[("pytest-test_things-test_fails_unless_fixed", "fixed")].outcome == "PASS"
    collect = records[("pytest-test_broken_import", "none")]
    assert collect.outcome == "OTHER_FAILURE" and collect.signature is not None
    assert collect.signature.exception == "CollectionError" and "no_such_module" in collect.signature.message
    assert records[("pytest-test_things-test_passes", "none")].rerun[:6] == [
        *("nox", "-s", "triage", "--", "--pytest", f"{THINGS}::test_passes"),
    ]


def test_pytest_is_brought_to_a_cell_without_one(tmp_path: Path) -> None:
    from reprobisect.cells.envs import CellEnv
    from reprobisect.cells.tools import has_pytest, pytest_folder
    from reprobisect.model.cell import Cell

    venv = tmp_path / "venv"
    subprocess.run([base_python(), "-m", "venv", "--without-pip", str(venv)], check=True)
    cell = Cell(python="3", torch="none", torch_source="system", packages={})
    env = CellEnv(cell=cell, path=venv, reused=True, build_seconds=0.0)
    assert not has_pytest(env)
    folder = pytest_folder(env, tmp_path / "envs")
    assert folder is not None and (folder / "pytest").is_dir()
    assert pytest_folder(env, tmp_path / "envs") == folder  # installed once per Python version
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import pytest; print(pytest.__version__)"],
        env={"PYTHONPATH": str(folder)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_pasted_script_times_its_steps_with_the_instruments_on_request(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    """``--instruments``: a script outside the checkout imports the repros' shared module in the sandbox (its folder
    on the run's sys.path, the file readable), and its step events reach the record."""
    script = tmp_path / "pasted" / "steps.py"
    script.parent.mkdir()
    script.write_text(
        "import instruments\nimport torch\n\nfor i in range(3):\n    with instruments.step(i):\n"
        "        torch.ones(4).sum()\n"
    )
    out = tmp_path / "out"
    _harness("triage", str(script), *CELL, "--instruments", envs=envs_dir, out=out)
    [record] = _records(out)
    assert record.outcome == "PASS", record.signature
    assert [step.step for step in record.steps] == [0, 1, 2]
    assert "--instruments" in " ".join(record.rerun or ())
