"""Each command reads its command line once, into one frozen, typed options object (issue #40): the values it holds,
the shared groups composed into it, and what is refused as it is built — Slurm options without ``--executor slurm``
and values that pip, uv or git would read as an option — each error naming the option."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from reprobisect.commands.bench import BenchOptions
from reprobisect.commands.bisect import BisectOptions
from reprobisect.commands.corpus import CorpusOptions, _triage_argv, refuse_pins
from reprobisect.commands.engine_options import EngineOptions
from reprobisect.commands.main import _parse
from reprobisect.commands.matrix import MatrixOptions
from reprobisect.commands.minimize import MinimizeOptions
from reprobisect.commands.nightly import NightlyOptions
from reprobisect.commands.ops import OpsOptions
from reprobisect.commands.options import CommonOptions, run_context
from reprobisect.commands.report import ReportOptions
from reprobisect.commands.run_options import RunOptions
from reprobisect.commands.run_repro import RunReproOptions
from reprobisect.commands.script_options import ScriptOptions
from reprobisect.commands.triage_options import TriageOptions
from reprobisect.commands.wheelhouse import WheelhouseOptions
from reprobisect.config.scripts import CliFixes
from reprobisect.corpus.truth import load_truth
from reprobisect.engine.slurm import SlurmExecutor, SlurmOptions
from reprobisect.errors import ConfigError
from reprobisect.run.sandbox import Confinement
from tests.conftest import ROOT

SLURM_OPTIONS = [
    ("--slurm-partition", "gpu"),
    ("--slurm-account", "lab"),
    ("--slurm-time", "30"),
    ("--slurm-constraint", "h100"),
    ("--slurm-cpus", "4"),
    ("--slurm-arg", "qos=high"),
    ("--slurm-folder", "/shared/jobs"),
]
ENGINE_COMMANDS = {
    "matrix": (["matrix"], lambda args: MatrixOptions.from_args(args).run.engine),
    "triage": (["triage", "issue.py"], lambda args: TriageOptions.from_args(args).run.engine),
    "bisect": (["bisect", "--good", "0.16.4", "--bad", "0.16.6"], lambda args: BisectOptions.from_args(args).engine),
    "nightly": (["nightly"], lambda args: NightlyOptions.from_args(args).engine),
}


def test_bisect_reads_its_command_line_into_typed_values() -> None:
    argv = ["bisect", "--script", "issue.py", "--env", "A=1", "--shim", "--good", "0.16.0", "--bad", "0.19.8"]
    argv += ["--jobs", "2", "--timeout", "90", "--all-transitions", "--probe-all-up-to", "12", "--torch", "2.5.1"]
    argv += ["--fix-env", "quiet=NCCL_DEBUG=WARN", "--no-sandbox", "--out", "o", "--envs", "e", "--", "--lr", "1"]
    options = BisectOptions.from_args(_parse(argv))
    assert (options.good, options.bad, options.axis, options.jobs, options.timeout) == (
        "0.16.0",
        "0.19.8",
        "deepspeed",
        2,
        90.0,
    )
    assert options.all_transitions and options.probe_all_up_to == 12 and options.repro is None
    assert options.script == ScriptOptions(
        script=Path("issue.py"),
        shim=True,
        env=("A=1",),
        script_args=("--lr", "1"),
        fixes=CliFixes(env=("quiet=NCCL_DEBUG=WARN",)),
    )
    assert options.common.pins == {"torch": "2.5.1"} and options.common.confinement == Confinement(sandbox=False)
    assert (options.common.out, options.common.envs) == (Path("o"), Path("e"))
    assert options.timing.slower_than is None and options.engine == EngineOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.jobs = 3  # type: ignore[misc]


def test_matrix_and_triage_share_one_run_group() -> None:
    run = ["--fix", "a,b", "--fix", "c", "--form", "cpu", "--select", "deepspeed=0.18.*", "--python", "3.11"]
    run += ["--nproc", "1,2", "--jobs", "3", "--repeat", "2", "--fresh"]
    matrix = MatrixOptions.from_args(_parse(["matrix", "--repro", "gan,zero3", "--cell", "x", *run]))
    triage = TriageOptions.from_args(_parse(["triage", "issue.py", "--culprits", *run]))
    assert (
        matrix.run
        == triage.run
        == RunOptions(
            select=("deepspeed=0.18.*",),
            python="3.11",
            nproc="1,2",
            fixes=("a", "b", "c"),
            forms=("cpu",),
            jobs=3,
            repeat=2,
            fresh=True,
        )
    )
    assert matrix.repros == ("gan", "zero3") and matrix.cells == ("x",) and not matrix.list
    assert triage.script.script == Path("issue.py") and triage.culprits and triage.git is None


def test_nightly_reads_its_clone_corpus_and_deepspeed() -> None:
    argv = ["nightly", "--git", ".", "--track", "releases", "--minimize-budget", "5m", "--corpus", "a,b"]
    argv += ["--corpus", "c", "--deepspeed", "main", "--max-releases", "2", "--repo", "https://example.org/ds.git"]
    options = NightlyOptions.from_args(_parse(argv))
    assert (
        options.clone.git == Path(".") and options.clone.track == "releases" and options.clone.minimize_budget == "5m"
    )
    assert options.corpus == ("a", "b", "c") and options.deepspeed == "main" and options.max_releases == 2
    assert options.repo == "https://example.org/ds.git" and options.common.out == Path("reports/nightly/latest")
    assert options.script == ScriptOptions()  # a night takes no arguments after '--'


def test_the_other_commands_read_theirs() -> None:
    repro = RunReproOptions.from_args(_parse(["repro", "gan", "--fix", "all", "--fix-args", "x=--y", "--resume"]))
    assert repro.repro == "gan" and repro.fixes == ("all",) and repro.jobs is None and repro.resume
    assert repro.cli_fixes == CliFixes(args=("x=--y",))
    minimize = MinimizeOptions.from_args(
        _parse(["minimize", "issue.py", "--bad", "deepspeed==0.16.5", "--budget", "10m", "--", "--lr", "1"])
    )
    assert minimize.bad == ("deepspeed==0.16.5",) and minimize.good is None and minimize.budget == ("10m",)
    assert minimize.script_args == ("--lr", "1") and minimize.jobs == 2 and minimize.keep_traceback
    corpus = CorpusOptions.from_args(_parse(["corpus", "--entry", "e", "--git", "lightning=/l", "--no-sandbox"]))
    assert corpus.entries == ("e",) and corpus.git == ("lightning=/l",) and corpus.backend == "cpu"
    assert corpus.common.out == Path("reports/corpus") and not corpus.common.confinement.sandbox
    bench = BenchOptions.from_args(_parse(["bench", "--no-pip", "--runs", "2"]))
    assert (bench.runs, bench.with_pip, bench.jobs, bench.gpu) == (2, False, 8, False)
    wheelhouse = WheelhouseOptions.from_args(_parse(["wheelhouse", "--system", "torch,numpy", "--deepspeed", "0.18.2"]))
    assert wheelhouse.system == ("torch", "numpy") and wheelhouse.common.pins == {"deepspeed": "0.18.2"}
    assert OpsOptions.from_args(_parse(["ops", "--envs", "e", "--max-gib", "2"])) == OpsOptions(
        envs=Path("e"), max_gib=2.0
    )
    report = ReportOptions.from_args(_parse(["report", "--merge", "a", "b", "--fail-on", "regression"]))
    assert report.merge == (Path("a"), Path("b")) and report.fail_on == ("regression",) and report.dest is None
    env = CommonOptions.from_args(_parse(["env", "--profile", "--cpus-per-run", "2", "--network", "off"]))
    assert env.profile and env.cpus_per_run == 2 and env.confinement == Confinement(network="off")
    assert env.environ()["REPROBISECT_PROFILE"] == "1"


@pytest.mark.parametrize("command", list(ENGINE_COMMANDS))
@pytest.mark.parametrize(("option", "value"), SLURM_OPTIONS)
def test_a_slurm_option_without_the_slurm_executor_is_refused_by_name(command: str, option: str, value: str) -> None:
    argv, engine = ENGINE_COMMANDS[command]
    with pytest.raises(ConfigError, match=f"^{option} goes with --executor slurm$"):
        engine(_parse([*argv, option, value]))


@pytest.mark.parametrize("command", list(ENGINE_COMMANDS))
def test_the_slurm_executor_takes_what_passes_through(command: str) -> None:
    argv, engine = ENGINE_COMMANDS[command]
    given = [item for option, value in SLURM_OPTIONS for item in (option, value)]
    options = engine(_parse([*argv, "--executor", "slurm", *given]))
    assert options.slurm == SlurmOptions(
        partition="gpu",
        account="lab",
        time_minutes=30,
        constraint="h100",
        cpus_per_job=4,
        extra={"qos": "high"},
        folder=Path("/shared/jobs"),
    )
    with pytest.raises(ConfigError, match="--slurm-arg 'array=1-3': the harness sets --array itself"):
        engine(_parse([*argv, "--executor", "slurm", "--slurm-arg", "array=1-3"]))


def test_the_engine_is_made_once_with_the_run_context(tmp_path: Path) -> None:
    options = MatrixOptions.from_args(_parse(["matrix", "--executor", "slurm", "--out", str(tmp_path)]))
    ctx = run_context(options.common, options.run.engine.engine())
    assert isinstance(ctx.executor, SlurmExecutor) and ctx.store.root == tmp_path
    assert options.run.engine.engine() is not ctx.executor  # a second call makes another: a command calls it once
    assert run_context(MatrixOptions.from_args(_parse(["matrix"])).common).executor is None


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["matrix", "--torch=-e"], "--torch"),
        (["matrix", "--torchvision", "0.20\nx"], "--torchvision"),
        (["matrix", "--python=--evil"], "--python"),
        (["triage", "issue.py", "--python=--evil"], "--python"),
        (["bisect", "--good=-x", "--bad", "0.16.6"], "--good"),
        (["bisect", "--good", "0.16.4", "--bad=-x"], "--bad"),
        (["bisect", "--good", "0.16.4", "--bad", "0.16.6", "--signature=-s"], "--signature"),
        (["nightly", "--repo=--upload-pack=x"], "--repo"),
        (["nightly", "--baseline-release=-b"], "--baseline-release"),
        (["nightly", "--up-to=-u"], "--up-to"),
        (["nightly", "--deepspeed=-d"], "--deepspeed"),
        (["repro", "gan", "--lightning=-l"], "--lightning"),
        (["wheelhouse", "--deepspeed=-d"], "--deepspeed"),
        (["env", "--deepspeed", "x" * 501], "--deepspeed"),
    ],
)
def test_a_value_in_disguise_is_refused_as_the_options_are_read(argv: list[str], option: str) -> None:
    builders = {
        "matrix": MatrixOptions.from_args,
        "triage": TriageOptions.from_args,
        "bisect": BisectOptions.from_args,
        "nightly": NightlyOptions.from_args,
        "repro": RunReproOptions.from_args,
        "wheelhouse": WheelhouseOptions.from_args,
        "env": CommonOptions.from_args,
    }
    with pytest.raises(ConfigError, match=f"^{option}: .* give a version, a specifier, a path or a URL$"):
        builders[argv[0]](_parse(argv))


def test_corpus_refuses_a_pin_of_what_an_entry_varies_and_hands_on_the_machines_pins() -> None:
    """On an offline GPU node the DeepSpeed entries need ``--lightning system`` (no Lightning to list); a pin of
    the package an entry varies, or pins itself, stays refused, naming the entry."""
    with pytest.raises(ConfigError, match=r"^--deepspeed: .* give a version"):
        CorpusOptions.from_args(_parse(["corpus", "--deepspeed=-x"]))  # refused before it is read, as any pin
    ds = load_truth(ROOT / "corpus" / "ds-bf16-stray-grad")
    pl = load_truth(ROOT / "corpus" / "pl-ds-convert-weights-only")
    with pytest.raises(ConfigError, match=r"^--deepspeed: a corpus entry's versions are its truth's, and ds-bf16-"):
        refuse_pins([ds], {"deepspeed": "0.16.5"})
    with pytest.raises(ConfigError, match=r"^--torch: .* pl-ds-convert-weights-only, ds-bf16-stray-grad varies or"):
        refuse_pins([pl, ds], {"torch": "2.6.0"})  # both pin torch in their truth
    with pytest.raises(ConfigError, match=r"^--lightning: .* pl-ds-convert-weights-only varies or pins lightning"):
        refuse_pins([ds, pl], {"lightning": "system"})
    refuse_pins([ds], {"lightning": "system"})
    options = CorpusOptions.from_args(_parse(["corpus", "--lightning", "system", "--git", "/tmp/ds"]))
    argv = _triage_argv(ds, options)
    assert argv[argv.index("--lightning") + 1] == "system" and argv.count("--torch") == 1
    assert "--secret-env" not in argv


def test_corpus_hands_secret_names_on_to_each_triage_and_its_rerun_line() -> None:
    """A name made secret for the corpus is one for each entry's triage, re-run from its summary too; only the
    name travels."""
    ds = load_truth(ROOT / "corpus" / "ds-bf16-stray-grad")
    argv = ["corpus", "--secret-env", "MY_DB", "--secret-env", "ORG_CODE", "--git", "/tmp/ds"]
    words = _triage_argv(ds, CorpusOptions.from_args(_parse(argv)))
    assert [words[i + 1] for i, w in enumerate(words) if w == "--secret-env"] == ["MY_DB", "ORG_CODE"]


def test_nothing_below_commands_reads_a_namespace() -> None:
    """argparse is the command line's: no library module imports it, so none can be handed a Namespace to read."""
    src = ROOT / "src" / "reprobisect"
    offenders = []
    for path in src.rglob("*.py"):
        if "commands" in path.relative_to(src).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if "argparse" in names or module == "argparse":
                offenders.append(str(path.relative_to(src)))
    assert offenders == []
