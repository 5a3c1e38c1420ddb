"""Views over real records: the outcome matrix, first releases, step times, ENV_ERROR reasons, commands."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from reprobisect.model.signature import Signature
from reprobisect.report.frame import Loaded, SkippedFileWarning, load_bisects, load_records, records_frame
from reprobisect.report.verdicts import verdicts
from reprobisect.report.views import (
    cell_labels,
    env_errors,
    first_releases,
    fix_order,
    outcome_matrix,
    release_key,
    reproduce_command,
    sorted_cells,
    step_stats,
    sweep_transitions,
)
from tests.bisect_reports import bisect_report, transition

RECORDS = Path(__file__).parents[1] / "resources" / "records"


@pytest.fixture(scope="module")
def loaded() -> list[Loaded]:
    return load_records([RECORDS / "releases"])  # deepspeed 0.16.4, 0.17.0 and 0.19.8, two repeats each


@pytest.fixture(scope="module")
def frame(loaded: list[Loaded]) -> pd.DataFrame:
    return records_frame(loaded)


def test_matrix_rows_are_releases_in_order_and_cells_carry_glyph_and_signature(frame: pd.DataFrame) -> None:
    matrix = outcome_matrix(frame, "gan", "cpu-deepspeed")
    assert list(matrix.index) == ["0.16.4", "0.17.0", "0.19.8"]
    assert list(matrix.columns) == [
        "none",
        "buffer-dtype-half",
        "freeze-d",
        "no-overlap-comm",
        "single-engine",
        "zero-stage-0",
    ]
    assert matrix.loc["0.16.4", "none"] == "✗ 36b244a365"
    assert matrix.loc["0.17.0", "none"] == "! e149c29f78"
    assert matrix.loc["0.16.4", "freeze-d"] == "✓"


def test_first_release_with_each_outcome_along_deepspeed(frame: pd.DataFrame) -> None:
    table = first_releases(frame, "deepspeed")
    none = table[table["fix"] == "none"].set_index("outcome")
    assert none.loc["REPRODUCED", "first"] == "0.16.4"
    assert none.loc["REPRODUCED", "last"] == "0.16.4"
    assert none.loc["OTHER_FAILURE", "first"] == "0.17.0"
    assert none.loc["OTHER_FAILURE", "of"] == 3
    assert set(table["held"]) == {"torch 2.13.0+cpu, lightning 2.6.6"}


def test_the_verdict_changes_between_neighbouring_releases_are_the_transitions(frame: pd.DataFrame) -> None:
    """Each change of outcome or signature between two measured releases is a row, in release order; a unit that
    behaves the same on every release has none; the known name travels with the signature id."""
    table = sweep_transitions(frame, "deepspeed")
    none = table[table["fix"] == "none"]
    assert list(zip(none["from"], none["to"], strict=True)) == [("0.16.4", "0.17.0"), ("0.17.0", "0.19.8")]
    assert none["before"].iloc[0] == "✗ 36b244a365 `zero-ipg-buffer-none`"
    assert none["after"].iloc[0] == "! e149c29f78 `zero-param-already-reduced`"  # named by the catalogue today
    assert none["before"].iloc[1] == none["after"].iloc[0]  # a chain: each change starts where the last one ended
    single = table[table["fix"] == "single-engine"]
    assert list(zip(single["from"], single["to"], single["before"], strict=True)) == [("0.17.0", "0.19.8", "✓")]
    assert set(table["held"]) == {"torch 2.13.0+cpu, lightning 2.6.6"}
    same = frame[frame["deepspeed"] == "0.19.8"]
    assert sweep_transitions(same, "deepspeed").empty  # one release: nothing changes along it


def test_step_stats_pool_repeats_and_skip_runs_without_steps(frame: pd.DataFrame) -> None:
    stats = step_stats(frame).set_index(["cell", "fix"])
    cell = "torch-2.13.0+cpu_deepspeed-0.16.4_lightning-2.6.6"
    row = stats.loc[(cell, "zero-stage-0")]
    assert row["runs"] == 2
    assert row["steps"] == 14  # 8 steps per run, warm-up excluded
    assert row["median_ms"] < row["p90_ms"] < row["first_step_ms"]  # the first step is the slow one
    # these records predate the harness's own memory measurement: their figures were the run's word (#39)
    assert row["peak_mem_mib"] is None
    assert stats.loc[(cell, "none"), "steps"] == 0


def test_repeats_that_disagree_are_shown_as_flaky() -> None:
    runs = [i for i in load_records([RECORDS / "baseline"]) if i.record.fix == "freeze-d"]
    flipped = dataclasses.replace(
        runs[2].record, outcome="OTHER_FAILURE", signature=Signature(exception="X", message="x")
    )
    frame = records_frame([*runs[:2], dataclasses.replace(runs[2], record=flipped)])
    (verdict,) = verdicts(frame).values()
    assert verdict.flaky
    assert verdict.label == "✓ (2/3)"


def test_env_errors_give_their_reason(loaded: list[Loaded]) -> None:
    item = loaded[0]
    broken = dataclasses.replace(
        item.record,
        outcome="ENV_ERROR",
        known_signature="lightning-needs-deepspeed-0.16",
        signature=Signature(exception="ImportError", message="PyTorch >= N requires DeepSpeed"),
    )
    errors = env_errors(records_frame([dataclasses.replace(item, record=broken), loaded[1]]))
    assert len(errors) == 1
    assert errors.loc[0, "known_signature"] == "lightning-needs-deepspeed-0.16"
    assert "requires DeepSpeed" in errors.loc[0, "signature"]


def test_reproduce_command_omits_torch_when_it_comes_from_the_system(frame: pd.DataFrame) -> None:
    row = frame.iloc[0]
    assert reproduce_command("gan", row, "cpu-deepspeed", "none") == (
        "nox -s repro_gan -- --deepspeed 0.16.4 --lightning 2.6.6 --form cpu-deepspeed --fix none"
    )
    pinned = {"torch_source": "pinned", "torch": "2.4.1", "deepspeed": "0.15.4", "lightning": ""}
    assert reproduce_command("zero3", pinned, "cuda", "bf16") == (
        "nox -s repro_zero3 -- --torch 2.4.1 --deepspeed 0.15.4 --form cuda --fix bf16"
    )


def test_ordering_helpers() -> None:
    assert sorted(["0.9.0", "0.16.4", "0.16.10", "weird", "0.17.0rc1"], key=release_key) == [
        "0.9.0",
        "0.16.4",
        "0.16.10",
        "0.17.0rc1",
        "weird",
    ]
    assert fix_order(["zero-stage-0", "none", "freeze-d", "none"]) == ["none", "freeze-d", "zero-stage-0"]


def test_cell_labels_name_only_what_varies(frame: pd.DataFrame) -> None:
    labels = cell_labels(frame)
    assert labels["torch-2.13.0+cpu_deepspeed-0.19.8_lightning-2.6.6"] == "0.19.8"
    assert sorted_cells(frame)[0].endswith("0.16.4_lightning-2.6.6")
    one = frame[frame["deepspeed"] == "0.16.4"]
    assert cell_labels(one) == {c: c for c in set(one["cell"])}


def _bisect(tmp_path: Path, name: str, data: object) -> None:
    (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")


def test_bisect_files_are_read_and_broken_ones_skipped(tmp_path: Path) -> None:
    reproduced = {"outcome": "REPRODUCED", "signature_id": "36b244a365", "signature": "t"}
    other = {"outcome": "OTHER_FAILURE", "signature_id": "e149c29f78", "signature": "u"}
    good = bisect_report(versions=("0.16.4", "0.19.8"), transitions=[transition("0.16.9", "0.17.0", reproduced, other)])
    _bisect(tmp_path, "bisect-gan.json", good.to_json())
    _bisect(tmp_path, "bisect-range.json", {**good.to_json(), "range": ["0.16.4", "0.19.8"]})
    _bisect(tmp_path, "bisect-old.json", {"repro": "gan"})
    (tmp_path / "bisect-cut.json").write_text('{"repro": "gan", "tra', encoding="utf-8")
    with pytest.warns(SkippedFileWarning) as caught:
        found = load_bisects([tmp_path])
    assert [b.path.name for b in found] == ["bisect-gan.json"]
    messages = " ".join(str(w.message) for w in caught)
    assert "bisect-old.json" in messages and "bisect report 'form' is None; expected a string" in messages
    assert "bisect-range.json: bisect report 'range' must be a JSON object, not list" in messages
    assert "bisect-cut.json" in messages


def test_a_unit_that_passed_its_training_check_says_so_and_a_hostile_verdict_says_nothing() -> None:
    from reprobisect.report.views import training_note

    ran = pd.DataFrame({"trains": ["yes", "yes"], "deviation_D": [0.053, 0.051], "deviation_G": [0.024, 0.026]})
    assert training_note(ran) == " trains (claimed; D 5%, G 2%)"
    assert training_note(ran.assign(trains=["yes", "no"])) == ""  # one repeat did not train: the signature says it
    assert training_note(ran.assign(trains=["", ""])) == ""  # no check (the ZeRO-3 repro, old records)
    assert training_note(ran.assign(deviation_G=[None, float("nan")])) == " trains (claimed; D 5%)"
    assert training_note(pd.DataFrame({"outcome": ["PASS"]})) == ""  # a frame without the column
    assert training_note(ran.iloc[0:0]) == ""
