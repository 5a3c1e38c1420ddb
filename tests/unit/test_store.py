"""The store: a record written reads back equal, reuse finds only the same inputs, a newer harness's record is
never overwritten, no record or log path leaves the output folder, and ``inside`` sees through links."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobisect.errors import StorageError
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import SCHEMA_VERSION, Record
from reprobisect.model.store import Store
from reprobisect.util.files import inside

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"
# what check_name (config/load.py) lets through as a repro or fix name, and what Cell.id is made of
SAFE_NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,20}", fullmatch=True).filter(lambda s: ".." not in s)


def _record(**changes: object) -> Record:
    template = Record.load(next((BASELINE / "records").rglob("*none__r0.json")))
    return dataclasses.replace(template, **changes)  # type: ignore[arg-type]


def _with_cell_id(record: Record, cell_id: str) -> Record:
    return dataclasses.replace(record, cell={**record.cell, "id": cell_id})


def test_a_record_round_trips_through_its_file(tmp_path: Path) -> None:
    store = Store(tmp_path / "out")
    record = _record(repeat=2)
    path = store.write(record)
    assert path == store.record_path(record.repro, record.cell["id"], record.form, record.fix, 2)
    assert path == (tmp_path / "out" / "records" / record.repro / record.cell["id"] / f"{record.form}__none__r2.json")
    assert Record.load(path) == record
    assert store.find(record.spec_key, record.repro, record.cell["id"], record.form, record.fix, 2) == record
    assert list(store.iter_records()) == [record]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left beside it


def test_find_gives_only_the_same_inputs(tmp_path: Path) -> None:
    store = Store(tmp_path)
    record = _record()
    store.write(record)
    cell = record.cell["id"]
    assert store.find("another-key", record.repro, cell, record.form, record.fix) is None
    assert store.find(record.spec_key, record.repro, cell, record.form, record.fix, 1) is None
    assert store.find(record.spec_key, record.repro, cell, record.form, "freeze-d") is None
    assert store.find(record.spec_key, "other", cell, record.form, record.fix) is None


def test_a_run_without_a_verdict_of_the_environment_is_retried_not_reused(tmp_path: Path) -> None:
    """An ENV_ERROR (seen on the H200: two of 144 runs found their rendezvous port taken) says nothing about the bug:
    a re-run of the matrix over the same records runs it again; a TIMEOUT, as costly again, is kept."""
    store = Store(tmp_path)
    for outcome, reused in ((Outcome.ENV_ERROR, False), (Outcome.TIMEOUT, True), (Outcome.PASS, True)):
        record = _record(outcome=outcome)
        store.write(record)
        found = store.find(record.spec_key, record.repro, record.cell["id"], record.form, record.fix)
        assert (found == record) is reused, outcome


def test_a_rewrite_replaces_the_record_whole(tmp_path: Path) -> None:
    store = Store(tmp_path)
    first = _record(run_id="first")
    path = store.write(first)
    store.write(_record(run_id="second", outcome="PASS"))
    assert Record.load(path).run_id == "second"
    assert len(list(path.parent.iterdir())) == 1


@pytest.mark.parametrize(
    "content",
    ["", "{", "[]", "null", '{"schema_version": "1"}', "\x00\xff garbage", '{"a": ' * 10_000, "{}"],
)
def test_an_unreadable_stored_record_is_ignored_with_a_warning_and_rewritten(tmp_path: Path, content: str) -> None:
    store = Store(tmp_path)
    record = _record()
    path = store.record_path(record.repro, record.cell["id"], record.form, record.fix)
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8", errors="surrogateescape")
    with pytest.warns(UserWarning, match="ignoring"):
        assert store.find(record.spec_key, record.repro, record.cell["id"], record.form, record.fix) is None
    with pytest.warns(UserWarning, match="skipping"):
        assert list(store.iter_records()) == []
    store.write(record)  # not of a newer schema: this harness may replace it
    assert Record.load(path) == record


@pytest.mark.parametrize("newer", [SCHEMA_VERSION + 1, 10**30])
def test_a_newer_schema_record_is_never_overwritten(tmp_path: Path, newer: int) -> None:
    store = Store(tmp_path)
    record = _record()
    path = store.write(record)
    data = json.loads(path.read_text())
    data["schema_version"] = newer
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    with pytest.raises(StorageError, match=f"schema {newer}, newer than this harness's {SCHEMA_VERSION}"):
        store.write(record)
    assert path.read_bytes() == before
    with pytest.warns(UserWarning, match="update the harness"):
        assert store.find(record.spec_key, record.repro, record.cell["id"], record.form, record.fix) is None


@pytest.mark.parametrize("version", [0, SCHEMA_VERSION, True, "99", None, 1.5, -3])
def test_an_older_or_odd_schema_is_overwritten(tmp_path: Path, version: object) -> None:
    store = Store(tmp_path)
    record = _record()
    path = store.write(record)
    data = json.loads(path.read_text())
    data["schema_version"] = version
    path.write_text(json.dumps(data))
    store.write(record)
    assert Record.load(path) == record


def test_a_link_planted_at_a_record_path_is_replaced_not_written_through(tmp_path: Path) -> None:
    store = Store(tmp_path / "out")
    record = _record()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    path = store.record_path(record.repro, record.cell["id"], record.form, record.fix)
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    store.write(record)
    assert victim.read_text() == "precious"
    assert not path.is_symlink() and Record.load(path) == record


def test_iter_records_of_one_repro_and_in_order(tmp_path: Path) -> None:
    store = Store(tmp_path)
    records = [_record(repro=name, repeat=r, run_id=f"{name}{r}") for name in ("b", "a") for r in (1, 0)]
    for record in records:
        store.write(record)
    assert [r.run_id for r in store.iter_records("a")] == ["a0", "a1"]
    assert [r.run_id for r in store.iter_records()] == ["a0", "a1", "b0", "b1"]
    assert list(store.iter_records("c")) == []


def test_the_root_is_resolved_so_paths_are_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = Store(Path("out"))
    assert store.root == tmp_path.resolve() / "out"
    assert store.record_path("gan", "cell", "cuda", "none").is_absolute()


def test_log_paths_are_one_per_run(tmp_path: Path) -> None:
    store = Store(tmp_path)
    one = store.log_path("gan", "cell", "cuda", "none", 3, "abc")
    assert one == tmp_path.resolve() / "logs" / "gan" / "cell" / "cuda__none__r3__abc.log"
    assert store.log_path("gan", "cell", "cuda", "none", 3, "abd") != one


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    repro=SAFE_NAMES,
    cell=SAFE_NAMES,
    fix=SAFE_NAMES,
    repeat=st.integers(0, 10**6),
    run=SAFE_NAMES,
)
def test_paths_of_safe_names_stay_in_their_folders(
    tmp_path: Path, repro: str, cell: str, fix: str, repeat: int, run: str
) -> None:
    store = Store(tmp_path)
    record = store.record_path(repro, cell, "cpu-shim", fix, repeat)
    log = store.log_path(repro, cell, "cpu-shim", fix, repeat, run)
    assert record.resolve().is_relative_to(store.root / "records" / repro / cell)
    assert log.resolve().is_relative_to(store.root / "logs" / repro / cell)
    assert record.name == f"cpu-shim__{fix}__r{repeat}.json"


@pytest.mark.parametrize("fix", ["deepspeed-0.16.8", "v1.0", "a."])
def test_a_fix_name_with_a_dot_keeps_one_record_per_repeat(tmp_path: Path, fix: str) -> None:
    store = Store(tmp_path)
    paths = {store.record_path("gan", "cell", "cpu-deepspeed", fix, repeat) for repeat in range(3)}
    assert len(paths) == 3
    assert store.record_path("gan", "cell", "cpu-deepspeed", fix, 1).name == f"cpu-deepspeed__{fix}__r1.json"
    assert store.record_path("gan", "cell", "cpu-deepspeed", "deepspeed-0.16.8") != store.record_path(
        "gan", "cell", "cpu-deepspeed", "deepspeed-0.16.9"
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("repro", "../../escaped"), ("cell", "../../../escaped"), ("repro", "ABSOLUTE"), ("fix", "x/../../../../e")],
)
def test_a_record_naming_parent_folders_is_refused_and_nothing_is_written_outside(
    tmp_path: Path, field: str, value: str
) -> None:
    store = Store(tmp_path / "out")
    record = _record()
    value = str(tmp_path / "absolute") if value == "ABSOLUTE" else value
    record = _with_cell_id(record, value) if field == "cell" else dataclasses.replace(record, **{field: value})
    with pytest.raises((StorageError, ValueError)):
        store.write(record)
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_relative_to(tmp_path / "out")]
    assert outside == []


# --- inside ------------------------------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "logs" / "gan").mkdir(parents=True)
    (root / "logs" / "gan" / "run.log").write_text("log")
    (tmp_path / "secret").write_text("PRIVATE KEY")
    return root


@pytest.mark.parametrize(
    "rel",
    [
        "logs/gan/run.log",
        "logs/gan/not-yet.log",
        "logs/../logs/gan/run.log",
        "./logs",
        "~/.ssh/id_ed25519",  # no ~ expansion: a folder named "~" under the root
    ],
)
def test_paths_under_the_root_are_inside(root: Path, rel: str) -> None:
    assert inside(root, rel)


@pytest.mark.parametrize(
    "rel",
    [
        "../secret",
        "logs/../../secret",
        "/etc/passwd",
        str(Path("/") / "tmp"),
        "logs/\x00/x",
        "../root-sibling/x",
    ],
)
def test_paths_that_leave_the_root_are_not_inside(root: Path, rel: str) -> None:
    assert not inside(root, rel)


def test_a_link_inside_the_root_to_outside_is_not_inside(root: Path) -> None:
    (root / "logs" / "gan" / "evil.log").symlink_to(root.parent / "secret")
    (root / "logs" / "up").symlink_to(root.parent)
    assert not inside(root, "logs/gan/evil.log")
    assert not inside(root, "logs/up/secret")
    assert not inside(root, "logs/up/root/logs/../../secret")


def test_a_link_inside_the_root_to_inside_is_inside(root: Path) -> None:
    (root / "logs" / "alias").symlink_to(root / "logs" / "gan")
    assert inside(root, "logs/alias/run.log")


def test_a_link_loop_is_not_an_error(root: Path) -> None:
    (root / "loop").symlink_to(root / "loop2")
    (root / "loop2").symlink_to(root / "loop")
    assert inside(root, "loop/x") in (True, False)


def test_a_root_reached_through_a_link_still_works(tmp_path: Path, root: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    assert inside(alias, "logs/gan/run.log")
    assert not inside(alias, "../secret")


@given(st.text(max_size=200))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=200)
def test_inside_never_raises_and_is_true_only_below_the_root(root: Path, rel: str) -> None:
    verdict = inside(root, rel)
    assert isinstance(verdict, bool)
    if verdict:
        assert Path(os.path.realpath(root / rel)).is_relative_to(os.path.realpath(root))
