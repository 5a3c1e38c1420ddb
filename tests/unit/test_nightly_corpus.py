"""The regression corpus in the night (issue #37, item 1): entries become repros beside the canonical ones, what
this machine cannot run is listed with why, and matrix.yaml's ``nightly.corpus`` is read as hostile input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobisect.commands.main import _parse
from reprobisect.commands.nightly import NightlyOptions, _with_corpus
from reprobisect.config.load import load_config
from reprobisect.config.scripts import INSTRUMENTS_ENV
from reprobisect.corpus.entries import corpus_slice, entry_repro, why_not_here
from reprobisect.corpus.truth import load_truth
from reprobisect.errors import ConfigError
from tests.conftest import ROOT

CORPUS = ROOT / "corpus"
CPU_ENTRIES = sorted(p.parent.name for p in CORPUS.glob("*/truth.toml") if load_truth(p.parent).backend == "cpu")
GPU_ENTRIES = sorted(p.parent.name for p in CORPUS.glob("*/truth.toml") if load_truth(p.parent).backend != "cpu")
AXES = {"python": "system", "torch": "system", "lightning": "2.6.6", "torchvision": "match"}


def _args(*argv: str) -> NightlyOptions:
    """The nightly's options as its own parser reads them."""
    return NightlyOptions.from_args(_parse(["nightly", "--backend", "cpu", *argv]))


def _copy(tmp_path: Path, name: str, edit: str = "") -> Path:
    root = tmp_path / "corpus"
    shutil.copytree(CORPUS / name, root / name)
    if edit:
        truth = root / name / "truth.toml"
        text = truth.read_text()
        before, _, after = edit.partition("=>")
        assert before in text, before
        truth.write_text(text.replace(before, after, 1))
    return root


def _why(name: str, axes: dict[str, str]) -> str | None:
    return why_not_here(load_truth(CORPUS / name), backend="cpu", gpus=0, axes=axes)


def test_every_cpu_entry_the_slice_can_run_becomes_a_repro_and_the_rest_say_why() -> None:
    found = corpus_slice(CORPUS, ["all"], backend="cpu", axes=AXES, strict=True)
    runnable = [name for name in CPU_ENTRIES if _why(name, AXES) is None]
    assert sorted(found.repros) == [f"corpus-{name}" for name in runnable] and len(runnable) >= 15
    left = [name for name in CPU_ENTRIES if name not in runnable]  # an entry pinning another python, --require
    cpu_not_run = [line for line in found.not_run if "needs 1 GPU" not in line]  # the GPU entries: said below
    assert sorted(cpu_not_run) == sorted(f"corpus entry {name}: {_why(name, AXES)}" for name in left)
    repro = found.repros[f"corpus-{CPU_ENTRIES[0]}"]
    truth = load_truth(CORPUS / CPU_ENTRIES[0])
    assert repro.report == truth.report and repro.timeout == truth.timeout and "cpu-deepspeed" in repro.forms
    assert repro.forms["cpu-deepspeed"].script == (CORPUS / CPU_ENTRIES[0] / "issue.py").resolve()
    assert entry_repro(truth).name == f"corpus-{truth.name}"


def test_a_gpu_entry_or_a_contradicting_pin_is_listed_not_run_with_why(tmp_path: Path) -> None:
    name = CPU_ENTRIES[0]
    root = _copy(tmp_path, name, 'backend = "cpu"\ngpus = 0=>backend = "gpu"\ngpus = 1')
    found = corpus_slice(root, [name], backend="cpu", axes=AXES, strict=True)
    assert found.repros == {} and found.not_run == (f"corpus entry {name}: needs 1 GPU(s) (backend gpu): run with "
                                                    "--backend cuda on a GPU machine",)  # fmt: skip
    assert corpus_slice(root, [name], backend="cuda", axes=AXES, strict=True).not_run[0].endswith(
        "needs 1 GPUs, this machine has 0"
    ) or shutil.which("nvidia-smi")
    truth = load_truth(CORPUS / name)
    pinned = {**AXES, "torch": "2.9.1"}
    assert why_not_here(truth, backend="cpu", gpus=0, axes=pinned) == (
        "its truth pins torch system; this slice runs torch 2.9.1"
    )
    assert why_not_here(truth, backend="cuda", gpus=1, axes=AXES) is None


def test_a_missing_corpus_is_an_error_when_asked_and_a_note_when_matrix_yaml_asks(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no corpus folder here"):
        corpus_slice(tmp_path / "nowhere", ["all"], backend="cpu", axes=AXES, strict=True)
    quiet = corpus_slice(tmp_path / "nowhere", ["all"], backend="cpu", axes=AXES, strict=False)
    assert quiet.repros == {} and "no corpus folder at" in quiet.not_run[0]
    with pytest.raises(ConfigError, match=r"corpus entry 'ds-bf16-stray-gra': no such entry .* perhaps you meant"):
        corpus_slice(CORPUS, ["ds-bf16-stray-gra"], backend="cpu", axes=AXES, strict=True)


def test_the_corpus_joins_the_default_slice_and_what_is_asked_for() -> None:
    config = load_config(ROOT / "matrix.yaml")
    assert config.nightly is not None and config.nightly.corpus == ("all",)
    made, repros, not_run = _with_corpus(config, _args(), ())
    left = {name for name in CPU_ENTRIES if any(line.startswith(f"corpus entry {name}: ") for line in not_run)}
    corpus = tuple(f"corpus-{name}" for name in CPU_ENTRIES if name not in left)
    assert repros == (*config.nightly.repros, *corpus) and len(corpus) >= 15
    assert GPU_ENTRIES and sorted(line for line in not_run if "GPU" in line) == [  # a CPU night names them, and why
        f"corpus entry {name}: needs 1 GPU(s) (backend gpu): run with --backend cuda on a GPU machine"
        for name in GPU_ENTRIES
    ]
    assert all("pins" in line or "this slice's cells do not install" in line for line in not_run if "GPU" not in line)
    assert all(name in made.repros for name in corpus)
    _, repros, _ = _with_corpus(config, _args(), ("script-issue",))  # a night of one script stays that script
    assert repros == ("script-issue",)
    _, repros, _ = _with_corpus(config, _args("--corpus", CPU_ENTRIES[0]), ("script-issue",))
    assert repros == ("script-issue", f"corpus-{CPU_ENTRIES[0]}")
    unchanged, repros, _ = _with_corpus(config, _args("--corpus", "none"), ())
    assert repros == () and unchanged is config  # () is matrix.yaml's nightly.repros, without the corpus


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of matrix.yaml's folder (its repros/), whose matrix.yaml each test rewrites."""
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(ROOT / "repros", root / "repros")
    return root


def _load_with_corpus(project: Path, value: object) -> None:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    data["nightly"]["corpus"] = value
    (project / "matrix.yaml").write_text(yaml.safe_dump(data))
    load_config(project / "matrix.yaml")


@pytest.mark.parametrize("value", ["../etc", "a b", "", ".hidden", "x" * 101, "naïve", "a/b"])
def test_a_hostile_nightly_corpus_name_is_refused_by_key(project: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"nightly\.corpus"):
        _load_with_corpus(project, [value])
    _load_with_corpus(project, ["ds-bf16-stray-grad", "all"])  # names of entries, and 'all', load


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.integers(), st.dictionaries(st.text(max_size=3), st.text(max_size=3)), st.text(min_size=1)))
def test_a_nightly_corpus_that_is_not_a_list_of_names_is_refused(project: Path, value: object) -> None:
    with pytest.raises(ConfigError, match=r"nightly\.corpus"):
        _load_with_corpus(project, value)


def test_a_performance_entry_in_the_night_imports_the_instruments_it_times_its_steps_with() -> None:
    instruments = ROOT / "repros" / "instruments.py"
    found = corpus_slice(CORPUS, ["all"], backend="cpu", axes=AXES, strict=True, instruments=instruments)
    timed = found.repros["corpus-ds-zero2-hook-count-slowdown"].forms["cpu-deepspeed"]
    assert timed.env[INSTRUMENTS_ENV] == str(instruments.parent) and instruments in timed.inputs
    plain = found.repros["corpus-ds-bf16-stray-grad"].forms["cpu-deepspeed"]
    assert INSTRUMENTS_ENV not in plain.env and instruments not in plain.inputs
    made, _, _ = _with_corpus(load_config(ROOT / "matrix.yaml"), _args(), ())
    assert INSTRUMENTS_ENV in made.repros["corpus-ds-zero2-hook-count-slowdown"].forms["cpu-deepspeed"].env
