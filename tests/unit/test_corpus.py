"""The corpus (issue #36): hostile truth.toml files are refused by name, and the scoring of answers is exact.

Every way an answer can be wrong is planted on synthetic answers: a range one release too long, a skipped
release, the wrong pull request, a fix found at the wrong end, a signature that changed; and every real entry under
corpus/ must load.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobisect.commands import output
from reprobisect.commands.corpus import _clone_for
from reprobisect.commands.main import main
from reprobisect.corpus.scoring import Found, score, signature_agrees
from reprobisect.corpus.table import Header, NotRun, Ran, Table, markdown, write_table
from reprobisect.corpus.truth import load_truth, parse_truth
from reprobisect.corpus.truth_model import Truth
from reprobisect.errors import ConfigError
from reprobisect.model.culprit import ChangeKind, Commit, Culprit, SearchTarget
from tests.conftest import ROOT

RELEASES = ["0.16.4", "0.16.5", "0.16.6", "0.17.0", "0.17.1"]
BUG = "AssertionError: D's step used more than D's own gradient: max |error| = 8.569"
GOOD = """\
schema = 1
title = "a bug that came and went"
report = "Lightning-AI/pytorch-lightning#17856"
reporter = "no version named"
kinds = ["wrong-numbers", "came-and-went"]
package = "deepspeed"
releases = ["0.16.4", "0.16.5", "0.16.6", "0.17.0", "0.17.1"]
backend = "cpu"
precision = "bf16"

[pins]
torch = "system"

[[affected]]
first = "0.16.5"
last = "0.17.0"

[affected.introduced]
pr = "deepspeedai/DeepSpeed#7018"
commit = "b418cf6c1"

[affected.fixed]
pr = "deepspeedai/DeepSpeed#6976"
commit = "e440506be"

[runs]
"0.16.4" = { exit = 0, last_line = "", seconds = 9.0 }
"0.16.5" = { exit = 1, last_line = "AssertionError: D's step used more than D's own gradient: max |error| = 8.569", seconds = 9.0 }
"0.16.6" = { exit = 1, last_line = "AssertionError: D's step used more than D's own gradient: max |error| = 8.569", seconds = 9.0 }
"0.17.0" = { exit = 1, last_line = "AssertionError: D's step used more than D's own gradient: max |error| = 8.569", seconds = 9.0 }
"0.17.1" = { exit = 0, last_line = "", seconds = 9.0 }
"""


def _entry(tmp_path: Path, text: str = GOOD, name: str = "entry") -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "issue.py").write_text("print('hi')\n")
    (folder / "truth.toml").write_text(text)
    return folder


def _truth(tmp_path: Path) -> Truth:
    return load_truth(_entry(tmp_path))


def _refused(tmp_path: Path, text: str, *words: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_truth(_entry(tmp_path, text))
    message = str(info.value)
    assert str(tmp_path / "entry" / "truth.toml") in message
    for word in words:
        assert word in message, message
    return message


def test_a_good_truth_loads_with_its_ranges(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    assert truth.span_releases() == [["0.16.5", "0.16.6", "0.17.0"]]
    assert truth.affected[0].introduced is not None and truth.affected[0].introduced.pr.endswith("#7018")


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (("schema = 1", "schema = 1\ncolour = 'red'"), ("colour", "unknown key")),
        (('precision = "bf16"', 'precison = "bf16"'), ("precison", "perhaps you meant 'precision'")),
        (('backend = "cpu"', "backend = 1"), ("backend = 1", "must be a str")),
        (('backend = "cpu"', 'backend = "tpu"'), ("'tpu'", "cpu, gpu, gpus")),
        (('first = "0.16.5"', 'first = "0.16.2"'), ("affected[0].first", "'0.16.2'", "releases listed")),
        (('first = "0.16.5"', 'first = "0.17.1"'), ("first must not come after last",)),
        (('pr = "deepspeedai/DeepSpeed#7018"', 'pr = "7018"'), ("affected[0].introduced.pr", "owner/repo#N")),
        (('commit = "b418cf6c1"', 'commit = "HEAD; rm -rf"'), ("introduced.commit", "commit sha")),
        (('"0.16.5" = { exit = 1', '"0.16.9" = { exit = 1'), ("runs.0.16.9", "not listed")),
        (('"0.16.6" = { exit = 1', '"0.16.6" = { exit = 0'), ("affected", "the runs fail on 0.16.5, 0.17.0")),
        (('releases = ["0.16.4", "0.16.5"', 'releases = ["0.16.5", "0.16.4"'), ("increasing order",)),
        (('kinds = ["wrong-numbers"', 'kinds = ["slow"'), ("'slow'", "performance")),
        (('torch = "system"', 'torch = "--index-url=x"'), ("pins.torch", "version")),
        (('torch = "system"', 'deepspeed = "0.16.4"'), ("pins.deepspeed", "the package varies")),
        (('backend = "cpu"', 'backend = "gpu"'), ("gpus = 0", "cpu: 0, gpu: 1")),
        (("schema = 1", "schema = 2"), ("schema = 2",)),
    ],
)
def test_a_hostile_truth_is_refused_naming_key_value_and_fix(
    tmp_path: Path, edit: tuple[str, str], words: tuple[str, ...]
) -> None:
    old, new = edit
    assert old in GOOD
    _refused(tmp_path, GOOD.replace(old, new, 1), *words)


def test_a_commit_check_that_contradicts_its_side_is_refused(tmp_path: Path) -> None:
    measured = '\n[commits]\n"b418cf6c1b1a" = { exit = 0, last_line = "", seconds = 1.0 }\n'
    _refused(tmp_path, GOOD + measured, "affected[0].introduced", "'b418cf6c1'", "must fail")
    fine = '\n[commits]\n"b418cf6c1b1a" = { exit = 1, last_line = "AssertionError: x", seconds = 1.0 }\n'
    assert load_truth(_entry(tmp_path, GOOD + fine)).commits["b418cf6c1b1a"].exit == 1


def _run_line(release: str, line: str) -> tuple[str, str]:
    """The edit that gives one release of GOOD another failure line."""
    old = f'"{release}" = {{ exit = 1, last_line = "{BUG}", seconds = 9.0 }}'
    assert old in GOOD
    return old, f'"{release}" = {{ exit = 1, last_line = {json.dumps(line)}, seconds = 9.0 }}'


@pytest.mark.parametrize(
    ("edits", "words"),
    [
        ([('kinds = ["wrong-numbers", "came-and-went"]', 'kinds = ["wrong-numbers"]')], ("'came-and-went'", "add it")),
        ([('"came-and-went"]', '"came-and-went", "still-present"]')], ("'still-present'", "drop it")),
        ([('"came-and-went"]', '"came-and-went", "signature-changes"]')], ("'signature-changes'", "drop it")),
        ([_run_line("0.17.0", "TypeError: 'NoneType' object is not iterable")], ("'signature-changes'", "add it")),
    ],
)
def test_kinds_the_runs_decide_must_be_stated_exactly(
    tmp_path: Path, edits: list[tuple[str, str]], words: tuple[str, ...]
) -> None:
    text = GOOD
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    _refused(tmp_path, text, "kinds", *words)


def test_a_signature_change_is_one_the_scoring_would_see(tmp_path: Path) -> None:
    other_numbers = GOOD.replace(*_run_line("0.17.0", BUG.replace("8.569", "1.25")))
    assert load_truth(_entry(tmp_path, other_numbers)).kinds == ("wrong-numbers", "came-and-went")
    changed = GOOD.replace(*_run_line("0.17.0", "TypeError: 'NoneType' object is not iterable"))
    changed = changed.replace('"came-and-went"]', '"came-and-went", "signature-changes"]')
    assert load_truth(_entry(tmp_path, changed, "changed")).runs["0.17.0"].last_line.startswith("TypeError")


@pytest.mark.parametrize("script", ["../outside.py", "/etc/passwd", "sub/../../x.py", "missing.py"])
def test_a_script_outside_the_entry_folder_is_refused(tmp_path: Path, script: str) -> None:
    (tmp_path / "outside.py").write_text("")
    _refused(tmp_path, f'script = "{script}"\n' + GOOD, "script", script)


def test_a_script_linked_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    folder = _entry(tmp_path, 'script = "link.py"\n' + GOOD)
    (tmp_path / "secret.py").write_text("")
    os.symlink(tmp_path / "secret.py", folder / "link.py")
    with pytest.raises(ConfigError, match="leads out of the entry's folder"):
        load_truth(folder)


def test_not_toml_and_too_large_are_refused(tmp_path: Path) -> None:
    _refused(tmp_path, "schema = = 1", "not valid TOML")
    _refused(tmp_path, "x" * (1 << 20 + 1), "larger than")


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(tomllib.loads(GOOD))), value=_VALUES)
def test_any_value_in_any_key_loads_or_is_refused_by_name(tmp_path: Path, key: str, value: Any) -> None:
    data = tomllib.loads(GOOD)
    if value is None:
        del data[key]
    else:
        data[key] = value
    folder = tmp_path / "entry"
    folder.mkdir(exist_ok=True)
    (folder / "issue.py").write_text("")
    try:
        parse_truth(data, folder, where="truth.toml")
    except ConfigError as exc:
        assert str(exc).startswith("truth.toml: ")
        assert key in str(exc) or "affected" in str(exc) or "runs" in str(exc)


# --- scoring: synthetic answers -------------------------------------------------------------------------------


def _culprit(kind: ChangeKind, last: str, first: str, pr: str | None) -> Culprit:
    commit = None if pr is None else Commit(sha="a" * 40, subject="s", pull_request=pr)
    target = SearchTarget(outcome="PASS" if kind == "fixed" else "REPRODUCED", signature_id=None)
    return Culprit(kind=kind, last=last, first=first, target=target, commit=commit, why=None if pr else "no tag")


def _found(**change: Any) -> Found:
    failing = (
        "REPRODUCED",
        "AssertionError: D's step used more than D's own gradient: max |error| = N @ x.py:<module>",
    )
    states = {r: failing if r in ("0.16.5", "0.16.6", "0.17.0") else ("PASS", None) for r in RELEASES}
    states |= change.get("states", {})
    culprits = [
        _culprit("introduced", "0.16.4", "0.16.5", "deepspeedai/DeepSpeed#7018"),
        _culprit("fixed", "0.17.0", "0.17.1", "deepspeedai/DeepSpeed#6976"),
    ]
    return Found(
        states=states,
        affected=change.get("affected", [["0.16.5", "0.16.6", "0.17.0"]]),
        culprits=change.get("culprits", culprits),
        seconds=12.34,
    )


def test_a_right_answer_is_exact(tmp_path: Path) -> None:
    row = score(_truth(tmp_path), _found())
    assert row.exact and row.ranges.ok and row.introduced.ok and row.fixed.ok and row.signature.ok
    assert row.seconds == 12.3


def test_a_range_one_release_too_long_is_wrong(tmp_path: Path) -> None:
    row = score(_truth(tmp_path), _found(affected=[["0.16.5", "0.16.6", "0.17.0", "0.17.1"]]))
    assert not row.exact and row.ranges.ok is False and "0.16.5 … 0.17.1" in row.ranges.found


def test_a_skipped_release_makes_the_ranges_inexact(tmp_path: Path) -> None:
    row = score(_truth(tmp_path), _found(states={"0.16.6": ("ENV_ERROR", "pip failed")}))
    assert row.ranges.ok is False and "not judged: 0.16.6" in row.ranges.found


def test_the_wrong_pull_request_or_none_is_wrong(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    wrong = [
        _culprit("introduced", "0.16.4", "0.16.5", "deepspeedai/DeepSpeed#7000"),
        _culprit("fixed", "0.17.0", "0.17.1", None),
    ]
    row = score(truth, _found(culprits=wrong))
    assert row.introduced.ok is False and "#7000" in row.introduced.found
    assert row.fixed.ok is False and "no commit: no tag" in row.fixed.found


def test_a_pull_request_at_the_wrong_transition_does_not_count(tmp_path: Path) -> None:
    moved = [_culprit("introduced", "0.16.5", "0.16.6", "deepspeedai/DeepSpeed#7018")]
    row = score(_truth(tmp_path), _found(culprits=moved))
    assert row.introduced.ok is False and row.introduced.found == "no transition found"


def test_a_changed_signature_is_wrong(tmp_path: Path) -> None:
    other = {"0.17.0": ("OTHER_FAILURE", "TypeError: 'NoneType' object is not subscriptable @ stage_1_and_2:f")}
    row = score(_truth(tmp_path), _found(states=other))
    assert row.signature.ok is False and "0.17.0: OTHER_FAILURE TypeError" in row.signature.found
    assert row.ranges.ok  # still failing there: the ranges are right, the signature is not


def test_no_pull_request_in_the_truth_is_not_applicable(tmp_path: Path) -> None:
    text = GOOD.split("[affected.introduced]")[0]
    row = score(load_truth(_entry(tmp_path, text + GOOD.split('commit = "e440506be"')[1])), _found(culprits=[]))
    assert row.introduced.ok is None and row.fixed.ok is None and row.exact


@pytest.mark.parametrize(
    ("line", "outcome", "found", "agrees"),
    [
        ("", "PASS", None, True),
        ("", "REPRODUCED", "AssertionError: x", False),
        ("AssertionError: grad norm 3.25 vs 1.5", "REPRODUCED", "AssertionError: grad norm N vs N @ m:f", True),
        ("AssertionError: grad norm 3.25", "REPRODUCED", "ValueError: grad norm N", False),
        ("torch.OutOfMemoryError: CUDA out", "CRASH", "OutOfMemoryError: CUDA out", True),
        ("exit 3: died", "OTHER_FAILURE", "Exit: status N: died", False),
        ("exit 3: died", "OTHER_FAILURE", "Exit: status 3: died", True),
        ("signal 9", "CRASH", "Signal: SIGKILL", True),
        ("AssertionError: x", "TIMEOUT", "timed out", False),
    ],
)
def test_signature_agreement(line: str, outcome: str, found: str | None, agrees: bool) -> None:
    assert signature_agrees(line, outcome, found) is agrees


def test_the_table_says_k_of_n_lists_what_did_not_run_and_shows_wrong_rows(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    rows = [Ran(row=score(truth, _found())), Ran(row=score(truth, _found(affected=[])))]
    header = Header(commit="abc", date="2026-12-07 05:00 UTC", backend="cpu", entry_jobs=1, wall_seconds=30.0)
    not_run = [NotRun(entry="gpu-one", why="needs 1 GPU(s)")]
    table = Table(rows=rows, not_run=not_run, command="reprobisect corpus", header=header)
    text = markdown(table)
    assert "1 of 2 exact (1 not run)" in text and "gpu-one: needs 1 GPU(s)" in text and "**NO**: truth" in text
    md, js = write_table(table, tmp_path / "out")
    data = json.loads(js.read_text())
    assert data["exact"] == 1 and data["ran"] == 2 and data["rows"][1]["exact"] is False and md.exists()


def test_the_command_lists_an_unmeasured_entry_as_not_run_and_refuses_a_typo(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    _entry(corpus, GOOD.split("[runs]")[0], name="unmeasured")
    out = tmp_path / "out"
    assert main(["corpus", "--corpus", str(corpus), "--out", str(out)]) == 0
    data = json.loads((out / "corpus.json").read_text())
    assert data["ran"] == 0 and "tools/corpus_truth.py" in data["not_run"][0]["why"]
    assert main(["corpus", "--corpus", str(corpus), "--entry", "unmeasure", "--out", str(out)]) == 2


def test_each_entry_gets_the_clone_of_its_own_package_and_a_wrong_git_is_refused(tmp_path: Path) -> None:
    both = ["lightning=/l", "deepspeed=/d"]
    assert _clone_for("lightning", both) == Path("/l") and _clone_for("deepspeed", both) == Path("/d")
    assert _clone_for("lightning", ["/any"]) == Path("/any") and _clone_for("deepspeed", ["/any"]) == Path("/any")
    assert _clone_for("lightning", ["deepspeed=/d"]) is None  # the harness's own clone (--culprits)
    assert _clone_for("deepspeed", ["/any", "deepspeed=/d"]) == Path("/d")
    for wrong in (["torch=/t"], ["deepspeed=/a", "DeepSpeed=/b"], ["/a", "/b"]):
        with pytest.raises(ConfigError, match="--git"):
            _clone_for("deepspeed", wrong)
    corpus = tmp_path / "corpus"
    _entry(corpus, GOOD.split("[runs]")[0], name="unmeasured")
    assert main(["corpus", "--corpus", str(corpus), "--git", "torch=/t", "--out", str(tmp_path / "out")]) == 2


def test_every_real_entry_loads_and_is_measured() -> None:
    entries = sorted((ROOT / "corpus").glob("*/truth.toml"))
    assert entries
    for path in entries:
        truth = load_truth(path.parent)
        assert truth.unmeasured() == [], f"{path}: run tools/corpus_truth.py"  # releases, or an interaction's cells
        assert (path.parent / "truth-logs.tar.xz").is_file(), f"{path}: its hand-run logs are not packed"


def test_the_summary_of_an_entrys_triage_says_the_triage_that_reruns_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(output, "run_matrix", lambda *a, **k: [])
    monkeypatch.setattr(sys, "argv", ["reprobisect", "corpus", "--entry", "e", "--git", "lightning=/l"])
    ctx = types.SimpleNamespace(executor=None)
    request = types.SimpleNamespace()
    rerun = "reprobisect triage corpus/e/issue.py --lightning 2.5.3,2.5.4 --git /l"
    _, path = output.run_and_summarize(None, request, ctx, tmp_path, title="t", summary="s.md", command=rerun)  # type: ignore[arg-type]
    assert f"Reproduce: `{rerun}`" in path.read_text()
    own = output.own_command("triage")
    _, path = output.run_and_summarize(None, request, ctx, tmp_path, title="t", summary="s.md", command=own)  # type: ignore[arg-type]
    assert "Reproduce: `nox -s triage -- --entry e --git lightning=/l`" in path.read_text()  # a command's own argv


# --- a signature change inside a range, with its pull request ---------------------------------------------------

TYPE_ERROR = "TypeError: 'NoneType' object is not iterable"
CHANGED = (
    GOOD.replace(*_run_line("0.17.0", TYPE_ERROR))
    .replace('"came-and-went"]', '"came-and-went", "signature-changes"]')
    .replace(
        "[runs]",
        '[[affected.changed]]\nat = "0.17.0"\npr = "deepspeedai/DeepSpeed#7100"\ncommit = "c0ffee123"\n'
        'parent = "c0ffee000"\n\n[runs]',
    )
)


def test_a_signature_change_with_its_pull_request_loads(tmp_path: Path) -> None:
    (change,) = load_truth(_entry(tmp_path, CHANGED)).affected[0].changed
    assert (change.at, change.pr, change.commit, change.parent) == (
        "0.17.0",
        "deepspeedai/DeepSpeed#7100",
        "c0ffee123",
        "c0ffee000",
    )


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (('at = "0.17.0"', 'at = "0.16.5"'), ("changed[0].at", "'0.16.5'", "0.16.6, 0.17.0")),  # the range's first
        (('at = "0.17.0"', 'at = "0.17.1"'), ("changed[0].at", "'0.17.1'")),  # outside the range
        (('at = "0.17.0"\n', ""), ("changed[0].at", "None")),
        (('at = "0.17.0"', 'at = "0.16.6"'), ("changed.at", "'0.16.6'", "fail alike")),  # runs say 0.17.0
        (('commit = "c0ffee123"', 'commit = "c0ffee; rm -rf /"'), ("changed[0].commit", "commit sha")),
        (('pr = "deepspeedai/DeepSpeed#7100"', 'pr = "#7100"'), ("changed[0].pr", "owner/repo#N")),
        (('parent = "c0ffee000"', 'parent = "c0ffee000"\ncolour = "red"'), ("changed[0].colour", "unknown key")),
        (("[[affected.changed]]\nat", "[affected.changed]\nat"), ("affected[0].changed", "must be a list")),
    ],
)
def test_a_hostile_signature_change_is_refused(tmp_path: Path, edit: tuple[str, str], words: tuple[str, ...]) -> None:
    old, new = edit
    assert old in CHANGED
    _refused(tmp_path, CHANGED.replace(old, new, 1), *words)


def test_a_signature_change_whose_commits_fail_otherwise_is_refused(tmp_path: Path) -> None:
    right = f'\n[commits]\n"c0ffee123" = {{ exit = 1, last_line = "{TYPE_ERROR}", seconds = 1.0 }}\n'
    right += f'"c0ffee000" = {{ exit = 1, last_line = {json.dumps(BUG)}, seconds = 1.0 }}\n'
    assert load_truth(_entry(tmp_path, CHANGED + right)).commits["c0ffee123"].exit == 1
    swapped = (
        right.replace('"c0ffee123"', '"tmp"').replace('"c0ffee000"', '"c0ffee123"').replace('"tmp"', '"c0ffee000"')
    )
    _refused(tmp_path, CHANGED + swapped, "affected[0].changed", "'c0ffee123'", "must fail as 0.17.0 does")
    passing = right.replace(f'exit = 1, last_line = "{TYPE_ERROR}"', 'exit = 0, last_line = ""')
    _refused(tmp_path, CHANGED + passing, "affected[0].changed", "exit 0")


def _changed_found(pr: str | None, first: str = "0.17.0") -> Found:
    states = {"0.17.0": ("OTHER_FAILURE", f"{TYPE_ERROR} @ x.py:<module>")}
    culprits = [
        _culprit("introduced", "0.16.4", "0.16.5", "deepspeedai/DeepSpeed#7018"),
        _culprit("fixed", "0.17.0", "0.17.1", "deepspeedai/DeepSpeed#6976"),
        _culprit("changed", "0.16.6", first, pr),
    ]
    return _found(states=states, culprits=culprits)


def test_the_pull_request_of_a_signature_change_is_scored(tmp_path: Path) -> None:
    truth = load_truth(_entry(tmp_path, CHANGED))
    right = score(truth, _changed_found("deepspeedai/DeepSpeed#7100"))
    assert right.exact and right.changed.ok is True and right.changed.truth == "0.17.0: deepspeedai/DeepSpeed#7100"
    wrong = score(truth, _changed_found("deepspeedai/DeepSpeed#7101"))
    assert not wrong.exact and wrong.changed.ok is False and "#7101" in wrong.changed.found
    unsearched = score(truth, _changed_found(None))
    assert not unsearched.exact and "no commit" in unsearched.changed.found
    elsewhere = score(truth, _changed_found("deepspeedai/DeepSpeed#7100", first="0.16.6"))
    assert not elsewhere.exact and elsewhere.changed.found == "no transition found"
    assert score(_truth(tmp_path / "plain"), _found()).changed.ok is None  # nothing known: not applicable


def test_the_real_signature_change_entries_name_their_pull_requests() -> None:
    """The two real entries whose failure changes signature say which pull request changed it, as checked by hand."""
    for name, at, pr in (
        ("ds-zero1-comm-dtype-bucket", "0.18.1", "deepspeedai/DeepSpeed#7636"),
        ("ds-zero2-two-backward", "0.18.3", "deepspeedai/DeepSpeed#7665"),
    ):
        truth = load_truth(ROOT / "corpus" / name)
        assert [(c.at, c.pr) for s in truth.affected for c in s.changed] == [(at, pr)]
