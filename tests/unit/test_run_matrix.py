"""The matrix run with env builds and runs faked: the plan from a small config, one record per unit, records reused
on a second run, a failed build's units ENV_ERROR, unbuildable cells recorded, and the stats counted."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import re
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.cells.base import BaseInterpreter
from reprobisect.cells.envs import CellEnv
from reprobisect.config.load import Config, check_name, load_config
from reprobisect.config.scripts import ReproOptions, pytest_repro, script_repro
from reprobisect.errors import ConfigError, EnvBuildError, NothingToDoError
from reprobisect.model.cell import Cell, run_cell
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.run import matrix_build as prepare
from reprobisect.run import matrix_plan as plan
from reprobisect.run import matrix_units as units
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_plan import listed_cells, plan_cells
from reprobisect.run.matrix_request import MatrixRequest, RunStats
from reprobisect.run.matrix_run import run_matrix
from reprobisect.run.matrix_units import ProgressLine, job_cpus
from reprobisect.run.one_run import RunSpec
from reprobisect.run.sandbox import Confinement
from reprobisect.util.stop import in_parallel
from tests.conftest import SCRIPTS

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"
BASE = BaseInterpreter(
    executable=sys.executable,
    version=".".join(map(str, sys.version_info[:3])),
    is_venv=False,
    site_packages=(),
    torch="2.5.1",
)
UNCONFINED = Confinement(sandbox=False)


def _config(tmp_path: Path, **matrix_changes: object) -> Config:
    data = {
        "version": 1,
        "matrix": {
            "axes": {
                "python": ["system"],
                "torch": ["system"],
                "deepspeed": ["0.16.4", "0.17.0"],
                "lightning": ["2.6.6"],
            },
            **matrix_changes,
        },
        "repros": {
            "demo": {
                "title": "a demo",
                "expected_signature": None,
                "forms": {
                    "cpu-deepspeed": {"script": str(SCRIPTS / "passes.py"), "precision": "fp32"},
                    "cuda": {"script": str(SCRIPTS / "passes.py"), "precision": "fp16"},
                },
                "fixes": {"none": {}, "other": {"args": ["--other"], "description": "d"}},
            },
            "second": {
                "title": "another",
                "forms": {"cpu-deepspeed": {"script": str(SCRIPTS / "raises.py"), "precision": "fp32"}},
                "fixes": {"none": {}},
            },
        },
    }
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_config(path)


RELEASES = {
    "deepspeed": ["0.15.0", "0.15.4", "0.16.4", "0.17.0", "0.18.2"],
    "lightning": ["2.5.0", "2.6.6"],
    "torch": ["2.4.0", "2.5.1"],
    "python": ["3.1"],  # see test_a_python_version_is_never_looked_up_on_the_package_index
}


class FakeIndex:
    """The index: a fixed list of releases per package, and the packages it was asked about."""

    def __init__(self, releases: dict[str, list[str]] | None = None) -> None:
        self.releases = RELEASES if releases is None else releases
        self.asked: list[str] = []

    def versions(self, package: str, **_: object) -> list[str]:
        self.asked.append(package)
        if package not in self.releases:
            msg = f"cannot list releases of {package!r} on the configured index: ERROR: No matching distribution"
            raise ConfigError(msg)
        return self.releases[package]


class Fakes:
    """ensure_env and execute, faked: envs are empty folders, runs write a PASS record through the real store."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.broken: set[str] = set()  # cell ids whose build fails
        self.built: list[str] = []
        self.executed: list[tuple[str, str, str, str, int]] = []
        self.lock = threading.Lock()
        self.template = Record.load(next((BASELINE / "records").rglob("*none__r0.json")))

    def ensure_env(self, cell: Cell, base: BaseInterpreter, envs_dir: Path, **_: object) -> CellEnv:
        with self.lock:
            self.built.append(cell.id)
        if cell.id in self.broken:
            msg = f"installing deepspeed=={cell.packages.get('deepspeed')} into cell {cell.id} failed (exit 1)\ntail"
            raise EnvBuildError(msg)
        path = envs_dir / cell.id
        (path / "bin").mkdir(parents=True, exist_ok=True)
        return CellEnv(cell=cell, path=path, reused=False, build_seconds=0.0)

    def execute(self, spec: RunSpec, store: Store, **_: object) -> Record:
        with self.lock:
            self.executed.append((spec.env.cell.id, spec.repro.name, spec.form.name, spec.fix.name, spec.repeat))
        record = dataclasses.replace(
            self.template,
            run_id=uuid.uuid4().hex[:12],
            spec_key=spec.key,
            repro=spec.repro.name,
            form=spec.form.name,
            fix=spec.fix.name,
            repeat=spec.repeat,
            cell=run_cell(spec.env.cell, spec.nproc),
            outcome=Outcome.PASS.value,
            matrix_cell=spec.matrix_cell,
            nproc=spec.nproc,
            rerun=list(spec.rerun),
        )
        store.write(record)
        return record


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fakes:
    fake = Fakes(tmp_path)
    monkeypatch.setattr(prepare, "ensure_env", fake.ensure_env)
    monkeypatch.setattr(units, "execute", fake.execute)
    monkeypatch.setattr(plan, "find_python", lambda version: None)  # no other Python on this "machine"
    monkeypatch.setattr(plan, "IndexCache", lambda *args, **kwargs: FakeIndex())
    return fake


def _run(
    tmp_path: Path, config: Config, request: MatrixRequest, **kwargs: object
) -> tuple[list[Record], RunStats, list[str]]:
    stats = RunStats()
    lines: list[str] = []
    records = run_matrix(
        config,
        request,
        RunContext(base=BASE, store=Store(tmp_path / "out"), envs_dir=tmp_path / "envs", environ={}, echo=lines.append),
        stats=stats,
        **kwargs,  # type: ignore[arg-type]
    )
    return records, stats, lines


def _request(**changes: object) -> MatrixRequest:
    return MatrixRequest(**{"repros": ("demo",), "backend": "cpu", "confinement": UNCONFINED, **changes})  # type: ignore[arg-type]


# --- planning ----------------------------------------------------------------------------------------------


def test_the_plan_is_the_product_of_the_axes(tmp_path: Path) -> None:
    cells = plan_cells(_config(tmp_path), _request(), BASE, FakeIndex())  # type: ignore[arg-type]
    assert [dict(c.pins) for c in cells] == [
        {"python": "system", "torch": "system", "deepspeed": "0.16.4", "lightning": "2.6.6"},
        {"python": "system", "torch": "system", "deepspeed": "0.17.0", "lightning": "2.6.6"},
    ]


def test_the_command_line_replaces_an_axis_and_selects(tmp_path: Path) -> None:
    config = _config(tmp_path)
    replaced = plan_cells(config, _request(axes={"deepspeed": ("0.18.2",)}), BASE, FakeIndex())  # type: ignore[arg-type]
    assert [c.pins["deepspeed"] for c in replaced] == ["0.18.2"]
    selected = plan_cells(config, _request(select=("deepspeed=0.17.*",)), BASE, FakeIndex())  # type: ignore[arg-type]
    assert [c.pins["deepspeed"] for c in selected] == ["0.17.0"]


@pytest.mark.parametrize(
    ("changes", "error", "says"),
    [
        ({"axes": {"deepspeeed": ("1",)}}, ConfigError, "'deepspeeed' is not an axis of matrix.yaml"),
        ({"select": ("deepspeed",)}, ConfigError, "expected AXIS=PATTERN"),
        ({"select": ("deepspeed=9.*",)}, NothingToDoError, "leaves no cell"),
        ({"select": ("nosuchaxis=1",)}, NothingToDoError, "leaves no cell"),
    ],
)
def test_a_bad_or_empty_selection_says_why(
    tmp_path: Path, changes: dict[str, object], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        plan_cells(_config(tmp_path), _request(**changes), BASE, FakeIndex())  # type: ignore[arg-type]


def test_includes_for_other_repros_and_excludes(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        exclude=[{"deepspeed": "0.17.*"}],
        include=[
            {"deepspeed": "0.15.4", "lightning": "2.5.0", "repros": "second", "label": "old"},
            {"deepspeed": "0.15.0", "lightning": "2.5.0", "repros": "demo"},
        ],
    )
    cells = plan_cells(config, _request(), BASE, FakeIndex())  # type: ignore[arg-type]
    assert [c.pins["deepspeed"] for c in cells] == ["0.16.4", "0.15.0"]
    without = plan_cells(config, _request(use_includes=False), BASE, FakeIndex())  # type: ignore[arg-type]
    assert [c.pins["deepspeed"] for c in without] == ["0.16.4"]


def test_listed_cells_say_which_can_be_built(tmp_path: Path, fakes: Fakes) -> None:
    config = _config(
        tmp_path,
        axes={"python": ["system", "3.1"], "torch": ["system"], "deepspeed": ["0.16.4"], "lightning": ["2.6.6"]},
        compatibility=[{"when": {"deepspeed": "0.16.*"}, "require": {"lightning": "<2"}, "reason": "too new"}],
    )
    listed = listed_cells(config, _request(), BASE, tmp_path / "envs")
    assert [entry["status"] for entry in listed] == [
        "not installable together: too new",
        "not installable together: too new",
    ]
    assert (
        listed[0]["args"]
        == "--select python=system --select torch=system --select deepspeed=0.16.4 --select lightning=2.6.6"
    )
    open_config = _config(
        tmp_path,
        axes={"python": ["system", "3.1"], "torch": ["2.4.0"], "deepspeed": ["0.16.4"], "lightning": ["2.6.6"]},
    )
    statuses = [e["status"] for e in listed_cells(open_config, _request(), BASE, tmp_path / "envs")]
    assert statuses == ["ok", "cannot build here: no Python 3.1 interpreter on this machine (nothing is downloaded)"]


def test_a_python_version_is_never_looked_up_on_the_package_index(tmp_path: Path) -> None:
    index = FakeIndex({k: v for k, v in RELEASES.items() if k != "python"})  # as pip answers: no such package
    cells = plan_cells(_config(tmp_path), _request(axes={"python": ("3.10",)}), BASE, index)  # type: ignore[arg-type]
    assert {c.pins["python"] for c in cells} == {"3.10"}
    assert "python" not in index.asked


# --- running -----------------------------------------------------------------------------------------------


def test_every_unit_runs_once_and_a_second_run_reuses_every_record(tmp_path: Path, fakes: Fakes) -> None:
    config = _config(tmp_path)
    records, stats, lines = _run(tmp_path, config, _request(repeat=2))
    keys = {(r.cell["id"], r.fix, r.repeat) for r in records}
    assert len(records) == len(keys) == 2 * 2 * 2  # cells x fixes x repeats
    assert (stats.executed, stats.reused) == (8, 0)
    assert {form for _, _, form, _, _ in fakes.executed} == {"cpu-deepspeed"}  # the cpu backend's forms only
    assert len(set(fakes.built)) == 2 and len(fakes.built) == 2  # one build per cell, not per unit
    assert len(list((tmp_path / "out" / "records").rglob("*.json"))) == 8
    assert any("2 cells (0 not installable or not buildable here), 8 runs, backend cpu" in line for line in lines)

    again, stats2, lines2 = _run(tmp_path, config, _request(repeat=2))
    assert (stats2.executed, stats2.reused) == (0, 8) and len(fakes.executed) == 8
    assert sorted(r.run_id for r in again) == sorted(r.run_id for r in records)
    assert sum("(stored)" in line for line in lines2) == 8


def test_fresh_runs_everything_again_and_changed_inputs_are_not_reused(tmp_path: Path, fakes: Fakes) -> None:
    config = _config(tmp_path)
    _run(tmp_path, config, _request())
    _, stats, _ = _run(tmp_path, config, _request(fresh=True))
    assert (stats.executed, stats.reused) == (4, 0)
    _, stats, _ = _run(tmp_path, config, _request(repeat=2))  # repeat 1 is new, repeat 0 on record
    assert (stats.executed, stats.reused) == (2 * 2, 2 * 2)


def test_a_record_of_other_inputs_at_the_same_place_is_not_reused(tmp_path: Path, fakes: Fakes) -> None:
    config = _config(tmp_path)
    records, _, _ = _run(tmp_path, config, _request(fixes=("none",)))
    store = Store(tmp_path / "out")
    for record in records:
        store.write(dataclasses.replace(record, spec_key="made-by-other-inputs"))
    _, stats, _ = _run(tmp_path, config, _request(fixes=("none",)))
    assert (stats.executed, stats.reused) == (2, 0)


def test_parallel_jobs_count_every_run_once(tmp_path: Path, fakes: Fakes) -> None:
    records, stats, _ = _run(tmp_path, _config(tmp_path), _request(jobs=3, repeat=3))
    assert stats.executed == len(records) == len(fakes.executed) == 2 * 2 * 3
    assert len(set(fakes.executed)) == len(fakes.executed)


def test_only_the_named_cells_run(tmp_path: Path, fakes: Fakes) -> None:
    config = _config(tmp_path)
    cell_id = Cell(
        python=BASE.version,
        torch="2.5.1",
        torch_source="system",
        packages={"deepspeed": "0.17.0", "lightning": "2.6.6"},
    ).id
    records, _, _ = _run(tmp_path, config, _request(), cells=(cell_id,))
    assert {r.cell["id"] for r in records} == {cell_id}
    with pytest.raises(NothingToDoError, match="--cell nosuch: no such cell"):
        _run(tmp_path, config, _request(), cells=("nosuch",))


def test_a_failed_build_makes_its_units_env_error_and_the_rest_run(tmp_path: Path, fakes: Fakes) -> None:
    config = _config(tmp_path)
    fakes.broken.add("torch-2.5.1_deepspeed-0.17.0_lightning-2.6.6")
    records, stats, lines = _run(tmp_path, config, _request(repeat=2))
    failed = [r for r in records if r.cell["id"] in fakes.broken]
    assert len(failed) == 2 * 2 and all(r.outcome == Outcome.ENV_ERROR.value for r in failed)
    assert all("failed (exit 1)" in r.config["reason"] for r in failed)
    assert stats.executed == 4 and {cell for cell, *_ in fakes.executed}.isdisjoint(fakes.broken)
    assert any("build failed, its runs are ENV_ERROR" in line for line in lines)
    for record in failed:
        log = tmp_path / "out" / record.log_path
        assert log.is_file() and "failed (exit 1)" in log.read_text()
        # dated like a run: report --latest ranks it by when it was decided, not below every older record
        assert dt.datetime.fromisoformat(record.finished_at).tzinfo is not None
        assert record.started_at == record.finished_at


def test_a_failed_builds_records_keep_distinct_repeat_numbers(tmp_path: Path, fakes: Fakes) -> None:
    fakes.broken.add("torch-2.5.1_deepspeed-0.17.0_lightning-2.6.6")
    records, _, _ = _run(tmp_path, _config(tmp_path), _request(repeat=3, fixes=("none",)))
    failed = [r for r in records if r.outcome == Outcome.ENV_ERROR.value]
    assert sorted(r.repeat for r in failed) == [0, 1, 2]
    stored = list(
        (tmp_path / "out" / "records" / "demo" / "torch-2.5.1_deepspeed-0.17.0_lightning-2.6.6").glob("*.json")
    )
    assert len(stored) == 3


def test_blocked_and_unbuildable_cells_are_recorded_not_built(tmp_path: Path, fakes: Fakes) -> None:
    config = _config(
        tmp_path,
        axes={
            "python": ["system", "3.1"],
            "torch": ["2.4.0"],
            "deepspeed": ["0.16.4", "0.17.0"],
            "lightning": ["2.6.6"],
        },
        compatibility=[{"when": {"deepspeed": "0.17.*"}, "require": {"torch": ">=2.5"}, "reason": "needs torch 2.5"}],
    )
    records, stats, lines = _run(tmp_path, config, _request(fixes=("none",)))
    by_kind: dict[str, list[Record]] = {}
    for record in records:
        by_kind.setdefault(record.outcome, []).append(record)
    assert len(by_kind[Outcome.PASS.value]) == 1 and stats.executed == 1
    unrun = by_kind[Outcome.ENV_ERROR.value]
    assert len(unrun) == 3
    reasons = sorted(r.config["reason"] for r in unrun)
    assert reasons == [
        "cannot build here: no Python 3.1 interpreter on this machine (nothing is downloaded)",
        "not installable together: needs torch 2.5",
        "not installable together: needs torch 2.5",
    ]
    assert len(fakes.built) == 1
    assert any("2 not installable" in line or "3 not installable" in line for line in lines)


def test_a_system_torch_cell_on_a_base_without_torch_is_not_buildable(tmp_path: Path, fakes: Fakes) -> None:
    no_torch = dataclasses.replace(BASE, torch=None)
    records = run_matrix(
        _config(tmp_path),
        _request(fixes=("none",)),
        RunContext(base=no_torch, store=Store(tmp_path / "out"), envs_dir=tmp_path / "envs", environ={}).quiet(),
    )
    assert {r.outcome for r in records} == {Outcome.ENV_ERROR.value} and fakes.built == []
    assert all("has no torch" in r.config["reason"] for r in records)


def test_an_override_fix_runs_in_its_own_cell_but_reports_beside_its_row(tmp_path: Path, fakes: Fakes) -> None:
    config = _config(tmp_path)
    path = config.path
    data = yaml.safe_load(path.read_text())
    data["repros"]["demo"]["fixes"]["ds-next"] = {"description": "d", "override": {"deepspeed": "0.18.2"}}
    path.write_text(yaml.safe_dump(data))
    records, _, _ = _run(tmp_path, load_config(path), _request(fixes=("ds-next",), select=("deepspeed=0.16.4",)))
    (record,) = records
    assert record.cell["packages"]["deepspeed"] == "0.18.2"
    assert record.matrix_cell == "torch-2.5.1_deepspeed-0.16.4_lightning-2.6.6"


def test_a_script_run_needs_no_repro_of_the_config(tmp_path: Path, fakes: Fakes) -> None:
    config = _config(tmp_path)
    repro = script_repro(SCRIPTS / "passes.py", ReproOptions(rerun=("nox", "-s", "triage", "--", "passes.py")))
    config = dataclasses.replace(config, repros={**config.repros, repro.name: repro})
    records, _, _ = _run(tmp_path, config, _request(repros=(repro.name,), select=("deepspeed=0.16.4",)))
    assert [(r.repro, r.form, r.fix) for r in records] == [("script-passes", "cpu-deepspeed", "none")]
    # the record says how to run it again: the triage session with the script and the cell's pins
    assert records[0].rerun == [
        *(
            "nox",
            "-s",
            "triage",
            "--",
            "passes.py",
            "--torch",
            "system",
            "--deepspeed",
            "0.16.4",
            "--lightning",
            "2.6.6",
        ),
        *("--form", "cpu-deepspeed", "--fix", "none"),
    ]


# --- pieces ------------------------------------------------------------------------------------------------


def test_script_repro_of_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        script_repro(tmp_path / "nope.py", ReproOptions(expect=None, shim=False))


@given(st.text(min_size=1, max_size=120).filter(lambda s: "/" not in s and "\x00" not in s and s not in (".", "..")))
def test_a_script_repro_name_is_always_a_safe_name(stem: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / f"{stem}.py"
        try:
            script.write_text("")
        except (OSError, UnicodeEncodeError):
            return
        repro = script_repro(script, ReproOptions(expect=None, shim=True))
    assert repro.name.startswith("script-") and len(repro.name) <= 64
    assert Path(repro.name).name == repro.name and ".." not in Path(repro.name).parts
    assert check_name("repro", repro.name.replace("..", "_"), "x")
    assert set(repro.forms) == {"cuda", "cpu-shim"}


@given(
    jobs=st.integers(1, 8),
    per_run=st.integers(-1, 4),
    allowed=st.sets(st.integers(0, 255), max_size=40),
)
def test_job_cores_are_allowed_distinct_per_slot_and_spare_the_harness_core(
    jobs: int, per_run: int, allowed: set[int]
) -> None:
    slots = [job_cpus(slot, jobs, per_run, sorted(allowed)) for slot in range(jobs)]
    if per_run <= 0 or not allowed:
        assert all(s == () for s in slots)
        return
    for cores in slots:
        assert set(cores) <= allowed and 0 < len(cores) <= per_run and list(cores) == sorted(cores)
    if len(allowed) >= jobs * per_run:
        flat = [core for cores in slots for core in cores]
        assert len(flat) == len(set(flat)) == jobs * per_run
    if len(allowed) > jobs * per_run:
        assert min(allowed) not in {core for cores in slots for core in cores}


def test_job_env_gives_each_job_its_gpu_or_its_share_of_cores() -> None:
    assert units._job_env(0, 1, "cuda", 4) == {}
    cuda = [units._job_env(slot, 3, "cuda", 2) for slot in range(3)]
    assert [env["CUDA_VISIBLE_DEVICES"] for env in cuda] == ["0", "1", "0"]
    cpu = units._job_env(1, 64, "cpu", 0)
    assert "CUDA_VISIBLE_DEVICES" not in cpu and int(cpu["OMP_NUM_THREADS"]) >= 1


def test_run_stats_start_at_zero() -> None:
    assert RunStats() == RunStats(executed=0, reused=0)


def test_a_patch_of_a_package_the_form_never_imports_is_said_once_and_not_run(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #18: a Lightning patch on the pure-DeepSpeed form cannot change its outcome; it is not run there."""
    patches = {}
    for package in ("lightning", "deepspeed"):
        patches[package] = tmp_path / f"{package}.diff"
        patches[package].write_text(f"--- a/{package}/x.py\n+++ b/{package}/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    config = _config(tmp_path)
    data = yaml.safe_load(config.path.read_text())
    data["repros"]["demo"]["fixes"].update(
        {f"{package}-patch": {"patch": str(path), "strip": 1, "description": "d"} for package, path in patches.items()}
    )
    config.path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_config(config.path)
    monkeypatch.setattr(prepare, "prepare_overlay", lambda env, fix: tmp_path / "overlay")
    imported = {"torch": "2.13.0", "deepspeed": "0.16.4"}  # what the pure-DeepSpeed form's runs report
    fakes.template = dataclasses.replace(fakes.template, versions=imported, versions_source="imported")
    records, stats, lines = _run(tmp_path, config, _request(repros=("demo",)))
    ran = {(cell, fix) for cell, _, _, fix, _ in fakes.executed}
    assert {fix for _, fix in ran} == {"none", "other", "deepspeed-patch"}
    assert stats.not_applicable == 2 and stats.executed == 6  # two cells
    said = [line for line in lines if "never imports" in line]
    assert len(said) == 1 and "lightning-patch" in said[0] and "never imports lightning" in said[0]
    # the counter starts at the runs announced and loses those found not to apply: [1/8] ... [6/6], never [1/4]
    counters = [tuple(map(int, m.groups())) for line in lines if (m := re.match(r"\[(\d+)/(\d+)", line))]
    announced = next(int(m.group(1)) for line in lines if (m := re.search(r", (\d+) runs, backend", line)))
    assert announced == 8 and counters[0][1] == announced
    assert [total for _, total in counters] == sorted((total for _, total in counters), reverse=True)
    assert counters[-1] == (6, 6)
    assert "2 patched runs in all (2 not applicable, not run)" in lines
    assert [r.fix for r in records if r.cell["id"] == records[0].cell["id"]] == ["none", "other", "deepspeed-patch"]


def _with_patch_fix(tmp_path: Path, fix: str, package: str) -> Config:
    """The test matrix with one more fix of repro ``demo``: a patch of ``package``'s ``x.py``."""
    patch = tmp_path / f"{package}.diff"
    patch.write_text(f"--- a/{package}/x.py\n+++ b/{package}/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    config = _config(tmp_path)
    data = yaml.safe_load(config.path.read_text())
    data["repros"]["demo"]["fixes"][fix] = {"patch": str(patch), "strip": 1, "description": "d"}
    config.path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_config(config.path)


def test_a_patch_runs_once_its_own_cell_and_form_are_done_not_after_the_whole_matrix(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #41: on two cores the patched run used to wait for every unpatched run and then ran alone."""
    config = _with_patch_fix(tmp_path, "ds-patch", "deepspeed")
    monkeypatch.setattr(prepare, "prepare_overlay", lambda env, fix: tmp_path / "overlay")
    fakes.template = dataclasses.replace(fakes.template, versions={"deepspeed": "0.16.4"}, versions_source="imported")
    records, stats, _ = _run(tmp_path, config, _request())
    order = [(cell, fix) for cell, _, _, fix, _ in fakes.executed]
    assert [fix for _, fix in order[:3]] == ["none", "other", "ds-patch"] and len({c for c, _ in order[:3]}) == 1
    assert [fix for _, fix in order[3:]] == ["none", "other", "ds-patch"] and stats.executed == 6
    assert [r.fix for r in records] == ["none", "other", "ds-patch"] * 2  # records keep the plan's order


def test_without_an_unpatched_run_to_learn_from_every_patch_runs(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _with_patch_fix(tmp_path, "lightning-patch", "lightning")
    monkeypatch.setattr(prepare, "prepare_overlay", lambda env, fix: tmp_path / "overlay")
    records, stats, _ = _run(tmp_path, config, _request(fixes=("lightning-patch",)))
    assert stats.not_applicable == 0 and {r.fix for r in records} == {"lightning-patch"}


def test_a_patch_for_other_releases_is_an_env_error_even_in_a_one_cell_run(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nox -s repro_gan runs one cell, the newest release: a DeepSpeed patch written for 0.16.x does not apply
    there (patch --fuzz=0), which is that fix's ENV_ERROR, not the end of the session."""
    from reprobisect.cells.patches import PatchDoesNotApplyError

    patch = tmp_path / "deepspeed.diff"
    patch.write_text("--- a/deepspeed/x.py\n+++ b/deepspeed/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    config = _config(
        tmp_path, axes={"python": ["system"], "torch": ["system"], "deepspeed": ["0.16.4"], "lightning": ["2.6.6"]}
    )
    data = yaml.safe_load(config.path.read_text())
    data["repros"]["demo"]["fixes"]["ds-patch"] = {"patch": str(patch), "strip": 1, "description": "d"}
    config.path.write_text(yaml.safe_dump(data, sort_keys=False))

    def mismatch(env: CellEnv, fix: object) -> Path:
        msg = f"{patch}: does not apply to cell {env.cell.id}: Hunk #1 FAILED"
        raise PatchDoesNotApplyError(msg)

    monkeypatch.setattr(prepare, "prepare_overlay", mismatch)
    records, _, _ = _run(tmp_path, load_config(config.path), _request())
    by_fix = {r.fix: r for r in records}
    assert by_fix["ds-patch"].outcome == Outcome.ENV_ERROR.value
    assert by_fix["ds-patch"].signature is not None and by_fix["ds-patch"].signature.exception == "PatchError"
    assert by_fix["ds-patch"].finished_at  # the H200 map's 48 PatchError records had no time
    assert by_fix["none"].outcome == Outcome.PASS.value


def test_a_patch_no_cell_can_use_stops_the_run(tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch) -> None:
    patch = tmp_path / "lightning.diff"
    patch.write_text("--- a/lightning/x.py\n+++ b/lightning/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    config = _config(tmp_path)
    data = yaml.safe_load(config.path.read_text())
    data["repros"]["demo"]["fixes"]["bad"] = {"patch": str(patch), "strip": 1, "description": "d"}
    config.path.write_text(yaml.safe_dump(data, sort_keys=False))

    def unusable(env: CellEnv, fix: object) -> Path:
        msg = f"{patch}: patches 'lightning', which is not an importable package in cell {env.cell.id}"
        raise ConfigError(msg)

    monkeypatch.setattr(prepare, "prepare_overlay", unusable)
    with pytest.raises(ConfigError, match="not an importable package"):
        _run(tmp_path, load_config(config.path), _request())
    assert fakes.executed == []


def test_a_pasted_script_gets_a_one_process_distributed_env_on_cuda_too() -> None:
    """Issue #14: without torchrun's variables Lightning probes MPI, and on a GPU image with MPI installed a pasted
    Fabric/DeepSpeed script ended as ENV_ERROR "Local abort before MPI_INIT"."""
    script = SCRIPTS / "triage" / "fabric_deepspeed_pasted.py"
    repro = script_repro(script, ReproOptions(expect=None, shim=False))
    assert repro.forms["cuda"].distributed_env and repro.forms["cpu-deepspeed"].distributed_env


def test_a_packages_own_tests_run_without_a_distributed_env(tmp_path: Path) -> None:
    """As their project's CI runs them: Lightning's test_deepspeed_strategy_env_variables[Windows] failed on every
    release under the harness's RANK/MASTER_PORT, a failure of the harness's making."""
    (tmp_path / "tests_x").mkdir()
    (tmp_path / "tests_x" / "__init__.py").write_text("")
    (tmp_path / "tests_x" / "test_env.py").write_text("def test_env():\n    pass\n")
    repro = pytest_repro(str(tmp_path / "tests_x" / "test_env.py"))
    assert not repro.forms["cuda"].distributed_env and not repro.forms["cpu-deepspeed"].distributed_env


@contextlib.contextmanager
def _sigint_once_two_started(started: list[object]) -> Iterator[None]:
    """A real SIGINT to this process once two units have started (what Ctrl-C or a timeout's SIGINT sends the
    harness); the block must raise KeyboardInterrupt and do so within 15 s."""
    import os
    import signal
    import time

    def interrupt_when_two_started() -> None:
        while len(started) < 2:
            time.sleep(0.05)
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_when_two_started, daemon=True).start()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - start < 15


def test_ctrl_c_with_several_jobs_stops_the_running_children_and_starts_no_other(tmp_path: Path) -> None:
    """A real SIGINT to the harness while two runs sleep in worker threads: both child groups stop within seconds
    (before: the pool waited for each child's own end, up to its timeout; the H200 matrix was killed 30 s after its
    SIGINT) and the queued third unit never starts."""
    import os

    from reprobisect.run.child_process import ChildSpec, run_child

    started: list[object] = []

    def run(unit: int) -> Record:
        started.append(unit)
        spec = ChildSpec(
            argv=(sys.executable, "-c", "import time; time.sleep(120)"),
            env={"PATH": os.environ.get("PATH", os.defpath)},
            cwd=tmp_path,
            log_path=tmp_path / "logs" / f"{unit}.log",
            timeout=120,
            grace=0.2,
        )
        run_child(spec)
        raise AssertionError("a stopped run returned")  # pragma: no cover - only if the stop failed

    with _sigint_once_two_started(started):
        in_parallel(run, [0, 1, 2], 2)
    assert sorted(started) == [0, 1]  # type: ignore[type-var]  # ints


def test_ctrl_c_during_the_cell_builds_stops_them_and_builds_no_other(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SIGINT while two cells build (--jobs 2, a uv install that sleeps): both installs are killed within
    seconds and the third cell is never built (before: the pool waited for each install and then built every
    queued cell; a timeout's SIGINT reaches the harness only, not its uv)."""
    from reprobisect.util.cmd import run_logged

    started: list[object] = []

    def slow_build(cell: Cell, base: BaseInterpreter, envs_dir: Path, **_: object) -> CellEnv:
        started.append(cell.id)
        log = tmp_path / f"{cell.id}.build.log"
        run_logged([sys.executable, "-c", "import time; time.sleep(120)"], log=log, what="installing", timeout=600)
        raise AssertionError("a stopped build returned")  # pragma: no cover - only if the stop failed

    monkeypatch.setattr(prepare, "ensure_env", slow_build)
    with _sigint_once_two_started(started):
        _run(tmp_path, _config(tmp_path), _request(axes={"deepspeed": ("0.16.4", "0.17.0", "0.18.2")}, jobs=2))
    assert len(started) == 2 and fakes.executed == []


@settings(max_examples=300, deadline=None)
@given(
    where=st.text(max_size=120),
    what=st.text(min_size=1, max_size=200),
    label=st.text(max_size=200),
    stored=st.booleans(),
    width=st.integers(min_value=0, max_value=200),
)
def test_a_progress_line_keeps_its_verdict_whole_and_its_width(
    where: str, what: str, label: str, stored: bool, width: int
) -> None:
    """The CI failure of 2026-12-05: a long cell id pushed "(stored)" past the cut, so a reused record read as a
    new run. Whatever the names, the verdict stays whole, and the line stays within the width wherever the
    counter, the verdict and one character of what ran fit in it."""
    prefix, verdict = "[1/2, 1 running] ", "✗ REPRODUCED " + ("(stored)" if stored else "[62.5 s]")
    line = ProgressLine(what=what, verdict=verdict, label=label, where=where).fitted(prefix, width)
    assert line.startswith(prefix)
    assert f": {verdict}" in line
    assert len(line) <= max(width, len(prefix) + 1 + len(f": {verdict}"))
    assert "\n" not in line


def test_a_long_cell_id_is_cut_in_the_middle_and_the_label_goes_first() -> None:
    cell = "torch-2.13.0+cpu_deepspeed-0.16.8_lightning-2.6.6"
    what = "gan cpu-deepspeed deepspeed-0.16.8"
    line = ProgressLine(what, "! OTHER_FAILURE (stored)", "e149c29f78 zero-param-already-reduced", where=cell)
    assert (
        line.fitted("[1/2] ", 200)
        == f"[1/2] {cell} {what}: ! OTHER_FAILURE (stored) e149c29f78 zero-param-already-reduced"
    )
    wide = line.fitted("[1/2, 1 running] ", 145)
    assert wide == f"[1/2, 1 running] {cell} {what}: ! OTHER_FAILURE (stored) e149c29f78 zero-…"
    assert len(wide) == 145
    narrow = line.fitted("[1/2, 1 running] ", 120)  # the CI line: the cell id gives way, "(stored)" stays
    assert narrow == f"[1/2, 1 running] torch-2.13.0+cpu_deep…16.8_lightning-2.6.6 {what}: ! OTHER_FAILURE (stored)"
    assert len(narrow) == 120
