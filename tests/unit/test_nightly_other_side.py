"""Whose side a new DeepSpeed release's regression is on (issue #51, item 5): each verdict from fake probes, what
the index may list, probes that say nothing, and how the night says it; without runs."""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from reprobisect.bisect.search import ProbeResult
from reprobisect.config.load import load_config
from reprobisect.errors import ConfigError, EnvBuildError
from reprobisect.nightly import other_side
from reprobisect.nightly.other_side import OtherSide, lightning_releases, other_sides, which_side
from reprobisect.nightly.release_text import NightNews, issue_body
from reprobisect.nightly.targets import Target
from reprobisect.run.matrix_request import MatrixRequest, RunStats
from reprobisect.run.sandbox import Confinement
from tests.conftest import ROOT

KEY = ("gan", "torch-2.13.0+cpu_lightning-2.6.6", "cpu-deepspeed", "none")
VERSIONS = ["2.6.6", "2.6.7", "2.7.0", "2.7.1", "2.8.0"]


def _fail(version: str, signature: str = "ab12cd34ef") -> ProbeResult:
    return ProbeResult(version=version, outcome="OTHER_FAILURE", signature_id=signature, signature="TypeError: x")


def _pass(version: str) -> ProbeResult:
    return ProbeResult(version=version, outcome="PASS")


def _probe(said: Mapping[str, ProbeResult], asked: list[str]) -> Callable[[str], ProbeResult]:
    def probe(version: str) -> ProbeResult:
        asked.append(version)
        return said[version]

    return probe


def _side(said: Mapping[str, ProbeResult], versions: list[str] = VERSIONS) -> tuple[OtherSide, list[str]]:
    asked: list[str] = []
    return which_side(KEY, "0.19.9", versions, _probe(said, asked)), asked


def test_a_newer_lightning_that_passes_is_searched_to_its_first_passing_release() -> None:
    said = {"2.6.6": _fail("2.6.6"), "2.6.7": _fail("2.6.7"), **{v: _pass(v) for v in VERSIONS[2:]}}
    side, asked = _side(said)
    assert (side.side, side.last_failing, side.first_passing, side.newest) == ("lightning", "2.6.7", "2.7.0", "2.8.0")
    assert side.sentence() == (
        "fails with lightning ≤ 2.6.7, passes with 2.7.0: the fix is Lightning's (or a Lightning release already has it)"
    )
    assert sorted(asked) == sorted(set(asked)) and asked[:2] == ["2.6.6", "2.8.0"]  # each release run once, ends first
    assert len(asked) < len(VERSIONS)  # a search, not every release
    assert [p["lightning"] for p in side.to_json()["probes"]] == asked


def test_the_first_newer_release_passing_and_a_gap_that_says_nothing_are_said() -> None:
    said = {"2.6.6": _fail("2.6.6"), **{v: _pass(v) for v in VERSIONS[1:]}}
    assert _side(said)[0].first_passing == "2.6.7"
    gap = {**said, "2.6.7": ProbeResult(version="2.6.7", outcome="ENV_ERROR"), "2.7.0": _pass("2.7.0")}
    gap |= {"2.7.1": ProbeResult(version="2.7.1", outcome="TIMEOUT")}
    side, _ = _side(gap, ["2.6.6", "2.6.7", "2.7.1", "2.8.0"])
    assert (side.last_failing, side.first_passing) == ("2.6.6", "2.8.0")
    assert side.sentence().startswith("fails with lightning ≤ 2.6.6, passes with 2.8.0 (2.6.7, 2.7.1 between gave no")


def test_failing_alike_with_the_newest_lightning_is_deepspeeds_side_in_two_runs() -> None:
    side, asked = _side({v: _fail(v) for v in VERSIONS})
    assert side.side == "deepspeed" and asked == ["2.6.6", "2.8.0"]
    assert side.sentence() == "fails with every Lightning tried (pinned 2.6.6, newest 2.8.0): DeepSpeed's side"
    assert side.to_json()["side"] == "deepspeed" and side.to_json()["why"] is None


@pytest.mark.parametrize(
    ("newest", "why"),
    [
        (
            ProbeResult(version="2.8.0", outcome="ENV_ERROR", signature="no wheel"),
            "gave no verdict: ENV_ERROR: no wheel",
        ),
        (ProbeResult(version="2.8.0", outcome="TIMEOUT"), "gave no verdict: TIMEOUT"),
        (ProbeResult(version="2.8.0", outcome="PASS", flaky=True), "gave no verdict: flaky"),
        (_fail("2.8.0", "0000000000"), "fails otherwise with lightning 2.8.0 (OTHER_FAILURE 0000000000)"),
        (ProbeResult(version="2.8.0", outcome="CRASH", signature_id="ab12cd34ef"), "fails otherwise"),
    ],
)
def test_a_newest_run_that_says_nothing_or_something_else_is_no_verdict(newest: ProbeResult, why: str) -> None:
    side, asked = _side({"2.6.6": _fail("2.6.6"), "2.8.0": newest})
    assert side.side is None and why in str(side.why) and asked == ["2.6.6", "2.8.0"]
    assert side.sentence().startswith("could not tell which side: ")


def test_a_pinned_run_without_a_failure_and_a_harness_error_are_no_verdict() -> None:
    timeout = {"2.6.6": ProbeResult(version="2.6.6", outcome="TIMEOUT"), "2.8.0": _pass("2.8.0")}
    assert "the run with the pinned lightning 2.6.6 gives no failure: TIMEOUT" in str(_side(timeout)[0].why)
    passing = {"2.6.6": _pass("2.6.6"), "2.8.0": _pass("2.8.0")}
    assert "gives no failure: it passes" in str(_side(passing)[0].why)

    def broken(version: str) -> ProbeResult:
        if version == "2.8.0":
            raise EnvBuildError("lightning 2.8.0: uv could not install it")
        return _fail(version)

    side = which_side(KEY, "0.19.9", VERSIONS, broken)
    assert side.side is None and "harness error: lightning 2.8.0: uv could not install it" in str(side.why)


def test_the_releases_tried_are_final_ones_newer_than_the_pin_whatever_the_index_lists() -> None:
    listed = ["2.7.0", "garbage", "", "9" * 5000, "2.6.6", "2.7.0rc1", "2.8.0.dev2", "2.5.0", "2.7.0.0", "2.7.1.post1"]
    assert lightning_releases([*listed, 3, None], "2.6.6") == ["2.6.6", "2.7.0", "2.7.1.post1"]  # type: ignore[list-item]
    assert lightning_releases(listed, "2.6.6", up_to="2.7.0") == ["2.6.6", "2.7.0"]
    assert lightning_releases(["2.5.0", "2.6.6", "latest"], "2.6.6") == (
        "the configured index lists no Lightning release newer than the pinned 2.6.6"
    )
    assert "newer than the pinned 2.6.6 up to 2.6.9" in str(lightning_releases(["2.7.0"], "2.6.6", up_to="2.6.9"))
    assert lightning_releases(["2.7.0"], "latest") == "the slice's lightning pin 'latest' is not a release"
    assert "is not a release" in str(lightning_releases(["2.7.0"], "git+https://x/lightning@main"))


def _night(
    tmp_path: Path, *, other: bool = True, limit: int = 3, listed: object = ("2.6.6", "2.7.0")
) -> types.SimpleNamespace:
    class Index:
        def __init__(self, path: Path, python: str) -> None:
            pass

        def versions(self, package: str, *, refresh: bool = False) -> list[str]:
            assert package == "lightning" and refresh
            if isinstance(listed, Exception):
                raise listed
            return list(listed)  # type: ignore[call-overload]

    ctx = types.SimpleNamespace(envs_dir=tmp_path, base=types.SimpleNamespace(executable="python"))
    ctx.quiet = lambda: ctx
    request = types.SimpleNamespace(
        other_side=other, max_bisects=limit, lightning_up_to=None, backend="cpu", repeat=2, timeout=30.0,
        confinement=Confinement(sandbox=False),
    )  # fmt: skip
    axes = {"python": "system", "torch": "system", "lightning": "2.6.6", "torchvision": "match"}
    lines: list[str] = []
    night = types.SimpleNamespace(config=load_config(ROOT / "matrix.yaml"), request=request, ctx=ctx,
                                  stats=RunStats(), slice={"axes": axes}, echo=lines.append, lines=lines, Index=Index)  # fmt: skip
    return night


def test_the_night_runs_each_regression_cell_with_lightning_changed_and_deepspeed_at_its_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    night = _night(tmp_path)
    monkeypatch.setattr(other_side, "IndexCache", night.Index)
    asked: list[MatrixRequest] = []

    def matrix(config: object, request: MatrixRequest, ctx: object, *, stats: RunStats) -> list[object]:
        asked.append(request)
        assert stats is night.stats  # the night counts these runs
        return []  # no record: a probe that says nothing

    monkeypatch.setattr(other_side, "run_matrix", matrix)
    older = ("gan", "c", "cpu-deepspeed", "one-backward-raw-d")
    regressed = {"0.19.8": [KEY, older], "main@abc": [KEY]}
    targets = [
        Target(kind="release", name="0.19.8", spec="0.19.8"),
        Target(kind="ref", name="main@abc", spec="git+x@abc"),
    ]
    sides = other_sides(night, regressed, targets)  # type: ignore[arg-type]
    assert [(s.key[3], s.deepspeed) for s in sides] == [("none", "main@abc"), ("one-backward-raw-d", "0.19.8")]
    assert all(s.side is None and "no record of this probe" in str(s.why) for s in sides)
    first = asked[0]
    assert first.axes["deepspeed"] == ("git+x@abc",) and first.axes["lightning"] == ("2.6.6",)
    assert first.axes["torch"] == ("system",) and (first.forms, first.fixes, first.repeat) == (
        ("cpu-deepspeed",),
        ("none",),
        2,
    )
    assert not first.use_includes and first.confinement == night.request.confinement and first.timeout == 30.0
    assert any("lightning 2.6.6 .. 2.7.0" in line for line in night.lines)


def test_the_night_checks_nothing_when_asked_not_to_and_at_most_max_bisects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    regressed = {"0.19.8": [KEY, ("gan", "c", "cpu-deepspeed", "zz")]}
    targets = [Target(kind="release", name="0.19.8", spec="0.19.8")]
    assert other_sides(_night(tmp_path, other=False), regressed, targets) == []  # type: ignore[arg-type]
    assert other_sides(_night(tmp_path), {"0.19.8": []}, targets) == []  # type: ignore[arg-type]
    night = _night(tmp_path, limit=1, listed=("2.6.6",))
    monkeypatch.setattr(other_side, "IndexCache", night.Index)
    [side] = other_sides(night, regressed, targets)  # type: ignore[arg-type]
    assert side.key == KEY and "lists no Lightning release newer than the pinned 2.6.6" in str(side.why)
    assert "1 regression(s) not run with newer Lightning (--max-bisects 1)" in night.lines


def test_an_index_that_cannot_answer_and_lightnings_own_tests_are_no_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    targets = [Target(kind="release", name="0.19.8", spec="0.19.8")]
    night = _night(tmp_path, listed=ConfigError("cannot list releases of 'lightning': offline"))
    monkeypatch.setattr(other_side, "IndexCache", night.Index)
    [side] = other_sides(night, {"0.19.8": [KEY]}, targets)  # type: ignore[arg-type]
    assert "did not list Lightning's releases: cannot list releases of 'lightning': offline" in str(side.why)
    night = _night(tmp_path)
    monkeypatch.setattr(other_side, "IndexCache", night.Index)
    gan = night.config.repros["gan"]
    tests = dataclasses.replace(
        gan, forms={**gan.forms, "cpu-deepspeed": dataclasses.replace(gan.forms["cpu-deepspeed"], pytest=True)}
    )
    night.config = dataclasses.replace(night.config, repros={**night.config.repros, "gan": tests})
    [side] = other_sides(night, {"0.19.8": [KEY]}, targets)  # type: ignore[arg-type]
    assert "Lightning's own tests are the pinned release's" in str(side.why) and not side.probes


def test_the_night_says_each_side_in_its_json_terminal_and_issue_neutralised() -> None:
    fixed = OtherSide(key=KEY, deepspeed="0.19.9", pinned="2.6.6", newest="2.8.0", side="lightning",
                      last_failing="2.6.7", first_passing="2.7.0", probes=(_fail("2.6.6"), _pass("2.8.0")))  # fmt: skip
    hostile = OtherSide(key=KEY, deepspeed="0.19.9", pinned="2.6.6", newest="2.8.0",
                        why="the newest lightning 2.8.0 gave no verdict: ENV_ERROR: @octocat <!-- \x1b]0;x\x07 |")  # fmt: skip
    news = NightNews(at="t", backend="cpu", baseline="0.19.8", since=None, ran=["0.19.9"],
                     regressed={"0.19.9": [KEY]}, other_sides=[fixed, hostile])  # fmt: skip
    summary = json.loads(json.dumps(news.summary()))
    assert [s["side"] for s in summary["other_side"]] == ["lightning", None]
    assert summary["other_side"][0]["verdict"].startswith("fails with lightning ≤ 2.6.7, passes with 2.7.0")
    assert summary["other_side"][0]["probes"][1] == {"lightning": "2.8.0", "outcome": "PASS", "signature_id": None,
                                                      "skipped": None}  # fmt: skip
    terminal = news.terminal_summary()
    assert "  which side: gan cpu-deepspeed none on deepspeed 0.19.9: fails with lightning ≤ 2.6.7" in terminal
    assert "\x1b" not in terminal and "\x07" not in terminal
    body = issue_body(news, None)
    assert "### Lightning or DeepSpeed" in body and "passes with 2.7.0: the fix is Lightning's" in body
    assert "<!-- " not in body.split("\n", 1)[1] and "@octocat" not in body and "\x1b" not in body
    assert "could not tell which side: the newest lightning 2.8.0 gave no verdict" in body
    quiet = NightNews(at="t", backend="cpu", baseline="0.19.8", since=None, ran=["0.19.9"],
                      comparisons={}, regressed={})  # fmt: skip
    assert "Lightning or DeepSpeed" not in issue_body(quiet, None) and quiet.summary()["other_side"] == []


def test_the_check_is_on_unless_turned_off_and_its_bound_is_a_release_number() -> None:
    from reprobisect.commands.main import _parse
    from reprobisect.commands.nightly import NightlyOptions, _check_options, _request

    options = NightlyOptions.from_args(_parse(["nightly"]))
    assert options.other_side and options.lightning_up_to is None
    bounded = NightlyOptions.from_args(_parse(["nightly", "--lightning-up-to", "2.6.0"]))
    _check_options(bounded)
    request = _request(bounded, bounded.clone, repros=(), not_run=(), budget=60.0)
    assert request.other_side and request.lightning_up_to == "2.6.0"
    off = NightlyOptions.from_args(_parse(["nightly", "--no-other-side"]))
    assert not _request(off, off.clone, repros=(), not_run=(), budget=60.0).other_side
    with pytest.raises(ConfigError, match=r"^--lightning-up-to 'latest': not a release number; give one such as"):
        _check_options(NightlyOptions.from_args(_parse(["nightly", "--lightning-up-to", "latest"])))
    with pytest.raises(ConfigError, match=r"not with --no-other-side"):
        _check_options(NightlyOptions.from_args(_parse(["nightly", "--no-other-side", "--lightning-up-to", "2.6"])))
    with pytest.raises(ConfigError, match=r"^--lightning-up-to: .* give a version"):
        NightlyOptions.from_args(_parse(["nightly", "--lightning-up-to=-x"]))
