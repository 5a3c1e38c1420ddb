"""The report's loader: real records into the long frame; broken files are warned about and skipped."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pandas as pd
import pytest

from reprobisect.model.record import Record
from reprobisect.model.signature import Signature
from reprobisect.report.frame import (
    AXES,
    SkippedFileWarning,
    latest_runs,
    load_records,
    records_frame,
    runs_frame,
    step_times_ms,
    write_frame,
)
from reprobisect.report.summary import markdown_summary
from reprobisect.report.terminal import runs_table

RECORDS = Path(__file__).parents[1] / "resources" / "records"
CELL_0164 = "torch-2.13.0+cpu_deepspeed-0.16.4_lightning-2.6.6"


def test_real_records_become_one_row_per_run() -> None:
    loaded = load_records([RECORDS / "baseline"])
    frame = records_frame(loaded)
    assert len(frame) == 18  # 6 fixes × 3 repeats of the GAN's cpu-deepspeed form on deepspeed 0.16.4
    assert set(frame["cell"]) == {CELL_0164}
    assert set(frame["repeat"]) == {0, 1, 2}
    row = frame[(frame["fix"] == "none") & (frame["repeat"] == 0)].iloc[0]
    assert (row["outcome"], row["glyph"], row["signature_id"]) == ("REPRODUCED", "✗", "36b244a365")
    assert row["known_signature"] == "zero-ipg-buffer-none"
    assert (row["torch"], row["deepspeed"], row["lightning"], row["torch_source"]) == (
        "2.13.0+cpu",
        "0.16.4",
        "2.6.6",
        "system",
    )
    assert Path(row["log_file"]).is_file()


def test_step_times_leave_the_warm_up_step_out() -> None:
    loaded = load_records([RECORDS / "baseline"])
    item = next(i for i in loaded if i.record.fix == "zero-stage-0" and i.record.repeat == 0)
    steps = step_times_ms(item.record)
    assert len(steps) == len(item.record.steps) - 1
    assert steps[0] == pytest.approx(item.record.steps[1].seconds * 1000)
    row = records_frame([item]).iloc[0]
    assert row["first_step_ms"] == pytest.approx(item.record.steps[0].seconds * 1000)
    assert row["p10_step_ms"] <= row["median_step_ms"] <= row["p90_step_ms"]
    failed = next(i for i in loaded if i.record.fix == "none")
    assert step_times_ms(failed.record) == []  # died in its first step: no step time, only the failure


def test_broken_files_are_named_in_a_warning_and_skipped() -> None:
    with pytest.warns(SkippedFileWarning) as caught:
        loaded = load_records([RECORDS / "broken"])
    messages = "\n".join(str(w.message) for w in caught)
    for name in ("truncated.json", "old-schema.json", "not-an-object.json", "bad-outcome.json", "bad-steps.json"):
        assert name in messages
    assert "schema_version 0" in messages
    assert len(caught) == 5
    assert [item.record.fix for item in loaded] == ["none"]  # the one good record still loads


def test_merging_the_same_records_twice_keeps_each_run_once(tmp_path: Path) -> None:
    copy = tmp_path / "machine-b"
    shutil.copytree(RECORDS / "baseline", copy)
    loaded = load_records([RECORDS / "baseline", copy, RECORDS / "releases"])
    run_ids = [item.record.run_id for item in loaded]
    assert len(run_ids) == len(set(run_ids))
    assert len(loaded) == 18 + 36
    assert {item.root for item in loaded} == {(RECORDS / "baseline").resolve(), (RECORDS / "releases").resolve()}


def test_parquet_and_csv_keep_every_run(tmp_path: Path) -> None:
    frame = records_frame(load_records([RECORDS / "releases", RECORDS / "bisect"]))
    parquet, csv = write_frame(frame, tmp_path)
    back = pd.read_parquet(parquet)
    assert list(back.columns) == list(frame.columns)
    assert [list(s) for s in back["step_ms"]] == [list(s) for s in frame["step_ms"]]
    flat = pd.read_csv(csv)
    assert len(flat) == len(frame)
    first = frame["step_ms"].iloc[frame["n_steps"].argmax()]
    assert flat["step_ms"].iloc[frame["n_steps"].argmax()].split()[0] == f"{first[0]:.3f}"


def test_an_empty_folder_gives_an_empty_frame_with_every_column(tmp_path: Path) -> None:
    frame = records_frame(load_records([tmp_path]))
    assert frame.empty
    assert {"run_id", "outcome", "step_ms", *AXES} <= set(frame.columns)


def test_the_session_table_and_summary_still_work_on_records() -> None:
    records = [Record.load(p) for p in sorted((RECORDS / "baseline" / "records").rglob("*__r0.json"))]
    assert set(runs_frame(records)["outcome"]) == {"PASS", "REPRODUCED"}
    assert "✗ REPRODUCED" in runs_table(records)
    summary = markdown_summary(records, title="GAN", command="nox -s repro_gan")
    assert summary.startswith("## GAN") and "36b244a365" in summary


def test_a_training_verdict_becomes_columns_and_a_hostile_one_blanks(tmp_path: Path) -> None:
    """A record's ``training`` (the GAN's --check-training) gives ``trains`` and the deviations from ddp; values of
    the wrong type (records are untrusted input) leave the columns blank instead of breaking the frame."""
    source = next((RECORDS / "baseline" / "records").rglob("*__r0.json"))
    verdicts = {
        "good": {"trains": True, "deviation_D": 0.053, "deviation_G": 0.024},
        "bad": {"trains": False, "deviation_D": 3.961, "deviation_G": 0.193},
        "hostile": {"trains": "yes", "deviation_D": True, "deviation_G": "0.1"},
    }
    root = tmp_path / "store"
    for name, training in verdicts.items():
        record = Record.load(source)
        record = dataclasses.replace(
            record, run_id=name, training=training, versions={**record.versions, "torchvision": "0.26.0"}
        )
        dest = root / "records" / "gan" / record.cell["id"] / f"{name}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(record.to_json())
    frame = records_frame(load_records([root])).set_index("run_id")
    assert (frame.loc["good", "trains"], frame.loc["good", "deviation_D"]) == ("yes", 0.053)
    assert (frame.loc["bad", "trains"], frame.loc["bad", "deviation_G"]) == ("no", 0.193)
    assert frame.loc["hostile", "trains"] == "" and pd.isna(frame.loc["hostile", "deviation_D"])
    assert pd.isna(frame.loc["hostile", "deviation_G"]) and frame.loc["good", "torchvision"] == "0.26.0"
    assert frame["deviation_D"].dtype == "float64"


def test_latest_keeps_the_newest_record_of_each_run_and_distrusts_hostile_times(tmp_path: Path) -> None:
    """A map built over several sessions: a run recorded again (its fix changed) replaces its older record; a run
    recorded once stays; a finish time that is empty or not a time never outranks a real one (one that is not a string
    does not load)."""
    source = Record.load(next((RECORDS / "baseline" / "records").rglob("*none__r0.json")))

    def write(root: Path, run_id: str, fix: str, finished: str, outcome: str) -> None:
        record = dataclasses.replace(source, run_id=run_id, fix=fix, finished_at=finished, outcome=outcome)
        dest = root / "records" / record.repro / record.cell["id"] / f"{run_id}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(record.to_json())

    first, second = tmp_path / "call-1", tmp_path / "call-2"
    write(first, "old", "raw-d", "2026-12-03T10:00:00+00:00", "OTHER_FAILURE")
    write(first, "once", "freeze-d", "2026-12-03T10:00:00+00:00", "OTHER_FAILURE")
    write(second, "new", "raw-d", "2026-12-03T14:00:00+00:00", "PASS")
    for n, hostile in enumerate(["garbage", "", "9999-99-99", "2026-12-03T25:00:00"]):
        write(second, f"hostile-{n}", "freeze-d", hostile, "PASS")
    loaded = load_records([first, second])
    kept, superseded = latest_runs(loaded)
    assert sorted(item.record.run_id for item in kept) == ["new", "once"]
    assert superseded == len(loaded) - 2 == 5
    assert latest_runs([]) == ([], 0)


def test_a_record_older_than_the_catalogue_gets_the_bug_name_it_would_get_today(tmp_path: Path) -> None:
    """The GPU map mixes sessions: BatchNorm's CUDA wording became `buffers-fp32-batchnorm` after some runs recorded
    it nameless. The report names such a bug from today's catalogue; the record's own name wins; an "env" match is
    not named on a run judged otherwise (outcomes are never re-judged); a 1 MB hostile message is only text."""
    source = Record.load(next((RECORDS / "baseline" / "records").rglob("*none__r0.json")))
    batchnorm = Signature(
        exception="RuntimeError",
        message="Expected running_mean to have type Half but got Float",
        frames=("torch.autograd.graph:_engine_run_backward",),
    )
    port = Signature(exception="RuntimeError", message="EADDRINUSE: address already in use")
    huge = Signature(exception="RuntimeError", message="Expected running_mean " + "(a|a)*" * 150_000)
    cases = {
        "old": (batchnorm, None, "buffers-fp32-batchnorm"),
        "own": (batchnorm, "its-own-name", "its-own-name"),
        "env": (port, None, ""),
        "huge": (huge, None, ""),
    }
    for run_id, (signature, known, _) in cases.items():
        record = dataclasses.replace(
            source, run_id=run_id, fix=run_id, outcome="OTHER_FAILURE", signature=signature, known_signature=known
        )
        dest = tmp_path / "records" / record.repro / record.cell["id"] / f"{run_id}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(record.to_json())
    frame = records_frame(load_records([tmp_path])).set_index("run_id")
    for run_id, (_, _, expected) in cases.items():
        assert frame.loc[run_id, "known_signature"] == expected, run_id
        assert frame.loc[run_id, "outcome"] == "OTHER_FAILURE"
