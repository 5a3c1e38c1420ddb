"""``--executor slurm`` against a real one-node Slurm (tests/slurm_cluster.py: munged, MariaDB, slurmdbd,
slurmctld, slurmd, started here as root): the same verdicts and records as a local run, a bisection's probes as
jobs, a job cancelled mid-run made ENV_ERROR and requeued, a Ctrl-C that leaves no job behind, and two jobs
racing for one cell building it once. Skipped, with the reason, where the cluster cannot start."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import submitit

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.envs import ensure_env
from reprobisect.cells.pinning import resolve_cell
from tests.conftest import ROOT, base_python
from tests.integration.test_fanout_real import _report
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.slurm_cluster import Cluster, ClusterUnavailable, running_cluster

pytestmark = [pytest.mark.slow]

GATE = ROOT / "tests" / "resources" / "scripts" / "slurm" / "version_gate.py"
RELEASES = ("0.16.4", "0.16.5", "0.16.6")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # a short folder: munge's socket path must fit a sockaddr (108 bytes), which a pytest tmp path may not
    root = Path(tempfile.mkdtemp(prefix="rb-slurm-"))
    try:
        with running_cluster(root) as started:
            yield started
    except ClusterUnavailable as exc:
        pytest.skip(f"no one-node Slurm cluster here: {exc}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _command(out: Path, envs: Path, *extra: str, releases: tuple[str, ...] = RELEASES) -> list[str]:
    return [
        sys.executable,
        "-m",
        "reprobisect",
        "matrix",
        "--script",
        str(GATE),
        "--backend",
        "cpu",
        "--deepspeed",
        ",".join(releases),
        "--out",
        str(out),
        "--envs",
        str(envs),
        "--base-python",
        base_python(),
        "--config",
        str(ROOT / "matrix.yaml"),
        *extra,
    ]


def _run(cmd: list[str], cluster: Cluster, timeout: float = 600) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.perf_counter()
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT, env={**os.environ, **cluster.env}
    )
    return done, time.perf_counter() - start


def _jobs(cluster: Cluster) -> list[str]:
    return cluster.run("squeue", "-h", "-o", "%i %T").split("\n")[:-1]


def _wait_for(what: str, check, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} did not happen within {seconds:.0f} s")


def test_a_three_cell_matrix_through_slurm_gives_the_local_records(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
    cluster: Cluster,
) -> None:
    warm, _ = _run(_command(tmp_path / "warm", envs_dir), cluster)  # cells built here, so both runs below reuse them
    assert warm.returncode == 0, warm.stdout + warm.stderr
    local, local_s = _run(_command(tmp_path / "local", envs_dir), cluster)
    assert local.returncode == 0, local.stdout + local.stderr
    slurm, slurm_s = _run(_command(tmp_path / "slurm", envs_dir, "--executor", "slurm"), cluster)
    assert slurm.returncode == 0, slurm.stdout + slurm.stderr
    assert "as job array(s)" in slurm.stdout and slurm.stdout.count(": job ") == 3, slurm.stdout
    one, one_md = _report(tmp_path / "local")
    other, other_md = _report(tmp_path / "slurm")
    assert len(one) == 3
    pd.testing.assert_frame_equal(one, other)
    assert list(one["outcome"]) == ["PASS", "OTHER_FAILURE", "OTHER_FAILURE"]
    assert one_md.split("\n## ", 1)[1] == other_md.split("\n## ", 1)[1]  # the report below its header
    overhead = next(line for line in slurm.stdout.splitlines() if "overhead per job" in line)
    print(f"\n3-cell matrix, warm cells: local {local_s:.1f} s, slurm {slurm_s:.1f} s; {overhead}")
    assert _jobs(cluster) == []


def test_a_bisections_probes_run_as_jobs(tmp_path: Path, envs_dir: Path, cluster: Cluster) -> None:  # noqa: F811
    cmd = [
        sys.executable,
        "-m",
        "reprobisect",
        "bisect",
        "--script",
        str(GATE),
        "--backend",
        "cpu",
        "--good",
        RELEASES[0],
        "--bad",
        RELEASES[-1],
        "--all-transitions",
        "--probe-all-up-to",
        "2",  # the two ends first, then the middle: two waves, two job arrays
        "--jobs",
        "2",
        "--executor",
        "slurm",
        "--out",
        str(tmp_path / "bisect"),
        "--envs",
        str(envs_dir),
        "--base-python",
        base_python(),
        "--config",
        str(ROOT / "matrix.yaml"),
    ]
    done, _ = _run(cmd, cluster)
    assert done.returncode == 0, done.stdout + done.stderr
    [path] = (tmp_path / "bisect").glob("bisect-*.json")
    report = json.loads(path.read_text())
    [transition] = report["transitions"]
    assert (transition["last"], transition["first"]) == RELEASES[:2]
    # submitit's folder per job, <array>_<task>: the bisection prints no job lines, the folder names every job
    # (a wave of one probe is one plain job: submitit submits a batch of one without --array)
    jobs = sorted(p.name for p in (tmp_path / "bisect" / "slurm").iterdir() if not p.name.startswith("."))
    array_ids = {name.split("_")[0] for name in jobs}
    assert len(array_ids) == 2, jobs  # three probes in two waves (the ends, then the middle): one submission each
    sacct = cluster.run("sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(sorted(array_ids)))
    assert sacct.strip() and all(line.endswith("COMPLETED") for line in sacct.split()), sacct


def test_a_job_cancelled_mid_run_is_env_error_and_requeued_once(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
    cluster: Cluster,
) -> None:
    hold = tmp_path / "held"
    cmd = _command(
        tmp_path / "out", envs_dir, "--executor", "slurm", "--no-sandbox", "--env", f"GATE_HOLD={hold}",
        releases=RELEASES[:1],
    )  # fmt: skip
    harness = subprocess.Popen(
        cmd, cwd=ROOT, env={**os.environ, **cluster.env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        _wait_for("the repro's start", hold.exists)
        [job] = [line.split()[0] for line in _jobs(cluster)]
        cluster.run("scancel", job)
        output, _ = harness.communicate(timeout=300)
    finally:
        harness.kill()
    assert harness.returncode == 0, output
    assert f"Slurm job {job} was lost: CANCELLED" in output, output
    assert "requeued once" in output and "(requeue)" in output, output
    # the requeued job ran the repro again (the hold is open now): a verdict, not the engine's cancel
    frame, _ = _report(tmp_path / "out")
    assert list(frame["outcome"]) == ["PASS"], frame
    state = cluster.run("sacct", "-X", "-n", "-P", "-o", "State", "-j", job).strip()
    assert state.startswith("CANCELLED"), state


def test_ctrl_c_cancels_every_job_it_submitted(tmp_path: Path, envs_dir: Path, cluster: Cluster) -> None:  # noqa: F811
    hold = tmp_path / "held"
    cmd = _command(
        tmp_path / "out", envs_dir, "--executor", "slurm", "--no-sandbox", "--env", f"GATE_HOLD={hold}"
    )  # three jobs: one holds, the others finish or wait for a core
    harness = subprocess.Popen(
        cmd, cwd=ROOT, env={**os.environ, **cluster.env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        _wait_for("the repro's start", hold.exists)
        harness.send_signal(signal.SIGINT)
        output, _ = harness.communicate(timeout=120)
    finally:
        harness.kill()
    assert harness.returncode == 130, output
    assert "cancelling Slurm job(s)" in output, output
    _wait_for("an empty squeue", lambda: _jobs(cluster) == [], seconds=60)


def _build(cell_pins: dict[str, str], envs: str, python: str) -> bool:
    """One job's part of the race: the cell, built or reused; True when this job built it."""
    base = base_interpreter(python)
    return not ensure_env(resolve_cell(base, cell_pins), base, Path(envs)).reused


def test_two_jobs_racing_for_one_cell_build_it_once(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
    cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fresh = tmp_path / "shared-cells"  # no cell yet: both jobs start to build it at once
    pins = {"torch": "system", "deepspeed": RELEASES[0], "lightning": "2.6.6"}
    for name, value in cluster.env.items():
        monkeypatch.setenv(name, value)
    # the jobs (sbatch passes this environment on) take the kept DeepSpeed wheel: what races is the cell
    monkeypatch.setenv("REPROBISECT_WHEEL_CACHE", str(envs_dir.resolve() / "wheels"))
    executor = submitit.SlurmExecutor(folder=tmp_path / "jobs" / "%j", max_num_timeout=0)
    executor.update_parameters(time=10, cpus_per_task=1)
    with executor.batch():
        jobs = [executor.submit(_build, pins, str(fresh), base_python()) for _ in range(2)]
    built = [job.result() for job in jobs]
    print(f"\ntwo jobs raced for one cell: {sum(built)} build(s)")
    assert sorted(built) == [False, True]


SLOWDOWN = ROOT / "tests" / "resources" / "scripts" / "slowdown" / "zero2_many_params.py"


def test_a_timing_search_runs_its_repeats_as_jobs_alike(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
    cluster: Cluster,
) -> None:
    """``bisect --slower-than`` through Slurm (issue #38): each version's runs one job (a cell's repeats run one
    after another inside its job; a later repeat is another job), one version at a time, the records saying how
    each ran, and the search finding DeepSpeed 0.18.5's slower ZeRO-2 step (PR #7780; see
    tests/integration/test_slowdown_real.py) with every run alike."""
    out = tmp_path / "timed"
    cmd = [sys.executable, "-m", "reprobisect", "bisect", "--script", str(SLOWDOWN), "--instruments"]
    cmd += ["--env", "OMP_NUM_THREADS=1", "--axis", "deepspeed", "--good", "0.18.4", "--bad", "0.18.5"]
    cmd += ["--slower-than", "50", "--max-repeats", "4", "--backend", "cpu", "--lightning", "2.6.6"]
    cmd += ["--executor", "slurm", "--out", str(out), "--envs", str(envs_dir), "--base-python", base_python()]
    cmd += ["--config", str(ROOT / "matrix.yaml"), "--", "--steps", "15"]
    done, seconds = _run(cmd, cluster, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    [path] = out.glob("bisect-*-0.18.4-0.18.5-first-bad.json")
    report = json.loads(path.read_text())
    [came] = report["transitions"]
    assert (came["last"], came["first"]) == ("0.18.4", "0.18.5") and came["to"]["slower"] is True
    assert report["comparable"] is True, report["unlike"]
    jobs = [p for p in (out / "slurm").iterdir() if not p.name.startswith(".")]
    assert len(jobs) >= 2, sorted(p.name for p in jobs)  # each version's runs at least one job
    runs = [p for p in (out / "records").rglob("*.json")]
    assert len(runs) >= 2 * 3, runs  # three runs of each version at least
    print(f"\ntiming search through Slurm: {len(jobs)} jobs in {seconds:.0f} s")
    assert _jobs(cluster) == []
