"""Scripts as repros, fixes from the command line, the script's own arguments, ranks (issue #14): the logic, and
hostile input to each thing the harness reads (options, a launcher's report, rank logs, a record's command)."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.commands.main import _parse
from reprobisect.commands.matrix import MatrixOptions
from reprobisect.commands.script_options import with_script
from reprobisect.commands.triage_options import TriageOptions
from reprobisect.config.expand import MatrixSpec, expand
from reprobisect.config.load import load_config
from reprobisect.config.scripts import (
    INSTRUMENTS_ENV,
    PYTEST_RUNNER,
    CliFixes,
    ReproOptions,
    cli_fixes,
    instruments_of,
    pytest_repro,
    pytest_root,
    script_repro,
    with_fixes,
)
from reprobisect.errors import ConfigError
from reprobisect.model.cell import Cell, run_cell
from reprobisect.model.classify import classify
from reprobisect.model.repro import Fix
from reprobisect.report.frame import _rerun_text
from reprobisect.report.views import reproduce_command
from reprobisect.run.events import read_events
from reprobisect.run.one_run import LAUNCH, RunSpec, child_environ, inputs_digest
from reprobisect.run.ranks import failed_rank, keep_rank_logs
from tests.conftest import ROOT, SCRIPTS

PASSES = SCRIPTS / "passes.py"


# --- fixes from the command line ---------------------------------------------------------------------------


def test_each_kind_of_fix_from_the_command_line(tmp_path: Path) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text("--- a/x.py\n+++ b/x.py\n")
    fixes = cli_fixes(
        CliFixes(
            args=["lower-lr=--lr '1e-4'"],
            patch=[f"patched={patch}:0"],
            override=["older=DeepSpeed==0.16.4", "git=lightning @ git+https://example.invalid/l.git@v2.6.6"],
            env=["quiet=NCCL_DEBUG=WARN", "lower-lr=DS_X=a=b"],
        )
    )
    assert fixes["lower-lr"].args == ("--lr", "1e-4") and fixes["lower-lr"].env == {"DS_X": "a=b"}
    assert fixes["lower-lr"].kind == "args"  # arguments and a variable in one fix
    assert (fixes["patched"].patch, fixes["patched"].patch_strip, fixes["patched"].kind) == (patch, 0, "patch")
    assert fixes["older"].override == {"deepspeed": "0.16.4"} and fixes["older"].kind == "override"
    assert fixes["git"].override == {"lightning": "git+https://example.invalid/l.git@v2.6.6"}
    assert fixes["quiet"].kind == "env" and fixes["quiet"].env == {"NCCL_DEBUG": "WARN"}
    # each keeps the options that made it, so a report can print a command that re-runs it
    assert fixes["lower-lr"].cli == ("--fix-args", "lower-lr=--lr '1e-4'", "--fix-env", "lower-lr=DS_X=a=b")


@pytest.mark.parametrize(
    ("given_", "message"),
    [
        (CliFixes(args=["no-equals-sign"]), "expected NAME=VALUE"),
        (CliFixes(args=["=--x"]), "expected NAME=VALUE"),
        (CliFixes(args=["../up=--x"]), "fix name '../up' is not allowed"),
        (CliFixes(args=["none=--x"]), "'none' is the unmodified repro"),
        (CliFixes(args=["q=--lr 'unclosed"]), "No closing quotation"),
        (CliFixes(env=["e=1BAD=1"]), "variable name"),
        (CliFixes(env=["e=NOVALUE"]), "VARIABLE=VALUE"),
        (CliFixes(env=["e=RANK=3"]), "set by the harness"),
        (CliFixes(env=["e=REPROBISECT_OP_CACHE=/"]), "set by the harness"),
        (CliFixes(env=["e=X=a\nb"]), "control character"),
        (CliFixes(patch=["p=/no/such.diff"]), "is not a file"),
        (CliFixes(override=["o=deepspeed"]), "PACKAGE==VERSION"),
        (CliFixes(override=["o=deepspeed==--index-url=x"]), "read as an option"),
        (CliFixes(override=["o=-e==1"]), "PACKAGE==VERSION"),
    ],
)
def test_a_bad_fix_option_says_which_and_why(given_: CliFixes, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cli_fixes(given_)


def test_a_patch_and_an_override_never_share_a_fix(tmp_path: Path) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text("")
    with pytest.raises(ConfigError, match="a patch or an override, not both"):
        cli_fixes(CliFixes(patch=[f"x={patch}"], override=["x=deepspeed==0.16.4"]))


def test_a_fix_from_the_command_line_cannot_take_a_name_of_matrix_yaml(tmp_path: Path) -> None:
    repro = script_repro(PASSES)
    with pytest.raises(ConfigError, match="already a fix"):
        with_fixes(repro, {"none": Fix(name="none", description="")})


@given(
    st.lists(st.text(max_size=40), max_size=3),
    st.lists(st.text(max_size=40), max_size=3),
    st.lists(st.text(max_size=40), max_size=3),
)
def test_any_fix_options_give_fixes_or_a_config_error(args: list[str], env: list[str], override: list[str]) -> None:
    try:
        fixes = cli_fixes(CliFixes(args=args, env=env, override=override))
    except ConfigError:
        return
    for name, fix in fixes.items():
        assert name == fix.name and name != "none" and "/" not in name
        assert all(not k.startswith(("REPROBISECT_", "RANK", "WORLD_SIZE")) for k in fix.env)
        assert all(not v.startswith("-") for v in fix.override.values())


def test_a_fix_variable_reaches_the_run_after_the_forms(plain_env: object) -> None:
    repro = script_repro(PASSES, ReproOptions(fixes=cli_fixes(CliFixes(env=["e=DS_ACCELERATOR=cuda", "e=MY_FLAG=1"]))))
    form = repro.forms["cpu-deepspeed"]
    spec = RunSpec(repro=repro, form=form, fix=repro.fixes["e"], env=plain_env)  # type: ignore[arg-type]
    env = child_environ(spec, {})
    assert env["MY_FLAG"] == "1" and env["DS_ACCELERATOR"] == "cuda"  # the fix wins over the form
    plain = RunSpec(repro=repro, form=form, fix=repro.fixes["none"], env=plain_env)  # type: ignore[arg-type]
    assert plain.key != spec.key  # a fix's variables are part of what decides the outcome


# --- scripts and their arguments ---------------------------------------------------------------------------


def test_arguments_after_the_separator_go_to_the_script() -> None:
    args = _parse(["triage", "issue.py", "--deepspeed", "0.16.4", "--", "--deepspeed", "x", "--", "-v"])
    assert args.deepspeed == "0.16.4"  # the harness's own option
    assert args.script_args == ("--deepspeed", "x", "--", "-v")  # everything after the first '--' is the script's


def test_arguments_after_the_separator_are_refused_where_no_script_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        _parse(["report", "--", "--lr", "1"])
    assert raised.value.code == 2
    assert "go to a script" in capsys.readouterr().err


def test_a_script_repro_gets_its_arguments_in_every_form() -> None:
    repro = script_repro(PASSES, ReproOptions(args=("--steps", "2"), rerun=("nox", "-s", "triage", "--", "passes.py")))
    assert {form.args for form in repro.forms.values()} == {("--steps", "2")}
    words = repro.rerun_command(["--deepspeed", "0.16.4"], "cuda", repro.fixes["none"])
    assert words == [
        *("nox", "-s", "triage", "--", "passes.py", "--deepspeed", "0.16.4"),
        *("--form", "cuda", "--fix", "none", "--", "--steps", "2"),
    ]


def test_a_pasted_script_imports_the_instruments_on_request(tmp_path: Path, plain_env: object) -> None:
    instruments = instruments_of(load_config(ROOT / "matrix.yaml"))
    assert instruments == ROOT / "repros" / "instruments.py"
    script = tmp_path / "pasted.py"
    script.write_text('import instruments\n\ninstruments.event("config", pasted=True)\n')  # step() needs torch
    repro = script_repro(script, instruments=instruments)
    form = repro.forms["cpu-deepspeed"]
    assert form.inputs == (instruments,)  # readable in the sandbox, and an edit to it changes the run's key
    spec = RunSpec(repro=repro, form=form, fix=repro.fixes["none"], env=plain_env)  # type: ignore[arg-type]
    env = child_environ(spec, {})
    assert env[INSTRUMENTS_ENV] == str(instruments.parent)
    plain = script_repro(script)
    bare = RunSpec(repro=plain, form=plain.forms["cpu-deepspeed"], fix=plain.fixes["none"], env=plain_env)  # type: ignore[arg-type]
    assert spec.key != bare.key and INSTRUMENTS_ENV not in child_environ(bare, {})
    bootstrap = ROOT / "src" / "reprobisect" / "run" / "child" / "bootstrap.py"
    done = subprocess.run(
        [sys.executable, str(bootstrap), str(script)],
        env={**os.environ, INSTRUMENTS_ENV: env[INSTRUMENTS_ENV]},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert read_events(done.stdout).config == {"pasted": True}  # the bootstrap put repros/ on the script's sys.path
    without = subprocess.run([sys.executable, str(bootstrap), str(script)], capture_output=True, text=True, check=False)
    assert "No module named 'instruments'" in without.stderr  # only on request


def test_instruments_without_a_script_or_beside_no_repros_are_refused(tmp_path: Path) -> None:
    (tmp_path / "matrix.yaml").write_text((ROOT / "matrix.yaml").read_text())
    with pytest.raises(ConfigError, match=r"--instruments: .*repros/instruments.py is not there"):
        instruments_of(dataclasses.replace(load_config(ROOT / "matrix.yaml"), path=tmp_path / "matrix.yaml"))
    script = MatrixOptions.from_args(_parse(["matrix", "--instruments"])).script
    with pytest.raises(ConfigError, match=r"--instruments.* go with a script"):
        with_script(load_config(ROOT / "matrix.yaml"), script, timeout=None, repros=(), rerun=())


def test_matrix_yaml_takes_a_script_in_one_short_entry(tmp_path: Path) -> None:
    (tmp_path / "issue.py").write_text("print('hi')\n")
    (tmp_path / "matrix.yaml").write_text(
        "version: 1\nrepros:\n"
        "  issue-1234: {script: issue.py, args: [--steps, '2'], expected_signature: abc,\n"
        "               fixes: {none: {}, quiet: {env: {NCCL_DEBUG: WARN}}}}\n"
        "  issue-99: {script: issue.py, shim: true}\n"
    )
    config = load_config(tmp_path / "matrix.yaml")
    issue = config.repro("issue-1234")
    assert set(issue.forms) == {"cuda", "cpu-deepspeed"} and issue.forms["cuda"].distributed_env
    assert issue.forms["cpu-deepspeed"].args == ("--steps", "2") and issue.expected_signature == "abc"
    assert issue.fixes["quiet"].kind == "env"
    assert set(config.repro("issue-99").forms) == {"cuda", "cpu-shim"}
    assert set(config.repro("issue-99").fixes) == {"none"}
    # re-run through the repro session by name (it has no session of its own)
    words = issue.rerun_command([], "cuda", issue.fixes["quiet"])
    assert words[:5] == ["nox", "-s", "repro", "--", "issue-1234"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{script: missing.py}", "does not exist"),
        ("{script: issue.py, forms: {}}", "unknown 'forms'"),
        ("{script: issue.py, shim: 'yes'}", "expected true or false"),
        ("{script: issue.py, fixes: {quiet: {}}}", "must define 'none'"),
        ("{script: issue.py, fixes: {none: {}, e: {env: {'1X': a}}}}", "not an environment variable name"),
    ],
)
def test_a_bad_script_entry_names_the_key(tmp_path: Path, entry: str, message: str) -> None:
    (tmp_path / "issue.py").write_text("")
    (tmp_path / "matrix.yaml").write_text(f"version: 1\nrepros:\n  issue: {entry}\n")
    with pytest.raises(ConfigError, match=message):
        load_config(tmp_path / "matrix.yaml")


# --- ranks -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "two", "65", "1.5", ""])
def test_nproc_is_a_whole_number_of_ranks(value: str) -> None:
    spec = MatrixSpec(axes={"deepspeed": ("0.16.4",), "nproc": (value,)})
    with pytest.raises(ConfigError, match="number of ranks"):
        expand(spec, lambda axis: ["0.16.4"])


def test_nproc_is_an_axis_that_is_no_package() -> None:
    spec = MatrixSpec(axes={"deepspeed": ("0.16.4",), "nproc": ("1", "02")})
    assert [dict(c.pins) for c in expand(spec, lambda axis: ["0.16.4"])] == [
        {"deepspeed": "0.16.4", "nproc": "1"},
        {"deepspeed": "0.16.4", "nproc": "2"},
    ]
    cell = Cell(python="3.11", torch="2.13.0", torch_source="system", packages={"deepspeed": "0.16.4"})
    assert run_cell(cell, 1) == cell.to_dict()
    assert run_cell(cell, 2)["id"] == f"{cell.id}_nproc-2" and run_cell(cell, 2)["nproc"] == 2


def _launch(tmp_path: Path, nproc: int, code: str, grace: str = "2") -> tuple[subprocess.CompletedProcess[str], Path]:
    script = tmp_path / "rank.py"
    script.write_text(code)
    env = {**os.environ, "REPROBISECT_RANK_GRACE": grace}
    done = subprocess.run(
        [sys.executable, str(LAUNCH), str(nproc), sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done, tmp_path / "ranks"


def _ranks_event(out: str) -> dict[str, object]:
    line = [line for line in out.splitlines() if '"event": "ranks"' in line][-1]
    return dict(json.loads(line.removeprefix("@@repro ")))


def test_the_launcher_gives_each_rank_torchruns_variables(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "keys = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'TORCHELASTIC_RUN_ID')\n"
        "print(' '.join(f'{k}={os.environ[k]}' for k in keys))\n"
    )
    done, ranks = _launch(tmp_path, 3, code)
    assert done.returncode == 0
    assert "RANK=0 LOCAL_RANK=0 WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 GROUP_RANK=0" in done.stdout  # rank 0: the run's log
    assert "RANK=2 LOCAL_RANK=2 WORLD_SIZE=3" in (ranks / "rank-2.log").read_text()
    assert _ranks_event(done.stdout) == {"event": "ranks", "nproc": 3, "exit_codes": [0, 0, 0], "first_failed": None}


def test_the_first_rank_to_fail_decides_and_the_others_are_stopped(tmp_path: Path) -> None:
    code = (
        "import os, sys, time\n"
        "rank = int(os.environ['RANK'])\n"
        "if rank == 1: sys.exit(3)\n"
        "time.sleep(600)  # blocked, as in a collective whose peer died\n"
    )
    done, _ = _launch(tmp_path, 3, code, grace="0.5")
    assert done.returncode == 3  # the launcher exits as the first failed rank did
    event = _ranks_event(done.stdout)
    assert event["first_failed"] == 1
    assert event["exit_codes"] == [-15, 3, -15]  # the sleepers got SIGTERM after the grace


def test_a_rank_killed_by_a_signal_kills_the_launcher_with_it(tmp_path: Path) -> None:
    done, _ = _launch(tmp_path, 2, "import os, signal\nif os.environ['RANK'] == '1': os.kill(os.getpid(), 9)\n")
    assert done.returncode == -9  # classified as the rank's crash, not as an exit code


@pytest.mark.parametrize(
    "event",
    [
        {"nproc": 2, "exit_codes": [0], "first_failed": None},  # as many codes as ranks
        {"nproc": 2, "exit_codes": [0, "1"], "first_failed": 1},
        {"nproc": 2, "exit_codes": [0, True], "first_failed": 1},
        {"nproc": 2, "exit_codes": [0, 1], "first_failed": 2},  # no such rank
        {"nproc": 2, "exit_codes": [0, 1], "first_failed": -1},
        {"nproc": 2, "exit_codes": [0, 10**9], "first_failed": 1},
        {"nproc": -2, "exit_codes": [], "first_failed": None},
        {"nproc": 10**6, "exit_codes": [0], "first_failed": None},
    ],
)
def test_a_forged_ranks_event_is_ignored(event: dict[str, object]) -> None:
    events = read_events("@@repro " + json.dumps({"event": "ranks", **event}))
    assert events.ranks is None and events.ignored == 1


def test_the_failed_rank_must_fit_the_run(tmp_path: Path) -> None:
    events = read_events('@@repro {"event": "ranks", "nproc": 4, "exit_codes": [0, 0, 0, 1], "first_failed": 3}')
    assert events.ranks is not None
    assert failed_rank(events.ranks, 2, {1: tmp_path}) is None  # the run had 2 ranks, the tale says 4
    assert failed_rank(events.ranks, 4, {1: tmp_path}) is None  # no log of rank 3 was kept
    assert failed_rank(events.ranks, 4, {3: tmp_path}) == 3
    assert failed_rank(events.ranks, 1, {3: tmp_path}) is None


def test_rank_logs_are_kept_without_following_links_and_capped(tmp_path: Path) -> None:
    work, logs = tmp_path / "work", tmp_path / "logs"
    (work / "ranks").mkdir(parents=True)
    logs.mkdir()
    secret = tmp_path / "id_ed25519"
    secret.write_text("PRIVATE KEY")
    (work / "ranks" / "rank-1.log").symlink_to(secret)  # a rank pointing its log at a secret of the host's
    os.mkfifo(work / "ranks" / "rank-2.log")  # one that would block a reader forever
    (work / "ranks" / "rank-3.log").write_bytes(b"head\n" + b"x" * (7 * 2**20) + b"\nthe traceback\n")
    kept = keep_rank_logs(work, logs / "run.log", 5)
    assert set(kept) == {3}
    text = kept[3].read_bytes()
    assert text.startswith(b"head") and text.endswith(b"the traceback\n") and b"bytes dropped here" in text
    assert len(text) < 6.1 * 2**20
    assert not any(b"PRIVATE KEY" in p.read_bytes() for p in logs.iterdir())


# --- commands in reports -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "why"),
    [
        (["nox", "-s", "triage", "--", "a\nb"], "argument 4 holds a line break"),
        (["x" * 600], "argument 0 is longer than 500"),
        (["nox"] * 300, "300 arguments"),
        (["\x1b[31mred"], "argument 0 holds an escape sequence"),
    ],
)
def test_a_hostile_command_in_a_record_says_it_cannot_be_given(words: list[str], why: str) -> None:
    """Issue #50: a Re-run line re-runs exactly what ran or says it cannot; never a neutralised command, and never
    the canonical repro's session, which would re-run something else (the old fallback)."""
    shown = _rerun_text(words)
    assert shown.startswith("# the command cannot be shown as one line:") and why in shown
    assert "\n" not in shown and "\x1b" not in shown
    row = {"rerun": shown, "torch_source": "system", "deepspeed": "0.16.4", "lightning": "2.6.6"}
    assert reproduce_command("gan", row, "cpu-deepspeed", "none") == shown


def test_a_kept_command_with_backticks_is_given_exactly() -> None:
    words = ["nox", "```", "x"]
    assert shlex.split(_rerun_text(words)) == words


def test_a_kept_command_is_quoted_for_a_shell() -> None:
    words = ["nox", "-s", "triage", "--", "my issue.py", "--fix-args", "a=--lr 1e-4"]
    assert shlex.split(_rerun_text(words)) == words


# --- a package's own tests as repros (--pytest) ------------------------------------------------------------

TREE = Path(__file__).parents[1] / "resources" / "pytest_tree"
THINGS = TREE / "pkgtests" / "sub" / "test_things.py"


def test_a_pytest_repro_runs_from_above_the_test_tree() -> None:
    repro = pytest_repro(f"{THINGS}::test_passes", ReproOptions(args=("-x",)), keyword="passes")
    assert repro.name == "pytest-test_things-test_passes"
    form = repro.forms["cpu-deepspeed"]
    assert form.script == PYTEST_RUNNER and form.pytest and form.inputs == (TREE,)
    assert form.args == (str(TREE), "pkgtests/sub/test_things.py::test_passes", "-k", "passes", "-x")
    assert pytest_root(THINGS) == TREE
    assert pytest_repro(str(THINGS)).name == "pytest-test_things"
    assert pytest_repro(str(THINGS), qualified=True).name == "pytest-pkgtests_sub_test_things"


def test_two_test_files_of_one_name_are_told_apart_by_their_paths(tmp_path: Path) -> None:
    """Lightning has a test_deepspeed.py under tests_fabric/strategies and tests_pytorch/strategies."""
    for suite in ("tests_fabric", "tests_pytorch"):
        (tmp_path / suite / "strategies").mkdir(parents=True)
        (tmp_path / suite / "__init__.py").write_text("")
        (tmp_path / suite / "strategies" / "__init__.py").write_text("")
        (tmp_path / suite / "strategies" / "test_deepspeed.py").write_text("def test_a():\n    pass\n")
    argv = [
        "triage",
        *(
            a
            for s in ("tests_fabric", "tests_pytorch")
            for a in ("--pytest", f"{tmp_path}/{s}/strategies/test_deepspeed.py")
        ),
    ]
    script = TriageOptions.from_args(_parse(argv)).script
    config, made = with_script(load_config(ROOT / "matrix.yaml"), script, timeout=None, repros=(), rerun=("x",))
    assert made == ("pytest-tests_fabric_strategies_test_deepspeed", "pytest-tests_pytorch_strategies_test_deepspeed")
    assert all(name in config.repros for name in made)
    nodes = [a for n in ("test_passes", "test_fails") for a in ("--pytest", f"{THINGS}::{n}")]  # one file, two nodes
    script = TriageOptions.from_args(_parse(["triage", *nodes])).script
    _, made = with_script(load_config(ROOT / "matrix.yaml"), script, timeout=None, repros=(), rerun=("x",))
    assert made == ("pytest-test_things-test_passes", "pytest-test_things-test_fails")


@pytest.mark.parametrize(
    ("spec", "root", "message"),
    [("/no/such/test_x.py", None, "does not exist"), (str(THINGS), SCRIPTS, "is not inside --pytest-root")],
)
def test_a_bad_pytest_selection_is_refused(spec: str, root: Path | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        pytest_repro(spec, root=root)


def test_a_packages_tests_get_no_rendezvous_variables_a_script_does(plain_env: object) -> None:
    """Lightning's tests pick their own port and one asserts none is set; scripts side by side need one each."""
    tests = pytest_repro(str(THINGS))
    script = script_repro(PASSES)
    for repro, present in ((tests, False), (script, True)):
        for form in repro.forms.values():
            env = child_environ(RunSpec(repro=repro, form=form, fix=repro.fixes["none"], env=plain_env), {})  # type: ignore[arg-type]
            assert all((name in env) == present for name in ("MASTER_PORT", "MASTER_ADDR", "RANK", "WORLD_SIZE"))


def test_a_changed_conftest_is_another_run(tmp_path: Path, plain_env: object) -> None:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "__init__.py").write_text("")
    (tree / "pkg" / "conftest.py").write_text("A = 1\n")
    (tree / "pkg" / "test_a.py").write_text("def test_a():\n    pass\n")
    repro = pytest_repro(str(tree / "pkg" / "test_a.py"))
    spec = RunSpec(repro=repro, form=repro.forms["cuda"], fix=repro.fixes["none"], env=plain_env)  # type: ignore[arg-type]
    before = spec.key
    (tree / "pkg" / "conftest.py").write_text("A = 2\n")
    assert spec.key != before
    (tree / "pkg" / "notes.md").write_text("not an input")
    assert inputs_digest((tree,)) == inputs_digest((tree,))


def _run_tests(tmp_path: Path, tree: Path, *selection: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    done = subprocess.run(
        [sys.executable, str(PYTEST_RUNNER), str(tree), *selection],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    marked = [line.partition("@@repro ")[2] for line in done.stdout.splitlines()]
    events = [json.loads(payload) for payload in marked if payload]  # pytest's progress may precede a mark
    return done, events


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "__init__.py").write_text("")
    (tree / "pkg" / "conftest.py").write_text("import pytest\n\n@pytest.fixture\ndef answer():\n    return 42\n")
    (tree / "pkg" / "test_a.py").write_text(
        "import pytest, warnings\n"
        "def test_ok(answer):\n    warnings.warn('tolerated', DeprecationWarning)\n    assert answer == 42\n"
        "def test_bad(answer):\n    assert answer == 41, 'the answer changed'\n"
        "def test_worse():\n    raise KeyError('second failure')\n"
        "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n"
    )
    (tree / "pkg" / "test_broken.py").write_text("import no_such_module_anywhere\n")
    return tree


def test_the_runner_reports_each_test_and_signs_with_the_first_failure(tmp_path: Path) -> None:
    done, events = _run_tests(tmp_path, _tree(tmp_path), "pkg/test_a.py")
    assert done.returncode == 1
    tests = {e["nodeid"]: e["outcome"] for e in events if e["event"] == "test"}
    assert tests == {
        "pkg/test_a.py::test_ok": "passed",  # its warning is no error: the tree's settings, not this checkout's
        "pkg/test_a.py::test_bad": "failed",
        "pkg/test_a.py::test_worse": "failed",
        "pkg/test_a.py::test_later": "skipped",
    }
    assert [e["step"] for e in events if e["event"] == "step"] == [1, 2]
    # the first failure's exception is the log's last traceback, so the run's signature
    verdict = classify(exit_code=1, timed_out=False, log=done.stdout, expected=None)
    assert verdict.signature is not None and verdict.signature.exception == "AssertionError"
    assert verdict.signature.message.startswith("the answer changed")


def test_a_module_that_cannot_be_collected_is_a_failure_of_the_run(tmp_path: Path) -> None:
    done, _ = _run_tests(tmp_path, _tree(tmp_path), "pkg/test_broken.py")
    assert done.returncode == 1
    assert "CollectionError: pkg/test_broken.py: ModuleNotFoundError: No module named 'no_such_module_anywhere'" in (
        done.stderr
    )


@pytest.mark.parametrize("selection", [("pkg/test_a.py::test_later",), ("pkg/test_a.py", "-k", "nothing_matches")])
def test_a_session_where_no_test_ran_is_never_a_pass(tmp_path: Path, selection: tuple[str, ...]) -> None:
    done, _ = _run_tests(tmp_path, _tree(tmp_path), *selection)
    assert done.returncode == 1 and "NoTestRan: pytest exit status" in done.stderr
    verdict = classify(exit_code=done.returncode, timed_out=False, log=done.stdout + done.stderr, expected=None)
    assert verdict.outcome.value == "ENV_ERROR" and verdict.known is not None and verdict.known.name == "no-test-ran"


@pytest.mark.parametrize(
    "event",
    [
        {"nodeid": "", "outcome": "passed"},
        {"nodeid": "a\nb", "outcome": "passed"},
        {"nodeid": "x" * 501, "outcome": "passed"},
        {"nodeid": "t::a", "outcome": "won"},
        {"nodeid": ["t"], "outcome": "passed"},
    ],
)
def test_a_forged_test_event_is_ignored(event: dict[str, object]) -> None:
    events = read_events("@@repro " + json.dumps({"event": "test", **event}))
    assert events.tests == {} and events.ignored == 1


def test_a_run_keeps_at_most_two_thousand_test_results() -> None:
    lines = [f'@@repro {{"event": "test", "nodeid": "t::{i}", "outcome": "passed"}}' for i in range(2500)]
    assert len(read_events("\n".join(lines)).tests) == 2000
