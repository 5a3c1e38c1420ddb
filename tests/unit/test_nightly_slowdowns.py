"""``nightly --slower-than``: a run the night's comparison flags as slower is searched on timings between the
baseline and its release (runs made again, alone); a confirmed slowdown is a regression (exit 1, the title, the
issue's section, with a clone the commit and pull request), a cleared one is said as cleared."""

from __future__ import annotations

import argparse
import subprocess
import types
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from reprobisect.commands import nightly as command
from reprobisect.model.bisect_report import BisectReport
from reprobisect.model.culprit import Commit, Culprit, SearchTarget
from reprobisect.model.slowdown import SlowdownRule
from reprobisect.nightly import release_night as night_run
from reprobisect.nightly import slowdowns
from reprobisect.nightly.main_text import MainNews, main_body, main_title
from reprobisect.nightly.regressions import masked
from reprobisect.nightly.release_text import NightNews, issue_body, title_of
from reprobisect.report.compare import compare
from reprobisect.report.frame import Bisect
from reprobisect.run.sandbox import Confinement
from tests.bisect_reports import bisect_report, report_of
from tests.unit.test_nightly import _night
from tests.unit.test_slowdown_bisect import _bisect

RULE = SlowdownRule(threshold=0.5)
KEY = ("gan", "torch-2.13.0+cpu_lightning-2.6.6", "cpu-deepspeed", "none")


def _frames(before_ms: float, after_ms: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    before = masked(_night([("none", "PASS", "", "2.6.6")], "0.18.3")).assign(step_ms=[[before_ms] * 4])
    after = masked(_night([("none", "PASS", "", "2.6.6")], "0.18.9")).assign(step_ms=[[after_ms] * 4])
    return before, after


def test_the_screen_flags_runs_beyond_the_rules_limit_only() -> None:
    before, after = _frames(30.0, 40.0)  # ×1.33: slower than the default 10 %, not than 50 %
    assert slowdowns.flagged_slower({"0.18.9": compare(after, before, threshold=slowdowns.screen_limit(None))})
    assert not slowdowns.flagged_slower({"0.18.9": compare(after, before, threshold=slowdowns.screen_limit(RULE))})
    before, after = _frames(30.0, 90.0)
    [(key, release)] = slowdowns.flagged_slower(
        {"0.18.9": compare(after, before, threshold=slowdowns.screen_limit(RULE))}
    )
    assert key[0] == "gan" and key[2:] == ("cpu-deepspeed", "none") and release == "0.18.9"


class _FakeNight:
    def __init__(self, report: BisectReport, tmp_path: Path, git: Path | None = None) -> None:
        self.report, self.config, self.ctx = report, None, None
        self.request = types.SimpleNamespace(git=git, backend="cpu", timeout=None, confinement=None)
        self.slice = {"axes": {"torch": "system"}}
        self.path = tmp_path / "bisect-gan-timing.json"
        self.asked: list[tuple[Any, ...]] = []

    def bisect(self, key: Any, good: str, bad: str, *, slowdown: SlowdownRule | None = None) -> Bisect:
        self.asked.append((key, good, bad, slowdown))
        return Bisect(path=self.path, report=self.report)


def _news(found: list[slowdowns.Slowdown]) -> NightNews:
    return NightNews(at="t", backend="cpu", baseline="0.18.3", since=None, ran=["0.18.9"], slowdowns=found)


def test_a_confirmed_slowdown_is_a_regression_with_its_section(monkeypatch, tmp_path) -> None:
    _, report, _ = _bisect(monkeypatch, tmp_path, {"0.18.7": 3.0, "0.18.8": 3.0, "0.18.9": 3.0}, all_transitions=True)
    night = _FakeNight(report, tmp_path)
    [found] = slowdowns.night_slowdowns(night, [(KEY, "0.18.9")], "0.18.3", RULE, limit=3)
    assert night.asked == [(KEY, "0.18.3", "0.18.9", RULE)]
    news = _news([found])
    assert found.confirmed and news.is_regression
    assert title_of(news).startswith("Nightly (cpu): deepspeed 0.18.9 slower than 0.18.3: gan cpu-deepspeed step ×")
    body = issue_body(news, None)
    assert (
        "### Slower: gan (cpu-deepspeed) across deepspeed" in body and "**slower: deepspeed 0.18.7 … 0.18.9**" in body
    )
    assert news.summary()["slowdowns"][0]["slower"] == [["0.18.7", "0.18.8", "0.18.9"]]


def test_a_flagged_run_the_search_clears_is_no_regression(monkeypatch, tmp_path) -> None:
    _, report, _ = _bisect(monkeypatch, tmp_path, {}, all_transitions=True)
    [found] = slowdowns.night_slowdowns(_FakeNight(report, tmp_path), [(KEY, "0.18.9")], "0.18.3", RULE, limit=3)
    news = _news([found])
    assert not found.confirmed and not news.is_regression
    assert "cleared by a timing search run here" in issue_body(news, None)
    assert "cleared by its timing search" in news.terminal_summary()


def test_with_a_clone_the_title_names_the_pull_request(monkeypatch, tmp_path) -> None:
    _, report, _ = _bisect(monkeypatch, tmp_path, {"0.18.7": 3.0, "0.18.8": 3.0, "0.18.9": 3.0}, all_transitions=True)
    seen: list[Any] = []

    def fake_culprits(config: Any, request: Any, transitions: Any, **kwargs: Any) -> list[Culprit]:
        seen.append(request)
        sha = "311674ffa41b" * 3
        commit = Commit(sha=sha, subject="count hooks", pull_request="deepspeedai/DeepSpeed#7780")
        target = SearchTarget(outcome="PASS", signature_id=None)
        return [Culprit(last="0.18.6", first="0.18.7", kind="introduced", target=target, commit=commit)]

    monkeypatch.setattr(slowdowns, "find_culprits", fake_culprits)
    monkeypatch.setattr(slowdowns, "repro_source", lambda config, repro, form: ["--repro", repro])
    night = _FakeNight(report, tmp_path, git=tmp_path / "clone")
    [found] = slowdowns.night_slowdowns(night, [(KEY, "0.18.9")], "0.18.3", RULE, limit=3)
    [request] = seen
    assert request.slowdown == RULE and request.all_transitions and (request.good, request.bad) == ("0.18.3", "0.18.9")
    assert title_of(_news([found])).endswith("since 311674ffa41b (#7780)")
    assert "came between 0.18.6 and 0.18.7: **by `311674ffa41b`** count hooks" in issue_body(_news([found]), None)


def test_no_more_searches_than_max_bisects(tmp_path) -> None:
    night = _FakeNight(bisect_report(), tmp_path)
    flagged = [((f"r{i}", "c", "f", "none"), "0.18.9") for i in range(5)]
    assert len(slowdowns.night_slowdowns(night, flagged, "0.18.3", RULE, limit=2)) == 2


def test_the_nights_timing_search_runs_everything_again_alone(monkeypatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(
        night_run, "run_bisect", lambda config, request, ctx: seen.append(request) or (None, {}, Path("b"))
    )
    unconfined = Confinement(sandbox=False)
    night = types.SimpleNamespace(
        config=None, ctx=None, echo=lambda _: None, slice={"axes": {}},
        request=night_run.NightlyRequest(state=Path("s"), out=Path("o"), jobs=8, confinement=unconfined),
    )  # fmt: skip
    night_run.Night.bisect(night, KEY, "0.18.3", "0.18.9", slowdown=RULE)
    night_run.Night.bisect(night, KEY, "0.18.3", "0.18.9")
    timed, plain = seen
    assert timed.slowdown == RULE and timed.fresh and timed.jobs == 1 and timed.all_transitions
    assert plain.slowdown is None and not plain.fresh
    assert timed.confinement == plain.confinement == unconfined  # the night's --no-sandbox, not the default


def _options(*extra: str) -> command.NightlyOptions:
    parser = argparse.ArgumentParser()
    command.setup_arguments(parser.add_subparsers())
    return command.NightlyOptions.from_args(parser.parse_args(["nightly", *extra]))


@pytest.mark.parametrize("track", [[], ["--track", "main"], ["--track", "releases"]])
def test_a_timing_night_is_accepted_on_both_tracks(track: list[str]) -> None:
    command._check_options(_options("--slower-than", "20", "--git", "c", *track))


def test_a_timing_night_on_the_release_track_is_accepted() -> None:
    options = _options("--slower-than", "20", "--git", "c", "--track", "releases", "--jobs", "4")
    command._check_options(options)
    assert command.timing_rule(options.timing) == SlowdownRule(threshold=0.2)


@pytest.mark.parametrize("value", ["0", "-3", "nan"])
def test_an_impossible_threshold_names_the_flag(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):  # refused by the parser, before any options object (util/bounds.py)
        _options("--slower-than", value)
    assert f"argument --slower-than: '{value}': must be a number of percent above 0" in capsys.readouterr().err


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _clone(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "clone"
    repo.mkdir()
    _git(repo, "init", "-q")
    shas = []
    for subject in ("Last night (#7700)", "Count used parameters in every hook (#7780)"):
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", subject)
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas


def _commit_report(shas: list[str], slower: bool) -> BisectReport:
    def side(sha: str, is_slower: bool, ratio: float) -> dict[str, Any]:
        timing = {"verdict": "slower" if is_slower else "not slower", "ratio": ratio, "low": ratio * 0.9, "high": ratio * 1.1}  # fmt: skip
        return {"version": sha[:12], "outcome": "PASS", "slower": is_slower, "timing": timing}

    probes = [side(shas[0], False, 1.0), side(shas[1], slower, 8.4 if slower else 1.02)]
    transitions = [{"last": shas[0][:12], "first": shas[1][:12], "from": probes[0], "to": probes[1]}] if slower else []
    return report_of({
        "axis": "deepspeed", "git": "clone", "range": {"good": shas[0], "bad": shas[-1], "versions": shas},
        "probes": probes, "transitions": transitions, "slowdown": {"metric": "step", "threshold_percent": 50},
        "reference": {"version": shas[0][:12], "runs": 3}, "target": "step slower than the good end by more than 50%",
    })  # fmt: skip


def test_main_nights_slowdown_names_the_first_slower_commit_and_its_pull_request(monkeypatch, tmp_path) -> None:
    repo, shas = _clone(tmp_path)
    seen: list[Any] = []

    def fake_bisect(config: Any, request: Any, ctx: Any) -> Any:
        seen.append(request)
        return None, _commit_report(shas, slower=True), tmp_path / "bisect-main.json"

    monkeypatch.setattr(slowdowns, "run_bisect", fake_bisect)
    night = _FakeNight(bisect_report(), tmp_path)
    pair = types.SimpleNamespace(clone=repo, good=shas[0], bad=shas[1])
    [found] = slowdowns.main_slowdowns(night, [KEY], pair, RULE, limit=3)  # type: ignore[arg-type]
    [request] = seen
    assert (request.good, request.bad, request.git, request.slowdown) == (shas[0], shas[1], repo, RULE)
    assert request.fresh and request.form == "cpu-deepspeed" and request.fix == "none"
    assert found.confirmed and found.culprits[0].commit is not None and found.culprits[0].commit.sha == shas[1]
    assert found.title_words() == f"gan cpu-deepspeed step ×8.40 since {shas[1][:12]} (#7780)"
    news = MainNews(at="t", backend="cpu", ref="master", clone=str(repo), after=shas[1], before=shas[0], slowdowns=(found,))  # fmt: skip
    assert news.is_regression
    assert main_title(news) == (
        f"DeepSpeed master: slower than last night's {shas[0][:12]}: gan cpu-deepspeed step ×8.40 since "
        f"{shas[1][:12]} (#7780)"
    )
    body = main_body(news)
    assert f"came between {shas[0][:12]} and {shas[1][:12]}: **by `{shas[1][:12]}`** Count used parameters" in body
    assert news.summary()["slowdowns"][0]["confirmed"] is True


def test_main_nights_flagged_run_cleared_by_its_search_is_no_regression(monkeypatch, tmp_path) -> None:
    repo, shas = _clone(tmp_path)
    monkeypatch.setattr(
        slowdowns, "run_bisect", lambda *a: (None, _commit_report(shas, slower=False), tmp_path / "b.json")
    )
    pair = types.SimpleNamespace(clone=repo, good=shas[0], bad=shas[1])
    [found] = slowdowns.main_slowdowns(_FakeNight(bisect_report(), tmp_path), [KEY], pair, RULE, limit=3)  # type: ignore[arg-type]
    news = MainNews(at="t", backend="cpu", ref="master", clone=str(repo), after=shas[1], before=shas[0], slowdowns=(found,))  # fmt: skip
    assert not found.confirmed and not news.is_regression and found.culprits == ()
    assert "Flagged slower, then cleared by a timing search here" in main_body(news)
