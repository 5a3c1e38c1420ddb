"""A performance entry of the corpus (issue #36's "at least one performance regression"): its truth is a time —
each release's hand-measured median step, the affected releases those slower than the first beyond the entry's
threshold — checked as hostile input; the corpus triages it with ``--slower-than`` and scores the timing search's
slower ranges and pull requests; the hand tool reads step times from the instruments' lines and nothing else."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.bisect.answer import Answer
from reprobisect.commands import corpus
from reprobisect.commands.triage_flow import Triaged
from reprobisect.corpus.truth import parse_truth
from reprobisect.corpus.truth_model import Truth
from reprobisect.errors import ConfigError
from reprobisect.model.bisect_report import BisectReport, SeenState
from reprobisect.model.culprit import ChangeKind, Commit, Culprit, SearchTarget
from tests.bisect_reports import bisect_report, probe
from tests.conftest import tool_module

RELEASES = ["0.18.4", "0.18.5", "0.18.6", "0.18.7"]
STEPS = {
    "0.18.4": [7.1, 7.2, 7.0],
    "0.18.5": [60.2, 61.0, 59.5],
    "0.18.6": [60.0, 58.1, 62.3],
    "0.18.7": [8.1, 8.3, 8.2],
}


def _data(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema": 1, "title": "t", "report": "deepspeedai/DeepSpeed#7885", "reporter": "r",
        "kinds": ["performance", "came-and-went"], "package": "deepspeed", "releases": RELEASES, "backend": "cpu",
        "precision": "bf16", "slowdown": {"threshold": 50, "repeats": 3},
        "affected": [{
            "first": "0.18.5", "last": "0.18.6",
            "introduced": {"pr": "deepspeedai/DeepSpeed#7780", "commit": "311674ffa", "parent": "5f2f9bf37"},
            "fixed": {"pr": "deepspeedai/DeepSpeed#7886", "commit": "6c59d5446", "parent": "4dba1e202"},
        }],
        "runs": {r: {"exit": 0, "last_line": "", "seconds": 12.0, "step_ms": STEPS[r]} for r in RELEASES},
        "commits": {
            "311674ffa": {"exit": 0, "last_line": "", "seconds": 12.0, "step_ms": [63.4]},
            "5f2f9bf37": {"exit": 0, "last_line": "", "seconds": 12.0, "step_ms": [7.7]},
        },
    }  # fmt: skip
    data.update(changes)
    return data


def _parse(tmp_path: Path, data: dict[str, Any]) -> Truth:
    (tmp_path / "issue.py").write_text("print('x')\n")
    return parse_truth(data, tmp_path, where="corpus/e/truth.toml")


def test_a_performance_truth_loads_with_its_rule_and_medians(tmp_path: Path) -> None:
    truth = _parse(tmp_path, _data())
    assert truth.slowdown is not None and truth.slowdown.limit == 1.5 and truth.slowdown.metric == "step"
    assert truth.runs["0.18.5"].median_ms == 60.2 and truth.span_releases() == [["0.18.5", "0.18.6"]]


def _runs(**steps: list[float]) -> dict[str, Any]:
    return {r: {"exit": 0, "last_line": "", "seconds": 1.0, "step_ms": steps.get(r.replace(".", "_"), STEPS[r])} for r in RELEASES}  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"slowdown": None}, "slowdown = None: a performance entry needs [slowdown]"),
        ({"kinds": ["came-and-went"]}, "only a performance entry has one"),
        ({"slowdown": {"threshold": 0}}, "slowdown.threshold = 0: must be a percentage above 0"),
        ({"slowdown": {"threshold": 50, "metric": "wall"}}, "slowdown.metric = 'wall'"),
        ({"slowdown": {"threshold": 50, "repeats": 1}}, "slowdown.repeats = 1: must be 2 to 20"),
        ({"slowdown": {"threshold": 50, "noise": 3}}, "slowdown.noise = 3: unknown key"),
        ({"runs": _runs(**{"0_18_7": [10.2, 10.4, 10.3]})}, "runs.0.18.7.step_ms = [10.2, 10.4, 10.3]: ×1.45"),
        ({"runs": _runs(**{"0_18_7": [80.0]})}, "the runs are slower on 0.18.5, 0.18.6, 0.18.7"),
        ({"runs": _runs(**{"0_18_5": [-1.0]})}, "runs.0.18.5.step_ms = -1.0: must be a list of positive numbers"),
        ({"runs": _runs(**{"0_18_5": ["60"]})}, "runs.0.18.5.step_ms = '60'"),
        ({"runs": _runs(**{"0_18_5": [True]})}, "runs.0.18.5.step_ms = True"),
        ({"runs": _runs(**{"0_18_5": []})}, "runs.0.18.5 = []: a performance entry's runs must pass and be timed"),
        (
            {"runs": {**_runs(), "0.18.5": {"exit": 1, "last_line": "E", "seconds": 1.0, "step_ms": [60.0]}}},
            "runs.0.18.5 = 1: a performance entry's runs must pass",
        ),
        (
            {"commits": {"311674ffa": {"exit": 0, "last_line": "", "seconds": 1.0, "step_ms": [7.9]},
                         "5f2f9bf37": {"exit": 0, "last_line": "", "seconds": 1.0, "step_ms": [7.7]}}},
            "affected[0].introduced = '311674ffa': the introduced side must be slower beyond ×1.50",
        ),
    ],
)  # fmt: skip
def test_a_hostile_performance_truth_is_refused_by_key(tmp_path: Path, changes: dict[str, Any], words: str) -> None:
    data = _data(**changes)
    if data.get("slowdown") is None:
        data.pop("slowdown")
    with pytest.raises(ConfigError, match=re.escape(words)):
        _parse(tmp_path, data)


def _options(tmp_path: Path) -> corpus.CorpusOptions:
    parser = argparse.ArgumentParser()
    corpus.setup_arguments(parser.add_subparsers())
    argv = ["corpus", "--jobs", "4", "--git", "deepspeed=/clone", "--out", str(tmp_path)]
    return corpus.CorpusOptions.from_args(parser.parse_args(argv))


def test_a_performance_entry_is_triaged_as_a_timing_search_one_run_at_a_time(tmp_path: Path) -> None:
    argv = corpus._triage_argv(_parse(tmp_path, _data()), _options(tmp_path))
    assert argv[argv.index("--jobs") + 1] == "1"
    assert argv[argv.index("--slower-than") + 1] == "50" and "--instruments" in argv
    assert argv[argv.index("--metric") + 1] == "step" and argv[argv.index("--git") + 1] == "/clone"


def _report(slower: dict[str, bool | None]) -> BisectReport:
    return bisect_report(
        versions=RELEASES, probes=[probe(v, SeenState(outcome="PASS", slower=s, timing={})) for v, s in slower.items()]
    )


def _culprit(kind: ChangeKind, last: str, first: str, pr: str) -> Culprit:
    commit = Commit(sha="a" * 40, subject="s", pull_request=pr)
    return Culprit(
        kind=kind, last=last, first=first, target=SearchTarget(outcome="PASS", signature_id=None), commit=commit
    )


CAME, WENT = ("introduced", "0.18.4", "0.18.5"), ("fixed", "0.18.6", "0.18.7")


def _row(monkeypatch, tmp_path: Path, report: BisectReport | None, culprits: list[Culprit]) -> Any:
    from reprobisect.bisect.probes import ProbeResult

    states = {r: ProbeResult(version=r, outcome="PASS", signature_id=None, signature=None) for r in RELEASES}
    answer = Answer(
        repro="script-issue", form="cpu", axis="deepspeed", releases=tuple(RELEASES), states=states,
        transitions=(), fixes={}, pins={},
    )  # fmt: skip
    triaged = Triaged(answers=[(answer, [])], timed=[(answer, report, culprits)])
    monkeypatch.setattr(corpus, "triage_answers", lambda args, rerun: triaged)
    return corpus.run_entry(_parse(tmp_path, _data()), _options(tmp_path))


def test_the_timing_searchs_ranges_and_pull_requests_are_scored(monkeypatch, tmp_path: Path) -> None:
    slower = {"0.18.4": False, "0.18.5": True, "0.18.6": True, "0.18.7": False}
    right = [_culprit(*CAME, "deepspeedai/DeepSpeed#7780"), _culprit(*WENT, "deepspeedai/DeepSpeed#7886")]
    assert _row(monkeypatch, tmp_path, _report(slower), right).exact
    wrong = [_culprit(*CAME, "deepspeedai/DeepSpeed#7779"), right[1]]
    row = _row(monkeypatch, tmp_path, _report(slower), wrong)
    assert not row.exact and row.introduced.ok is False and row.fixed.ok is True
    undecided = {**slower, "0.18.7": None}  # 0.18.7 ambiguous: the range is right, the fix's transition unseen
    row = _row(monkeypatch, tmp_path, _report(undecided), right[:1])
    assert row.ranges.ok is True and row.fixed.ok is False and not row.exact
    assert not _row(monkeypatch, tmp_path, None, []).exact  # no timing search answered: a wrong row, never hidden


def _corpus_truth() -> Any:
    return tool_module("corpus_truth")


def test_the_hand_tool_reads_the_median_step_after_the_warm_up() -> None:
    tool = _corpus_truth()
    lines = [f'@@repro {json.dumps({"event": "step", "step": i, "seconds": s, "ok": True})}' for i, s in
             enumerate([5.0, 0.010, 0.012, 0.011, 0.013, 0.009])]  # fmt: skip
    assert tool.median_step_ms("\n".join(["noise", *lines, "done"])) == 11.0  # the 5 s first step is warm-up
    assert tool.median_step_ms("no steps at all") is None


@given(st.lists(st.text(max_size=60), max_size=30))
def test_the_hand_tool_survives_any_output(lines: list[str]) -> None:
    value = _TOOL.median_step_ms("\n".join(f"@@repro {line}" for line in lines))
    assert value is None or value > 0


_TOOL = _corpus_truth()


def test_a_slowdown_still_there_on_the_last_release_must_say_still_present(tmp_path: Path) -> None:
    affected = [{"first": "0.18.5", "last": "0.18.7"}]
    runs = _runs(**{"0_18_7": [61.0, 60.0, 62.0]})
    with pytest.raises(ConfigError, match=re.escape("the runs say 'still-present'; add it")):
        _parse(tmp_path, _data(affected=affected, runs=runs, commits={}, kinds=["performance"]))
    truth = _parse(tmp_path, _data(affected=affected, runs=runs, commits={}, kinds=["performance", "still-present"]))
    assert truth.span_releases() == [["0.18.5", "0.18.6", "0.18.7"]]


def test_the_hand_tool_without_uv_installs_with_pip_and_sees_a_venv_interpreters_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An offline GPU node has no uv and its Python is a venv holding torch: the tool makes the venv with the
    standard library, installs with this interpreter's pip, and adds this interpreter's site folders."""
    calls: list[list[str]] = []

    def fake_sh(cmd: list[str], **kwargs: object) -> Any:
        calls.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            (Path(cmd[-1]) / "bin").mkdir(parents=True)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(_TOOL.shutil, "which", lambda name: None)
    monkeypatch.setattr(_TOOL, "_sh", fake_sh)
    monkeypatch.setattr(_TOOL, "_torch_check", lambda python, pins: "")
    monkeypatch.setattr(_TOOL.sys, "base_prefix", "/usr")
    monkeypatch.setattr(_TOOL.sys, "prefix", "/opt/torch/.venv")
    monkeypatch.setattr(_TOOL.site, "getsitepackages", lambda: ["/opt/torch/.venv/lib/python3.12/site-packages"])
    python, _ = _TOOL.release_venv(tmp_path, {"package": "deepspeed", "pins": {"torch": "system"}}, "0.17.6")
    assert calls[0][1:] == ["-m", "venv", "--without-pip", "--system-site-packages", str(python.parent.parent)]
    assert calls[1][1:] == ["-m", "pip", "--python", str(python), "install", "-q", "deepspeed==0.17.6"]
    [pth] = python.parent.parent.glob("lib/python*/site-packages/_truth_base_site.pth")
    assert pth.read_text() == "/opt/torch/.venv/lib/python3.12/site-packages\n"
    monkeypatch.setattr(_TOOL.sys, "prefix", "/usr")  # a plain interpreter: its packages are the base's already
    other, _ = _TOOL.release_venv(tmp_path, {"package": "deepspeed", "pins": {"torch": "system"}}, "0.18.0")
    assert not list(other.parent.parent.glob("lib/python*/site-packages/*.pth"))
