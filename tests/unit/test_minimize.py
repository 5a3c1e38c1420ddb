"""minimize: statement trees, static refusals, the verdict rule, the reducer over a planted predicate, the options
and the Markdown a maintainer pastes (hostile script text included)."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reprobisect.commands.minimize import parse_cell_pins
from reprobisect.errors import ConfigError
from reprobisect.minimize.candidates import CellRun, FailureTarget, judge
from reprobisect.minimize.groups import setting_groups
from reprobisect.minimize.passes import starting_point, unwrap_failure_path
from reprobisect.minimize.reduce import prune_unused, reduce_statements, split_for_jobs
from reprobisect.minimize.request import Budget, parse_budget
from reprobisect.minimize.sections import section_markdown
from reprobisect.minimize.statements import parse_script, size_of, tidy
from reprobisect.minimize.static import undefined_names, why_not_runnable
from reprobisect.model.signature import script_lines
from reprobisect.run.events import read_events

RESOURCES = Path(__file__).parents[1] / "resources" / "scripts"
LONG = RESOURCES / "minimize" / "gan_bf16_long.py"

TRICKY = '''#!/usr/bin/env python
"""doc"""
import os, sys
import json

# a comment
@staticmethod
def f(x):
    # inner
    if x:
        return 1
    elif x == 2:
        return 2
    elif x == 3:
        return 3
    else:
        y = 3; z = 4
        return y + z

class A:
    s = """
# not a comment

"""
    def g(self): return 5

try:
    pass
except ValueError:
    raise
except Exception as e:
    print(e)
else:
    print("else")
finally:
    print("finally")
for i in range(3): print(i)
while False:
    break
else:
    print("no break")
match sys.argv:
    case [a]:
        print(a)
    case _:
        pass
with open(os.devnull) as h:
    h.read()
print(f(1), A.s, json)
config = dict(
    a=1,
    b=[
        1,
        2,
    ],
    **{
        "c": 3,  # a comment
        **os.environ,
    },
)
value = config[
    "a",
] if False else print(
    "x", "y",
    "z"
)
s = {
    1,
}
'''

SOURCES = [TRICKY, LONG.read_text(encoding="utf-8"), (RESOURCES / "bisect" / "stray_grad_bf16.py").read_text()]


@pytest.mark.parametrize("source", SOURCES, ids=["tricky", "long", "stray"])
def test_nothing_removed_is_the_original_byte_for_byte(source: str) -> None:
    assert parse_script(source).text([]) == source


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(range(len(SOURCES))))
def test_any_set_of_removed_statements_still_compiles(data: st.DataObject, which: int) -> None:
    source = SOURCES[which]
    script = parse_script(source)
    removed = data.draw(st.sets(st.sampled_from([u.id for u in script.units])))
    text = script.text(removed)
    compile(text, "<candidate>", "exec")  # deletions and a pass never break the syntax
    kept = [u for u in script.units if u.id not in script.removed_with_descendants(removed)]
    body = text.splitlines()
    for unit in kept:  # every kept statement's first line is still there, as written
        assert script.lines[unit.first - 1].rstrip("\n") in body


def test_levels_go_from_the_top_down_and_pinned_units_are_never_offered() -> None:
    script = parse_script(TRICKY)
    count = len(script.units)
    offered = script.level(0, [])
    top = [u for u in offered if u < count]
    assert all(script.units[u].depth == 0 for u in top)
    assert {u - count for u in offered if u >= count} == {u for u in top if script.units[u].body}  # unwrappings
    f = next(u for u in top if "def f" in script.lines[script.units[u].last - 1] or script.units[u].first == 7)
    assert f not in script.level(0, [], pinned=[f])
    assert not any(script.units[u].parent == f for u in script.level(1, [f]) if u < count)  # gone with its parent
    pinned = script.enclosing([11])  # `return 1` inside `if x:` inside `def f`
    assert {script.units[u].first for u in pinned} >= {7, 10, 11}


def test_elements_that_own_their_lines_are_units_under_their_statement() -> None:
    script = parse_script(TRICKY)
    elements = {script.lines[u.first - 1].strip(): u for u in script.units if u.element}
    assert set(elements) == {"a=1,", "b=[", "1,", "2,", "**{", '"c": 3,  # a comment', "**os.environ,", '"z"'}
    config = next(u for u in script.units if script.lines[u.first - 1].startswith("config = dict("))
    assert elements["a=1,"].parent == config.id and elements["a=1,"].depth == config.depth + 1
    assert elements["2,"].parent == elements["b=["].id  # a list inside a keyword: under the keyword
    without = script.text([elements["b=["].id, elements["**{"].id])
    assert "config = dict(\n    a=1,\n)\n" in without
    assert '\n    "a",\n' in script.text([elements['"z"'].id])  # a subscript's tuple is never cut


def test_an_emptied_block_gets_pass_and_an_elif_goes_whole() -> None:
    script = parse_script("if a:\n    x = 1\nelif b:\n    y = 2\nelse:\n    z = 3\n")
    elif_unit = next(u for u in script.units if u.first == 3)
    assert script.text([elif_unit.id]) == "if a:\n    x = 1\n"
    x_unit = next(u for u in script.units if u.first == 2)
    assert script.text([x_unit.id]).startswith("if a:\n    pass\n")


@pytest.mark.parametrize("source", SOURCES, ids=["tricky", "long", "stray"])
def test_tidy_removes_comments_and_blank_runs_but_not_code_or_strings(source: str) -> None:
    tidied = tidy(source)
    assert ast.dump(ast.parse(tidied)) == ast.dump(ast.parse(source))
    assert "\n\n\n" not in tidied
    assert not any(line.strip().startswith("# a comment") for line in tidied.splitlines())
    if source is TRICKY:
        assert "# not a comment\n\n" in tidied  # inside a string


def test_size_counts_lines_and_tokens_not_comments() -> None:
    assert size_of("x = 1  # note\n\n# only\ny = x\n").lines == 3
    assert size_of("x = 1  # note\n\n# only\ny = x\n").tokens == 6


def test_static_refusal_names_what_is_wrong() -> None:
    assert why_not_runnable("def f(:\n", frozenset()) == "does not compile"
    assert why_not_runnable("print(x)\n", frozenset()) == "undefined name 'x'"
    assert why_not_runnable("print(x)\n", frozenset({"x"})) is None  # the original lacked it too
    assert why_not_runnable("import os\nprint(os.sep)\n", frozenset()) is None


def test_script_lines_are_the_failures_path_through_the_script() -> None:
    log = (
        "noise\nTraceback (most recent call last):\n"
        '  File "/w/candidates/k/issue.py", line 40, in <module>\n    main()\n'
        '  File "/w/candidates/k/issue.py", line 12, in main\n    run()\n'
        '  File "/site-packages/deepspeed/runtime/engine.py", line 900, in step\n    x\n'
        "AssertionError: boom\n"
    )
    assert script_lines(log, "issue.py") == (40, 12)
    assert script_lines(log, "other.py") == ()
    assert script_lines("no traceback", "issue.py") == ()


def _run(outcome: str, signature: str | None = None) -> CellRun:
    return CellRun(
        cell="c", outcome=outcome, signature=signature, signature_text=signature, seconds=1.0, reused=False, record="r"
    )


TARGET = FailureTarget(outcome="OTHER_FAILURE", signature="abc", text="AssertionError")


@pytest.mark.parametrize(
    ("target", "bad", "good", "interesting"),
    [
        (TARGET, _run("OTHER_FAILURE", "abc"), _run("PASS"), True),
        (TARGET, _run("OTHER_FAILURE", "abc"), None, True),
        (TARGET, _run("PASS"), None, False),
        (TARGET, _run("OTHER_FAILURE", "xyz"), _run("PASS"), False),  # another failure is not the bug
        (TARGET, _run("TIMEOUT"), None, False),
        (TARGET, _run("ENV_ERROR"), None, False),
        (TARGET, _run("OTHER_FAILURE", "abc"), _run("OTHER_FAILURE", "abc"), False),  # fails alike: no test
        (TARGET, _run("OTHER_FAILURE", "abc"), _run("ENV_ERROR"), False),
        (TARGET, _run("OTHER_FAILURE", "abc"), _run("TIMEOUT"), False),
        (TARGET, _run("OTHER_FAILURE", "abc"), _run("OTHER_FAILURE", "xyz"), False),  # good must pass
        (
            FailureTarget(outcome="OTHER_FAILURE", signature="abc", text="", good_must_pass=False),
            _run("OTHER_FAILURE", "abc"),
            _run("OTHER_FAILURE", "xyz"),
            True,
        ),
        (
            FailureTarget(outcome="", signature=None, text="", expected=True),
            _run("REPRODUCED", "any"),
            _run("PASS"),
            True,
        ),
        (FailureTarget(outcome="", signature=None, text="", expected=True), _run("OTHER_FAILURE", "abc"), None, False),
    ],
)
def test_judge(target: FailureTarget, bad: CellRun, good: CellRun | None, interesting: bool) -> None:
    assert judge(target, bad, good)[0] is interesting


PLANTED = "import os\nimport sys\n\na = 1\nb = 2\n\n\ndef f():\n    c = 3\n    d = a + c\n    return d\n\n\nprint(f())\nprint(b)\n"


def _planted(script_text: str) -> bool:
    """Interesting: the script still computes a + c inside f and prints f()."""
    return (
        "d = a + c" in script_text and "print(f()" in script_text and why_not_runnable(script_text, frozenset()) is None
    )


@pytest.mark.parametrize("jobs", [1, 2, 4])
def test_the_reducer_finds_the_planted_minimum(jobs: int) -> None:
    script = parse_script(PLANTED)
    reduction = reduce_statements(script, lambda removed: _planted(script.text(removed)), jobs=jobs)
    kept = script.text(reduction.removed)
    assert _planted(kept)
    assert "import" not in kept and "b = 2" not in kept  # nothing that is not needed
    assert reduction.stopped == "a whole pass removed nothing more"


@given(st.lists(st.lists(st.integers(), min_size=1, max_size=6), min_size=1, max_size=12), st.integers(1, 16))
def test_a_split_keeps_every_unit_in_order_and_fills_the_jobs(subsets: list[list[int]], jobs: int) -> None:
    units = [u for piece in subsets for u in piece]
    pieces = split_for_jobs(subsets, jobs=jobs)
    assert [u for piece in pieces for u in piece] == units and all(pieces)
    assert len(pieces) == min(len(units), max(2 * len(subsets), jobs))  # ddmin's doubling, never below the jobs
    assert max(map(len, pieces)) - min(map(len, pieces)) <= max(1, len(units) // len(pieces))


def test_a_level_starts_with_as_many_pieces_as_runs_at_a_time() -> None:
    assert [len(p) for p in split_for_jobs([list(range(20))], jobs=8)] == [2, 2, 2, 2, 3, 3, 3, 3]
    assert [len(p) for p in split_for_jobs([list(range(20))], jobs=1)] == [10, 10]  # picire's halving
    assert len(split_for_jobs([[1, 2, 3]], jobs=8)) == 3  # no more pieces than units


def test_a_spent_budget_stops_after_the_level() -> None:
    script = parse_script(PLANTED)
    reduction = reduce_statements(script, lambda r: _planted(script.text(r)), spent=lambda: "the run budget (1 runs)")
    assert reduction.stopped == "the run budget (1 runs)"
    assert reduction.passes == 1


def test_budget_and_pins_parse_or_say_what_is_wrong() -> None:
    assert parse_budget(["10m", "200runs"]) == Budget(seconds=600, runs=200)
    assert parse_budget(["90"]) == Budget(seconds=90)
    assert parse_cell_pins(["deepspeed==0.16.5,lightning==2.5.0"], "--bad") == {
        "deepspeed": "0.16.5",
        "lightning": "2.5.0",
    }
    with pytest.raises(ConfigError, match="--bad 'numpy==1'"):
        parse_cell_pins(["numpy==1"], "--bad")
    with pytest.raises(ConfigError, match="--budget"):
        parse_budget(["soon"])


@given(st.text(max_size=40))
def test_hostile_budget_and_pins_are_refused_or_parsed(value: str) -> None:
    try:
        budget = parse_budget([value])
        assert (budget.seconds or 0) > 0 or (budget.runs or 0) > 0 or budget.runs == 0
    except ConfigError as exc:
        assert "--budget" in str(exc)
    try:
        pins = parse_cell_pins([value], "--good") or {}
        assert all(not v.startswith("-") for v in pins.values())
    except ConfigError as exc:
        assert "--good" in str(exc)


def _summary(text: str) -> dict[str, object]:
    return {
        "script": "issue.py",
        "form": "cpu-deepspeed",
        "target": "OTHER_FAILURE boom",
        "original": {"lines": 100, "tokens": 1000},
        "minimized": {"lines": 10, "tokens": 90},
        "reduction": {"lines": 10.0, "tokens": 11.1},
        "bad": {"pins": {"deepspeed": "0.16.5"}, "original": None, "minimized": None},
        "good": None,
        "stopped": "a whole pass removed nothing more",
        "runs": 40,
        "seconds": 300.0,
        "runs_per_minute": 8.0,
        "jobs": 2,
        "candidates": 300,
        "refused_without_a_run": 260,
        "recheck": ["nox -s triage -- minimized.py --deepspeed 0.16.5"],
    }


@given(st.text(max_size=200))
def test_the_section_keeps_hostile_script_text_inside_its_fence(text: str) -> None:
    hostile = "```\n@maintainer <!-- \x1b[31m\x00 " + text
    markdown = section_markdown(_summary(hostile), hostile, "")
    assert "\x1b" not in markdown and "\x00" not in markdown
    fence = re.search(r"^(`{3,})python$", markdown, re.MULTILINE)
    assert fence is not None
    inside = markdown[fence.end() :].split("\n" + fence.group(1) + "\n")[0]
    assert "<details>" not in inside  # the script cannot close its fence early


TRACED = """import os
import sys


def used(x):
    return x + 1


def never(x):
    return x - 1


if len(sys.argv) > 5:
    never(1)
else:
    print(used(1))
raise SystemExit(
    used(2),
)
print("after")
"""


def _traced_lines(tmp_path: Path, source: str) -> frozenset[int]:
    """The lines the real bootstrap's tracer reports for ``source``, run as a harness run runs it."""
    script = tmp_path / "traced.py"
    script.write_text(source)
    bootstrap = Path(__file__).parents[2] / "src" / "reprobisect" / "run" / "child" / "bootstrap.py"
    env = {**os.environ, "REPROBISECT_TRACE_LINES": "1"}
    done = subprocess.run(
        [sys.executable, str(bootstrap), str(script)], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    lines = read_events(done.stdout).lines
    assert lines is not None, done.stdout + done.stderr
    return lines


def test_the_tracer_reports_what_ran_and_the_rest_is_cut_in_one_candidate(tmp_path: Path) -> None:
    ran = _traced_lines(tmp_path, TRACED)
    assert {1, 2, 5, 6, 9, 13, 16, 17, 18} <= ran and not {10, 14, 20} & ran  # never()'s body, the if, after
    script = parse_script(TRACED)
    cut = script.text(script.unexecuted(ran))
    assert "def never" not in cut and "never(1)" not in cut and "after" not in cut
    assert "def used" in cut and "print(used(1))" in cut and "used(2)," in cut  # an element goes with its statement
    assert "import os" in cut  # it ran; pruning is another step
    assert "import os" not in script.text(prune_unused(script, script.unexecuted(ran)))
    compile(cut, "<cut>", "exec")


def test_pruning_drops_what_nothing_uses_and_never_what_something_does() -> None:
    script = parse_script("import os, sys\nimport json\n\n\n@staticmethod\ndef f():\n    return json\n\n\nprint(sys)\n")
    pruned = script.text(prune_unused(script, frozenset()))
    assert pruned == "import os, sys\n\n\n\n\nprint(sys)\n"  # f unused, then json; os shares sys's statement
    kept = parse_script("import json\nprint(json)\n")
    assert prune_unused(kept, frozenset()) == frozenset()


@settings(max_examples=200, deadline=None)
@given(ranges=st.one_of(st.lists(st.lists(st.integers(-5, 10**7), max_size=3), max_size=5), st.text(), st.none()))
@example(ranges=[[0, 112274], [0, 887725]])  # overlapping: the bound counts both lengths (found by Hypothesis)
def test_hostile_lines_events_are_ignored_not_trusted(ranges: object) -> None:
    event = json.dumps({"event": "lines", "ranges": ranges})
    events = read_events(f"@@repro {event}\n")
    valid = (
        isinstance(ranges, list)
        and all(isinstance(p, list) and len(p) == 2 and 0 <= p[0] <= p[1] <= 10**6 for p in ranges)
        and sum(p[1] - p[0] + 1 for p in ranges) <= 10**6  # at most a million lines in all, overlaps or not
    )
    if not valid:
        assert events.lines is None and events.ignored == 1
    else:
        assert events.lines is not None and all(0 <= n <= 10**6 for n in events.lines)


def test_the_reducer_starts_from_what_it_is_given() -> None:
    script = parse_script(PLANTED)
    start = frozenset(u.id for u in script.units if script.lines[u.first - 1].startswith("import"))
    seen: list[frozenset[int]] = []

    def interesting(removed: frozenset[int]) -> bool:
        seen.append(removed)
        return _planted(script.text(removed))

    reduction = reduce_statements(script, interesting, initial=start)
    assert all(start <= removed for removed in seen)  # never asks again about what is already gone
    assert "b = 2" not in script.text(reduction.removed)


SETTINGS = """import argparse
import dataclasses


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--warmup", type=int, default=3)
    return parser.parse_args([])


@dataclasses.dataclass
class Config:
    lr: float
    warmup: int


args = parse()
cfg = Config(
    lr=args.lr,
    warmup=args.warmup,
)
factor = min(1.0, cfg.warmup / 10)
print("factor", factor)
print("lr", cfg.lr)
"""


_STDOUT = threading.Lock()  # the groups are judged in threads, and redirect_stdout is one per process


def _prints_lr(text: str) -> bool:
    """Interesting: the script runs and still prints the learning rate it was given."""
    out = io.StringIO()
    try:
        with _STDOUT, contextlib.redirect_stdout(out):
            exec(compile(text, "<candidate>", "exec"), {"__name__": "__main__"})
    except Exception:
        return False
    return "lr 0.1" in out.getvalue()


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_setting_threaded_through_four_places_goes_as_one_group(jobs: int) -> None:
    script = parse_script(SETTINGS)
    plain = script.text(reduce_statements(script, lambda r: _prints_lr(script.text(r))).removed)
    assert "warmup" in plain  # statement by statement, each of its four places is needed by another
    grouped = reduce_statements(
        script,
        lambda r: _prints_lr(script.text(r)),
        jobs=jobs,
        groups=lambda removed: setting_groups(script, removed, frozenset()),
    )
    text = script.text(grouped.removed)
    assert _prints_lr(text) and "warmup" not in text and "factor" not in text
    assert "lr=args.lr," in text and 'parser.add_argument("--lr"' in text


def test_a_parallel_reduction_leaves_no_process_behind_and_one_after_a_stop_still_runs() -> None:
    """Ctrl-C in ``minimize`` ends every child process of the harness; a reduction after it in the same process (a
    nightly, the test suite) once found picire's process-wide cache server gone with it and died on its socket."""
    script = parse_script(SETTINGS)
    first = reduce_statements(script, lambda r: _prints_lr(script.text(r)), jobs=2)
    assert multiprocessing.active_children() == []
    for child in multiprocessing.active_children():  # what a stop does
        child.terminate()
    again = reduce_statements(script, lambda r: _prints_lr(script.text(r)), jobs=2)
    assert again.removed == first.removed and multiprocessing.active_children() == []


def test_no_group_takes_a_pinned_statement_or_leaves_a_name_undefined() -> None:
    script = parse_script(SETTINGS)
    printing = script.starting_at([25])  # print("lr", cfg.lr)
    for group in setting_groups(script, frozenset(), printing):
        assert not group.units & printing
        assert why_not_runnable(script.text(group.units), frozenset()) is None, group
    assert {g.word for g in setting_groups(script, frozenset(), printing)} >= {"warmup"}
    assert "lr" not in {g.word for g in setting_groups(script, frozenset(), printing)}  # it would take the print


def test_a_removed_statements_words_are_not_its_parents() -> None:
    script = parse_script(SETTINGS.replace('print("factor", factor)', 'if True:\n    print("factor", cfg.warmup)'))
    inner = script.starting_at([25])  # print("factor", cfg.warmup), inside the if
    header = script.starting_at([24])
    [warmup] = [g for g in setting_groups(script, inner, frozenset()) if g.word == "warmup"]
    assert not warmup.units & header  # the if names nothing of its own once its body is gone
    assert {g.word for g in setting_groups(script, frozenset(), frozenset())} == {"lr", "warmup"}  # not type=, default=


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(range(len(SOURCES))))
def test_unwrapping_keeps_the_body_one_indent_less_and_never_breaks_the_text(data: st.DataObject, which: int) -> None:
    script = parse_script(SOURCES[which])
    ids = [u.id for u in script.units] + [script.unwrap_id(u.id) for u in script.units if u.body]
    removed = data.draw(st.sets(st.sampled_from(ids)))
    text = script.text(removed)
    origins = script.origins(removed)
    assert len(origins) == len(text.splitlines())
    for line, number in zip(text.splitlines(), origins, strict=True):  # every line is an original one, dedented
        assert number is None or script.lines[number - 1].rstrip("\n").endswith(line.lstrip()) or not line.strip()
    if why_not_runnable(text, frozenset({"a", "i", "e", "h", "x", "y", "z"})) is None:
        compile(text, "<candidate>", "exec")


def test_an_unwrapped_loop_leaves_its_body_and_a_pinned_statement_can_be_unwrapped() -> None:
    source = "import sys\nfor step in range(3):\n    if step == 0:\n        print(sys)\nelse:\n    print('done')\n"
    script = parse_script(source)
    loop, check = (next(u for u in script.units if u.first == n) for n in (2, 3))
    assert script.unwrap_id(loop.id) in script.level(0, [], pinned=[loop.id])  # pinned: not removed, unwrapped
    assert loop.id not in script.level(0, [], pinned=[loop.id])
    both = script.text([script.unwrap_id(check.id), script.unwrap_id(loop.id)])
    assert both == "import sys\nprint(sys)\n"
    assert script.text([script.unwrap_id(loop.id)]) == "import sys\nif step == 0:\n    print(sys)\n"
    assert why_not_runnable(script.text([script.unwrap_id(loop.id)]), frozenset()) == "undefined name 'step'"
    assert script.text([loop.id, script.unwrap_id(loop.id)]) == "import sys\n"  # removed wins


LOOPED = """import sys
import json


def check(x):
    assert x < 0, "the bug"


def unused():
    return json.dumps({})


for step in range(3):
    if step == 0:
        check(1)
print("never")
"""


def test_the_start_cuts_what_never_ran_then_unwraps_the_failures_path() -> None:
    script = parse_script(LOOPED)
    ran = frozenset({1, 2, 5, 6, 9, 13, 14, 15})  # as a traced run reports it: unused() and the print never ran
    pinned = script.enclosing([15, 6])  # the traceback's lines: check(1) and the assert
    said: list[str] = []

    def judged(removed: frozenset[int]) -> bool:  # interesting: still calls check(1), runs, and is small
        text = script.text(removed)
        return "check(1)" in text and why_not_runnable(text, frozenset()) is None

    start, prunes = starting_point(script, ran, pinned, judged, said.append)
    assert prunes and "def unused" not in script.text(start) and "import json" not in script.text(start)
    assert "never" not in script.text(start) and "still interesting" in said[0]
    unwrapped = unwrap_failure_path(script, start, pinned, judged, said.append)
    text = script.text(unwrapped)
    # innermost first: the if goes, then the loop (its body no longer names `step`), the call stays
    assert tidy(text) == 'def check(x):\n    assert x < 0, "the bug"\n\ncheck(1)\n'
    assert said[-1] == "  the failure's path: 2 of 2 statements around the failing line unwrapped"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(range(len(SOURCES))))
def test_every_group_leaves_a_script_worth_a_run(data: st.DataObject, which: int) -> None:
    script = parse_script(SOURCES[which])
    ids = [u.id for u in script.units] + [script.unwrap_id(u.id) for u in script.units if u.body]
    removed = frozenset(data.draw(st.sets(st.sampled_from(ids), max_size=6)))
    undefined = undefined_names(script.text(removed))
    for group in setting_groups(script, removed, frozenset()):
        assert group.units - script.removed_with_descendants(removed)  # it removes something still there
        if undefined is not None:
            assert why_not_runnable(script.text(removed | group.units), undefined) is None, group


def test_a_levels_workers_end_on_sigterm_as_plain_processes(tmp_path: Path) -> None:
    """picire stops a worker with SIGTERM, maybe before it is past the fork: a handler the harness installed in
    the parent (``main``'s, which raises KeyboardInterrupt) must not run in the child and unwind the parent's stack."""
    script = parse_script(PLANTED)
    parent, seen = os.getpid(), tmp_path / "seen"

    def interesting(removed: frozenset[int]) -> bool:
        if os.getpid() != parent:
            with seen.open("a") as handle:
                handle.write(f"{signal.getsignal(signal.SIGTERM) is signal.SIG_DFL}\n")
        return _planted(script.text(removed))

    def harness_handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, harness_handler)
    try:
        reduce_statements(script, interesting, jobs=2)
        assert signal.getsignal(signal.SIGTERM) is harness_handler  # the parent keeps its own
    finally:
        signal.signal(signal.SIGTERM, previous)
    answers = seen.read_text().split()
    assert answers and set(answers) == {"True"}
