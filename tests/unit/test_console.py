"""What a session prints: a table that fits 120 columns, known names beside ids, and the next command."""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.model.record import Record
from reprobisect.model.repro import repro_head
from reprobisect.model.signature import Signature
from reprobisect.report.terminal import next_step, runs_table, signature_legend
from reprobisect.util.console import WIDTH, cut, heartbeat

RELEASES = Path(__file__).parents[1] / "resources" / "records" / "releases" / "records" / "gan"


def _records(release: str) -> list[Record]:
    folder = RELEASES / f"torch-2.13.0+cpu_deepspeed-{release}_lightning-2.6.6"
    return [Record.load(p) for p in sorted(folder.glob("*__r0.json"))]


def test_the_table_fits_120_columns_and_names_known_signatures() -> None:
    records = _records("0.16.4")
    table = runs_table(records)
    assert max(len(line) for line in table.splitlines()) <= WIDTH
    assert "36b244a365 zero-ipg-buffer-none" in table  # the known name beside the id
    assert "torch-2.13.0+cpu_deepspeed-0.16.4_lightning-2.6.6 · cpu-deepspeed (bf16)" in table
    assert table.count("✗ REPRODUCED") == sum(r.outcome == "REPRODUCED" for r in records)


def test_the_legend_gives_each_signature_once_in_full() -> None:
    records = _records("0.16.4") + _records("0.17.0")
    legend = signature_legend(records)
    ids = {r.signature.id for r in records if r.signature}
    assert legend[0] == "Signatures:"
    for sig_id in ids:
        assert sum(line.strip().startswith(sig_id) for line in legend) == 1
    assert any("Lightning-AI/pytorch-lightning#17856" in line for line in legend)
    assert max(len(line) for line in legend) <= WIDTH


def _hostile(record: Record, fix: str, text: str) -> Record:
    signature = Signature(exception="E", message=text)  # a forged record's message can be anything
    return dataclasses.replace(record, fix=fix, signature=signature, known_signature=None, matrix_cell=fix * 3)


@settings(max_examples=60, deadline=None)
@given(fix=st.text(min_size=1, max_size=300), text=st.text(max_size=2000))
def test_no_line_is_wider_than_the_console_whatever_the_names(fix: str, text: str) -> None:
    record = _hostile(_records("0.16.4")[0], fix, text)
    for block in (runs_table([record]), "\n".join(signature_legend([record]))):
        assert all(len(line) <= WIDTH for line in block.splitlines())


def test_cut_marks_what_it_cut() -> None:
    assert cut("short", 10) == "short"
    assert cut("a  b\nc", 10) == "a b c"
    assert cut("x" * 20, 10) == "x" * 9 + "…"


def test_no_hint_when_the_report_reproduced() -> None:
    records = _records("0.16.4")
    assert (
        next_step(
            records, repro="gan", expected="zero-ipg-buffer-none", stored=[], rerun=["nox", "-s", "repro_gan", "--"]
        )
        is None
    )


def test_the_hint_names_the_newest_release_of_the_users_own_records() -> None:
    here = _records("0.19.8")
    stored = _records("0.16.4") + _records("0.17.0") + here
    hint = next_step(
        here, repro="gan", expected="zero-ipg-buffer-none", stored=stored, rerun=["nox", "-s", "repro_gan", "--"]
    )
    assert hint is not None
    assert "deepspeed 0.19.8" in hint.reason and "last reproduced on deepspeed 0.16.4 (your records" in hint.reason
    assert hint.commands[0] == "nox -s repro_gan -- --deepspeed 0.16.4"
    assert hint.commands[1].startswith("nox -s bisect -- --repro gan --axis deepspeed --good 0.19.8 --bad 0.16.4")
    assert all(len(line) <= WIDTH for line in hint.lines())


def test_without_records_the_known_signature_says_where_it_reproduced() -> None:
    here = _records("0.19.8")
    hint = next_step(
        here,
        repro="gan",
        expected="zero-ipg-buffer-none",
        stored=[],
        rerun=["nox", "-s", "repro_gan", "--"],
        pins={"lightning": "2.6.6"},
    )
    assert hint is not None
    assert "known signatures" in hint.reason
    assert hint.commands[0] == "nox -s repro_gan -- --deepspeed 0.16.4 --lightning 2.6.6"


def test_a_patch_that_does_not_apply_is_named_apart_from_the_failures() -> None:
    """A newcomer read "fail with 4990cc6f53" (the PatchError of an unrun fix) as one more failure."""
    here = _records("0.19.8")
    unrun = dataclasses.replace(
        here[0], fix="lightning-patch", outcome="ENV_ERROR", signature=Signature(exception="PatchError", message="m")
    )
    hint = next_step([*here, unrun], repro="gan", expected="zero-ipg-buffer-none", stored=[], rerun=["c"])
    assert hint is not None
    failures, _, not_run = hint.reason.partition("; not run: ")
    assert unrun.signature is not None and unrun.signature.id not in failures
    assert not_run.startswith("lightning-patch (the patch does not apply to this release)")


def test_a_bug_never_seen_reproduce_gets_a_matrix_over_releases() -> None:
    here = _records("0.19.8")
    hint = next_step(
        here, repro="zero3", expected="zero3-allgather-dtype", stored=[], rerun=["nox", "-s", "repro_zero3", "--"]
    )
    assert hint is not None
    assert hint.commands == ("nox -s matrix -- --repro zero3 --deepspeed '>=0.16,<0.20'",)


def test_heartbeat_speaks_while_the_block_runs_and_stops_after() -> None:
    heard: list[str] = []
    lock = threading.Lock()

    def echo(line: str) -> None:
        with lock:
            heard.append(line)

    with heartbeat(echo, "building cell x", every=0.05):
        time.sleep(0.3)
    count = len(heard)
    time.sleep(0.15)
    assert count >= 3 and len(heard) == count
    assert heard[0].startswith("  … building cell x, ")


def test_a_heartbeat_asks_a_changing_phase_at_each_beat() -> None:
    heard: list[str] = []
    phase = ["building cell x"]
    with heartbeat(heard.append, lambda: phase[0], every=0.05):
        time.sleep(0.15)
        phase[0] = "run 2 of 3"
        time.sleep(0.2)
    assert heard[0].startswith("  … building cell x, ") and heard[-1].startswith("  … run 2 of 3, ")


def test_bench_gpu_says_each_phase_and_is_never_silent_for_a_beat(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # on an H100 ``bench --gpu`` printed nothing for 240 s (issue #52)
    from reprobisect.commands import bench

    def measure(*args: object, say: Callable[[str], None], **kwargs: object) -> str:
        say("run 1 of 5 alone, through the harness and bare")
        time.sleep(0.35)
        return "bench"

    monkeypatch.setattr(bench, "heartbeat", functools.partial(heartbeat, every=0.1))
    monkeypatch.setattr(bench, "resolve_cell", lambda base, pins: "cell")
    monkeypatch.setattr(bench, "ensure_env", lambda cell, base, envs: "env")
    monkeypatch.setattr(bench, "run_gpu_bench", measure)
    monkeypatch.setattr(bench, "format_gpu_bench", lambda result: f"rows of the {result}")
    options = types.SimpleNamespace(common=types.SimpleNamespace(pins={}, envs=Path("e")), runs=5, jobs=2)
    ctx = types.SimpleNamespace(base="base")
    assert bench._gpu_rows(options, types.SimpleNamespace(default_cell={}), ctx) == 0  # type: ignore[arg-type]
    said = capsys.readouterr().out.splitlines()
    assert said[0] == "bench --gpu: run 1 of 5 alone, through the harness and bare"
    assert sum(line.startswith("  … bench --gpu: run 1 of 5 alone") for line in said) >= 2
    assert said[-1] == "rows of the bench"


def test_died_at_is_unknown_for_a_script_that_reports_no_steps() -> None:
    """A pasted script reports no steps: its failure died somewhere unknown (``-``), not at a setup it never
    announced; a repro that reports steps and failed before the first one died at setup."""
    from reprobisect.model.outcome import Outcome
    from reprobisect.run.one_run import _failing_step

    assert _failing_step(Outcome.OTHER_FAILURE, [], reports_steps=False) is None
    assert _failing_step(Outcome.OTHER_FAILURE, [], reports_steps=True) == "setup"
    assert _failing_step(Outcome.PASS, [], reports_steps=True) is None
    [failed, *_] = [r for r in _records("0.16.4") if r.outcome != "PASS"]
    lines = runs_table([dataclasses.replace(failed, failing_step=None)]).splitlines()
    header = next(line for line in lines if "died at" in line)
    row = next(line for line in lines if line.strip().startswith(failed.fix))
    assert row[header.index("died at") : header.index("ms/step")].strip() == "-"


def test_installed_the_hint_names_the_commands_that_run_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #54: an installed harness printed `nox -s ...` hints, which exit 127 where there is no noxfile."""
    monkeypatch.delenv("NOX_CURRENT_SESSION")
    here = _records("0.19.8")
    hint = next_step(here, repro="zero3", expected="zero3-allgather-dtype", stored=[], rerun=repro_head("zero3"))
    assert hint is not None and hint.commands == ("reprobisect matrix --repro zero3 --deepspeed '>=0.16,<0.20'",)
    known = next_step(here, repro="gan", expected="zero-ipg-buffer-none", stored=[], rerun=repro_head("gan"))
    assert known is not None and known.commands[0].startswith("reprobisect repro gan --deepspeed ")
    assert known.commands[1].startswith("reprobisect bisect --repro gan --axis deepspeed")
