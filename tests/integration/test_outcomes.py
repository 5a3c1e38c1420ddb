"""Every outcome class produced by a real child process through the real runner and store."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from reprobisect.cells.envs import CellEnv
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.run.one_run import RunSpec, execute
from tests.conftest import make_repro


def _run(env: CellEnv, tmp_path: Path, script: str, **kwargs: object) -> Record:
    repro = make_repro(script, **kwargs)  # type: ignore[arg-type]
    spec = RunSpec(repro=repro, form=repro.forms["cpu-deepspeed"], fix=repro.fixes["none"], env=env)
    return execute(spec, Store(tmp_path / "reports"), environ=os.environ)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_pass_records_steps_and_versions(plain_env: CellEnv, tmp_path: Path) -> None:
    record = _run(plain_env, tmp_path, "passes.py")
    assert record.outcome == Outcome.PASS.value
    assert [s.step for s in record.steps] == [0, 1, 2]
    assert record.step_median_seconds is not None
    assert record.first_step_seconds is not None
    assert record.step_median_seconds > record.first_step_seconds  # warm-up excluded: steps 1, 2 sleep longer
    assert record.versions_source == "imported"
    assert record.peak_rss_bytes and record.peak_rss_bytes > 0
    assert record.python == ".".join(map(str, sys.version_info[:3]))
    records = tmp_path / "reports" / "records"
    stored = Record.load(records / "passes" / record.cell["id"] / "cpu-deepspeed__none__r0.json")
    assert stored == record


def test_reproduced_with_failing_step(plain_env: CellEnv, tmp_path: Path) -> None:
    record = _run(plain_env, tmp_path, "raises.py")
    assert record.outcome == Outcome.REPRODUCED.value
    assert record.failing_step == 1
    assert record.known_signature == "zero-ipg-buffer-none"
    assert record.signature is not None
    assert list(record.signature.frames) == [
        "deepspeed.runtime.zero.stage_1_and_2:reduce_independent_p_g_buckets_and_remove_grads"
    ]


def test_other_failure(plain_env: CellEnv, tmp_path: Path) -> None:
    record = _run(plain_env, tmp_path, "other_failure.py")
    assert record.outcome == Outcome.OTHER_FAILURE.value
    assert record.failing_step == "setup"
    assert record.signature is not None
    assert record.signature.message == "something else at 0x? in <path> after N steps"


@pytest.mark.chaos
def test_a_flooding_repro_has_its_log_capped_and_is_still_classified(plain_env: CellEnv, tmp_path: Path) -> None:
    record = _run(plain_env, tmp_path, "floods.py", expected=None)
    log = tmp_path / "reports" / record.log_path
    assert log.stat().st_size < 11 * 2**20  # 8 MiB head + 2 MiB tail + the marker
    assert "log capped" in log.read_text(errors="replace")
    assert record.outcome == Outcome.OTHER_FAILURE.value
    assert record.signature is not None
    assert record.signature.message == "after the flood"
    assert [s.step for s in record.steps] == [0]  # the event from the dropped middle was kept


def test_import_failure_is_env_error(plain_env: CellEnv, tmp_path: Path) -> None:
    assert _run(plain_env, tmp_path, "cannot_import.py").outcome == Outcome.ENV_ERROR.value


@pytest.mark.chaos
def test_segfault_is_crash(plain_env: CellEnv, tmp_path: Path) -> None:
    record = _run(plain_env, tmp_path, "segfaults.py")
    assert record.outcome == Outcome.CRASH.value
    assert record.signature is not None
    assert record.signature.message == "SIGSEGV"


@pytest.fixture
def memory_cgroup():
    """A cgroup v1 memory group limited to 256 MiB, or a skip where this machine has none to give."""
    import uuid

    root = Path("/sys/fs/cgroup/memory")
    group = root / f"reprobisect-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(256 * 2**20))
        swap = group / "memory.memsw.limit_in_bytes"
        if swap.exists():
            swap.write_text(str(256 * 2**20))
    except OSError as exc:
        pytest.skip(f"no writable cgroup v1 memory controller here ({exc})")
    yield group
    for _ in range(50):
        try:
            group.rmdir()
            break
        except OSError:
            time.sleep(0.1)


@pytest.mark.chaos
def test_a_child_killed_for_memory_is_a_crash(plain_env: CellEnv, tmp_path: Path, memory_cgroup: Path) -> None:
    record = _run(plain_env, tmp_path, "oom.py", args=(str(memory_cgroup),))
    assert record.outcome == Outcome.CRASH.value
    assert record.signature is not None
    assert record.signature.message == "SIGKILL (the out-of-memory killer)"  # the kernel log names the run's pid
    assert record.kill_evidence is not None and "OOM killer killed process" in record.kill_evidence
    control = dict(line.split() for line in (memory_cgroup / "memory.oom_control").read_text().splitlines())
    assert int(control["oom_kill"]) >= 1  # the kernel's OOM killer really killed it


@pytest.mark.chaos
def test_timeout_kills_the_whole_group_grandchild_included(plain_env: CellEnv, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    start = time.monotonic()
    # 10 s: long enough for the child to be running its script on a loaded machine when SIGINT comes
    record = _run(plain_env, tmp_path, "sleeps_with_grandchild.py", timeout=10, args=(str(pid_file),))
    assert record.outcome == Outcome.TIMEOUT.value
    assert time.monotonic() - start < 60
    # SIGINT first: Python printed where the child was stuck
    assert record.signature is not None
    assert record.signature.exception == "KeyboardInterrupt"
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild), "the grandchild survived the timeout"


@pytest.mark.chaos
def test_sigterm_to_the_cli_mid_run_stops_the_child_group(tmp_path: Path) -> None:
    """SIGTERM to `reprobisect matrix` while a script runs: no process of the child's group survives."""
    import subprocess

    config = tmp_path / "matrix.yaml"
    config.write_text("version: 1\ndefault_cell: {python: system}\nmatrix:\n  axes: {python: [system]}\nrepros: {}\n")
    pid_file = tmp_path / "gc.pid"
    script = tmp_path / "hang.py"
    script.write_text(
        (Path(__file__).parents[1] / "resources" / "scripts" / "sleeps_with_grandchild.py")
        .read_text()
        .replace("sys.argv[1]", repr(str(pid_file)))
    )
    # unconfined: the script reports its grandchild's pid in a file outside its work folder (a sandboxed run
    # could not write it; tests/integration/test_sandbox.py covers what the sandbox ends)
    cmd = [
        sys.executable,
        "-m",
        "reprobisect",
        "matrix",
        "--script",
        str(script),
        "--backend",
        "cpu",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "out"),
        "--envs",
        str(tmp_path / "cells"),
        "--base-python",
        sys.executable,
        "--no-sandbox",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), "the script never started"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)
    assert not list((tmp_path / "out").rglob("*.json"))


@pytest.mark.chaos
def test_two_harnesses_writing_into_the_same_reports(tmp_path: Path) -> None:
    """Two `reprobisect matrix` processes, same cell, same runs, same reports/: nothing lost or interleaved."""
    import subprocess

    config = tmp_path / "matrix.yaml"
    config.write_text("version: 1\ndefault_cell: {python: system}\nmatrix:\n  axes: {python: [system]}\nrepros: {}\n")
    script = Path(__file__).parents[1] / "resources" / "scripts" / "passes.py"
    cmd = [
        sys.executable,
        "-m",
        "reprobisect",
        "matrix",
        "--script",
        str(script),
        "--backend",
        "cpu",
        "--repeat",
        "6",
        "--fresh",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "out"),
        "--envs",
        str(tmp_path / "cells"),
        "--base-python",
        sys.executable,
    ]
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    records = sorted((tmp_path / "out" / "records").rglob("*.json"))
    assert [p.name for p in records] == [f"cpu-deepspeed__none__r{i}.json" for i in range(6)]
    loaded = [Record.load(p) for p in records]  # every file is a whole record
    assert all(r.outcome == "PASS" and len(r.steps) == 3 for r in loaded)
    logs = sorted((tmp_path / "out" / "logs").rglob("*.log"))
    assert len(logs) == 12  # one per run of either harness
    for log in logs:
        text = log.read_text()
        assert text.count('"event": "step"') == 3 and text.count('"event": "exit"') == 1
    assert not list((tmp_path / "out").rglob("*.tmp"))
    assert len(list((tmp_path / "cells").glob("*/bin/python"))) == 1  # the cell was built once


@pytest.mark.chaos
def test_sigint_to_the_harness_mid_run_keeps_earlier_records_intact(tmp_path: Path) -> None:
    """Run a two-repro harness in a subprocess, interrupt it during the second run, check the store."""
    import subprocess

    driver = tmp_path / "driver.py"
    driver.write_text(f"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # pytest may run with SIGINT ignored (a background job)
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
from pathlib import Path
from reprobisect.model.cell import Cell
from reprobisect.cells.envs import CellEnv
from reprobisect.run.one_run import RunSpec, execute
from reprobisect.model.store import Store
from tests.conftest import make_repro
path = Path({str(tmp_path)!r}) / "cell"
(path / "bin").mkdir(parents=True)
(path / "bin" / "python").symlink_to(sys.executable)
env = CellEnv(cell=Cell(python="3", torch="none", torch_source="pinned", packages={{}}), path=path, reused=True, build_seconds=0)
store = Store(Path({str(tmp_path)!r}) / "reports")
for script, args in (("passes.py", ()), ("sleeps_with_grandchild.py", ({str(tmp_path / "gc.pid")!r},))):
    repro = make_repro(script, timeout=120, args=args)
    execute(RunSpec(repro=repro, form=repro.forms["cpu-deepspeed"], fix=repro.fixes["none"], env=env), store, environ=os.environ)
    print("done", script, flush=True)
""")
    proc = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("done passes.py")
    gc_pid_file = tmp_path / "gc.pid"
    deadline = time.monotonic() + 30
    while not gc_pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert proc.returncode != 0
    records = sorted((tmp_path / "reports" / "records").rglob("*"))
    files = [p for p in records if p.is_file()]
    assert [p.name for p in files] == ["cpu-deepspeed__none__r0.json"]  # the finished run, nothing half-written
    assert Record.load(files[0]).outcome == "PASS"
    grandchild = int(gc_pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)


@pytest.mark.chaos
@pytest.mark.parametrize("secret", ["GITHUB_TOKEN", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "MY_SERVICE_PASSWORD"])
def test_child_environment_has_no_credentials(plain_env: CellEnv, tmp_path: Path, secret: str) -> None:
    from reprobisect.run.one_run import child_environ

    repro = make_repro("passes.py")
    spec = RunSpec(repro=repro, form=repro.forms["cpu-deepspeed"], fix=repro.fixes["none"], env=plain_env)
    env = child_environ(spec, {"PATH": "/usr/bin", secret: "s3cr3t", "DS_ACCELERATOR": "cpu"})
    assert secret not in env
    assert env["DS_ACCELERATOR"] == "cpu"
    assert env["PATH"].startswith(str(plain_env.path / "bin"))
    assert secret in child_environ(spec, {secret: "x"}, allow=[secret])


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 1 MiB tmpfs, or a skip where this machine does not let tests mount one."""
    import subprocess

    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.chaos
def test_disk_full_while_writing_records(tmp_path: Path, small_disk: Path) -> None:
    import subprocess

    config = tmp_path / "matrix.yaml"
    config.write_text("version: 1\ndefault_cell: {python: system}\nmatrix:\n  axes: {python: [system]}\nrepros: {}\n")
    script = Path(__file__).parents[1] / "resources" / "scripts" / "passes.py"

    def harness(repeat: int) -> subprocess.CompletedProcess[str]:
        cmd = [
            sys.executable,
            "-m",
            "reprobisect",
            "matrix",
            "--script",
            str(script),
            "--backend",
            "cpu",
            "--repeat",
            str(repeat),
            "--config",
            str(config),
            "--out",
            str(small_disk / "out"),
            "--envs",
            str(tmp_path / "cells"),
            "--base-python",
            sys.executable,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)

    assert harness(1).returncode == 0
    [first] = list((small_disk / "out" / "records").rglob("*.json"))
    before = first.read_bytes()
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)  # fill the disk to the last byte
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
    done = harness(2)
    assert done.returncode == 7, done.stdout + done.stderr
    assert "cannot create the run's log" in done.stderr or "cannot write this record" in done.stderr
    assert "No space left on device" in done.stderr
    assert first.read_bytes() == before  # the earlier record is intact
    assert Record.load(first).outcome == "PASS"
    assert not list((small_disk / "out").rglob("*.tmp"))


@pytest.mark.chaos
def test_repeat_marks_a_flaky_repro(tmp_path: Path) -> None:
    import subprocess

    config = tmp_path / "matrix.yaml"
    config.write_text("version: 1\ndefault_cell: {python: system}\nmatrix:\n  axes: {python: [system]}\nrepros: {}\n")
    script = tmp_path / "flaky.py"
    script.write_text(
        (Path(__file__).parents[1] / "resources" / "scripts" / "flaky.py")
        .read_text()
        .replace("sys.argv[1]", repr(str(tmp_path / "counter")))
    )
    # unconfined: the flaky script keeps its counter outside its work folder, which a sandbox would not let it
    cmd = [
        sys.executable,
        "-m",
        "reprobisect",
        "matrix",
        "--script",
        str(script),
        "--backend",
        "cpu",
        "--repeat",
        "4",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "out"),
        "--envs",
        str(tmp_path / "cells"),
        "--base-python",
        sys.executable,
        "--no-sandbox",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("FLAKY")]
    assert "4 runs disagree" in line
    assert "PASS" in line
    assert "OTHER_FAILURE" in line
